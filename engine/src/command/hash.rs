//! Hash commands.

use super::long_double::LongDouble;
use super::set::{NoValues, ScanOpts};
use super::{arg_i64, eq_ic, notify, parse_i64, Ctx, ExpireMode, Reply, Spec};
use crate::value::hash::FieldState;
use crate::value::{Hash, Value};

pub const SPECS: &[Spec] = &[
    Spec::new("hset", hset),
    Spec::new("hmset", hset),
    Spec::new("hsetnx", hsetnx),
    Spec::new("hget", hget),
    Spec::new("hmget", hmget),
    Spec::new("hdel", hdel),
    Spec::new("hlen", hlen),
    Spec::new("hstrlen", hstrlen),
    Spec::new("hexists", hexists),
    Spec::new("hgetall", hgetall),
    Spec::new("hkeys", hkeys),
    Spec::new("hvals", hvals),
    Spec::new("hincrby", hincrby),
    Spec::new("hincrbyfloat", hincrbyfloat),
    Spec::new("hscan", hscan),
    Spec::new("hrandfield", hrandfield),
];

/// The hash at `key` for reading: Ok(None) when missing, Err(WRONGTYPE) for another type.
pub(super) fn read_hash<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Hash>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// The hash at `key` for writing: Ok(None) when missing, Err(WRONGTYPE) for another type.
pub(super) fn write_hash<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Hash>, Reply> {
    match ctx.lookup_write(key) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// The hash at `key` for writing, created empty when missing.
fn hash_or_create<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<&'c mut Hash, Reply> {
    write_hash(ctx, key)?;
    match ctx.lookup_write_or_insert(key, || Value::Hash(Box::default())) {
        Value::Hash(h) => Ok(h),
        _ => Err(Reply::wrongtype()),
    }
}

/// What a lazy field check did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lazy {
    /// The field is live, or missing.
    NotExpired,
    /// Its TTL passed: it reads as missing (deleted on a master).
    Expired,
    /// Its TTL passed and it was the last field: the key is gone.
    HashDeleted,
}

/// Redis's lazy field expiry (hashTypeGetValue): a field of the hash at `key` whose TTL
/// passed reads as missing; on a master it is deleted now, its HDEL propagated and
/// counted, `hexpired` fired (and `del` when the hash empties, which deletes the key)
/// unless `quiet`. A replica's writes come from its master: they see the field as it is.
pub(super) fn expire_field(ctx: &mut Ctx<'_>, key: &[u8], field: &[u8], write: bool, quiet: bool) -> Lazy {
    let (db, now) = (ctx.db, ctx.now);
    let Some(pos) = ctx.ks.dbs[db].find(key) else { return Lazy::NotExpired };
    let past = match &ctx.ks.dbs[db].slot(pos).value {
        Value::Hash(h) => h.lookup(field, now) == FieldState::Expired,
        _ => false,
    };
    match ctx.mode {
        _ if !past => return Lazy::NotExpired,
        ExpireMode::Replica if write => return Lazy::NotExpired,
        ExpireMode::Writable if write => {}
        ExpireMode::Replica | ExpireMode::Writable | ExpireMode::Loading => return Lazy::Expired,
        ExpireMode::Master => {}
    }
    let empty = match &mut ctx.ks.dbs[db].slot_mut(pos).value {
        Value::Hash(h) => {
            h.remove(field);
            h.is_empty()
        }
        _ => false,
    };
    ctx.propagate(vec![b"HDEL".to_vec(), key.to_vec(), field.to_vec()]);
    ctx.stats.expired_subkeys += 1;
    if !quiet {
        ctx.notify(notify::HASH, "hexpired", key);
    }
    let gone = if empty {
        if !quiet {
            ctx.notify(notify::GENERIC, "del", key);
        }
        ctx.ks.dbs[db].remove_at(pos);
        Lazy::HashDeleted
    } else {
        Lazy::Expired
    };
    ctx.signal_modified(key);
    gone
}

/// Remove every field of the hash at `key` whose TTL is due (HRANDFIELD does first, on a
/// master): HDEL each, one `hexpired`, `del` when it empties; the hash is registered
/// again under its next TTL. True when the key is gone.
pub(super) fn expire_due_fields(ctx: &mut Ctx<'_>, key: &[u8]) -> bool {
    let (db, now) = (ctx.db, ctx.now);
    let Some(pos) = ctx.ks.dbs[db].find(key) else { return false };
    let due = match &ctx.ks.dbs[db].slot(pos).value {
        Value::Hash(h) => h.min_field_ttl().is_some_and(|t| (t as i64) < now),
        _ => false,
    };
    if !due || ctx.mode != ExpireMode::Master {
        return false;
    }
    let (removed, empty, next) = match &mut ctx.ks.dbs[db].slot_mut(pos).value {
        Value::Hash(h) => {
            let removed = h.remove_due(now, usize::MAX);
            (removed, h.is_empty(), h.min_field_ttl())
        }
        _ => return false,
    };
    for f in &removed {
        ctx.propagate(vec![b"HDEL".to_vec(), key.to_vec(), f.to_vec()]);
    }
    ctx.stats.expired_subkeys += removed.len() as u64;
    ctx.notify(notify::HASH, "hexpired", key);
    if empty {
        ctx.ks.dbs[db].remove_at(pos);
        ctx.notify(notify::GENERIC, "del", key);
    } else {
        ctx.ks.dbs[db].set_hash_registered(pos, next);
    }
    ctx.signal_modified(key);
    empty
}

/// After a write that changed fields: WATCH, the event, dirty.
fn changed(ctx: &mut Ctx<'_>, key: &[u8], event: &'static str, dirty: u64) {
    ctx.signal_modified(key);
    ctx.notify(notify::HASH, event, key);
    ctx.dirty += dirty;
}

// ------------------------------------------------------------------ writes

/// HSET key field value [field value ...] (and the deprecated HMSET, which answers OK).
fn hset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let hmset = eq_ic(&a[0], "hmset");
    if a.len() % 2 == 1 {
        let name = if hmset { "hmset" } else { "hset" };
        return Reply::error(format!("ERR wrong number of arguments for '{name}' command"));
    }
    let key = &a[1];
    let limits = ctx.cfg.limits;
    let hash = match hash_or_create(ctx, key) {
        Ok(h) => h,
        Err(e) => return e,
    };
    if hash.args_too_long(a[2..].iter().map(|x| x.as_slice()), &limits) {
        hash.convert();
    }
    let created = a[2..].chunks_exact(2).filter(|p| hash.insert(&p[0], &p[1], &limits)).count();
    changed(ctx, key, "hset", ((a.len() - 2) / 2) as u64);
    if hmset {
        Reply::ok()
    } else {
        Reply::Int(created as i64)
    }
}

fn hsetnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let limits = ctx.cfg.limits;
    if let Err(e) = write_hash(ctx, key) {
        return e;
    }
    let lazy = expire_field(ctx, key, &a[2], true, false);
    let hash = match hash_or_create(ctx, key) {
        Ok(h) => h,
        Err(e) => return e,
    };
    // Redis 6.2 converts for a long field or value even when the field exists.
    if limits.hash_ziplist_keeps_long && hash.args_too_long([a[2].as_slice(), a[3].as_slice()], &limits) {
        hash.convert();
    }
    if lazy == Lazy::NotExpired && hash.contains(&a[2]) {
        return Reply::Int(0);
    }
    hash.insert(&a[2], &a[3], &limits);
    changed(ctx, key, "hset", 1);
    Reply::Int(1)
}

fn hdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let hash = match write_hash(ctx, key) {
        Ok(Some(h)) => h,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let mut deleted = 0;
    for field in &a[2..] {
        if hash.remove(field) {
            deleted += 1;
            if hash.is_empty() {
                break;
            }
        }
    }
    if deleted > 0 {
        changed(ctx, key, "hdel", deleted);
        ctx.delete_if_empty(key);
    }
    Reply::Int(deleted as i64)
}

/// HINCRBY key field increment
fn hincrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, field) = (&a[1], &a[2]);
    let incr = match arg_i64(&a[3]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if let Err(e) = write_hash(ctx, key) {
        return e;
    }
    let lazy = expire_field(ctx, key, field, true, false);
    let current = match write_hash(ctx, key) {
        Err(e) => return e,
        Ok(h) => match h.and_then(|h| h.get(field)).filter(|_| lazy == Lazy::NotExpired) {
            None => 0,
            Some(v) => match parse_i64(v) {
                Some(n) => n,
                None => return Reply::err("ERR hash value is not an integer"),
            },
        },
    };
    let Some(value) = current.checked_add(incr) else {
        return Reply::err("ERR increment or decrement would overflow");
    };
    set_field(ctx, key, field, value.to_string().as_bytes());
    changed(ctx, key, "hincrby", 1);
    Reply::Int(value)
}

/// HINCRBYFLOAT key field increment: `long double` arithmetic as Redis on x86-64,
/// propagated as HSET with the resulting text.
fn hincrbyfloat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, field) = (&a[1], &a[2]);
    let incr = match LongDouble::parse(&a[3]) {
        Some(v) if v.is_finite() => v,
        Some(_) => return Reply::err("ERR value is NaN or Infinity"),
        None => return Reply::not_float(),
    };
    if let Err(e) = write_hash(ctx, key) {
        return e;
    }
    let lazy = expire_field(ctx, key, field, true, false);
    let current = match write_hash(ctx, key) {
        Err(e) => return e,
        Ok(h) => match h.and_then(|h| h.get(field)).filter(|_| lazy == Lazy::NotExpired) {
            None => LongDouble::ZERO,
            Some(v) => match LongDouble::parse(v) {
                Some(x) => x,
                None => return Reply::err("ERR hash value is not a float"),
            },
        },
    };
    let value = current + incr;
    if !value.is_finite() {
        return Reply::err("ERR increment would produce NaN or Infinity");
    }
    let text = value.to_human().into_bytes();
    set_field(ctx, key, field, &text);
    changed(ctx, key, "hincrbyfloat", 1);
    ctx.rewrite(vec![b"HSET".to_vec(), key.clone(), field.clone(), text.clone()]);
    Reply::Bulk(text)
}

/// Set one field keeping its TTL, creating the hash when missing (type already checked).
fn set_field(ctx: &mut Ctx<'_>, key: &[u8], field: &[u8], value: &[u8]) {
    let limits = ctx.cfg.limits;
    if let Ok(h) = hash_or_create(ctx, key) {
        h.insert_incremented(field, value, &limits);
    }
}

// ------------------------------------------------------------------ reads

/// The live value of `field` in the hash at `key` (type already checked), after the
/// lazy check.
fn live_field(ctx: &mut Ctx<'_>, key: &[u8], field: &[u8], quiet: bool) -> (Option<Vec<u8>>, Lazy) {
    let lazy = expire_field(ctx, key, field, false, quiet);
    if lazy != Lazy::NotExpired {
        return (None, lazy);
    }
    let value = match ctx.ks.dbs[ctx.db].get(key).map(|s| &s.value) {
        Some(Value::Hash(h)) => h.get(field).map(<[u8]>::to_vec),
        _ => None,
    };
    (value, lazy)
}

fn hget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Ok(Some(_)) => live_field(ctx, &a[1], &a[2], false).0.map_or(Reply::Nil, Reply::Bulk),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

fn hmget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let exists = match read_hash(ctx, key) {
        Ok(h) => h.is_some(),
        Err(e) => return e,
    };
    let (mut expired, mut deleted) = (0, false);
    let mut out = Vec::with_capacity(a.len() - 2);
    for f in &a[2..] {
        if !exists || deleted {
            out.push(Reply::Nil);
            continue;
        }
        let (v, lazy) = live_field(ctx, key, f, true);
        expired += usize::from(lazy == Lazy::Expired);
        deleted |= lazy == Lazy::HashDeleted;
        out.push(v.map_or(Reply::Nil, Reply::Bulk));
    }
    // One event for the command (Redis counts only the fields that left the hash behind).
    if expired > 0 {
        ctx.notify(notify::HASH, "hexpired", key);
        if deleted {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    Reply::Array(out)
}

fn hlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Ok(h) => Reply::Int(h.map_or(0, |h| h.len() as i64)),
        Err(e) => e,
    }
}

fn hstrlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Ok(Some(_)) => Reply::Int(live_field(ctx, &a[1], &a[2], false).0.map_or(0, |v| v.len() as i64)),
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

fn hexists(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &a[1]) {
        Ok(Some(_)) => Reply::Int(i64::from(live_field(ctx, &a[1], &a[2], false).0.is_some())),
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

fn hgetall(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let now = ctx.now;
    match read_hash(ctx, &a[1]) {
        Ok(Some(h)) => Reply::Map(h.iter_visible(now).map(|(f, v)| (Reply::bulk(f), Reply::bulk(v))).collect()),
        Ok(None) => Reply::Map(Vec::new()),
        Err(e) => e,
    }
}

fn hkeys(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let now = ctx.now;
    match read_hash(ctx, &a[1]) {
        Ok(Some(h)) => Reply::bulks(h.iter_visible(now).map(|(f, _)| f)),
        Ok(None) => Reply::Array(Vec::new()),
        Err(e) => e,
    }
}

fn hvals(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let now = ctx.now;
    match read_hash(ctx, &a[1]) {
        Ok(Some(h)) => Reply::bulks(h.iter_visible(now).map(|(_, v)| v)),
        Ok(None) => Reply::Array(Vec::new()),
        Err(e) => e,
    }
}

// ------------------------------------------------------------------ HSCAN

/// A SCAN cursor as Redis's strtoul reads it (sign allowed, wrapping; no spaces).
pub fn parse_scan_cursor(b: &[u8]) -> Option<u64> {
    if b.first().is_some_and(|c| c.is_ascii_whitespace() || *c == 0x0b) {
        return None;
    }
    if b.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]
fn hscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let Some(cursor) = parse_scan_cursor(&a[2]) else {
        return Reply::err("ERR invalid cursor");
    };
    let now = ctx.now;
    let novalues = NoValues::of(ctx.cfg.version, true);
    let hash = match read_hash(ctx, &a[1]) {
        Ok(Some(h)) => h,
        Ok(None) => return Reply::Array(vec![Reply::bulk(b"0"), Reply::Array(Vec::new())]),
        Err(e) => return e,
    };
    let opts = match ScanOpts::parse(&a[3..], novalues) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut out = Vec::new();
    let next = hash.scan(cursor, opts.count, now, |f: &[u8], v: &[u8]| {
        if opts.matches(f) {
            out.push(Reply::bulk(f));
            if !opts.no_values {
                out.push(Reply::bulk(v));
            }
        }
    });
    Reply::Array(vec![Reply::Bulk(next.to_string().into_bytes()), Reply::Array(out)])
}

// ------------------------------------------------------------------ HRANDFIELD

/// HRANDFIELD key [count [WITHVALUES]]
fn hrandfield(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    if a.len() == 2 {
        let (hash, rng) = match hash_and_rng(ctx, &a[1]) {
            Ok(Some(h)) => h,
            Ok(None) => return Reply::Nil,
            Err(e) => return e,
        };
        let i = rng.usize(..hash.len().max(1));
        return hash.pair_at(i).map_or(Reply::Nil, |(f, _)| Reply::bulk(f));
    }
    let count = match arg_i64(&a[2]) {
        Ok(i64::MIN) => {
            return Reply::err(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            )
        }
        Ok(c) => c,
        Err(e) => return e,
    };
    if a.len() > 4 || (a.len() == 4 && !eq_ic(&a[3], "withvalues")) {
        return Reply::syntax();
    }
    let with_values = a.len() == 4;
    if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Reply::err("ERR value is out of range");
    }
    let picks = ctx.random_picks(count.unsigned_abs());
    let (hash, rng) = match hash_and_rng(ctx, &a[1]) {
        Ok(Some(h)) => h,
        Ok(None) => return Reply::Array(Vec::new()),
        Err(e) => return e,
    };
    let size = hash.len();
    let positions: Vec<usize> = if count == 0 {
        Vec::new()
    } else if count < 0 {
        // Repeats allowed: independent picks.
        match picks {
            Ok(n) => (0..n).map(|_| rng.usize(..size)).collect(),
            Err(e) => return e,
        }
    } else if count as u64 >= size as u64 {
        (0..size).collect()
    } else {
        distinct_positions(rng, size, count as usize, !matches!(hash, Hash::Table(_)))
    };
    let pair = |i: &usize| hash.pair_at(*i).map(|(f, v)| (Reply::bulk(f), Reply::bulk(v)));
    if with_values {
        Reply::Pairs(positions.iter().filter_map(pair).collect())
    } else {
        Reply::Array(positions.iter().filter_map(pair).map(|(f, _)| f).collect())
    }
}

/// The hash at `key` for reading, with the random generator beside it.
#[allow(clippy::type_complexity)]
fn hash_and_rng<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<(&'c Hash, &'c mut fastrand::Rng)>, Reply> {
    if read_hash(ctx, key)?.is_none() || expire_due_fields(ctx, key) {
        return Ok(None);
    }
    match ctx.ks.dbs[ctx.db].get(key).map(|s| &s.value) {
        Some(Value::Hash(h)) => Ok(Some((h, &mut *ctx.rng))),
        _ => Ok(None),
    }
}

/// `count` (< `size`) distinct positions out of `size`; in order for a listpack, as
/// Redis's lpRandomPairsUnique returns them.
fn distinct_positions(rng: &mut fastrand::Rng, size: usize, count: usize, ordered: bool) -> Vec<usize> {
    let mut picked = if count * 3 > size {
        // Partial Fisher-Yates over all positions.
        let mut all: Vec<usize> = (0..size).collect();
        for i in 0..count {
            let j = rng.usize(i..size);
            all.swap(i, j);
        }
        all.truncate(count);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let p = rng.usize(..size);
            if seen.insert(p) {
                out.push(p);
            }
        }
        out
    };
    if ordered {
        picked.sort_unstable();
    }
    picked
}
