//! DEBUG subcommands beyond admin.rs's: POPULATE, LOADAOF, and the ones accepted for
//! compatibility (QUICKLIST-PACKED-THRESHOLD, JMAP, CHANGE-REPL-ID).

use ferrokv::command::parse_i64;
use ferrokv::value::{Str, Value};
use ferrokv::Reply;

use crate::client::Client;
use crate::log::log;
use crate::server::Server;

/// DEBUG LOADAOF: fsync the AOF, then replace the dataset with what its files hold.
pub fn loadaof(s: &mut Server, c: &mut Client) -> Reply {
    s.settle_snapshot();
    let now = s.engine.now_ms();
    if let Some(aof) = s.engine.persistence_mut().aof.as_mut() {
        // What is still buffered would be lost by loading the files without it.
        if let Err(e) = aof.settle(now) {
            return Reply::error(format!("ERR Error writing the AOF before loading it: {e}"));
        }
    }
    // Clients are answered -LOADING meanwhile, as by Redis's DEBUG LOADAOF.
    let cfg = s.engine.config().clone();
    s.start_loading(&cfg);
    let loaded = ferrokv::Engine::load_aof_files(&cfg, &mut crate::persistence::ServerAsLoadHost(s));
    s.loading = None;
    match loaded {
        Ok(Some(ks)) => {
            s.touch_all_watched(c);
            s.tracking_flushed(Some(c));
            *s.engine.keyspace_mut() = ks;
            s.engine.stats_mut().dirty = 0;
            if let Err(e) = crate::script::functions::install(s) {
                return Reply::error(format!("ERR Error loading the AOF: {e}"));
            }
            log("Append Only File loaded by DEBUG LOADAOF");
            Reply::ok()
        }
        // Redis exits here; keeping the dataset is kinder.
        Ok(None) => Reply::err("ERR no AOF to load: the AOF manifest names no file"),
        Err(e) => Reply::error(format!("ERR Error loading the AOF: {e}")),
    }
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD size: accepted (ferrokv keeps no plain nodes), with
/// Redis's check of the argument.
pub fn quicklist_packed_threshold(a: &[Vec<u8>]) -> Reply {
    match crate::memory_value::parse_memory(&String::from_utf8_lossy(&a[2])) {
        Some(n) if (0..=(1i64 << 32) - (1 << 20)).contains(&n) => Reply::ok(),
        _ => Reply::err("ERR argument must be a memory value bigger than 1 and smaller than 4gb"),
    }
}

/// Redis's addReplySubcommandSyntaxError (commands without a subcommand table, as DEBUG).
/// DEBUG PROTOCOL <type>: one reply of each RESP type, for clients' tests. Attributes and
/// pushes have no `Reply`: their bytes go straight to the output, before the reply.
pub fn protocol(c: &mut Client, name: &[u8]) -> Reply {
    let ints = |n: i64| (0..n).map(Reply::Int).collect::<Vec<_>>();
    match name.to_ascii_lowercase().as_slice() {
        b"string" => Reply::Bulk(b"Hello World".to_vec()),
        b"integer" => Reply::Int(12345),
        // Redis's test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => Reply::Double(3.141),
        b"bignum" => Reply::BigNumber(b"1234567999999999999999999999999999999".to_vec()),
        b"null" => Reply::Nil,
        b"array" => Reply::Array(ints(3)),
        b"set" => Reply::Set(ints(3)),
        b"map" => Reply::Map((0..3).map(|j| (Reply::Int(j), Reply::Bool(j == 1))).collect()),
        b"attrib" => {
            if c.resp3 {
                c.out.extend_from_slice(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n");
            }
            Reply::Bulk(b"Some real reply following the attribute".to_vec())
        }
        b"push" => {
            if !c.resp3 {
                return Reply::err("ERR RESP2 is not supported by this command");
            }
            c.out.extend_from_slice(b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n");
            Reply::Bulk(b"Some real reply following the push reply".to_vec())
        }
        b"true" => Reply::Bool(true),
        b"false" => Reply::Bool(false),
        b"verbatim" => Reply::Verbatim(b"This is a verbatim\nstring".to_vec()),
        _ => Reply::err(
            "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

pub fn subcommand_syntax_error(sub: &[u8], cmd: &str) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
        cmd.to_ascii_uppercase()
    ))
}

/// C's atoi: optional spaces and sign, then the leading digits; 0 without any.
pub fn atoi(b: &[u8]) -> i64 {
    let (neg, digits) = ferrokv::format::blob::c_number_start(b);
    let n = digits
        .iter()
        .take_while(|d| d.is_ascii_digit())
        .fold(0i64, |n, d| n.wrapping_mul(10).wrapping_add(i64::from(d - b'0')));
    if neg {
        -n
    } else {
        n
    }
}

/// DEBUG POPULATE count [prefix] [size]: `prefix:N` (default `key:N`) set to `value:N`,
/// padded with zero bytes (or cut) to `size`; existing keys are left alone. Nothing is
/// propagated, as in Redis.
pub fn populate(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if !(3..=5).contains(&a.len()) {
        return crate::cmd::sub_arity("debug", &a[1]);
    }
    let positive = |b: &[u8]| parse_i64(b).filter(|n| *n >= 0);
    let Some(count) = positive(&a[2]) else {
        return Reply::err("ERR value is out of range, must be positive");
    };
    let size = match a.get(4) {
        Some(b) => match positive(b) {
            Some(n) => n as usize,
            None => return Reply::err("ERR value is out of range, must be positive"),
        },
        None => 0,
    };
    let prefix: &[u8] = a.get(3).map_or(b"key", |p| p.as_slice());
    let lru = s.engine.clock().lru();
    let Some(db) = s.engine.keyspace_mut().dbs.get_mut(c.session.db) else { return Reply::ok() };
    db.reserve(count as usize);
    let mut key = Vec::new();
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.extend_from_slice(format!(":{j}").as_bytes());
        let mut val = format!("value:{j}").into_bytes();
        if size > 0 {
            val.resize(size, 0);
        }
        db.add_new(&key, Value::Str(Str::plain(&val)), lru);
    }
    Reply::ok()
}
