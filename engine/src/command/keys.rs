//! Generic key commands: deletion, expiry, renaming, iteration, databases, DUMP/RESTORE,
//! OBJECT and SORT.

mod dump;
mod sort;

use super::{arg_i64, eq_ic, invalid_expire_time, notify, Ctx, Reply, Spec};
use crate::value::{Str, Value};

pub const SPECS: &[Spec] = &[
    Spec::new("del", del),
    Spec::new("unlink", unlink),
    Spec::new("exists", exists),
    Spec::new("touch", touch),
    Spec::new("type", type_cmd),
    Spec::new("expire", expire),
    Spec::new("pexpire", pexpire),
    Spec::new("expireat", expireat),
    Spec::new("pexpireat", pexpireat),
    Spec::new("ttl", ttl),
    Spec::new("pttl", pttl),
    Spec::new("expiretime", expiretime),
    Spec::new("pexpiretime", pexpiretime),
    Spec::new("persist", persist),
    Spec::new("rename", rename),
    Spec::new("renamenx", renamenx),
    Spec::new("keys", keys),
    Spec::new("scan", scan),
    Spec::new("randomkey", randomkey),
    Spec::new("dbsize", dbsize),
    Spec::new("flushdb", flushdb),
    Spec::new("flushall", flushall),
    Spec::new("select", select),
    Spec::new("swapdb", swapdb),
    Spec::new("move", move_cmd),
    Spec::new("copy", copy),
    Spec::new("dump", dump::dump),
    Spec::new("restore", dump::restore),
    Spec::new("restore-asking", dump::restore),
    Spec::new("object", object),
    Spec::new("sort", sort::sort).movable(sort::sort_keys),
    Spec::new("sort_ro", sort::sort_ro).movable(sort::sort_keys),
];

const NO_SUCH_KEY: &str = "ERR no such key";
const SAME_OBJECT: &str = "ERR source and destination objects are the same";
const DB_RANGE: &str = "ERR DB index is out of range";

/// An `int` argument (getIntFromObjectOrReply): an integer that fits 32 bits.
fn arg_i32(b: &[u8]) -> Result<i32, Reply> {
    let v = arg_i64(b)?;
    i32::try_from(v).map_err(|_| Reply::err("ERR value is out of range, value must between -2147483648 and 2147483647"))
}

/// A database index argument, checked against the configured count.
fn arg_db(ctx: &Ctx<'_>, b: &[u8]) -> Result<usize, Reply> {
    let id = arg_i32(b)?;
    usize::try_from(id).ok().filter(|&i| i < ctx.ks.dbs.len()).ok_or(Reply::err(DB_RANGE))
}

/// Whether an absolute time has passed already (checkAlreadyExpired; never while loading).
fn already_expired(ctx: &Ctx<'_>, when: i64) -> bool {
    ctx.mode == super::ExpireMode::Master && when <= ctx.now
}

/// Delete `key` because an expiry in the past was given: propagated as DEL or UNLINK.
pub(crate) fn delete_expired_now(ctx: &mut Ctx<'_>, key: &[u8]) {
    ctx.db_delete(key);
    ctx.dirty += 1;
    let cmd: &[u8] = if ctx.cfg.lazyfree_lazy_expire { b"UNLINK" } else { b"DEL" };
    ctx.rewrite(vec![cmd.to_vec(), key.to_vec()]);
    ctx.notify(notify::GENERIC, "del", key);
}

// ------------------------------------------------------------ DEL EXISTS TYPE

fn del(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let lazy = ctx.cfg.lazyfree_lazy_user_del;
    delete_keys(ctx, a, lazy)
}

/// UNLINK: DEL whose big values are freed on the lazyfree thread.
fn unlink(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    delete_keys(ctx, a, true)
}

fn delete_keys(ctx: &mut Ctx<'_>, a: &[Vec<u8>], lazy: bool) -> Reply {
    let mut n = 0;
    for key in &a[1..] {
        ctx.expire_if_needed(key);
        let gone = if lazy { ctx.db_delete_lazy(key) } else { ctx.db_delete(key) };
        if gone {
            ctx.notify(notify::GENERIC, "del", key);
            ctx.dirty += 1;
            n += 1;
        }
    }
    Reply::Int(n)
}

fn exists(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    Reply::Int(a[1..].iter().filter(|k| ctx.exists(k)).count() as i64)
}

/// TOUCH: a read of each key (its LRU/LFU, hits and misses); the keys that exist.
fn touch(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    Reply::Int(a[1..].iter().filter(|k| ctx.lookup_read(k).is_some()).count() as i64)
}

fn type_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    Reply::simple(ctx.lookup_slot(&a[1]).map_or("none", |s| s.value.type_name()))
}

// ------------------------------------------------------------ expiry

#[derive(Clone, Copy)]
enum Base {
    /// Relative to now.
    Now,
    /// Absolute unix time.
    Epoch,
}

fn expire(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    expire_generic(ctx, a, Base::Now, 1000)
}

fn pexpire(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    expire_generic(ctx, a, Base::Now, 1)
}

fn expireat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    expire_generic(ctx, a, Base::Epoch, 1000)
}

fn pexpireat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    expire_generic(ctx, a, Base::Epoch, 1)
}

#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn expire_flags(opts: &[Vec<u8>]) -> Result<ExpireFlags, Reply> {
    let mut f = ExpireFlags::default();
    for o in opts {
        if eq_ic(o, "nx") {
            f.nx = true;
        } else if eq_ic(o, "xx") {
            f.xx = true;
        } else if eq_ic(o, "gt") {
            f.gt = true;
        } else if eq_ic(o, "lt") {
            f.lt = true;
        } else {
            return Err(Reply::error(format!("ERR Unsupported option {}", super::err_arg(o, usize::MAX))));
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(Reply::err("ERR NX and XX, GT or LT options at the same time are not compatible"));
    }
    if f.gt && f.lt {
        return Err(Reply::err("ERR GT and LT options at the same time are not compatible"));
    }
    Ok(f)
}

fn expire_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], base: Base, unit: i64) -> Reply {
    let name = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
    let bad_time = || invalid_expire_time(&name, ctx.cfg.version);
    let flags = match expire_flags(&a[3..]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let given = match arg_i64(&a[2]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let Some(scaled) = given.checked_mul(unit) else {
        return bad_time();
    };
    let basetime = match base {
        Base::Now => ctx.now,
        Base::Epoch => 0,
    };
    if scaled > i64::MAX - basetime {
        return bad_time();
    }
    let when = scaled + basetime;
    let key = &a[1];
    if ctx.lookup_write(key).is_none() {
        return Reply::Int(0);
    }
    let current = ctx.expire_of(key);
    let refused = (flags.nx && current.is_some())
        || (flags.xx && current.is_none())
        || (flags.gt && current.is_none_or(|c| when <= c))
        || (flags.lt && current.is_some_and(|c| when >= c));
    if refused {
        return Reply::Int(0);
    }
    if already_expired(ctx, when) {
        delete_expired_now(ctx, key);
        return Reply::Int(1);
    }
    ctx.set_expire(key, when);
    let mut argv = a.to_vec();
    argv[0] = b"PEXPIREAT".to_vec();
    argv[2] = when.to_string().into_bytes();
    ctx.rewrite(argv);
    ctx.signal_modified(key);
    ctx.notify(notify::GENERIC, "expire", key);
    ctx.dirty += 1;
    Reply::Int(1)
}

fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], in_ms: bool, absolute: bool) -> Reply {
    let Some((_, expire)) = ctx.lookup_slot_with_expire(key) else {
        return Reply::Int(-2);
    };
    let Some(expire) = expire else {
        return Reply::Int(-1);
    };
    let t = if absolute { expire } else { expire.saturating_sub(ctx.now) }.max(0);
    // Rounded as Redis computes it: t + 500 may pass i64::MAX (a PXAT near it), and
    // Redis's result is the unsigned one.
    Reply::Int(if in_ms { t } else { ((t as u64 + 500) / 1000) as i64 })
}

fn ttl(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    ttl_generic(ctx, &a[1], false, false)
}

fn pttl(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    ttl_generic(ctx, &a[1], true, false)
}

fn expiretime(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    ttl_generic(ctx, &a[1], false, true)
}

fn pexpiretime(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    ttl_generic(ctx, &a[1], true, true)
}

fn persist(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    if ctx.lookup_write(key).is_none() || !ctx.persist(key) {
        return Reply::Int(0);
    }
    ctx.signal_modified(key);
    ctx.notify(notify::GENERIC, "persist", key);
    ctx.dirty += 1;
    Reply::Int(1)
}

// ------------------------------------------------------------ RENAME MOVE COPY

/// Move a key with its value, TTL and LRU to a new name or database (the target is free).
fn move_key(ctx: &mut Ctx<'_>, from: (usize, &[u8]), to: (usize, &[u8])) -> bool {
    let Some((_, expire)) = ctx.ks.dbs[from.0].get_with_expire(from.1) else {
        return false;
    };
    let Some(slot) = ctx.ks.dbs[from.0].remove(from.1) else {
        return false;
    };
    let pos = ctx.ks.dbs[to.0].add(to.1, slot.value, slot.lru);
    if let Some(t) = expire {
        ctx.ks.dbs[to.0].set_expire_at(pos, t);
    }
    true
}

fn rename(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    rename_generic(ctx, a, false)
}

fn renamenx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    rename_generic(ctx, a, true)
}

fn rename_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], nx: bool) -> Reply {
    let (src, dst) = (&a[1], &a[2]);
    if ctx.lookup_write(src).is_none() {
        return Reply::err(NO_SUCH_KEY);
    }
    let done = if nx { Reply::Int(1) } else { Reply::ok() };
    if src == dst {
        return if nx { Reply::Int(0) } else { done };
    }
    if ctx.lookup_write(dst).is_some() {
        if nx {
            return Reply::Int(0);
        }
        ctx.db_delete(dst);
    }
    let db = ctx.db;
    if !move_key(ctx, (db, src), (db, dst)) {
        return Reply::err(NO_SUCH_KEY);
    }
    ctx.signal_modified(src);
    ctx.signal_modified(dst);
    ctx.notify(notify::GENERIC, "rename_from", src);
    ctx.notify(notify::GENERIC, "rename_to", dst);
    ctx.dirty += 1;
    done
}

fn move_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let dst = match arg_db(ctx, &a[2]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let src = ctx.db;
    if src == dst {
        return Reply::err(SAME_OBJECT);
    }
    if ctx.lookup_write(key).is_none() || ctx.lookup_write_in(dst, key).is_some() {
        return Reply::Int(0);
    }
    if !move_key(ctx, (src, key), (dst, key)) {
        return Reply::Int(0);
    }
    ctx.signal_modified_in(src, key);
    ctx.signal_modified_in(dst, key);
    ctx.notify_in(src, notify::GENERIC, "move_from", key);
    ctx.notify_in(dst, notify::GENERIC, "move_to", key);
    ctx.dirty += 1;
    Reply::Int(1)
}

fn copy(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (src, dst) = (&a[1], &a[2]);
    let mut replace = false;
    let mut dst_db = ctx.db;
    let mut j = 3;
    while j < a.len() {
        if eq_ic(&a[j], "replace") {
            replace = true;
        } else if eq_ic(&a[j], "db") && j + 1 < a.len() {
            dst_db = match arg_db(ctx, &a[j + 1]) {
                Ok(d) => d,
                Err(e) => return e,
            };
            j += 1;
        } else {
            return Reply::syntax();
        }
        j += 1;
    }
    if dst_db == ctx.db && src == dst {
        return Reply::err(SAME_OBJECT);
    }
    let Some(value) = ctx.lookup_read(src).map(|v| v.clone()) else {
        return Reply::Int(0);
    };
    let expire = ctx.expire_of(src);
    if ctx.lookup_write_in(dst_db, dst).is_some() {
        if !replace {
            return Reply::Int(0);
        }
        ctx.ks.dbs[dst_db].remove(dst);
    }
    let lru = ctx.lru;
    let pos = ctx.ks.dbs[dst_db].add(dst, value, lru);
    if let Some(when) = expire {
        ctx.ks.dbs[dst_db].set_expire_at(pos, when);
    }
    ctx.signal_modified_in(dst_db, dst);
    ctx.notify_in(dst_db, notify::GENERIC, "copy_to", dst);
    ctx.dirty += 1;
    Reply::Int(1)
}

// ------------------------------------------------------------ KEYS SCAN RANDOMKEY

fn keys(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let pattern = &a[1];
    let all = pattern.as_slice() == b"*";
    let check_ttl = ctx.mode != super::ExpireMode::Loading;
    let now = ctx.now;
    let out: Vec<Reply> = ctx.ks.dbs[ctx.db]
        .iter()
        .filter(|(s, _)| all || crate::glob::matches(pattern, &s.key))
        .filter(|(_, t)| !(check_ttl && t.is_some_and(|t| now > t)))
        .map(|(s, _)| Reply::Bulk(s.key.to_vec()))
        .collect();
    Reply::Array(out)
}

/// A SCAN cursor as strtoul reads it: optional sign, decimal digits, no overflow.
fn parse_cursor(b: &[u8]) -> Option<u64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if b.is_empty() {
        return Some(0);
    }
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

fn scan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let Some(cursor) = parse_cursor(&a[1]) else {
        return Reply::err("ERR invalid cursor");
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut type_name: Option<&[u8]> = None;
    let mut i = 2;
    while i < a.len() {
        let more = i + 1 < a.len();
        if eq_ic(&a[i], "count") && more {
            count = match arg_i64(&a[i + 1]) {
                Ok(c) => c,
                Err(e) => return e,
            };
            if count < 1 {
                return Reply::syntax();
            }
        } else if eq_ic(&a[i], "match") && more {
            pattern = (a[i + 1].as_slice() != b"*").then_some(a[i + 1].as_slice());
        } else if eq_ic(&a[i], "type") && more {
            type_name = Some(&a[i + 1]);
        } else if eq_ic(&a[i], "novalues") && ctx.cfg.version.since_redis74() {
            return Reply::err("ERR NOVALUES option can only be used in HSCAN");
        } else {
            return Reply::syntax();
        }
        i += 2;
    }
    let db = ctx.db;
    let mut found = Vec::new();
    let next = ctx.ks.dbs[db].scan(cursor, usize::try_from(count).unwrap_or(usize::MAX), |s| found.push(s.key.clone()));
    let mut out = Vec::with_capacity(found.len());
    for key in found {
        if pattern.is_some_and(|p| !crate::glob::matches(p, &key)) {
            continue;
        }
        if let Some(t) = type_name {
            let name = ctx.lookup_slot(&key).map_or("none", |s| s.value.type_name());
            if !t.eq_ignore_ascii_case(name.as_bytes()) {
                continue;
            }
        }
        if ctx.expire_if_needed(&key) {
            continue;
        }
        out.push(Reply::Bulk(key.to_vec()));
    }
    Reply::Array(vec![Reply::Bulk(next.to_string().into_bytes()), Reply::Array(out)])
}

fn randomkey(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> Reply {
    let db = ctx.db;
    loop {
        let Some(pos) = ctx.ks.dbs[db].random_pos(ctx.rng) else {
            return Reply::Nil;
        };
        let key = ctx.ks.dbs[db].slot(pos).key.clone();
        if matches!(ctx.mode, super::ExpireMode::Replica | super::ExpireMode::Writable) || !ctx.expire_if_needed(&key) {
            return Reply::Bulk(key.to_vec());
        }
    }
}

fn dbsize(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> Reply {
    Reply::Int(ctx.ks.dbs[ctx.db].len() as i64)
}

// ------------------------------------------------------------ databases

/// FLUSHDB/FLUSHALL's optional ASYNC|SYNC.
fn flush_mode_ok(a: &[Vec<u8>]) -> bool {
    match a.len() {
        1 => true,
        2 => eq_ic(&a[1], "sync") || eq_ic(&a[1], "async"),
        _ => false,
    }
}

/// Whether a FLUSHALL/FLUSHDB frees in the background: ASYNC, or neither word and
/// lazyfree-lazy-user-flush on.
fn flush_async(ctx: &Ctx<'_>, a: &[Vec<u8>]) -> bool {
    if ctx.fx.flush_in_background {
        return true;
    }
    match a.get(1) {
        Some(mode) => eq_ic(mode, "async"),
        None => ctx.cfg.lazyfree_lazy_user_flush,
    }
}

/// Empty database `db`, signalling every key, its keys freed on the lazyfree thread when
/// `lazy`; how many there were.
fn empty_db(ctx: &mut Ctx<'_>, db: usize, lazy: bool) -> u64 {
    if ctx.fx.track_modified {
        let keys: Vec<_> = ctx.ks.dbs[db].slots().iter().map(|s| s.key.clone()).collect();
        for k in keys {
            ctx.signal_modified_in(db, &k);
        }
    }
    let n = ctx.ks.dbs[db].len() as u64;
    let keys = ctx.ks.dbs[db].take_keys();
    if lazy {
        crate::keyspace::lazyfree::free_keys(keys);
    }
    n
}

fn flushdb(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    if !flush_mode_ok(a) {
        return Reply::syntax();
    }
    let db = ctx.db;
    let start = ctx.fx.modified.len();
    let lazy = flush_async(ctx, a);
    // Propagated even when the database was empty already.
    ctx.dirty += empty_db(ctx, db, lazy) + 1;
    note_flush(ctx, start);
    Reply::ok()
}

fn flushall(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    if !flush_mode_ok(a) {
        return Reply::syntax();
    }
    let start = ctx.fx.modified.len();
    let lazy = flush_async(ctx, a);
    for db in 0..ctx.ks.dbs.len() {
        ctx.dirty += empty_db(ctx, db, lazy);
    }
    ctx.dirty += 1;
    note_flush(ctx, start);
    Reply::ok()
}

/// The keys signalled from `start` on were emptied by one flush.
fn note_flush(ctx: &mut Ctx<'_>, start: usize) {
    if ctx.fx.track_modified {
        let end = ctx.fx.modified.len();
        ctx.fx.flushes.push(start..end);
    }
}

fn select(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match arg_db(ctx, &a[1]) {
        Ok(db) => {
            ctx.db = db;
            Reply::ok()
        }
        Err(e) => e,
    }
}

fn swapdb(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let Ok(x) = arg_i32(&a[1]) else {
        return Reply::err("ERR invalid first DB index");
    };
    let Ok(y) = arg_i32(&a[2]) else {
        return Reply::err("ERR invalid second DB index");
    };
    let n = ctx.ks.dbs.len();
    let (Ok(x), Ok(y)) = (usize::try_from(x), usize::try_from(y)) else {
        return Reply::err(DB_RANGE);
    };
    if x >= n || y >= n {
        return Reply::err(DB_RANGE);
    }
    ctx.ks.dbs.swap(x, y);
    if ctx.fx.track_modified {
        ctx.fx.swapped_dbs.push((x, y));
    }
    ctx.dirty += 1;
    Reply::ok()
}

// ------------------------------------------------------------ OBJECT

const OBJECT_HELP: &[&str] = &[
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
];

/// Redis's refcount for shared small integers.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

fn object(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let arity = match sub.as_str() {
        "help" => 2,
        "encoding" | "freq" | "idletime" | "refcount" => 3,
        _ => return Reply::error(format!("ERR unknown subcommand '{}'. Try OBJECT HELP.", super::err_arg(&a[1], 128))),
    };
    if a.len() != arity {
        return Reply::error(format!("ERR wrong number of arguments for 'object|{sub}' command"));
    }
    if sub == "help" {
        return Reply::help("OBJECT", OBJECT_HELP, ctx.cfg.version);
    }
    let lru_now = ctx.lru;
    let (lfu, now, decay) = (ctx.cfg.lfu, ctx.now, ctx.cfg.lfu_decay_time);
    let version = ctx.cfg.version;
    let Some(slot) = ctx.lookup_slot_quiet(&a[2]) else {
        return Reply::Nil;
    };
    match sub.as_str() {
        "encoding" => match (slot.value.encoding(), version) {
            // Redis 6.2 keeps small hashes and zsets in a ziplist.
            ("listpack", crate::command::catalog::ServerVersion::Redis62) => Reply::bulk(b"ziplist"),
            (name, _) => Reply::bulk(name.as_bytes()),
        },
        "refcount" => Reply::Int(match &slot.value {
            Value::Str(Str::Int(i)) if (0..10_000).contains(i) => SHARED_REFCOUNT,
            _ => 1,
        }),
        "idletime" if lfu => Reply::err(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching \
             between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        "idletime" => Reply::Int(crate::keyspace::idle_secs(lru_now, slot.lru) as i64),
        _ if lfu => Reply::Int(i64::from(crate::keyspace::lfu::counter(slot.lru, now, decay))),
        _ => Reply::err(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
    }
}
