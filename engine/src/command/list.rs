//! List commands.

use super::{arg_i64, eq_ic, notify, Ctx, Reply, Spec};
use crate::command::catalog::ServerVersion;
use crate::value::list::{End, List};
use crate::value::Value;

pub const SPECS: &[Spec] = &[
    Spec::new("lpush", lpush),
    Spec::new("rpush", rpush),
    Spec::new("lpushx", lpushx),
    Spec::new("rpushx", rpushx),
    Spec::new("lpop", lpop),
    Spec::new("rpop", rpop),
    Spec::new("llen", llen),
    Spec::new("lrange", lrange),
    Spec::new("lindex", lindex),
    Spec::new("lset", lset),
    Spec::new("linsert", linsert),
    Spec::new("lrem", lrem),
    Spec::new("ltrim", ltrim),
    Spec::new("rpoplpush", rpoplpush),
    Spec::new("lmove", lmove),
    Spec::new("lpos", lpos),
];

/// The list at `key` for reading: Ok(None) when missing, Err(WRONGTYPE) for another type.
fn read_list<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut List>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// The list at `key` for writing: Ok(None) when missing, Err(WRONGTYPE) for another type.
fn write_list<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut List>, Reply> {
    match ctx.lookup_write(key) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// The list at `key` for writing, created empty when missing (type already checked), and
/// ready to take `count` elements of `bytes` bytes (a listpack past its limit becomes a
/// quicklist first).
fn list_or_create<'c>(ctx: &'c mut Ctx<'_>, key: &[u8], bytes: usize, count: usize) -> Result<&'c mut List, Reply> {
    let limits = ctx.cfg.limits;
    let new = || Value::List(Box::new(if limits.list_packed { List::new_packed() } else { List::default() }));
    match ctx.lookup_write_or_insert(key, new) {
        Value::List(l) => {
            l.before_growing(limits.list_max_listpack_size, bytes, count);
            Ok(l)
        }
        _ => Err(Reply::wrongtype()),
    }
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Left => "lpop",
        End::Right => "rpop",
    }
}

fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

// ------------------------------------------------------------------ push

fn lpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    push(ctx, a, End::Left, false)
}

fn rpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    push(ctx, a, End::Right, false)
}

fn lpushx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    push(ctx, a, End::Left, true)
}

fn rpushx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    push(ctx, a, End::Right, true)
}

/// LPUSH/RPUSH/LPUSHX/RPUSHX; `only_existing` for the X forms.
fn push(ctx: &mut Ctx<'_>, a: &[Vec<u8>], end: End, only_existing: bool) -> Reply {
    let key = &a[1];
    match write_list(ctx, key) {
        Err(e) => return e,
        Ok(None) if only_existing => return Reply::Int(0),
        Ok(_) => {}
    }
    let bytes = a[2..].iter().map(Vec::len).sum();
    let list = match list_or_create(ctx, key, bytes, a.len() - 2) {
        Ok(l) => l,
        Err(e) => return e,
    };
    for item in &a[2..] {
        list.push(end, item);
    }
    let len = list.len();
    ctx.dirty += (a.len() - 2) as u64;
    ctx.signal_modified(key);
    ctx.notify(notify::LIST, push_event(end), key);
    Reply::Int(len as i64)
}

// ------------------------------------------------------------------ pop

fn lpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    pop(ctx, a, End::Left)
}

fn rpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    pop(ctx, a, End::Right)
}

/// A count argument that must be >= 0 (Redis's getPositiveLongFromObjectOrReply).
fn arg_non_negative(b: &[u8], msg: &'static str) -> Result<i64, Reply> {
    match super::parse_i64(b) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(Reply::err(msg)),
    }
}

const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";

/// LPOP/RPOP key [count].
fn pop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], end: End) -> Reply {
    let key = &a[1];
    if a.len() > 3 {
        let name = if end == End::Left { "lpop" } else { "rpop" };
        return Reply::error(format!("ERR wrong number of arguments for '{name}' command"));
    }
    let count = match a.get(2).map(|c| arg_non_negative(c, MUST_BE_POSITIVE)).transpose() {
        Ok(c) => c,
        Err(e) => return e,
    };
    let limits = ctx.cfg.limits;
    let list = match write_list(ctx, key) {
        Err(e) => return e,
        Ok(None) => return if count.is_some() { Reply::NilArray } else { Reply::Nil },
        Ok(Some(l)) => l,
    };
    let reply = match count {
        None => match list.pop(end) {
            Some(item) => Reply::Bulk(item),
            None => return Reply::Nil,
        },
        Some(0) => return Reply::Array(Vec::new()),
        Some(n) => {
            let n = (n as u64).min(list.len() as u64) as usize;
            Reply::Array((0..n).filter_map(|_| list.pop(end)).map(Reply::Bulk).collect())
        }
    };
    list.after_shrinking(&limits);
    let popped = match &reply {
        Reply::Array(v) => v.len(),
        _ => 1,
    };
    elements_removed(ctx, key, end, popped as u64);
    reply
}

/// After a pop: the event, the key's deletion when emptied, dirty.
fn elements_removed(ctx: &mut Ctx<'_>, key: &[u8], end: End, count: u64) {
    ctx.notify(notify::LIST, pop_event(end), key);
    ctx.delete_if_empty(key);
    ctx.signal_modified(key);
    ctx.dirty += count;
}

/// Elements of the list at `key` went: a quicklist that became small enough is a
/// listpack again (Redis 7.2+). For LMOVE, whose source is checked after the push.
fn shrunk(ctx: &mut Ctx<'_>, key: &[u8]) {
    let limits = ctx.cfg.limits;
    if !limits.list_packed {
        return;
    }
    if let Ok(Some(l)) = write_list(ctx, key) {
        l.after_shrinking(&limits);
    }
}

// ------------------------------------------------------------------ reads

fn llen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_list(ctx, &a[1]) {
        Ok(Some(l)) => Reply::Int(l.len() as i64),
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

fn lrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (start, stop) = match (arg_i64(&a[2]), arg_i64(&a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match read_list(ctx, &a[1]) {
        Ok(Some(l)) => match l.clamp_range(start, stop) {
            Some((from, to)) => Reply::bulks(l.range(from, to)),
            None => Reply::Array(Vec::new()),
        },
        Ok(None) => Reply::Array(Vec::new()),
        Err(e) => e,
    }
}

fn lindex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let list = match read_list(ctx, &a[1]) {
        Ok(Some(l)) => l,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    match arg_i64(&a[2]) {
        Ok(i) => list.get(i).map_or(Reply::Nil, Reply::bulk),
        Err(e) => e,
    }
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
fn lpos(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut i = 3;
    while i < a.len() {
        let more = i + 1 < a.len();
        if eq_ic(&a[i], "rank") && more {
            rank =
                match arg_i64(&a[i + 1]) {
                    Ok(0) if ctx.cfg.version.is_redis62() => {
                        return Reply::err(
                            "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second, ...",
                        )
                    }
                    Ok(0) => return Reply::err(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use \
                         negative to start from the end of the list",
                    ),
                    // Redis 7.2+ reads the rank in -LONG_MAX..LONG_MAX.
                    Ok(i64::MIN) if ctx.cfg.version.behaves_as() >= ServerVersion::Redis72 => {
                        return Reply::error(format!(
                            "ERR value is out of range, value must between {} and {}",
                            -i64::MAX,
                            i64::MAX
                        ))
                    }
                    Ok(r) => r,
                    Err(e) => return e,
                };
        } else if eq_ic(&a[i], "count") && more {
            count = match arg_non_negative(&a[i + 1], "ERR COUNT can't be negative") {
                Ok(c) => Some(c),
                Err(e) => return e,
            };
        } else if eq_ic(&a[i], "maxlen") && more {
            maxlen = match arg_non_negative(&a[i + 1], "ERR MAXLEN can't be negative") {
                Ok(m) => m,
                Err(e) => return e,
            };
        } else {
            return Reply::syntax();
        }
        i += 2;
    }
    let list = match read_list(ctx, &a[1]) {
        Ok(Some(l)) => l,
        Ok(None) => return if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil },
        Err(e) => return e,
    };
    // A negative rank searches from the tail. Redis negates it in C `long`: i64::MIN stays
    // negative, so every match qualifies; wrapping arithmetic keeps that behaviour.
    let from_tail = rank < 0;
    if from_tail {
        rank = rank.wrapping_neg();
    }
    let elem = a[2].as_slice();
    let len = list.len();
    let scan_limit = if maxlen == 0 { len } else { (maxlen as u64).min(len as u64) as usize };
    let items: Box<dyn Iterator<Item = (usize, &[u8])>> = if from_tail {
        Box::new(list.iter().rev().enumerate().map(|(k, e)| (len - 1 - k, e)))
    } else {
        Box::new(list.iter().enumerate())
    };
    let mut matches = 0i64;
    let mut found = Vec::new();
    for (pos, item) in items.take(scan_limit) {
        if item != elem {
            continue;
        }
        matches += 1;
        if matches < rank {
            continue;
        }
        found.push(Reply::Int(pos as i64));
        match count {
            None => break,
            Some(c) if c != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= c => break,
            Some(_) => {}
        }
    }
    match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    }
}

// ------------------------------------------------------------------ writes

fn lset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let limits = ctx.cfg.limits;
    let list = match write_list(ctx, key) {
        Ok(Some(l)) => l,
        Ok(None) => return Reply::err("ERR no such key"),
        Err(e) => return e,
    };
    let index = match arg_i64(&a[2]) {
        Ok(i) => i,
        Err(e) => return e,
    };
    // Redis checks for growth before it knows the index is in range.
    list.before_growing(limits.list_max_listpack_size, a[3].len(), 1);
    if !list.set(index, &a[3]) {
        return Reply::err("ERR index out of range");
    }
    list.after_shrinking(&limits);
    ctx.signal_modified(key);
    ctx.notify(notify::LIST, "lset", key);
    ctx.dirty += 1;
    Reply::ok()
}

/// LINSERT key BEFORE|AFTER pivot element
fn linsert(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let after = if eq_ic(&a[2], "after") {
        true
    } else if eq_ic(&a[2], "before") {
        false
    } else {
        return Reply::syntax();
    };
    let fill = ctx.cfg.limits.list_max_listpack_size;
    let list = match write_list(ctx, key) {
        Ok(Some(l)) => l,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    // Grown before the pivot is looked for, as Redis does.
    list.before_growing(fill, a[4].len(), 1);
    if !list.insert_by_pivot(&a[3], &a[4], after) {
        return Reply::Int(-1);
    }
    let len = list.len();
    ctx.signal_modified(key);
    ctx.notify(notify::LIST, "linsert", key);
    ctx.dirty += 1;
    Reply::Int(len as i64)
}

/// LREM key count element
fn lrem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let limits = ctx.cfg.limits;
    let count = match arg_i64(&a[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let list = match write_list(ctx, key) {
        Ok(Some(l)) => l,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let removed = list.remove_matching(&a[3], limit, count < 0);
    if removed > 0 {
        list.after_shrinking(&limits);
        ctx.signal_modified(key);
        ctx.notify(notify::LIST, "lrem", key);
        ctx.dirty += removed as u64;
    }
    ctx.delete_if_empty(key);
    Reply::Int(removed as i64)
}

/// LTRIM key start stop
fn ltrim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let limits = ctx.cfg.limits;
    let (start, stop) = match (arg_i64(&a[2]), arg_i64(&a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let list = match write_list(ctx, key) {
        Ok(Some(l)) => l,
        Ok(None) => return Reply::ok(),
        Err(e) => return e,
    };
    let keep = list.clamp_range(start, stop);
    let removed = list.trim(keep);
    list.after_shrinking(&limits);
    ctx.notify(notify::LIST, "ltrim", key);
    ctx.delete_if_empty(key);
    ctx.signal_modified(key);
    ctx.dirty += removed as u64;
    Reply::ok()
}

// ------------------------------------------------------------------ move

fn rpoplpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    move_element(ctx, &a[1], &a[2], End::Right, End::Left)
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
fn lmove(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (Some(from), Some(to)) = (parse_end(&a[3]), parse_end(&a[4])) else {
        return Reply::syntax();
    };
    move_element(ctx, &a[1], &a[2], from, to)
}

fn parse_end(arg: &[u8]) -> Option<End> {
    if eq_ic(arg, "left") {
        Some(End::Left)
    } else if eq_ic(arg, "right") {
        Some(End::Right)
    } else {
        None
    }
}

/// Pop from one end of `src`, push to one end of `dst` (possibly the same list); both
/// RPOPLPUSH and LMOVE propagate as called.
fn move_element(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from: End, to: End) -> Reply {
    match write_list(ctx, src) {
        Ok(Some(l)) if !l.is_empty() => {}
        Ok(_) => return Reply::Nil,
        Err(e) => return e,
    }
    if let Err(e) = write_list(ctx, dst) {
        return e;
    }
    let item = match write_list(ctx, src) {
        Ok(Some(l)) => l.pop(from),
        _ => None,
    };
    let Some(item) = item else {
        return Reply::Nil;
    };
    // The source is deleted only after the push, so a rotation keeps its key. The popped
    // element's bytes count for growth unless Redis holds it as an integer object.
    let bytes = if crate::format::blob::parse_canonical_i64(&item).is_some() { 0 } else { item.len() };
    match list_or_create(ctx, dst, bytes, 1) {
        Ok(l) => l.push(to, &item),
        Err(e) => return e,
    }
    ctx.signal_modified(dst);
    ctx.notify(notify::LIST, push_event(to), dst);
    ctx.notify(notify::LIST, pop_event(from), src);
    shrunk(ctx, src);
    ctx.delete_if_empty(src);
    ctx.signal_modified(src);
    ctx.dirty += 1;
    Reply::Bulk(item)
}
