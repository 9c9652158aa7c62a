//! Hash field TTLs (Redis 7.4): HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT set them, HTTL,
//! HPTTL, HEXPIRETIME, HPEXPIRETIME read them, HPERSIST drops them.

use super::hash::{read_hash, write_hash};
use super::{eq_ic, notify, parse_i64, Ctx, ExpireMode, Reply, Spec};
use crate::value::{Hash, Value};

pub const SPECS: &[Spec] = &[
    Spec::new("hexpire", hexpire),
    Spec::new("hpexpire", hpexpire),
    Spec::new("hexpireat", hexpireat),
    Spec::new("hpexpireat", hpexpireat),
    Spec::new("httl", httl),
    Spec::new("hpttl", hpttl),
    Spec::new("hexpiretime", hexpiretime),
    Spec::new("hpexpiretime", hpexpiretime),
    Spec::new("hpersist", hpersist),
];

/// The latest field TTL the commands accept, unix ms (2^46 - 1: Redis keeps field TTLs in
/// 48 bits with room to spare).
pub const MAX_FIELD_TTL_MS: i64 = (1 << 46) - 1;

/// Registered times closer than this to the new earliest TTL are left as they are (Redis's
/// HASH_NEW_EXPIRE_DIFF_THRESHOLD: the active cycle corrects them).
const REREGISTER_MS: u64 = 4000;

/// "No TTL" in Redis's arithmetic on registered times (EB_EXPIRE_TIME_INVALID).
const NO_TTL: u64 = 1 << 48;

/// Per-field answers.
const NO_FIELD: i64 = -2;
const NO_TTL_SET: i64 = -1;
const CONDITION_NOT_MET: i64 = 0;
const SET: i64 = 1;
const DELETED: i64 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

fn hexpire(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    set_ttls(ctx, a, "hexpire", 1000, true)
}

fn hpexpire(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    set_ttls(ctx, a, "hpexpire", 1, true)
}

fn hexpireat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    set_ttls(ctx, a, "hexpireat", 1000, false)
}

fn hpexpireat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    set_ttls(ctx, a, "hpexpireat", 1, false)
}

/// The field count after FIELDS: an integer from 1 up, else `range_error`; it must match
/// the fields given.
fn field_count(a: &[Vec<u8>], at: usize, range_error: &str) -> Result<usize, Reply> {
    if !eq_ic(&a[at - 1], "fields") {
        return Err(Reply::err("ERR Mandatory argument FIELDS is missing or not at the right position"));
    }
    let n = match parse_i64(&a[at]) {
        Some(n) if n >= 1 => n,
        _ => return Err(Reply::error(format!("ERR {range_error}"))),
    };
    if n as u64 != (a.len() - at - 1) as u64 {
        return Err(Reply::err("ERR The `numfields` parameter must match the number of arguments"));
    }
    Ok(n as usize)
}

fn all_missing(n: usize) -> Reply {
    Reply::Array(vec![Reply::Int(NO_FIELD); n])
}

/// HEXPIRE family: `unit_ms` is 1000 for seconds; `relative` adds the command's time.
fn set_ttls(ctx: &mut Ctx<'_>, a: &[Vec<u8>], name: &str, unit_ms: i64, relative: bool) -> Reply {
    let key = &a[1];
    if let Err(e) = write_hash(ctx, key) {
        return e;
    }
    let invalid = || Reply::error(format!("ERR invalid expire time in '{name}' command"));
    let Some(mut when) = parse_i64(&a[2]) else { return Reply::not_integer() };
    if when < 0 {
        return Reply::err("ERR invalid expire time, must be >= 0");
    }
    if unit_ms != 1 {
        if when > MAX_FIELD_TTL_MS / unit_ms {
            return invalid();
        }
        when *= unit_ms;
    }
    let base = if relative { ctx.now } else { 0 };
    if when > MAX_FIELD_TTL_MS - base {
        return invalid();
    }
    when += base;
    let cond = match a[3].to_ascii_lowercase().as_slice() {
        b"nx" => Condition::Nx,
        b"xx" => Condition::Xx,
        b"gt" => Condition::Gt,
        b"lt" => Condition::Lt,
        _ => Condition::Always,
    };
    let count_at = if cond == Condition::Always { 4 } else { 5 };
    let n = match field_count(a, count_at, "Parameter `numFields` should be greater than 0") {
        Ok(n) => n,
        Err(e) => return e,
    };
    let (db, now) = (ctx.db, ctx.now);
    let Some(pos) = ctx.ks.dbs[db].find(key) else { return all_missing(n) };
    // Past times delete on a master only (an AOF or a master's stream carries the HDELs).
    let deletes = when <= now && ctx.mode == ExpireMode::Master;
    let when = when as u64;
    let Value::Hash(hash) = &mut ctx.ks.dbs[db].slot_mut(pos).value else { return all_missing(n) };
    hash.make_ttl_capable();
    let registered = hash.registered().unwrap_or(NO_TTL);
    let mut earliest_touched = NO_TTL;
    let (mut updated, mut deleted) = (Vec::new(), Vec::new());
    let mut replies = Vec::with_capacity(n);
    for field in &a[count_at + 1..] {
        let Some(prev) = hash.field_ttl(field) else {
            replies.push(Reply::Int(NO_FIELD));
            continue;
        };
        let met = match (cond, prev) {
            (Condition::Xx | Condition::Gt, None) => false,
            (_, None) => true,
            (Condition::Nx, Some(_)) => false,
            (Condition::Gt, Some(p)) => p < when,
            (Condition::Lt, Some(p)) => p > when,
            (_, Some(_)) => true,
        };
        if !met {
            replies.push(Reply::Int(CONDITION_NOT_MET));
            continue;
        }
        if let Some(p) = prev {
            earliest_touched = earliest_touched.min(p);
        }
        if deletes {
            hash.remove(field);
            deleted.push(field.clone());
            replies.push(Reply::Int(DELETED));
        } else {
            earliest_touched = earliest_touched.min(when);
            hash.set_field_ttl(field, when);
            updated.push(field.clone());
            replies.push(Reply::Int(SET));
        }
    }
    let empty = hash.is_empty();
    let earliest_now = hash.min_field_ttl().unwrap_or(NO_TTL);
    for f in &deleted {
        ctx.propagate(vec![b"HDEL".to_vec(), key.clone(), f.clone()]);
    }
    ctx.stats.expired_subkeys += deleted.len() as u64;
    if updated.is_empty() && deleted.is_empty() {
        return Reply::Array(replies);
    }
    ctx.dirty += (updated.len() + deleted.len()) as u64;
    ctx.signal_modified(key);
    if !deleted.is_empty() && empty {
        ctx.ks.dbs[db].remove_at(pos);
        ctx.notify(notify::HASH, "hdel", key);
        ctx.notify(notify::GENERIC, "del", key);
    } else {
        ctx.notify(notify::HASH, if deleted.is_empty() { "hexpire" } else { "hdel" }, key);
        // Redis moves the registration only when the command may have made it late, and
        // by more than a few seconds.
        if registered >= earliest_touched && registered.abs_diff(earliest_now) >= REREGISTER_MS {
            ctx.ks.dbs[db].set_hash_registered(pos, (earliest_now != NO_TTL).then_some(earliest_now));
        }
    }
    if updated.is_empty() {
        ctx.suppress_propagation();
        return Reply::Array(replies);
    }
    // Propagated as HPEXPIREAT with the absolute time, naming the fields it set.
    let mut argv = Vec::with_capacity(count_at + 1 + updated.len());
    argv.push(if name == "hpexpireat" { a[0].clone() } else { b"HPEXPIREAT".to_vec() });
    argv.push(key.clone());
    argv.push(if name == "hpexpireat" { a[2].clone() } else { when.to_string().into_bytes() });
    argv.extend(a[3..count_at].iter().cloned());
    argv.push(if updated.len() == n { a[count_at].clone() } else { updated.len().to_string().into_bytes() });
    argv.extend(updated);
    ctx.rewrite(argv);
    Reply::Array(replies)
}

#[derive(Debug, Clone, Copy)]
enum Read {
    TtlSecs,
    TtlMs,
    AtSecs,
    AtMs,
}

fn httl(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    read_ttls(ctx, a, Read::TtlSecs)
}

fn hpttl(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    read_ttls(ctx, a, Read::TtlMs)
}

fn hexpiretime(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    read_ttls(ctx, a, Read::AtSecs)
}

fn hpexpiretime(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    read_ttls(ctx, a, Read::AtMs)
}

/// The hash of `key FIELDS numfields field...` (HTTL family, HPERSIST) once the clause
/// checks out; else the reply (an error, or -2 per field for a missing key).
fn fields_of<'h>(hash: Option<&'h mut Hash>, a: &[Vec<u8>]) -> Result<&'h mut Hash, Reply> {
    let n = field_count(a, 3, "Number of fields must be a positive integer")?;
    hash.ok_or_else(|| all_missing(n))
}

/// HTTL family: -2 no field (or its TTL passed), -1 no TTL, else the TTL or the time.
fn read_ttls(ctx: &mut Ctx<'_>, a: &[Vec<u8>], what: Read) -> Reply {
    let now = ctx.now;
    let hash = match read_hash(ctx, &a[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let hash = match fields_of(hash, a) {
        Ok(h) => h,
        Err(r) => return r,
    };
    // A listpackex counts a TTL equal to now as passed; a hashtable does not.
    let gone_at_now = matches!(hash, Hash::ListpackEx(_));
    let answer = |field: &Vec<u8>| -> i64 {
        match hash.field_ttl(field) {
            None => NO_FIELD,
            Some(None) => NO_TTL_SET,
            Some(Some(t)) => {
                let t = t as i64;
                if t < now || (gone_at_now && t == now) {
                    return NO_FIELD;
                }
                match what {
                    Read::TtlSecs => (t + 999 - now) / 1000,
                    Read::TtlMs => t - now,
                    Read::AtSecs => (t + 999) / 1000,
                    Read::AtMs => t,
                }
            }
        }
    };
    Reply::Array(a[4..].iter().map(|f| Reply::Int(answer(f))).collect())
}

/// HPERSIST key FIELDS numfields field...: 1 TTL dropped, -1 none, -2 no field (or passed).
fn hpersist(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let now = ctx.now;
    let key = &a[1];
    let hash = match write_hash(ctx, key) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let hash = match fields_of(hash, a) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let mut changed = false;
    let mut replies = Vec::with_capacity(a.len() - 4);
    for field in &a[4..] {
        let r = match hash.field_ttl(field) {
            None => NO_FIELD,
            Some(None) => NO_TTL_SET,
            Some(Some(t)) if (t as i64) < now => NO_FIELD,
            Some(Some(_)) => {
                hash.clear_field_ttl(field);
                changed = true;
                SET
            }
        };
        replies.push(Reply::Int(r));
    }
    if changed {
        ctx.notify(notify::HASH, "hpersist", key);
        ctx.signal_modified(key);
        ctx.dirty += 1;
    }
    Reply::Array(replies)
}
