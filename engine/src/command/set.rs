//! Set commands (t_set.c): replies, propagation and keyspace events as Redis 7.0.

use std::borrow::Cow;

use super::catalog::ServerVersion;
use super::{arg_i64, eq_ic, notify, numkeys_at_1, Ctx, Reply, Spec};
use crate::value::{Limits, Set, Value};

pub const SPECS: &[Spec] = &[
    Spec::new("sadd", sadd),
    Spec::new("srem", srem),
    Spec::new("smembers", sinter),
    Spec::new("sismember", sismember),
    Spec::new("smismember", smismember),
    Spec::new("scard", scard),
    Spec::new("spop", spop),
    Spec::new("srandmember", srandmember),
    Spec::new("smove", smove),
    Spec::new("sinter", sinter),
    Spec::new("sinterstore", sinterstore),
    Spec::new("sintercard", sintercard).movable(numkeys_at_1),
    Spec::new("sunion", sunion),
    Spec::new("sunionstore", sunionstore),
    Spec::new("sdiff", sdiff),
    Spec::new("sdiffstore", sdiffstore),
    Spec::new("sscan", sscan),
];

// ------------------------------------------------------------------ lookups

/// The set at `key` for writing: Ok(None) when missing, Err(WRONGTYPE) for another type.
fn set_mut<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Set>, Reply> {
    match ctx.lookup_write(key) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// The set at `key` for reading.
fn set_ref<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c Set>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// Read-lookup every key (expiring, counting hits) and check their types, as a command
/// over several sets does before touching any; then borrow them all at once.
fn sets_of<'c>(ctx: &'c mut Ctx<'_>, keys: &[Vec<u8>]) -> Result<Vec<Option<&'c Set>>, Reply> {
    for k in keys {
        set_ref(ctx, k)?;
    }
    let db = &ctx.ks.dbs[ctx.db];
    Ok(keys
        .iter()
        .map(|k| match db.get(k).map(|s| &s.value) {
            Some(Value::Set(s)) => Some(&**s),
            _ => None,
        })
        .collect())
}

/// The set SADD/SMOVE create for their first member (setTypeCreate); Redis 7.0 has no
/// size hint, 7.2 (listpack sets on) sizes it for all the members given.
fn new_set(first: &[u8], members: usize, limits: &Limits) -> Set {
    let hint = if limits.set_max_listpack_entries > 0 { members } else { 1 };
    Set::create(first, hint, limits)
}

fn bulks<'a>(items: impl Iterator<Item = Cow<'a, [u8]>>) -> Vec<Reply> {
    items.map(|m| Reply::Bulk(m.into_owned())).collect()
}

// ------------------------------------------------------------------ single-set commands

fn sadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let limits = ctx.cfg.limits;
    if let Err(e) = set_mut(ctx, key) {
        return e;
    }
    let v = ctx.lookup_write_or_insert(key, || Value::Set(Box::new(new_set(&a[2], a.len() - 2, &limits))));
    let Value::Set(s) = v else {
        return Reply::wrongtype();
    };
    let added = a[2..].iter().filter(|m| s.insert(m, &limits)).count();
    if added > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::SET, "sadd", key);
    }
    ctx.dirty += added as u64;
    Reply::Int(added as i64)
}

fn srem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let s = match set_mut(ctx, key) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let mut removed = 0;
    for m in &a[2..] {
        if s.remove(m) {
            removed += 1;
            if s.is_empty() {
                break;
            }
        }
    }
    if removed > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::SET, "srem", key);
        ctx.delete_if_empty(key);
        ctx.dirty += removed;
    }
    Reply::Int(removed as i64)
}

fn sismember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match set_ref(ctx, &a[1]) {
        Ok(s) => Reply::Int(i64::from(s.is_some_and(|s| s.contains(&a[2])))),
        Err(e) => e,
    }
}

fn smismember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match set_ref(ctx, &a[1]) {
        Ok(s) => Reply::Array(a[2..].iter().map(|m| Reply::Int(i64::from(s.is_some_and(|s| s.contains(m))))).collect()),
        Err(e) => e,
    }
}

fn scard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match set_ref(ctx, &a[1]) {
        Ok(s) => Reply::Int(s.map_or(0, |s| s.len() as i64)),
        Err(e) => e,
    }
}

fn smove(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (src, dst, member) = (&a[1], &a[2], &a[3]);
    let limits = ctx.cfg.limits;
    let src_state = set_mut(ctx, src).map(|s| s.is_some());
    let dst_state = set_mut(ctx, dst).map(|s| s.is_some());
    match src_state {
        Ok(false) => return Reply::Int(0),
        Err(e) => return e,
        Ok(true) => {}
    }
    let dst_exists = match dst_state {
        Ok(e) => e,
        Err(e) => return e,
    };
    if src == dst {
        return match set_ref(ctx, src) {
            Ok(s) => Reply::Int(i64::from(s.is_some_and(|s| s.contains(member)))),
            Err(e) => e,
        };
    }
    if !set_mut(ctx, src).ok().flatten().is_some_and(|s| s.remove(member)) {
        return Reply::Int(0);
    }
    ctx.notify(notify::SET, "srem", src);
    ctx.delete_if_empty(src);
    if !dst_exists {
        ctx.db_add(dst, Value::Set(Box::new(new_set(member, 1, &limits))));
    }
    ctx.signal_modified(src);
    ctx.dirty += 1;
    if set_mut(ctx, dst).ok().flatten().is_some_and(|d| d.insert(member, &limits)) {
        ctx.dirty += 1;
        ctx.signal_modified(dst);
        ctx.notify(notify::SET, "sadd", dst);
    }
    Reply::Int(1)
}

// ------------------------------------------------------------------ random members

/// Parse a count as getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX) does.
pub fn arg_count_signed(b: &[u8]) -> Result<i64, Reply> {
    let n = arg_i64(b)?;
    if n == i64::MIN {
        return Err(Reply::err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(n)
}

/// Parse a count as getPositiveLongFromObjectOrReply does (one error for all bad input).
pub fn arg_count_positive(b: &[u8]) -> Result<usize, Reply> {
    arg_at_least(b, 0, "ERR value is out of range, must be positive").map(|n| n as usize)
}

/// An integer of at least `min`; `err` for anything else (getRangeLongFromObjectOrReply
/// with a message).
pub fn arg_at_least(b: &[u8], min: i64, err: &'static str) -> Result<i64, Reply> {
    match super::parse_i64(b) {
        Some(n) if n >= min => Ok(n),
        _ => Err(Reply::err(err)),
    }
}

/// `count` distinct positions out of `0..size` (count < size), in random order.
pub fn distinct_positions(rng: &mut fastrand::Rng, size: usize, count: usize) -> Vec<usize> {
    if count.saturating_mul(3) > size {
        let mut all: Vec<usize> = (0..size).collect();
        rng.shuffle(&mut all);
        all.truncate(count);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let i = rng.usize(..size);
            if seen.insert(i) {
                out.push(i);
            }
        }
        out
    }
}

fn srandmember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    if a.len() > 3 {
        return Reply::syntax();
    }
    if a.len() == 3 {
        return srandmember_count(ctx, a);
    }
    let size = match set_ref(ctx, &a[1]) {
        Ok(Some(s)) => s.len(),
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    let i = ctx.rng.usize(..size.max(1));
    match ctx.ks.dbs[ctx.db].get(&a[1]).map(|slot| &slot.value) {
        Some(Value::Set(s)) => s.get_index(i).map_or(Reply::Nil, |m| Reply::Bulk(m.into_owned())),
        _ => Reply::Nil,
    }
}

fn srandmember_count(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let n = match arg_count_signed(&a[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let size = match set_ref(ctx, &a[1]) {
        Ok(Some(s)) => s.len(),
        Ok(None) => return Reply::Array(Vec::new()),
        Err(e) => return e,
    };
    let count = n.unsigned_abs() as usize;
    if count == 0 {
        return Reply::Array(Vec::new());
    }
    let db = ctx.db;
    let Some(Value::Set(s)) = ctx.ks.dbs[db].get(&a[1]).map(|slot| &slot.value) else {
        return Reply::Array(Vec::new());
    };
    if n < 0 || count == 1 {
        // Repetitions allowed: `count` independent picks.
        let count = match ctx.random_picks(count as u64) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let out = (0..count).filter_map(|_| s.get_index(ctx.rng.usize(..size)).map(|m| Reply::Bulk(m.into_owned())));
        return Reply::Array(out.collect());
    }
    if count >= size {
        return Reply::Array(bulks(s.iter()));
    }
    let picks = distinct_positions(ctx.rng, size, count);
    Reply::Array(picks.into_iter().filter_map(|i| s.get_index(i).map(|m| Reply::Bulk(m.into_owned()))).collect())
}

/// SPOP with count as Redis 7.0 does it: the whole set (propagated as DEL), a few random
/// members (each propagated as SREM), or most of it, keeping a rebuilt set of the rest.
const SPOP_MOVE_STRATEGY_MUL: usize = 5;

fn spop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    if a.len() > 3 {
        return Reply::syntax();
    }
    if a.len() == 3 {
        return spop_count(ctx, a);
    }
    let key = &a[1];
    let size = match set_mut(ctx, key) {
        Ok(Some(s)) => s.len(),
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    let i = ctx.rng.usize(..size.max(1));
    let popped = {
        let Ok(Some(s)) = set_mut(ctx, key) else {
            return Reply::Nil;
        };
        let Some(m) = s.get_index(i).map(Cow::into_owned) else {
            return Reply::Nil;
        };
        s.remove(&m);
        m
    };
    ctx.notify(notify::SET, "spop", key);
    ctx.rewrite(vec![b"SREM".to_vec(), key.clone(), popped.clone()]);
    ctx.delete_if_empty(key);
    ctx.signal_modified(key);
    ctx.dirty += 1;
    Reply::Bulk(popped)
}

fn spop_count(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let count = match arg_count_positive(&a[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let limits = ctx.cfg.limits;
    let size = match set_mut(ctx, key) {
        Ok(Some(s)) => s.len(),
        Ok(None) => return Reply::Set(Vec::new()),
        Err(e) => return e,
    };
    if count == 0 {
        return Reply::Set(Vec::new());
    }
    ctx.notify(notify::SET, "spop", key);
    ctx.dirty += count.min(size) as u64;
    if count >= size {
        let all = match set_ref(ctx, key) {
            Ok(Some(s)) => union_of(&[Some(s)], &limits),
            _ => Set::default(),
        };
        ctx.db_delete(key);
        ctx.notify(notify::GENERIC, "del", key);
        // Redis's SPOP propagates the deletion as the server's deletions are made.
        ctx.rewrite(vec![ctx.cfg.server_del_command().to_vec(), key.clone()]);
        ctx.signal_modified(key);
        return Reply::Set(bulks(all.iter()));
    }
    let remaining = size - count;
    let mut popped: Vec<Vec<u8>> = Vec::with_capacity(count);
    let db = ctx.db;
    let Some(Value::Set(s)) = ctx.ks.dbs[db].get_mut(key).map(|slot| &mut slot.value) else {
        return Reply::Set(Vec::new());
    };
    if remaining * SPOP_MOVE_STRATEGY_MUL > count {
        for _ in 0..count {
            let i = ctx.rng.usize(..s.len());
            if let Some(m) = s.get_index(i).map(Cow::into_owned) {
                s.remove(&m);
                popped.push(m);
            }
        }
    } else {
        // Keep `remaining` random members in a new set; pop everything else.
        let mut kept: Option<Set> = None;
        for _ in 0..remaining {
            let i = ctx.rng.usize(..s.len());
            if let Some(m) = s.get_index(i).map(Cow::into_owned) {
                kept.get_or_insert_with(|| Set::create(&m, 1, &limits)).insert(&m, &limits);
                s.remove(&m);
            }
        }
        popped.extend(s.iter().map(Cow::into_owned));
        **s = kept.unwrap_or_default();
    }
    ctx.suppress_propagation();
    // One SREM per member; Redis 7.2 on sends them 1024 members to an SREM.
    let batch = if ctx.cfg.version.behaves_as() >= ServerVersion::Redis72 { SPOP_SREM_BATCH } else { 1 };
    for members in popped.chunks(batch) {
        let mut srem = Vec::with_capacity(2 + members.len());
        srem.extend([b"SREM".to_vec(), key.clone()]);
        srem.extend(members.iter().cloned());
        ctx.propagate(srem);
    }
    ctx.signal_modified(key);
    Reply::Set(popped.into_iter().map(Reply::Bulk).collect())
}

/// Members per SREM that SPOP with a count propagates (Redis 7.2 on).
const SPOP_SREM_BATCH: usize = 1024;

// ------------------------------------------------------------------ algebra

/// SINTER's result: members of the smallest set found in all the others, in its order.
fn intersection(sets: &[Option<&Set>], limit: usize) -> Vec<Vec<u8>> {
    let mut present: Vec<&Set> = match sets.iter().copied().collect::<Option<Vec<_>>>() {
        Some(v) => v,
        None => return Vec::new(),
    };
    present.sort_by_key(|s| s.len());
    let Some((first, rest)) = present.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in first.iter() {
        if rest.iter().all(|o| std::ptr::eq(*o, *first) || o.contains(&m)) {
            out.push(m.into_owned());
            if limit > 0 && out.len() >= limit {
                break;
            }
        }
    }
    out
}

/// SUNION's result set (built as Redis builds it: an intset first, converting as needed).
fn union_of(sets: &[Option<&Set>], limits: &Limits) -> Set {
    let mut out = Set::default();
    for s in sets.iter().flatten() {
        for m in s.iter() {
            out.insert(&m, limits);
        }
    }
    out
}

/// SDIFF's result set: members of the first set in none of the others.
fn difference_of(sets: &[Option<&Set>], limits: &Limits) -> Set {
    let mut out = Set::default();
    let Some(Some(first)) = sets.first() else {
        return out;
    };
    let rest = &sets[1..];
    if rest.iter().flatten().any(|o| std::ptr::eq(*o, *first)) {
        return out;
    }
    for m in first.iter() {
        if !rest.iter().flatten().any(|o| o.contains(&m)) {
            out.insert(&m, limits);
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Inter,
    Union,
    Diff,
}

impl SetOp {
    fn store_event(self) -> &'static str {
        match self {
            SetOp::Inter => "sinterstore",
            SetOp::Union => "sunionstore",
            SetOp::Diff => "sdiffstore",
        }
    }
}

/// The result of `op` over `keys`, as a set built the way Redis builds it.
fn compute(ctx: &mut Ctx<'_>, keys: &[Vec<u8>], op: SetOp) -> Result<Set, Reply> {
    let limits = ctx.cfg.limits;
    let sets = sets_of(ctx, keys)?;
    Ok(match op {
        SetOp::Inter => {
            let mut out = Set::default();
            for m in intersection(&sets, 0) {
                out.insert(&m, &limits);
            }
            out
        }
        SetOp::Union => union_of(&sets, &limits),
        SetOp::Diff => difference_of(&sets, &limits),
    })
}

fn sinter(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match sets_of(ctx, &a[1..]) {
        Ok(sets) => Reply::Set(intersection(&sets, 0).into_iter().map(Reply::Bulk).collect()),
        Err(e) => e,
    }
}

fn sunion(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match compute(ctx, &a[1..], SetOp::Union) {
        Ok(s) => Reply::Set(bulks(s.iter())),
        Err(e) => e,
    }
}

fn sdiff(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match compute(ctx, &a[1..], SetOp::Diff) {
        Ok(s) => Reply::Set(bulks(s.iter())),
        Err(e) => e,
    }
}

/// SINTERSTORE / SUNIONSTORE / SDIFFSTORE: store the result, or delete the destination
/// when it is empty.
fn store(ctx: &mut Ctx<'_>, a: &[Vec<u8>], op: SetOp) -> Reply {
    let dst = &a[1];
    let result = match compute(ctx, &a[2..], op) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let n = result.len();
    if n > 0 {
        ctx.db_set(dst, Value::Set(Box::new(result)), false);
        ctx.notify(notify::SET, op.store_event(), dst);
        ctx.dirty += 1;
    } else if ctx.db_delete(dst) {
        // Redis deletes the destination without an expiry check (dbDelete), so an expired
        // destination counts as a change and the command itself is propagated.
        ctx.notify(notify::GENERIC, "del", dst);
        ctx.dirty += 1;
    }
    Reply::Int(n as i64)
}

fn sinterstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    store(ctx, a, SetOp::Inter)
}

fn sunionstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    store(ctx, a, SetOp::Union)
}

fn sdiffstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    store(ctx, a, SetOp::Diff)
}

fn sintercard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let numkeys = match arg_at_least(&a[1], 1, "ERR numkeys should be greater than 0") {
        Ok(n) => n as usize,
        Err(e) => return e,
    };
    if numkeys > a.len() - 2 {
        return Reply::err("ERR Number of keys can't be greater than number of args");
    }
    let mut limit = 0;
    let mut j = 2 + numkeys;
    while j < a.len() {
        if eq_ic(&a[j], "limit") && j + 1 < a.len() {
            limit = match arg_at_least(&a[j + 1], 0, "ERR LIMIT can't be negative") {
                Ok(n) => n as usize,
                Err(e) => return e,
            };
            j += 2;
        } else {
            return Reply::syntax();
        }
    }
    match sets_of(ctx, &a[2..2 + numkeys]) {
        Ok(sets) => Reply::Int(intersection(&sets, limit).len() as i64),
        Err(e) => e,
    }
}

// ------------------------------------------------------------------ SSCAN

/// A SCAN cursor as strtoul reads it (a sign is allowed, `-1` wraps); None when invalid.
pub fn parse_cursor(b: &[u8]) -> Option<u64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() {
        return b.is_empty().then_some(0);
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// What a scan makes of NOVALUES.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NoValues {
    /// The version has no such option: a syntax error.
    Unknown,
    /// Redis 7.4 knows it, but only for HSCAN.
    Refused,
    /// HSCAN in Redis 7.4 and Valkey 8.0: fields without their values.
    Accepted,
}

impl NoValues {
    /// What `version`'s `command` (hscan, sscan, zscan, scan) makes of it.
    pub fn of(version: crate::command::catalog::ServerVersion, hscan: bool) -> NoValues {
        match (version.since_redis74(), hscan) {
            (false, _) => NoValues::Unknown,
            (true, false) => NoValues::Refused,
            (true, true) => NoValues::Accepted,
        }
    }

    /// Err for NOVALUES where it does not belong; Ok(true) where it is taken.
    pub fn take(self) -> Result<bool, Reply> {
        match self {
            NoValues::Unknown => Err(Reply::syntax()),
            NoValues::Refused => Err(Reply::err("ERR NOVALUES option can only be used in HSCAN")),
            NoValues::Accepted => Ok(true),
        }
    }
}

/// HSCAN/SSCAN/ZSCAN options: COUNT, MATCH and (HSCAN) NOVALUES.
pub struct ScanOpts {
    pub count: usize,
    pub pattern: Option<Vec<u8>>,
    /// NOVALUES was given.
    pub no_values: bool,
}

impl ScanOpts {
    pub fn parse(args: &[Vec<u8>], novalues: NoValues) -> Result<ScanOpts, Reply> {
        let mut o = ScanOpts { count: 10, pattern: None, no_values: false };
        let mut i = 0;
        while i < args.len() {
            let more = args.len() - i >= 2;
            if eq_ic(&args[i], "novalues") {
                o.no_values = novalues.take()?;
                i += 1;
                continue;
            }
            if eq_ic(&args[i], "count") && more {
                let n = arg_i64(&args[i + 1])?;
                if n < 1 {
                    return Err(Reply::syntax());
                }
                o.count = usize::try_from(n).unwrap_or(usize::MAX);
            } else if eq_ic(&args[i], "match") && more {
                o.pattern = (args[i + 1].as_slice() != b"*").then(|| args[i + 1].clone());
            } else {
                return Err(Reply::syntax());
            }
            i += 2;
        }
        Ok(o)
    }

    pub fn matches(&self, s: &[u8]) -> bool {
        self.pattern.as_deref().is_none_or(|p| crate::glob::matches(p, s))
    }
}

/// The reply of a scan step: the next cursor and the elements.
pub fn scan_reply(cursor: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::Bulk(cursor.to_string().into_bytes()), Reply::Array(items)])
}

fn sscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let Some(cursor) = parse_cursor(&a[2]) else {
        return Reply::err("ERR invalid cursor");
    };
    let novalues = NoValues::of(ctx.cfg.version, false);
    let s = match set_ref(ctx, &a[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(e) => return e,
    };
    let opts = match ScanOpts::parse(&a[3..], novalues) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut items = Vec::new();
    let next = s.scan(cursor, opts.count, |m| {
        if opts.matches(&m) {
            items.push(Reply::Bulk(m.into_owned()));
        }
    });
    scan_reply(next, items)
}

#[cfg(test)]
mod tests {
    use crate::{Config, Engine, Session};

    fn argv(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|x| x.as_bytes().to_vec()).collect()
    }

    /// Run `cmd` and return what it propagated (MULTI/EXEC included), as text.
    fn propagated(e: &mut Engine, cmd: &str) -> Vec<String> {
        let mut s = Session::default();
        e.call(&mut s, &argv(cmd));
        e.flush_collect().into_iter().map(|(_, a)| String::from_utf8_lossy(&a.join(&b' ')).into_owned()).collect()
    }

    fn engine() -> Engine {
        let mut cfg = Config::default();
        cfg.limits.set_max_listpack_entries = 0;
        Engine::in_memory(cfg)
    }

    #[test]
    fn spop_with_count_propagates_srems_in_a_transaction() {
        let mut e = engine();
        propagated(&mut e, "SADD s a b c d e f g h i j");
        // Few members: random picks, one SREM each.
        let p = propagated(&mut e, "SPOP s 3");
        assert_eq!(p.len(), 5, "{p:?}");
        assert_eq!(p[0], "MULTI");
        assert!(p[1..4].iter().all(|c| c.starts_with("SREM s ")));
        assert_eq!(p[4], "EXEC");
        // Most of the set (remaining*5 <= count): the rest is rebuilt, popped ones SREM'd.
        let p = propagated(&mut e, "SPOP s 6");
        assert_eq!(p.len(), 8, "{p:?}");
        assert!(p[1..7].iter().all(|c| c.starts_with("SREM s ")));
        propagated(&mut e, "SADD s k l m");
        assert_eq!(propagated(&mut e, "SPOP s 1").len(), 1);
        assert_eq!(propagated(&mut e, "SPOP s 5"), vec!["DEL s".to_string()]);
        assert!(propagated(&mut e, "SPOP s 5").is_empty());
        // With lazyfree-lazy-server-del, Redis 7.2's SPOP sends UNLINK; 7.0's DEL.
        e.cfg.lazyfree_lazy_server_del = true;
        propagated(&mut e, "SADD s a b");
        assert_eq!(propagated(&mut e, "SPOP s 5"), vec!["DEL s".to_string()]);
        e.cfg.set_version(crate::command::catalog::ServerVersion::Redis74);
        propagated(&mut e, "SADD s a b");
        assert_eq!(propagated(&mut e, "SPOP s 5"), vec!["UNLINK s".to_string()]);
    }

    /// Redis 7.2 on sends SPOP's popped members 1024 to an SREM (7.0: one SREM each).
    #[test]
    fn spop_with_count_batches_srems_from_7_2() {
        let members: Vec<String> = (0..4000).map(|i| i.to_string()).collect();
        let srems = |version, count: &str| {
            let mut e = engine();
            e.cfg.set_version(version);
            propagated(&mut e, &format!("SADD s {}", members.join(" ")));
            let p = propagated(&mut e, &format!("SPOP s {count}"));
            p.iter().filter(|c| c.starts_with("SREM s ")).map(|c| c.split(' ').count() - 2).collect::<Vec<_>>()
        };
        use crate::command::catalog::ServerVersion::{Redis70, Redis74};
        assert_eq!(srems(Redis74, "1023"), vec![1023]);
        assert_eq!(srems(Redis74, "1025"), vec![1024, 1]);
        assert_eq!(srems(Redis74, "3500"), vec![1024, 1024, 1024, 428]);
        assert_eq!(srems(Redis70, "1025").len(), 1025);
    }

    #[test]
    fn spop_keeps_a_rebuilt_set_of_the_rest() {
        let mut e = engine();
        // A hashtable holding only integers becomes an intset again when rebuilt.
        propagated(&mut e, "SADD s x 1 2 3 4 5 6 7 8 9 10 11");
        propagated(&mut e, "SREM s x");
        propagated(&mut e, "SPOP s 10");
        let v = e.ks.dbs[0].get(b"s").map(|s| s.value.encoding());
        assert_eq!(v, Some("intset"));
    }
}
