//! Sorted set commands (t_zset.c): replies, errors, propagation and keyspace events as
//! Redis 7.0. Scores reply as doubles (%.17g); WITHSCORES replies are [`Reply::Pairs`]
//! (flat in RESP2, [member, score] pairs in RESP3, as Redis 7.0).

mod range;
mod score;

pub use score::{parse_score, strtod};

use self::range::{rank_interval, LexRange, ScoreRange};
use self::score::arg_score;
use super::set::{
    arg_count_positive, arg_count_signed, distinct_positions, parse_cursor, scan_reply, NoValues, ScanOpts,
};
use super::{arg_i64, eq_ic, fmt_double, notify, Ctx, Reply, Spec};
use crate::value::{sds, Limits, Sds, Set, Value, Zset};

pub const SPECS: &[Spec] = &[
    Spec::new("zadd", zadd),
    Spec::new("zincrby", zincrby),
    Spec::new("zrem", zrem),
    Spec::new("zscore", zscore),
    Spec::new("zmscore", zmscore),
    Spec::new("zcard", zcard),
    Spec::new("zcount", zcount),
    Spec::new("zlexcount", zlexcount),
    Spec::new("zrank", zrank),
    Spec::new("zrevrank", zrevrank),
    Spec::new("zrange", zrange),
    Spec::new("zrangestore", zrangestore),
    Spec::new("zrevrange", zrevrange),
    Spec::new("zrangebyscore", zrangebyscore),
    Spec::new("zrevrangebyscore", zrevrangebyscore),
    Spec::new("zrangebylex", zrangebylex),
    Spec::new("zrevrangebylex", zrevrangebylex),
    Spec::new("zremrangebyrank", zremrangebyrank),
    Spec::new("zremrangebyscore", zremrangebyscore),
    Spec::new("zremrangebylex", zremrangebylex),
    Spec::new("zpopmin", zpopmin),
    Spec::new("zpopmax", zpopmax),
    Spec::new("zunionstore", zunionstore).movable(store_keys),
    Spec::new("zinterstore", zinterstore).movable(store_keys),
    Spec::new("zdiffstore", zdiffstore).movable(store_keys),
    Spec::new("zunion", zunion).movable(super::numkeys_at_1),
    Spec::new("zinter", zinter).movable(super::numkeys_at_1),
    Spec::new("zdiff", zdiff).movable(super::numkeys_at_1),
    Spec::new("zintercard", zintercard).movable(super::numkeys_at_1),
    Spec::new("zrandmember", zrandmember),
    Spec::new("zscan", zscan),
];

/// Keys of ZUNIONSTORE-like commands: the destination, then numkeys sources.
/// The destination, then the sources; no keys at all for a bad numkeys (Redis's
/// zunionInterDiffStoreGetKeys).
fn store_keys(a: &[Vec<u8>]) -> Vec<usize> {
    let sources = super::numkeys_keys(a, 2);
    if sources.is_empty() {
        return sources;
    }
    std::iter::once(1).chain(sources).collect()
}

// ------------------------------------------------------------------ lookups

fn zset_mut<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Zset>, Reply> {
    match ctx.lookup_write(key) {
        None => Ok(None),
        Some(Value::Zset(z)) => Ok(Some(z)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

pub(super) fn zset_ref<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c Zset>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::Zset(z)) => Ok(Some(z)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// Delete `key` when its zset is empty; fires `del` after the caller's own event.
fn delete_if_empty(ctx: &mut Ctx<'_>, key: &[u8]) -> bool {
    ctx.delete_if_empty(key)
}

// ------------------------------------------------------------------ ZADD / ZINCRBY

#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

pub(super) fn zadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zadd_generic(ctx, a, false)
}

fn zincrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zadd_generic(ctx, a, true)
}

fn zadd_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], incr: bool) -> Reply {
    let key = &a[1];
    let mut f = AddFlags { incr, ..AddFlags::default() };
    let mut at = 2;
    while at < a.len() {
        let o = &a[at];
        if eq_ic(o, "nx") {
            f.nx = true;
        } else if eq_ic(o, "xx") {
            f.xx = true;
        } else if eq_ic(o, "ch") {
            f.ch = true;
        } else if eq_ic(o, "incr") {
            f.incr = true;
        } else if eq_ic(o, "gt") {
            f.gt = true;
        } else if eq_ic(o, "lt") {
            f.lt = true;
        } else {
            break;
        }
        at += 1;
    }
    let pairs = &a[at..];
    if pairs.is_empty() || pairs.len() % 2 == 1 {
        return Reply::syntax();
    }
    if f.nx && f.xx {
        return Reply::err("ERR XX and NX options at the same time are not compatible");
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Reply::err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && pairs.len() > 2 {
        return Reply::err("ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for p in pairs.chunks(2) {
        match arg_score(&p[0]) {
            Ok(s) => scores.push(s),
            Err(e) => return e,
        }
    }
    let limits = ctx.cfg.limits;
    let exists = match zset_mut(ctx, key) {
        Ok(z) => z.is_some(),
        Err(e) => return e,
    };
    let (mut added, mut updated, mut processed) = (0u64, 0u64, 0u64);
    let mut last = 0.0;
    let mut nan = false;
    if exists || !f.xx {
        let members = pairs.len() / 2;
        let measured = if limits.zset_sized_by_longest {
            pairs.chunks(2).map(|p| p[1].len()).max().unwrap_or(0)
        } else {
            pairs[1].len()
        };
        if !exists {
            ctx.db_add(key, Value::Zset(Box::new(Zset::create(measured, members, &limits))));
        }
        let Ok(Some(z)) = zset_mut(ctx, key) else {
            return Reply::wrongtype();
        };
        // Redis 7.2+ makes an existing listpack a skiplist up front when the command
        // brings more members than a listpack holds (Valkey 8.0 also a longer one), added
        // or not.
        if exists && limits.zset_created_by_size {
            let too_long = limits.zset_sized_by_longest && measured > limits.zset_max_listpack_value;
            if members > limits.zset_max_listpack_entries || too_long {
                z.convert_to_skiplist();
            }
        }
        // A new key without conditions: every pair is processed, so sort them in at once.
        let plain = !(f.nx || f.xx || f.gt || f.lt || f.incr);
        let batch: Vec<(&[u8], f64)> = if plain && !exists {
            pairs.chunks(2).map(|p| p[1].as_slice()).zip(scores.iter().copied()).collect()
        } else {
            Vec::new()
        };
        let filled = if batch.len() > 1 { z.fill_empty_listpack(&batch, &limits) } else { None };
        if let Some((a, u)) = filled {
            (added, updated, processed) = (a, u, batch.len() as u64);
        }
        if filled.is_none() {
            for (p, &score) in pairs.chunks(2).zip(&scores) {
                let m = &p[1];
                match z.score(m) {
                    Some(cur) => {
                        if f.nx {
                            continue;
                        }
                        let new = if f.incr { score + cur } else { score };
                        if new.is_nan() {
                            nan = true;
                            break;
                        }
                        if (f.lt && new >= cur) || (f.gt && new <= cur) {
                            continue;
                        }
                        last = new;
                        processed += 1;
                        #[allow(clippy::float_cmp)]
                        if new != cur {
                            z.insert(m, new, &limits);
                            updated += 1;
                        }
                    }
                    None => {
                        if f.xx {
                            continue;
                        }
                        z.insert(m, score, &limits);
                        last = score;
                        added += 1;
                        processed += 1;
                    }
                }
            }
        }
    }
    if added + updated > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if nan {
        return Reply::err("ERR resulting score is not a number (NaN)");
    }
    ctx.dirty += added + updated;
    if f.incr {
        if processed > 0 {
            Reply::Double(last)
        } else {
            Reply::Nil
        }
    } else {
        Reply::Int((if f.ch { added + updated } else { added }) as i64)
    }
}

// ------------------------------------------------------------------ simple reads and ZREM

fn zrem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let z = match zset_mut(ctx, key) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let mut deleted = 0;
    for m in &a[2..] {
        if z.remove(m) {
            deleted += 1;
        }
        if z.is_empty() {
            break;
        }
    }
    if deleted > 0 {
        ctx.notify(notify::ZSET, "zrem", key);
        delete_if_empty(ctx, key);
        ctx.signal_modified(key);
        ctx.dirty += deleted;
    }
    Reply::Int(deleted as i64)
}

fn zscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match zset_ref(ctx, &a[1]) {
        Ok(z) => z.and_then(|z| z.score(&a[2])).map_or(Reply::Nil, Reply::Double),
        Err(e) => e,
    }
}

fn zmscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match zset_ref(ctx, &a[1]) {
        Ok(z) => {
            Reply::Array(a[2..].iter().map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Nil, Reply::Double)).collect())
        }
        Err(e) => e,
    }
}

fn zcard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match zset_ref(ctx, &a[1]) {
        Ok(z) => Reply::Int(z.map_or(0, |z| z.len() as i64)),
        Err(e) => e,
    }
}

fn zcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let range = match ScoreRange::parse(&a[2], &a[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match zset_ref(ctx, &a[1]) {
        Ok(Some(z)) => {
            let (lo, hi) = range.ranks(z);
            Reply::Int((hi - lo) as i64)
        }
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

fn zlexcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let range = match LexRange::parse(&a[2], &a[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match zset_ref(ctx, &a[1]) {
        Ok(Some(z)) => {
            let (lo, hi) = range.ranks(z);
            Reply::Int((hi - lo) as i64)
        }
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

/// ZRANK / ZREVRANK key member [WITHSCORE] (the option since Redis 7.2: `[rank, score]`,
/// a null array when the member is missing).
fn zrank_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], rev: bool) -> Reply {
    if a.len() > 4 || (a.len() == 4 && ctx.cfg.version < crate::command::catalog::ServerVersion::Redis72) {
        return Reply::error(format!(
            "ERR wrong number of arguments for '{}' command",
            if rev { "zrevrank" } else { "zrank" }
        ));
    }
    let with_score = a.len() == 4;
    if with_score && !eq_ic(&a[3], "withscore") {
        return Reply::syntax();
    }
    let missing = if with_score { Reply::NilArray } else { Reply::Nil };
    match zset_ref(ctx, &a[1]) {
        Ok(Some(z)) => match z.rank(&a[2]) {
            Some(r) => {
                let rank = Reply::Int(if rev { (z.len() - 1 - r) as i64 } else { r as i64 });
                match z.score(&a[2]).filter(|_| with_score) {
                    Some(s) => Reply::Array(vec![rank, Reply::Double(s)]),
                    None => rank,
                }
            }
            None => missing,
        },
        Ok(None) => missing,
        Err(e) => e,
    }
}

fn zrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrank_generic(ctx, a, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrank_generic(ctx, a, true)
}

// ------------------------------------------------------------------ ZRANGE family

#[derive(Clone, Copy, PartialEq)]
enum RangeBy {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

enum Parsed {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// The selected entries of a range query, in reply order.
fn select(z: &Zset, what: &Parsed, rev: bool, offset: i64, limit: i64) -> Vec<(Sds, f64)> {
    let (lo, hi) = match what {
        Parsed::Rank(start, end) => {
            let (lo, hi) = if rev {
                let (s, e) = rank_interval(z.len(), *start, *end);
                (z.len() - e, z.len() - s)
            } else {
                rank_interval(z.len(), *start, *end)
            };
            return collect(z, lo, hi, rev, 0, -1);
        }
        Parsed::Score(r) => r.ranks(z),
        Parsed::Lex(r) => r.ranks_from(z, rev),
    };
    if offset < 0 {
        return Vec::new();
    }
    collect(z, lo, hi, rev, offset as usize, limit)
}

/// Entries of ranks `lo..hi`, skipping `offset` and taking `limit` (negative: all), from
/// the end when `rev`.
fn collect(z: &Zset, lo: usize, hi: usize, rev: bool, offset: usize, limit: i64) -> Vec<(Sds, f64)> {
    let n = hi.saturating_sub(lo).saturating_sub(offset);
    let take = if limit < 0 { n } else { n.min(limit as usize) };
    if take == 0 {
        return Vec::new();
    }
    let (from, to) = if rev { (hi - offset - take, hi - offset) } else { (lo + offset, lo + offset + take) };
    let it = z.range(from, to).map(|(m, s)| (sds(m), s));
    if rev {
        it.rev().collect()
    } else {
        it.collect()
    }
}

fn entries_reply(items: Vec<(Sds, f64)>, withscores: bool) -> Reply {
    if withscores {
        Reply::Pairs(items.into_iter().map(|(m, s)| (Reply::Bulk(m.to_vec()), Reply::Double(s))).collect())
    } else {
        Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m.to_vec())).collect())
    }
}

/// zrangeGenericCommand: ZRANGE and its older forms, and ZRANGESTORE (`store`).
fn zrange_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], at: usize, store: bool, by: RangeBy, dir: Direction) -> Reply {
    let (mut by, mut dir) = (by, dir);
    let key = &a[at];
    let (mut minidx, mut maxidx) = (at + 1, at + 2);
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = at + 3;
    while j < a.len() {
        let left = a.len() - j - 1;
        if !store && eq_ic(&a[j], "withscores") {
            withscores = true;
        } else if eq_ic(&a[j], "limit") && left >= 2 {
            match (arg_i64(&a[j + 1]), arg_i64(&a[j + 2])) {
                (Ok(o), Ok(l)) => (offset, limit) = (o, l),
                (Err(e), _) | (_, Err(e)) => return e,
            }
            j += 2;
        } else if dir == Direction::Auto && eq_ic(&a[j], "rev") {
            dir = Direction::Reverse;
        } else if by == RangeBy::Auto && eq_ic(&a[j], "bylex") {
            by = RangeBy::Lex;
        } else if by == RangeBy::Auto && eq_ic(&a[j], "byscore") {
            by = RangeBy::Score;
        } else {
            return Reply::syntax();
        }
        j += 1;
    }
    let rev = dir == Direction::Reverse;
    if by == RangeBy::Auto {
        by = RangeBy::Rank;
    }
    if limit != -1 && by == RangeBy::Rank {
        return Reply::err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    }
    if withscores && by == RangeBy::Lex {
        return Reply::err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    if rev && by != RangeBy::Rank {
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    let what = match by {
        RangeBy::Score => match ScoreRange::parse(&a[minidx], &a[maxidx]) {
            Ok(r) => Parsed::Score(r),
            Err(e) => return e,
        },
        RangeBy::Lex => match LexRange::parse(&a[minidx], &a[maxidx]) {
            Ok(r) => Parsed::Lex(r),
            Err(e) => return e,
        },
        _ => match (arg_i64(&a[minidx]), arg_i64(&a[maxidx])) {
            (Ok(s), Ok(e)) => Parsed::Rank(s, e),
            (Err(e), _) | (_, Err(e)) => return e,
        },
    };
    let items = match zset_ref(ctx, key) {
        Ok(Some(z)) => select(z, &what, rev, offset, limit),
        Ok(None) => Vec::new(),
        Err(e) => return e,
    };
    if !store {
        return entries_reply(items, withscores);
    }
    let expected = match what {
        Parsed::Rank(..) => items.len(),
        _ => 0,
    };
    let limits = ctx.cfg.limits;
    let mut out = Zset::for_store(expected, &limits);
    for (m, s) in &items {
        out.insert(m, *s, &limits);
    }
    store_result(ctx, &a[1], out, "zrangestore", 1)
}

/// Store a computed zset at `dst` (counting `dirty` changes), or delete `dst` when the
/// result is empty.
pub(in crate::command) fn store_result(
    ctx: &mut Ctx<'_>,
    dst: &[u8],
    z: Zset,
    event: &'static str,
    dirty: u64,
) -> Reply {
    let n = z.len();
    if n > 0 {
        ctx.db_set(dst, Value::Zset(Box::new(z)), false);
        ctx.notify(notify::ZSET, event, dst);
        ctx.dirty += dirty;
    } else if ctx.db_delete(dst) {
        // As Redis's dbDelete: no expiry check, so an expired destination is a change.
        ctx.notify(notify::GENERIC, "del", dst);
        ctx.dirty += 1;
    }
    Reply::Int(n as i64)
}

fn zrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, a, 1, false, RangeBy::Auto, Direction::Auto)
}

fn zrangestore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, a, 2, true, RangeBy::Auto, Direction::Auto)
}

fn zrevrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, a, 1, false, RangeBy::Rank, Direction::Reverse)
}

fn zrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, a, 1, false, RangeBy::Score, Direction::Forward)
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, a, 1, false, RangeBy::Score, Direction::Reverse)
}

fn zrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, a, 1, false, RangeBy::Lex, Direction::Forward)
}

fn zrevrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, a, 1, false, RangeBy::Lex, Direction::Reverse)
}

// ------------------------------------------------------------------ ZREMRANGEBY*

fn zremrange_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], by: RangeBy) -> Reply {
    let key = &a[1];
    let (what, event) = match by {
        RangeBy::Score => match ScoreRange::parse(&a[2], &a[3]) {
            Ok(r) => (Parsed::Score(r), "zremrangebyscore"),
            Err(e) => return e,
        },
        RangeBy::Lex => match LexRange::parse(&a[2], &a[3]) {
            Ok(r) => (Parsed::Lex(r), "zremrangebylex"),
            Err(e) => return e,
        },
        _ => match (arg_i64(&a[2]), arg_i64(&a[3])) {
            (Ok(s), Ok(e)) => (Parsed::Rank(s, e), "zremrangebyrank"),
            (Err(e), _) | (_, Err(e)) => return e,
        },
    };
    let z = match zset_mut(ctx, key) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let (lo, hi) = match &what {
        Parsed::Rank(s, e) => rank_interval(z.len(), *s, *e),
        Parsed::Score(r) => r.ranks(z),
        Parsed::Lex(r) => r.ranks(z),
    };
    let deleted = z.remove_range(lo, hi);
    if deleted > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::ZSET, event, key);
        delete_if_empty(ctx, key);
    }
    ctx.dirty += deleted as u64;
    Reply::Int(deleted as i64)
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zremrange_generic(ctx, a, RangeBy::Rank)
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zremrange_generic(ctx, a, RangeBy::Score)
}

fn zremrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zremrange_generic(ctx, a, RangeBy::Lex)
}

// ------------------------------------------------------------------ ZPOPMIN / ZPOPMAX

fn zpop_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], max: bool) -> Reply {
    if a.len() > 3 {
        return Reply::syntax();
    }
    let count = match a.get(2).map(|c| arg_count_positive(c)) {
        Some(Ok(n)) => Some(n),
        Some(Err(e)) => return e,
        None => None,
    };
    let key = &a[1];
    let z = match zset_mut(ctx, key) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Array(Vec::new()),
        Err(e) => return e,
    };
    let n = count.unwrap_or(1).min(z.len());
    if n == 0 {
        return Reply::Array(Vec::new());
    }
    let (lo, hi) = if max { (z.len() - n, z.len()) } else { (0, n) };
    let mut popped: Vec<(Sds, f64)> = z.range(lo, hi).map(|(m, s)| (sds(m), s)).collect();
    if max {
        popped.reverse();
    }
    z.remove_range(lo, hi);
    ctx.dirty += n as u64;
    ctx.notify(notify::ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
    ctx.signal_modified(key);
    delete_if_empty(ctx, key);
    if count.is_some() {
        entries_reply(popped, true)
    } else {
        Reply::Array(popped.into_iter().flat_map(|(m, s)| [Reply::Bulk(m.to_vec()), Reply::Double(s)]).collect())
    }
}

fn zpopmin(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zpop_generic(ctx, a, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zpop_generic(ctx, a, true)
}

// ------------------------------------------------------------------ ZUNION / ZINTER / ZDIFF

#[derive(Clone, Copy, PartialEq)]
enum ZsetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, target: &mut f64, v: f64) {
        match self {
            Aggregate::Sum => {
                *target += v;
                // inf + -inf: Redis keeps 0.
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if v < *target {
                    *target = v;
                }
            }
            Aggregate::Max => {
                if v > *target {
                    *target = v;
                }
            }
        }
    }
}

/// An input of ZUNION-like commands: a zset, a set (every score 1), or nothing.
#[derive(Clone, Copy)]
enum Source<'a> {
    Zset(&'a Zset),
    Set(&'a Set),
    Missing,
}

impl<'a> Source<'a> {
    fn len(&self) -> usize {
        match self {
            Source::Zset(z) => z.len(),
            Source::Set(s) => s.len(),
            Source::Missing => 0,
        }
    }

    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            Source::Zset(z) => z.iter().for_each(|(m, s)| f(m, s)),
            Source::Set(s) => s.iter().for_each(|m| f(&m, 1.0)),
            Source::Missing => {}
        }
    }

    fn find(&self, m: &[u8]) -> Option<f64> {
        match self {
            Source::Zset(z) => z.score(m),
            Source::Set(s) => s.contains(m).then_some(1.0),
            Source::Missing => None,
        }
    }

    /// Whether two inputs are the same object (the same key given twice).
    fn same(&self, other: &Source<'_>) -> bool {
        match (self, other) {
            (Source::Zset(a), Source::Zset(b)) => std::ptr::eq(*a, *b),
            (Source::Set(a), Source::Set(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

struct OpArgs {
    keys: std::ops::Range<usize>,
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    limit: usize,
}

/// Parse numkeys, the keys' types and the options of zunionInterDiffGenericCommand.
fn parse_op(ctx: &mut Ctx<'_>, a: &[Vec<u8>], at: usize, op: ZsetOp, store: bool, card: bool) -> Result<OpArgs, Reply> {
    let setnum = arg_i64(&a[at])?;
    if setnum < 1 {
        return Err(Reply::error(format!(
            "ERR at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(&a[0]).to_lowercase()
        )));
    }
    if setnum > (a.len() - at - 1) as i64 {
        return Err(Reply::syntax());
    }
    let setnum = setnum as usize;
    let keys = at + 1..at + 1 + setnum;
    for k in &a[keys.clone()] {
        match ctx.lookup_read(k) {
            None | Some(Value::Zset(_)) | Some(Value::Set(_)) => {}
            Some(_) => return Err(Reply::wrongtype()),
        }
    }
    let mut args = OpArgs {
        keys: keys.clone(),
        weights: vec![1.0; setnum],
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = keys.end;
    while j < a.len() {
        let remaining = a.len() - j;
        if op != ZsetOp::Diff && !card && remaining > setnum && eq_ic(&a[j], "weights") {
            for i in 0..setnum {
                args.weights[i] =
                    parse_score(&a[j + 1 + i]).ok_or_else(|| Reply::err("ERR weight value is not a float"))?;
            }
            j += 1 + setnum;
        } else if op != ZsetOp::Diff && !card && remaining >= 2 && eq_ic(&a[j], "aggregate") {
            let v = &a[j + 1];
            args.aggregate = if eq_ic(v, "sum") {
                Aggregate::Sum
            } else if eq_ic(v, "min") {
                Aggregate::Min
            } else if eq_ic(v, "max") {
                Aggregate::Max
            } else {
                return Err(Reply::syntax());
            };
            j += 2;
        } else if !store && !card && eq_ic(&a[j], "withscores") {
            args.withscores = true;
            j += 1;
        } else if card && remaining >= 2 && eq_ic(&a[j], "limit") {
            args.limit = super::set::arg_at_least(&a[j + 1], 0, "ERR LIMIT can't be negative")? as usize;
            j += 2;
        } else {
            return Err(Reply::syntax());
        }
    }
    Ok(args)
}

/// The result of `op` as (member, score) pairs (any order), or its size for ZINTERCARD.
fn compute_op(
    sources: &mut [(Source<'_>, f64)],
    op: ZsetOp,
    agg: Aggregate,
    card_limit: Option<usize>,
) -> (Vec<(Sds, f64)>, usize) {
    let mut out: Vec<(Sds, f64)> = Vec::new();
    let mut count = 0;
    if op != ZsetOp::Diff {
        sources.sort_by_key(|(s, _)| s.len());
    }
    let Some(&(first, w0)) = sources.first() else {
        return (out, 0);
    };
    match op {
        ZsetOp::Inter => {
            if first.len() == 0 {
                return (out, 0);
            }
            let rest = &sources[1..];
            let mut stop = false;
            first.for_each(|m, s| {
                if stop {
                    return;
                }
                let mut score = w0 * s;
                if score.is_nan() {
                    score = 0.0;
                }
                for (src, w) in rest {
                    let v = if src.same(&first) { Some(s) } else { src.find(m) };
                    match v {
                        Some(v) => agg.apply(&mut score, v * w),
                        None => return,
                    }
                }
                count += 1;
                match card_limit {
                    Some(l) => stop = l > 0 && count >= l,
                    None => out.push((crate::value::sds(m), score)),
                }
            });
        }
        ZsetOp::Union => {
            let mut acc: indexmap::IndexMap<Sds, f64, foldhash::fast::RandomState> = Default::default();
            for (src, w) in sources.iter() {
                src.for_each(|m, s| {
                    let mut score = w * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => agg.apply(t, score),
                        None => {
                            acc.insert(crate::value::sds(m), score);
                        }
                    }
                });
            }
            out = acc.into_iter().collect();
        }
        ZsetOp::Diff => {
            let rest = &sources[1..];
            if first.len() > 0 && !rest.iter().any(|(s, _)| s.same(&first)) {
                first.for_each(|m, s| {
                    if !rest.iter().any(|(o, _)| o.find(m).is_some()) {
                        out.push((crate::value::sds(m), s));
                    }
                });
            }
        }
    }
    let n = if card_limit.is_some() { count } else { out.len() };
    (out, n)
}

fn zset_op(ctx: &mut Ctx<'_>, a: &[Vec<u8>], op: ZsetOp, store: bool, card: bool) -> Reply {
    let at = if store { 2 } else { 1 };
    let args = match parse_op(ctx, a, at, op, store, card) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let limits: Limits = ctx.cfg.limits;
    let (items, n) = {
        let db = &ctx.ks.dbs[ctx.db];
        let mut sources: Vec<(Source<'_>, f64)> = a[args.keys.clone()]
            .iter()
            .zip(&args.weights)
            .map(|(k, w)| {
                let src = match db.get(k).map(|s| &s.value) {
                    Some(Value::Zset(z)) => Source::Zset(z),
                    Some(Value::Set(s)) => Source::Set(s),
                    _ => Source::Missing,
                };
                (src, *w)
            })
            .collect();
        compute_op(&mut sources, op, args.aggregate, card.then_some(args.limit))
    };
    if card {
        return Reply::Int(n as i64);
    }
    let mut result = Zset::Skiplist(Default::default());
    for (m, s) in &items {
        result.insert(m, *s, &limits);
    }
    if store {
        result.shrink_if_small(&limits);
        let event = match op {
            ZsetOp::Union => "zunionstore",
            ZsetOp::Inter => "zinterstore",
            ZsetOp::Diff => "zdiffstore",
        };
        return store_result(ctx, &a[1], result, event, 1);
    }
    entries_reply(result.iter().map(|(m, s)| (sds(m), s)).collect(), args.withscores)
}

fn zunionstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zset_op(ctx, a, ZsetOp::Union, true, false)
}

fn zinterstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zset_op(ctx, a, ZsetOp::Inter, true, false)
}

fn zdiffstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zset_op(ctx, a, ZsetOp::Diff, true, false)
}

fn zunion(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zset_op(ctx, a, ZsetOp::Union, false, false)
}

fn zinter(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zset_op(ctx, a, ZsetOp::Inter, false, false)
}

fn zdiff(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zset_op(ctx, a, ZsetOp::Diff, false, false)
}

fn zintercard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    zset_op(ctx, a, ZsetOp::Inter, false, true)
}

// ------------------------------------------------------------------ ZRANDMEMBER / ZSCAN

fn zrandmember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    if a.len() == 2 {
        let size = match zset_ref(ctx, key) {
            Ok(Some(z)) => z.len(),
            Ok(None) => return Reply::Nil,
            Err(e) => return e,
        };
        let i = ctx.rng.usize(..size.max(1));
        return match ctx.ks.dbs[ctx.db].get(key).map(|s| &s.value) {
            Some(Value::Zset(z)) => z.get_by_rank(i).map_or(Reply::Nil, |(m, _)| Reply::Bulk(m.to_vec())),
            _ => Reply::Nil,
        };
    }
    let l = match arg_count_signed(&a[2]) {
        Ok(l) => l,
        Err(e) => return e,
    };
    if a.len() > 4 || (a.len() == 4 && !eq_ic(&a[3], "withscores")) {
        return Reply::syntax();
    }
    let withscores = a.len() == 4;
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return Reply::err("ERR value is out of range");
    }
    let size = match zset_ref(ctx, key) {
        Ok(Some(z)) => z.len(),
        Ok(None) => return Reply::Array(Vec::new()),
        Err(e) => return e,
    };
    let count = l.unsigned_abs() as usize;
    if count == 0 {
        return Reply::Array(Vec::new());
    }
    let db = ctx.db;
    let Some(Value::Zset(z)) = ctx.ks.dbs[db].get(key).map(|s| &s.value) else {
        return Reply::Array(Vec::new());
    };
    let pick = |i: usize| z.get_by_rank(i).map(|(m, s)| (sds(m), s));
    let items: Vec<(Sds, f64)> = if l < 0 || count == 1 {
        let count = match ctx.random_picks(count as u64) {
            Ok(c) => c,
            Err(e) => return e,
        };
        (0..count).filter_map(|_| pick(ctx.rng.usize(..size))).collect()
    } else if count >= size {
        // The whole zset, walked from the tail as Redis's zset iterator does.
        z.iter().rev().map(|(m, s)| (sds(m), s)).collect()
    } else {
        distinct_positions(ctx.rng, size, count).into_iter().filter_map(pick).collect()
    };
    entries_reply(items, withscores)
}

fn zscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let Some(cursor) = parse_cursor(&a[2]) else {
        return Reply::err("ERR invalid cursor");
    };
    let novalues = NoValues::of(ctx.cfg.version, false);
    let z = match zset_ref(ctx, &a[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(e) => return e,
    };
    let opts = match ScanOpts::parse(&a[3..], novalues) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut items = Vec::new();
    let next = z.scan(cursor, opts.count.saturating_mul(2), |m, s| {
        if opts.matches(m) {
            items.push(Reply::Bulk(m.to_vec()));
            items.push(Reply::Bulk(fmt_double(s).into_bytes()));
        }
    });
    scan_reply(next, items)
}
