//! String commands.

use super::catalog::ServerVersion;
use super::long_double::LongDouble;
use super::{arg_i64, eq_ic, invalid_expire_time, notify, parse_i64, Ctx, ExpireMode, Reply, Spec};
use crate::value::{Str, Value};

pub const SPECS: &[Spec] = &[
    Spec::new("get", get),
    Spec::new("set", set),
    Spec::new("setnx", setnx),
    Spec::new("setex", setex),
    Spec::new("psetex", psetex),
    Spec::new("getset", getset),
    Spec::new("getdel", getdel),
    Spec::new("getex", getex),
    Spec::new("mget", mget),
    Spec::new("mset", mset),
    Spec::new("msetnx", msetnx),
    Spec::new("append", append),
    Spec::new("strlen", strlen),
    Spec::new("getrange", getrange),
    Spec::new("substr", getrange),
    Spec::new("setrange", setrange),
    Spec::new("incr", incr),
    Spec::new("decr", decr),
    Spec::new("incrby", incrby),
    Spec::new("decrby", decrby),
    Spec::new("incrbyfloat", incrbyfloat),
    Spec::new("setbit", setbit),
    Spec::new("getbit", getbit),
    Spec::new("bitcount", bitcount),
    Spec::new("bitpos", bitpos),
    Spec::new("bitop", bitop),
    Spec::new("bitfield", bitfield),
    Spec::new("bitfield_ro", bitfield_ro),
    Spec::new("lcs", lcs),
];

/// proto-max-bulk-len: the longest string a command may build.
const MAX_STRING: u64 = 512 * 1024 * 1024;
const TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// The string at `key`: Ok(None) when missing, Err(WRONGTYPE) for another type.
pub fn read_str<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c Str>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// The string at `key` for writing: Ok(None) when missing, Err(WRONGTYPE) for another type.
fn write_str<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Str>, Reply> {
    match ctx.lookup_write(key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// GET's reply (getGenericCommand).
fn get_reply(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    match read_str(ctx, key) {
        Ok(Some(s)) => Reply::Bulk(s.to_vec()),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

fn get(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    get_reply(ctx, &a[1])
}

// ------------------------------------------------------------ SET and friends

/// How an expire argument is given.
#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Seconds,
    Millis,
}

/// SET/GETEX options.
#[derive(Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    /// The expire argument, its unit and whether it is relative (EX/PX).
    expire: Option<(&'a [u8], Unit, bool)>,
}

/// Parse SET (from argv[3]) or GETEX (from argv[2]) options as Redis 7.0 does: each option
/// only where it does not conflict with one already given (and, in Redis 6.2, NX and GET
/// conflict too).
fn parse_set_options(opts: &[Vec<u8>], for_set: bool, redis62: bool) -> Result<SetOptions<'_>, Reply> {
    let mut o = SetOptions::default();
    let mut j = 0;
    while j < opts.len() {
        let opt = &opts[j];
        let next = opts.get(j + 1).map(Vec::as_slice);
        let has = |o: &SetOptions<'_>, unit: Unit, rel: bool| o.expire.is_some_and(|(_, u, r)| u == unit && r == rel);
        let expire_free = |o: &SetOptions<'_>, unit: Unit, rel: bool| {
            !o.keep_ttl
                && !o.persist
                && [(Unit::Seconds, true), (Unit::Millis, true), (Unit::Seconds, false), (Unit::Millis, false)]
                    .iter()
                    .all(|&(u, r)| (u, r) == (unit, rel) || !has(o, u, r))
        };
        if for_set && eq_ic(opt, "nx") && !o.xx && !(redis62 && o.get) {
            o.nx = true;
        } else if for_set && eq_ic(opt, "xx") && !o.nx {
            o.xx = true;
        } else if for_set && eq_ic(opt, "get") && !(redis62 && o.nx) {
            o.get = true;
        } else if for_set && eq_ic(opt, "keepttl") && !o.persist && o.expire.is_none() {
            o.keep_ttl = true;
        } else if !for_set && eq_ic(opt, "persist") && o.expire.is_none() && !o.keep_ttl {
            o.persist = true;
        } else if let Some((unit, rel)) = expire_option(opt).filter(|&(u, r)| expire_free(&o, u, r) && next.is_some()) {
            o.expire = next.map(|n| (n, unit, rel));
            j += 1;
        } else {
            return Err(Reply::syntax());
        }
        j += 1;
    }
    Ok(o)
}

fn expire_option(opt: &[u8]) -> Option<(Unit, bool)> {
    if eq_ic(opt, "ex") {
        Some((Unit::Seconds, true))
    } else if eq_ic(opt, "px") {
        Some((Unit::Millis, true))
    } else if eq_ic(opt, "exat") {
        Some((Unit::Seconds, false))
    } else if eq_ic(opt, "pxat") {
        Some((Unit::Millis, false))
    } else {
        None
    }
}

/// The absolute expiry in ms an expire argument gives (getExpireMillisecondsOrReply).
fn expire_ms(ctx: &Ctx<'_>, arg: &[u8], unit: Unit, relative: bool, cmd: &str) -> Result<i64, Reply> {
    let bad = || invalid_expire_time(cmd, ctx.cfg.version);
    let v = arg_i64(arg)?;
    if v <= 0 {
        return Err(bad());
    }
    let ms = match unit {
        Unit::Seconds => v.checked_mul(1000).ok_or_else(bad)?,
        Unit::Millis => v,
    };
    let ms = if relative { ms.checked_add(ctx.now).ok_or_else(bad)? } else { ms };
    if ms <= 0 {
        return Err(bad());
    }
    Ok(ms)
}

/// setGenericCommand: store `val` at `key` under the NX/XX/GET/expiry options.
fn set_generic(
    ctx: &mut Ctx<'_>,
    a: &[Vec<u8>],
    key: &[u8],
    val: &[u8],
    o: &SetOptions<'_>,
    ok: Reply,
    abort: Reply,
) -> Reply {
    let name = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
    let when = match o.expire {
        Some((arg, unit, rel)) => match expire_ms(ctx, arg, unit, rel, &name) {
            Ok(ms) => Some(ms),
            Err(e) => return e,
        },
        None => None,
    };
    let old = if o.get {
        let r = get_reply(ctx, key);
        if r.is_error() {
            return r;
        }
        Some(r)
    } else {
        None
    };
    let found = ctx.lookup_write(key).is_some();
    if (o.nx && found) || (o.xx && !found) {
        return old.unwrap_or(abort);
    }
    ctx.db_set(key, Value::Str(Str::try_encode(val)), o.keep_ttl);
    ctx.dirty += 1;
    ctx.notify(notify::STRING, "set", key);
    if let Some(ms) = when {
        ctx.set_expire(key, ms);
        // From 7.2 a PXAT goes out as written, GET and all.
        let pxat = matches!(o.expire, Some((_, Unit::Millis, false)));
        if !(pxat && ctx.cfg.set_pxat_verbatim()) {
            ctx.rewrite(vec![
                b"SET".to_vec(),
                key.to_vec(),
                val.to_vec(),
                b"PXAT".to_vec(),
                ms.to_string().into_bytes(),
            ]);
        }
        ctx.notify(notify::GENERIC, "expire", key);
    } else if o.get {
        // Propagated without its GET arguments.
        let argv = a.iter().enumerate().filter(|(j, x)| *j < 3 || !eq_ic(x, "get")).map(|(_, x)| x.clone()).collect();
        ctx.rewrite(argv);
    }
    old.unwrap_or(ok)
}

fn set(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match parse_set_options(&a[3..], true, ctx.cfg.version.is_redis62()) {
        Ok(o) => set_generic(ctx, a, &a[1], &a[2], &o, Reply::ok(), Reply::Nil),
        Err(e) => e,
    }
}

fn setnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let o = SetOptions { nx: true, ..SetOptions::default() };
    set_generic(ctx, a, &a[1], &a[2], &o, Reply::Int(1), Reply::Int(0))
}

fn setex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let o = SetOptions { expire: Some((&a[2], Unit::Seconds, true)), ..SetOptions::default() };
    set_generic(ctx, a, &a[1], &a[3], &o, Reply::ok(), Reply::Nil)
}

fn psetex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let o = SetOptions { expire: Some((&a[2], Unit::Millis, true)), ..SetOptions::default() };
    set_generic(ctx, a, &a[1], &a[3], &o, Reply::ok(), Reply::Nil)
}

fn getset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let old = get_reply(ctx, key);
    if old.is_error() {
        return old;
    }
    ctx.db_set(key, Value::Str(Str::try_encode(&a[2])), false);
    ctx.notify(notify::STRING, "set", key);
    ctx.dirty += 1;
    ctx.rewrite(vec![b"SET".to_vec(), key.to_vec(), a[2].clone()]);
    old
}

fn getdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let old = get_reply(ctx, key);
    if old.is_error() {
        return old;
    }
    if ctx.db_delete(key) {
        ctx.rewrite(vec![ctx.cfg.getdel_command().to_vec(), key.to_vec()]);
        ctx.notify(notify::GENERIC, "del", key);
        ctx.dirty += 1;
    }
    old
}

fn getex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let o = match parse_set_options(&a[2..], false, false) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let key = &a[1];
    let value = match read_str(ctx, key) {
        Ok(Some(s)) => s.to_vec(),
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    let when = match o.expire {
        Some((arg, unit, rel)) => match expire_ms(ctx, arg, unit, rel, "getex") {
            Ok(ms) => Some((ms, rel)),
            Err(e) => return e,
        },
        None => None,
    };
    match when {
        Some((ms, false)) if ctx.mode == super::ExpireMode::Master && ms <= ctx.now => {
            super::keys::delete_expired_now(ctx, key);
        }
        Some((ms, _)) => {
            ctx.set_expire(key, ms);
            ctx.rewrite(vec![b"PEXPIREAT".to_vec(), key.to_vec(), ms.to_string().into_bytes()]);
            ctx.signal_modified(key);
            ctx.notify(notify::GENERIC, "expire", key);
            ctx.dirty += 1;
        }
        None if o.persist && ctx.persist(key) => {
            ctx.signal_modified(key);
            ctx.rewrite(vec![b"PERSIST".to_vec(), key.to_vec()]);
            ctx.notify(notify::GENERIC, "persist", key);
            ctx.dirty += 1;
        }
        None => {}
    }
    Reply::Bulk(value)
}

fn mget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let out = a[1..]
        .iter()
        .map(|k| match ctx.lookup_read(k) {
            Some(Value::Str(s)) => Reply::Bulk(s.to_vec()),
            _ => Reply::Nil,
        })
        .collect();
    Reply::Array(out)
}

fn mset_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], nx: bool) -> Reply {
    if a.len().is_multiple_of(2) {
        let name = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
        return Reply::error(format!("ERR wrong number of arguments for '{name}' command"));
    }
    if nx && a[1..].iter().step_by(2).any(|k| ctx.lookup_write(k).is_some()) {
        return Reply::Int(0);
    }
    for pair in a[1..].chunks(2) {
        // setKey looks the key up for writing, so an expired one is deleted first.
        ctx.expire_if_needed(&pair[0]);
        ctx.db_set(&pair[0], Value::Str(Str::try_encode(&pair[1])), false);
        ctx.notify(notify::STRING, "set", &pair[0]);
    }
    ctx.dirty += (a.len() / 2) as u64;
    if nx {
        Reply::Int(1)
    } else {
        Reply::ok()
    }
}

fn mset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    mset_generic(ctx, a, false)
}

fn msetnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    mset_generic(ctx, a, true)
}

// ------------------------------------------------------------ APPEND and ranges

/// Whether a string of `len + extra` bytes would pass proto-max-bulk-len.
fn too_long(len: u64, extra: u64) -> bool {
    len.checked_add(extra).is_none_or(|t| t > MAX_STRING)
}

fn append(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let total = match write_str(ctx, key) {
        Err(e) => return e,
        Ok(None) => {
            let s = Str::try_encode(&a[2]);
            let n = s.len();
            ctx.db_add(key, Value::Str(s));
            n
        }
        Ok(Some(s)) => {
            if too_long(s.len() as u64, a[2].len() as u64) {
                return Reply::err(TOO_BIG);
            }
            let raw = s.make_raw();
            raw.extend_from_slice(&a[2]);
            raw.len()
        }
    };
    ctx.signal_modified(key);
    ctx.notify(notify::STRING, "append", key);
    ctx.dirty += 1;
    Reply::Int(total as i64)
}

fn strlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_str(ctx, &a[1]) {
        Ok(Some(s)) => Reply::Int(s.len() as i64),
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

fn getrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (mut start, mut end) = match (arg_i64(&a[2]), arg_i64(&a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let s = match read_str(ctx, &a[1]) {
        Ok(Some(s)) => s.as_bytes(),
        Ok(None) => return Reply::Bulk(Vec::new()),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Reply::Bulk(Vec::new());
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0).min(len - 1);
    if start > end || len == 0 {
        return Reply::Bulk(Vec::new());
    }
    Reply::bulk(&s[start as usize..=end as usize])
}

fn setrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let value = &a[3];
    let offset = match arg_i64(&a[2]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    if offset < 0 {
        return Reply::err("ERR offset is out of range");
    }
    let offset = offset as u64;
    let total = match write_str(ctx, key) {
        Err(e) => return e,
        Ok(None) => {
            if value.is_empty() {
                return Reply::Int(0);
            }
            if too_long(offset, value.len() as u64) {
                return Reply::err(TOO_BIG);
            }
            // Exactly its size, as Redis makes a new key's (a reallocation would double it).
            let mut raw = Vec::with_capacity(offset as usize + value.len());
            raw.resize(offset as usize, 0);
            raw.extend_from_slice(value);
            let n = raw.len();
            ctx.db_add(key, Value::Str(Str::grown(raw)));
            n
        }
        Ok(Some(s)) => {
            if value.is_empty() {
                return Reply::Int(s.len() as i64);
            }
            if too_long(offset, value.len() as u64) {
                return Reply::err(TOO_BIG);
            }
            let raw = s.make_raw();
            let end = offset as usize + value.len();
            if raw.len() < end {
                raw.resize(end, 0);
            }
            raw[offset as usize..end].copy_from_slice(value);
            raw.len()
        }
    };
    ctx.signal_modified(key);
    ctx.notify(notify::STRING, "setrange", key);
    ctx.dirty += 1;
    Reply::Int(total as i64)
}

// ------------------------------------------------------------ counters

fn incr_generic(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> Reply {
    let current = match write_str(ctx, key) {
        Err(e) => return e,
        Ok(None) => None,
        Ok(Some(s)) => match s.as_i64() {
            Some(v) => Some(v),
            None => return Reply::not_integer(),
        },
    };
    let Some(value) = current.unwrap_or(0).checked_add(by) else {
        return Reply::err("ERR increment or decrement would overflow");
    };
    // dbOverwrite keeps the TTL.
    ctx.db_set(key, Value::Str(Str::Int(value)), true);
    ctx.notify(notify::STRING, "incrby", key);
    ctx.dirty += 1;
    Reply::Int(value)
}

fn incr(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    incr_generic(ctx, &a[1], 1)
}

fn decr(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    incr_generic(ctx, &a[1], -1)
}

fn incrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match arg_i64(&a[2]) {
        Ok(by) => incr_generic(ctx, &a[1], by),
        Err(e) => e,
    }
}

fn decrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match arg_i64(&a[2]) {
        // Redis 6.2 negates it as C does, to itself.
        Ok(i64::MIN) if ctx.cfg.version.behaves_as() >= ServerVersion::Redis70 => {
            Reply::err("ERR decrement would overflow")
        }
        Ok(i64::MIN) => incr_generic(ctx, &a[1], i64::MIN),
        Ok(by) => incr_generic(ctx, &a[1], -by),
        Err(e) => e,
    }
}

fn incrbyfloat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let current = match write_str(ctx, key) {
        Err(e) => return e,
        Ok(None) => Some(LongDouble::ZERO),
        Ok(Some(s)) => LongDouble::parse(&s.as_bytes()),
    };
    let (Some(current), Some(by)) = (current, LongDouble::parse(&a[2])) else {
        return Reply::not_float();
    };
    let sum = current + by;
    if !sum.is_finite() {
        return Reply::err("ERR increment would produce NaN or Infinity");
    }
    let text = sum.to_human().into_bytes();
    ctx.db_set(key, Value::Str(Str::plain(&text)), true);
    ctx.notify(notify::STRING, "incrbyfloat", key);
    ctx.dirty += 1;
    ctx.rewrite(vec![b"SET".to_vec(), key.to_vec(), text.clone(), b"KEEPTTL".to_vec()]);
    Reply::Bulk(text)
}

// ------------------------------------------------------------ LCS

/// LCS's options.
#[derive(Default)]
struct LcsOpts {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: i64,
}

fn lcs_opts(a: &[Vec<u8>]) -> Result<LcsOpts, Reply> {
    let mut o = LcsOpts::default();
    let mut i = 3;
    while i < a.len() {
        let more = i + 1 < a.len();
        if eq_ic(&a[i], "idx") {
            o.idx = true;
        } else if eq_ic(&a[i], "len") {
            o.len = true;
        } else if eq_ic(&a[i], "withmatchlen") {
            o.with_match_len = true;
        } else if eq_ic(&a[i], "minmatchlen") && more {
            o.min_match_len = arg_i64(&a[i + 1])?.max(0);
            i += 1;
        } else {
            return Err(Reply::syntax());
        }
        i += 1;
    }
    if o.len && o.idx {
        return Err(Reply::err("ERR If you want both the length and indexes, please just use IDX."));
    }
    Ok(o)
}

/// The string at `key` for LCS (missing: empty), or the error LCS gives for another type.
fn lcs_input(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Vec<u8>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(Vec::new()),
        Some(Value::Str(s)) => Ok(s.to_vec()),
        Some(_) => Err(Reply::err("ERR The specified keys must contain string values")),
    }
}

/// LCS: the longest common subsequence by the classic dynamic programming table, walked
/// back from the end to give the string or the matching ranges (latest first, as Redis).
fn lcs(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (x, y) = match (lcs_input(ctx, &a[1]), lcs_input(ctx, &a[2])) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let o = match lcs_opts(a) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (n, m) = (x.len(), y.len());
    let cells = (n as u64 + 1).saturating_mul(m as u64 + 1);
    if cells.saturating_mul(4) > MAX_STRING {
        return Reply::err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let w = m + 1;
    let mut t = vec![0u32; (n + 1) * w];
    for i in 1..=n {
        for j in 1..=m {
            t[i * w + j] = if x[i - 1] == y[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[n * w + m];
    if o.len {
        return Reply::Int(i64::from(total));
    }
    let mut common = vec![0u8; total as usize];
    let mut left = total as usize;
    let mut matches = Vec::new();
    // The open range: start and end in x, start and end in y.
    let mut range: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut j) = (n, m);
    while i > 0 && j > 0 {
        let mut emit = false;
        if x[i - 1] == y[j - 1] {
            common[left - 1] = x[i - 1];
            range = match range {
                None => Some((i - 1, i - 1, j - 1, j - 1)),
                Some((xs, xe, ys, ye)) if xs == i && ys == j => Some((xs - 1, xe, ys - 1, ye)),
                Some(r) => {
                    emit = true;
                    Some(r)
                }
            };
            if range.is_some_and(|(xs, _, ys, _)| xs == 0 || ys == 0) {
                emit = true;
            }
            left -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = range.is_some();
        }
        if emit {
            if let Some((xs, xe, ys, ye)) = range.take() {
                let len = (xe - xs + 1) as i64;
                if o.idx && (o.min_match_len == 0 || len >= o.min_match_len) {
                    let mut m = vec![
                        Reply::Array(vec![Reply::Int(xs as i64), Reply::Int(xe as i64)]),
                        Reply::Array(vec![Reply::Int(ys as i64), Reply::Int(ye as i64)]),
                    ];
                    if o.with_match_len {
                        m.push(Reply::Int(len));
                    }
                    matches.push(Reply::Array(m));
                }
            }
        }
    }
    if o.idx {
        return Reply::Map(vec![
            (Reply::bulk(b"matches"), Reply::Array(matches)),
            (Reply::bulk(b"len"), Reply::Int(i64::from(total))),
        ]);
    }
    Reply::Bulk(common)
}

// ------------------------------------------------------------ bits

/// A bit offset argument: a non-negative integer within proto-max-bulk-len bytes.
fn bit_offset(b: &[u8]) -> Result<u64, Reply> {
    match parse_i64(b) {
        Some(v) if v >= 0 && ((v >> 3) as u64) < MAX_STRING => Ok(v as u64),
        _ => Err(Reply::err("ERR bit offset is not an integer or out of range")),
    }
}

fn setbit(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let offset = match bit_offset(&a[2]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let on = match parse_i64(&a[3]) {
        Some(v @ (0 | 1)) => v == 1,
        _ => return Reply::err("ERR bit is not an integer or out of range"),
    };
    let byte = (offset >> 3) as usize;
    let bit = 7 - (offset & 7) as u8;
    let (old, changed) = match write_str(ctx, key) {
        Err(e) => return e,
        Ok(None) => {
            let mut raw = vec![0u8; byte + 1];
            raw[byte] |= u8::from(on) << bit;
            ctx.db_add(key, Value::Str(Str::grown(raw)));
            (false, true)
        }
        Ok(Some(s)) => {
            let raw = s.make_raw();
            let grown = raw.len() < byte + 1;
            if grown {
                raw.resize(byte + 1, 0);
            }
            let old = raw[byte] & (1 << bit) != 0;
            raw[byte] = (raw[byte] & !(1 << bit)) | (u8::from(on) << bit);
            (old, grown || old != on)
        }
    };
    // Redis 6.2 counts every SETBIT as a change (propagated, notified) even when the bit
    // already had that value.
    if changed || ctx.cfg.version.is_redis62() {
        ctx.signal_modified(key);
        ctx.notify(notify::STRING, "setbit", key);
        ctx.dirty += 1;
    }
    Reply::Int(i64::from(old))
}

fn getbit(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let offset = match bit_offset(&a[2]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let s = match read_str(ctx, &a[1]) {
        Ok(Some(s)) => s.as_bytes(),
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let byte = (offset >> 3) as usize;
    let bit = 7 - (offset & 7) as u8;
    Reply::Int(i64::from(s.get(byte).is_some_and(|b| b & (1 << bit) != 0)))
}

/// BITPOS key bit [start [end [BYTE|BIT]]]: the first bit set to `bit` in the range, as
/// Redis 7.0 (BYTE|BIT from 7.0; 6.2 has byte ranges only). A missing key is all zeros; a
/// range with no such bit is -1, except that with no `end` given the string counts as
/// followed by zeros.
fn bitpos(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let bit = match parse_i64(&a[2]) {
        Some(b @ (0 | 1)) => b == 1,
        Some(_) => return Reply::err("ERR The bit argument must be 1 or 0."),
        None => return Reply::not_integer(),
    };
    let with_unit = ctx.cfg.version.behaves_as() >= ServerVersion::Redis70;
    // Redis 7.4 (and Valkey 8.0) check the range's arguments before looking the key up.
    if ctx.cfg.version.checks_bit_ranges_first() {
        if a.len() > 6 {
            return Reply::syntax();
        }
        if let Some(e) = a.get(3).and_then(|x| arg_i64(x).err()) {
            return e;
        }
        if a.get(5).is_some_and(|u| !eq_ic(u, "bit") && !eq_ic(u, "byte")) {
            return Reply::syntax();
        }
        if let Some(e) = a.get(4).and_then(|x| arg_i64(x).err()) {
            return e;
        }
    }
    let s = match read_str(ctx, &a[1]) {
        Ok(Some(s)) => s.as_bytes(),
        Ok(None) => return Reply::Int(if bit { -1 } else { 0 }),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    // The range in bits, inclusive, and whether the caller gave its end.
    let (first, last, end_given) = match a.len() {
        3 => (0, len * 8 - 1, false),
        4..=6 if a.len() < 6 || with_unit => {
            let start = match arg_i64(&a[3]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            let in_bits = match a.get(5) {
                None => false,
                Some(u) if eq_ic(u, "bit") => true,
                Some(u) if eq_ic(u, "byte") => false,
                Some(_) => return Reply::syntax(),
            };
            let end = match a.get(4).map(|e| arg_i64(e)) {
                Some(Ok(v)) => Some(v),
                Some(Err(e)) => return e,
                None => None,
            };
            let total = if in_bits { len * 8 } else { len };
            let norm = |v: i64| if v < 0 { (v + total).max(0) } else { v };
            let (start, end) = (norm(start), end.map_or(total - 1, |e| norm(e).min(total - 1)));
            if start > end {
                return Reply::Int(-1);
            }
            if in_bits {
                (start, end, a.len() >= 5)
            } else {
                (start * 8, end * 8 + 7, a.len() >= 5)
            }
        }
        _ => return Reply::syntax(),
    };
    if first > last {
        return Reply::Int(-1);
    }
    // Byte by byte: bits outside the range count as the other value; a byte holding the
    // wanted bit gives its first one.
    let at = ((first >> 3)..=(last >> 3)).find_map(|byte| {
        let lo = if byte == first >> 3 { first & 7 } else { 0 };
        let hi = if byte == last >> 3 { last & 7 } else { 7 };
        let in_range = (0xffu8 >> lo) & (0xffu8 << (7 - hi));
        let v = if bit { s[byte as usize] } else { !s[byte as usize] } & in_range;
        (v != 0).then(|| byte * 8 + i64::from(v.leading_zeros()))
    });
    Reply::Int(match at {
        Some(i) => i,
        None if bit || end_given => -1,
        // Past the range, the string counts as padded with zeros: its first byte after the
        // range's last byte.
        None => ((last >> 3) + 1) * 8,
    })
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]: the bitwise result of the keys (missing ones
/// empty, shorter ones padded with zeros) stored at destkey; an empty result deletes it.
fn bitop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = match &a[1] {
        o if eq_ic(o, "and") => Op::And,
        o if eq_ic(o, "or") => Op::Or,
        o if eq_ic(o, "xor") => Op::Xor,
        o if eq_ic(o, "not") => Op::Not,
        _ => return Reply::syntax(),
    };
    if op == Op::Not && a.len() != 4 {
        return Reply::err("ERR BITOP NOT must be called with a single source key.");
    }
    let mut sources: Vec<Vec<u8>> = Vec::with_capacity(a.len() - 3);
    for key in &a[3..] {
        match read_str(ctx, key) {
            Ok(Some(s)) => sources.push(s.as_bytes().into_owned()),
            Ok(None) => sources.push(Vec::new()),
            Err(e) => return e,
        }
    }
    let max = sources.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |s: &Vec<u8>, j: usize| s.get(j).copied().unwrap_or(0);
    let result: Vec<u8> = (0..max)
        .map(|j| {
            let mut out = byte(&sources[0], j);
            for s in &sources[1..] {
                match op {
                    Op::And => out &= byte(s, j),
                    Op::Or => out |= byte(s, j),
                    Op::Xor => out ^= byte(s, j),
                    Op::Not => {}
                }
            }
            if op == Op::Not {
                !out
            } else {
                out
            }
        })
        .collect();
    let dst = &a[2];
    if max > 0 {
        ctx.db_set(dst, Value::Str(Str::raw(result)), false);
        ctx.notify(notify::STRING, "set", dst);
        ctx.dirty += 1;
    } else if ctx.db_delete(dst) {
        ctx.notify(notify::GENERIC, "del", dst);
        ctx.dirty += 1;
    }
    Reply::Int(max as i64)
}

/// What BITFIELD does past a field's range (OVERFLOW WRAP|SAT|FAIL).
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation: GET (no value), SET or INCRBY of a field of `bits` bits at bit
/// `offset`, signed or not.
struct FieldOp {
    write: Option<(bool, i64)>,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// A field's value read MSB first from `s` (zeros past its end), sign-extended when signed.
fn field_get(s: &[u8], offset: u64, bits: u32, signed: bool) -> i64 {
    let mut v: u64 = 0;
    for j in 0..u64::from(bits) {
        let at = offset + j;
        let bit = s.get((at >> 3) as usize).map_or(0, |b| (b >> (7 - (at & 7))) & 1);
        v = (v << 1) | u64::from(bit);
    }
    if signed && bits < 64 && v >> (bits - 1) & 1 == 1 {
        v |= u64::MAX << bits;
    }
    v as i64
}

/// Write the low `bits` bits of `v` at bit `offset` of `s` (long enough), MSB first.
fn field_set(s: &mut [u8], offset: u64, bits: u32, v: u64) {
    for j in 0..u64::from(bits) {
        let at = offset + j;
        let bit = (v >> (u64::from(bits) - 1 - j)) & 1;
        let byte = &mut s[(at >> 3) as usize];
        let mask = 1u8 << (7 - (at & 7));
        *byte = if bit == 1 { *byte | mask } else { *byte & !mask };
    }
}

/// `value + incr` in a field of `bits` bits, as Redis's check*BitfieldOverflow decides: the
/// result, or None when it overflows under FAIL.
fn field_add(value: i64, incr: i64, bits: u32, signed: bool, ow: Overflow) -> Option<i64> {
    let wrap = |sum: u64| -> i64 {
        if !signed {
            return (sum & !(u64::MAX.checked_shl(bits).unwrap_or(0))) as i64;
        }
        if bits == 64 {
            return sum as i64;
        }
        let mask = u64::MAX << bits;
        (if sum >> (bits - 1) & 1 == 1 { sum | mask } else { sum & !mask }) as i64
    };
    let sum = (value as u64).wrapping_add(incr as u64);
    let (up, down) = if signed {
        let max = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
        let min = -max - 1;
        let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
        let minincr = min.wrapping_sub(value);
        let up = value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr);
        let down = value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr);
        (up.then_some(max), down.then_some(min))
    } else {
        let value = value as u64;
        let max = (1u64 << bits) - 1;
        let maxincr = max.wrapping_sub(value) as i64;
        let minincr = value.wrapping_neg() as i64;
        let up = value > max || (incr > 0 && incr > maxincr);
        let down = !up && incr < 0 && incr < minincr;
        (up.then_some(max as i64), down.then_some(0))
    };
    match (up.or(down), ow) {
        (None, _) => Some(sum as i64),
        (Some(_), Overflow::Wrap) => Some(wrap(sum)),
        (Some(limit), Overflow::Sat) => Some(limit),
        (Some(_), Overflow::Fail) => None,
    }
}

/// A BITFIELD type (`i1`..`i64`, `u1`..`u63`): (signed, bits).
fn field_type(t: &[u8]) -> Option<(bool, u32)> {
    let signed = match t.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return None,
    };
    // The width is read as a C string: up to a NUL.
    let rest = &t[1..t.iter().position(|&b| b == 0).unwrap_or(t.len())];
    let bits = parse_i64(rest)?;
    (1..=if signed { 64 } else { 63 }).contains(&bits).then_some((signed, bits as u32))
}

/// A BITFIELD offset: bits, or `#N` fields of `bits`; at most 512 MB in (but for the AOF).
fn field_offset(o: &[u8], bits: u32, loading: bool) -> Option<u64> {
    let (hash, digits) = match o.first() {
        Some(b'#') => (true, &o[1..]),
        _ => (false, o),
    };
    let mut v = parse_i64(digits)?;
    if hash {
        v = v.wrapping_mul(i64::from(bits));
    }
    (v >= 0 && (loading || ((v >> 3) as u64) < MAX_STRING)).then_some(v as u64)
}

/// BITFIELD key [GET type offset | SET type offset value | INCRBY type offset increment |
/// OVERFLOW WRAP|SAT|FAIL] ...: the operations in order, one reply each (null for an
/// overflow under FAIL); the string grows to the farthest field written.
fn bitfield(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    bitfield_generic(ctx, a, false)
}

/// BITFIELD_RO key [GET type offset ...].
fn bitfield_ro(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    bitfield_generic(ctx, a, true)
}

/// Run BITFIELD's operations in order on `buf` (long enough for every write): one reply
/// each, and how many count as changes (each write when `dirty`, else each that changed
/// its field).
fn run_field_ops(ops: &[FieldOp], buf: &mut [u8], dirty: bool) -> (Vec<Reply>, u64) {
    let mut changes = 0;
    let mut replies = Vec::with_capacity(ops.len());
    for op in ops {
        let old = field_get(buf, op.offset, op.bits, op.signed);
        let Some((incr, v)) = op.write else {
            replies.push(Reply::Int(old));
            continue;
        };
        let new = if incr {
            field_add(old, v, op.bits, op.signed, op.overflow)
        } else {
            field_add(v, 0, op.bits, op.signed, op.overflow)
        };
        let Some(new) = new else {
            replies.push(Reply::Nil);
            continue;
        };
        replies.push(Reply::Int(if incr { new } else { old }));
        field_set(buf, op.offset, op.bits, new as u64);
        if dirty || old != new {
            changes += 1;
        }
    }
    (replies, changes)
}

fn bitfield_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], ro: bool) -> Reply {
    let loading = ctx.mode == ExpireMode::Loading;
    let mut ops: Vec<FieldOp> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < a.len() {
        let rest = a.len() - j - 1;
        let sub = &a[j];
        let write = if eq_ic(sub, "get") && rest >= 2 {
            false
        } else if (eq_ic(sub, "set") || eq_ic(sub, "incrby")) && rest >= 3 {
            true
        } else if eq_ic(sub, "overflow") && rest >= 1 {
            overflow = match &a[j + 1] {
                t if eq_ic(t, "wrap") => Overflow::Wrap,
                t if eq_ic(t, "sat") => Overflow::Sat,
                t if eq_ic(t, "fail") => Overflow::Fail,
                _ => return Reply::err("ERR Invalid OVERFLOW type specified"),
            };
            j += 2;
            continue;
        } else {
            return Reply::syntax();
        };
        let Some((signed, bits)) = field_type(&a[j + 1]) else {
            return Reply::err(
                "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
            );
        };
        let Some(offset) = field_offset(&a[j + 2], bits, loading) else {
            return Reply::err("ERR bit offset is not an integer or out of range");
        };
        let value = if write {
            match arg_i64(&a[j + 3]) {
                Ok(v) => Some((eq_ic(sub, "incrby"), v)),
                Err(e) => return e,
            }
        } else {
            None
        };
        ops.push(FieldOp { write: value, signed, bits, offset, overflow });
        j += if write { 4 } else { 3 };
    }
    let key = &a[1];
    let highest = ops.iter().filter(|o| o.write.is_some()).map(|o| o.offset + u64::from(o.bits) - 1).max();
    let Some(highest) = highest else {
        // Only GETs: a missing key reads as zeros.
        let s = match read_str(ctx, key) {
            Ok(s) => s.map(|s| s.as_bytes()),
            Err(e) => return e,
        };
        let s = s.as_deref().unwrap_or_default();
        return Reply::Array(ops.iter().map(|op| Reply::Int(field_get(s, op.offset, op.bits, op.signed))).collect());
    };
    if ro {
        return Reply::err("ERR BITFIELD_RO only supports the GET subcommand");
    }
    let need = (highest >> 3) as usize + 1;
    // Redis 6.2 counts a change only when a field's value changed; 7.0 also when the
    // string was created or grown.
    let grown_counts = ctx.cfg.version.behaves_as() >= ServerVersion::Redis70;
    let (replies, changes) = match write_str(ctx, key) {
        Err(e) => return e,
        Ok(None) => {
            let mut buf = vec![0u8; need];
            let done = run_field_ops(&ops, &mut buf, grown_counts);
            ctx.db_add(key, Value::Str(Str::grown(buf)));
            done
        }
        Ok(Some(s)) => {
            let raw = s.make_raw();
            let grown = raw.len() < need;
            if grown {
                raw.resize(need, 0);
            }
            run_field_ops(&ops, raw, grown && grown_counts)
        }
    };
    if changes > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::STRING, "setbit", key);
        ctx.dirty += changes;
    }
    Reply::Array(replies)
}

fn bitcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    // Valkey 8.0 takes a start without an end (to the end of the string).
    let open_end = ctx.cfg.version == ServerVersion::Valkey80;
    // Redis 7.4 (and Valkey 8.0) check the range's arguments before looking the key up.
    if ctx.cfg.version.checks_bit_ranges_first() {
        if (a.len() == 3 && !open_end) || a.len() > 5 {
            return Reply::syntax();
        }
        if let Some(e) = a[2..a.len().min(4)].iter().find_map(|x| arg_i64(x).err()) {
            return e;
        }
        if a.get(4).is_some_and(|u| !eq_ic(u, "bit") && !eq_ic(u, "byte")) {
            return Reply::syntax();
        }
    }
    let s = match read_str(ctx, &a[1]) {
        Ok(Some(s)) => s.as_bytes().into_owned(),
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    let (mut start, mut end, mut first_mask, mut last_mask) = (0i64, len - 1, 0u8, 0u8);
    match a.len() {
        2 => {}
        n @ 3..=5 if n > 3 || open_end => {
            (start, end) = match (arg_i64(&a[2]), a.get(3).map_or(Ok(len - 1), |e| arg_i64(e))) {
                (Ok(s), Ok(e)) => (s, e),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            if start < 0 && end < 0 && start > end {
                return Reply::Int(0);
            }
            let is_bit = match a.get(4) {
                None => false,
                Some(u) if eq_ic(u, "bit") => true,
                Some(u) if eq_ic(u, "byte") => false,
                Some(_) => return Reply::syntax(),
            };
            let total = if is_bit { len << 3 } else { len };
            if start < 0 {
                start += total;
            }
            if end < 0 {
                end += total;
            }
            start = start.max(0);
            end = end.max(0).min(total - 1);
            if is_bit && start <= end {
                // Bits of the edge bytes outside the range are not counted.
                first_mask = !((1u16 << (8 - (start & 7))) - 1) as u8;
                last_mask = ((1u16 << (7 - (end & 7))) - 1) as u8;
                start >>= 3;
                end >>= 3;
            }
        }
        _ => return Reply::syntax(),
    }
    if start > end {
        return Reply::Int(0);
    }
    let bytes = &s[start as usize..=end as usize];
    let mut count: i64 = bytes.iter().map(|b| i64::from(b.count_ones())).sum();
    count -= i64::from((bytes[0] & first_mask).count_ones());
    count -= i64::from((bytes[bytes.len() - 1] & last_mask).count_ones());
    Reply::Int(count)
}
