//! What the stream commands share: ID and argument parsing, lookups, replies.

use crate::command::catalog::ServerVersion;
use crate::command::{err_arg, parse_i64, Ctx, ExpireMode, Reply};
use crate::format::rdb::StreamId;
use crate::value::stream::{id_decr, id_incr, Consumer, FieldsRef, Group, Nack, MAX_ID, MIN_ID};
use crate::value::{sds, Stream, Value};

pub(super) fn invalid_id() -> Reply {
    Reply::err("ERR Invalid stream ID specified as stream command argument")
}

pub(super) fn no_such_key() -> Reply {
    Reply::err("ERR no such key")
}

/// strtoull over the whole string: optional leading spaces and sign, digits, nothing after;
/// a minus sign wraps; overflow fails.
pub(super) fn strtoull(b: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64(b) {
        return u64::try_from(v).ok();
    }
    let (neg, digits) = crate::format::blob::c_number_start(b);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Parse an ID as Redis's streamGenericParseIDOrReply: `-` / `+` (unless `strict`), `ms`
/// (sequence `missing_seq`), `ms-seq`, and with `seq_star` also `ms-*`. Returns the ID
/// and whether the sequence was given.
pub(super) fn parse_id_generic(b: &[u8], missing_seq: u64, strict: bool, seq_star: bool) -> Option<(StreamId, bool)> {
    if b.len() > 127 || b.contains(&0) {
        return None;
    }
    if b == b"-" || b == b"+" {
        if strict {
            return None;
        }
        return Some((if b == b"-" { MIN_ID } else { MAX_ID }, true));
    }
    match b.iter().position(|&c| c == b'-') {
        Some(dash) => {
            let ms = strtoull(&b[..dash])?;
            let rest = &b[dash + 1..];
            if seq_star && rest == b"*" {
                return Some((StreamId { ms, seq: 0 }, false));
            }
            Some((StreamId { ms, seq: strtoull(rest)? }, true))
        }
        None => Some((StreamId { ms: strtoull(b)?, seq: missing_seq }, true)),
    }
}

pub(super) fn parse_id(b: &[u8], missing_seq: u64) -> Result<StreamId, Reply> {
    parse_id_generic(b, missing_seq, false, false).map(|x| x.0).ok_or_else(invalid_id)
}

pub(super) fn parse_strict_id(b: &[u8], missing_seq: u64) -> Result<StreamId, Reply> {
    parse_id_generic(b, missing_seq, true, false).map(|x| x.0).ok_or_else(invalid_id)
}

/// A range bound: `(id` excludes it (moved by one here), otherwise as parse_id.
pub(super) fn parse_interval(b: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, Reply> {
    if b.len() > 1 && b[0] == b'(' {
        let id = parse_strict_id(&b[1..], missing_seq)?;
        let moved = if start { id_incr(id) } else { id_decr(id) };
        return moved.ok_or_else(|| {
            Reply::err(if start {
                "ERR invalid start ID for the interval"
            } else {
                "ERR invalid end ID for the interval"
            })
        });
    }
    parse_id(b, missing_seq)
}

pub(super) fn id_bulk(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

pub(super) fn id_arg(id: StreamId) -> Vec<u8> {
    id.to_bytes()
}

pub(super) fn entry_reply(id: StreamId, fields: FieldsRef<'_>) -> Reply {
    let mut fv = Vec::with_capacity(fields.len() * 2);
    for (f, v) in fields {
        fv.push(Reply::bulk(f));
        fv.push(Reply::bulk(v));
    }
    Reply::Array(vec![id_bulk(id), Reply::Array(fv)])
}

/// Replies reserved up front for a range, which cannot tell its length (a narrow range of a
/// big stream must not reserve the stream).
const RESERVE_MAX: usize = 128;

/// Up to `limit` entries of `entries` as replies.
pub(super) fn entries_reply<'a>(entries: impl Iterator<Item = (StreamId, FieldsRef<'a>)>, limit: usize) -> Reply {
    let mut out = Vec::with_capacity(limit.min(RESERVE_MAX));
    out.extend(entries.take(limit).map(|(id, f)| entry_reply(id, f)));
    Reply::Array(out)
}

pub(super) fn read_stream<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Stream>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

pub(super) fn write_stream<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Stream>, Reply> {
    match ctx.lookup_write(key) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// A command whose source must be obeyed (AOF loading, a master): no trimming LIMIT.
pub(super) fn obeys_source(ctx: &Ctx<'_>) -> bool {
    ctx.mode != ExpireMode::Master
}

pub(super) fn subcommand_syntax(a: &[Vec<u8>]) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        err_arg(&a[1], 128),
        String::from_utf8_lossy(&a[0]).to_ascii_uppercase()
    ))
}

/// A container command's subcommand check: unknown names and arity, as Redis's table does.
pub(super) fn check_subcommand(a: &[Vec<u8>], table: &[(&str, i32)]) -> Result<String, Reply> {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let Some(&(_, arity)) = table.iter().find(|(n, _)| *n == sub) else {
        return Err(Reply::error(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            err_arg(&a[1], 128),
            String::from_utf8_lossy(&a[0]).to_ascii_uppercase()
        )));
    };
    let n = a.len() as i32;
    if (arity >= 0 && n != arity) || (arity < 0 && n < -arity) {
        let cmd = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
        return Err(Reply::error(format!("ERR wrong number of arguments for '{cmd}|{sub}' command")));
    }
    Ok(sub)
}

/// The XCLAIM Redis propagates for a pending entry's new state.
pub(super) fn xclaim_argv(
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    id: &[u8],
    n: &Nack,
    last_id: StreamId,
) -> Vec<Vec<u8>> {
    vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group.to_vec(),
        consumer.to_vec(),
        b"0".to_vec(),
        id.to_vec(),
        b"TIME".to_vec(),
        n.delivery_time.to_string().into_bytes(),
        b"RETRYCOUNT".to_vec(),
        n.delivery_count.to_string().into_bytes(),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        id_arg(last_id),
    ]
}

pub(super) fn setid_argv(key: &[u8], group: &[u8], g: &Group) -> Vec<Vec<u8>> {
    vec![
        b"XGROUP".to_vec(),
        b"SETID".to_vec(),
        key.to_vec(),
        group.to_vec(),
        id_arg(g.last_id),
        b"ENTRIESREAD".to_vec(),
        g.entries_read.to_string().into_bytes(),
    ]
}

/// `XGROUP CREATECONSUMER key group consumer`, as a consumer made by XREADGROUP NOACK
/// propagates.
pub(super) fn createconsumer_argv(key: &[u8], group: &[u8], consumer: &[u8]) -> Vec<Vec<u8>> {
    vec![b"XGROUP".to_vec(), b"CREATECONSUMER".to_vec(), key.to_vec(), group.to_vec(), consumer.to_vec()]
}

/// The consumer `name` of `g`, created if missing, seen now (XCLAIM, XAUTOCLAIM); true when
/// it was created.
pub(super) fn consumer_seen(g: &mut Group, name: &[u8], now: i64, tracks_activity: bool) -> bool {
    match g.consumers.get_mut(name) {
        Some(c) => {
            c.seen_time = now;
            false
        }
        None => {
            g.consumers.insert(sds(name), Consumer::new(now, tracks_activity));
            true
        }
    }
}

/// Whether consumers keep when they last got an entry (Redis 7.2's active-time).
pub(super) fn tracks_activity(ctx: &Ctx<'_>) -> bool {
    ctx.cfg.version.behaves_as() >= ServerVersion::Redis72
}
