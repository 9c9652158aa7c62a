//! Stream commands (Redis 7.0).
//!
//! XREAD / XREADGROUP answer at once here, with the data available or a null array (as
//! Redis answers inside MULTI); the server parks clients that asked to BLOCK
//! (server/src/cmd/xread.rs) and wakes them when the stream changes.

use super::flags::*;
use super::{arg_i64, eq_ic, err_arg, notify, parse_i64, Ctx, ExpireMode, Reply, Spec};
use crate::format::rdb::StreamId;
use crate::value::stream::{id_decr, id_incr, Consumer, Fields, Group, Nack, MAX_ID, MIN_ID};
use crate::value::{sds, Stream, Value};

pub const SPECS: &[Spec] = &[
    Spec::new("xadd", -5, WRITE | DENYOOM | FAST, (1, 1, 1), xadd),
    Spec::new("xlen", 2, READONLY | FAST, (1, 1, 1), xlen),
    Spec::new("xrange", -4, READONLY, (1, 1, 1), xrange),
    Spec::new("xrevrange", -4, READONLY, (1, 1, 1), xrevrange),
    Spec::new("xdel", -3, WRITE | FAST, (1, 1, 1), xdel),
    Spec::new("xtrim", -4, WRITE, (1, 1, 1), xtrim),
    Spec::new("xsetid", -3, WRITE | DENYOOM | FAST, (1, 1, 1), xsetid),
    Spec::new("xread", -4, READONLY | BLOCKING, (0, 0, 0), xread).movable(xread_keys),
    Spec::new("xreadgroup", -7, WRITE | BLOCKING, (0, 0, 0), xread).movable(xread_keys),
    // Containers: Redis declares flags and keys per subcommand and none on the command.
    Spec { keys: Some(subcommand_key), ..Spec::new("xgroup", -2, 0, (0, 0, 0), xgroup) },
    Spec::new("xack", -4, WRITE | FAST, (1, 1, 1), xack),
    Spec::new("xpending", -3, READONLY, (1, 1, 1), xpending),
    Spec::new("xclaim", -6, WRITE | FAST, (1, 1, 1), xclaim),
    Spec::new("xautoclaim", -6, WRITE | FAST, (1, 1, 1), xautoclaim),
    Spec { keys: Some(subcommand_key), ..Spec::new("xinfo", -2, 0, (0, 0, 0), xinfo) },
];

/// The keys of XREAD / XREADGROUP: the first half of what follows STREAMS.
fn xread_keys(a: &[Vec<u8>]) -> Vec<usize> {
    let Some(pos) = a.iter().skip(1).position(|x| eq_ic(x, "streams")) else {
        return Vec::new();
    };
    let first = pos + 2;
    let n = (a.len() - first) / 2;
    (first..first + n).collect()
}

/// The key of XGROUP / XINFO subcommands (all but HELP): the argument after the name.
fn subcommand_key(a: &[Vec<u8>]) -> Vec<usize> {
    if a.len() > 2 && !eq_ic(&a[1], "help") {
        vec![2]
    } else {
        Vec::new()
    }
}

// ------------------------------------------------------------------ helpers

fn invalid_id() -> Reply {
    Reply::err("ERR Invalid stream ID specified as stream command argument")
}

fn no_such_key() -> Reply {
    Reply::err("ERR no such key")
}

/// strtoull over the whole string: optional leading spaces and sign, digits, nothing after;
/// a minus sign wraps; overflow fails.
fn strtoull(b: &[u8]) -> Option<u64> {
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
fn parse_id_generic(b: &[u8], missing_seq: u64, strict: bool, seq_star: bool) -> Option<(StreamId, bool)> {
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

fn parse_id(b: &[u8], missing_seq: u64) -> Result<StreamId, Reply> {
    parse_id_generic(b, missing_seq, false, false).map(|x| x.0).ok_or_else(invalid_id)
}

fn parse_strict_id(b: &[u8], missing_seq: u64) -> Result<StreamId, Reply> {
    parse_id_generic(b, missing_seq, true, false).map(|x| x.0).ok_or_else(invalid_id)
}

/// A range bound: `(id` excludes it (moved by one here), otherwise as parse_id.
fn parse_interval(b: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, Reply> {
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

fn id_bulk(id: StreamId) -> Reply {
    Reply::Bulk(id.to_string().into_bytes())
}

fn id_arg(id: StreamId) -> Vec<u8> {
    id.to_string().into_bytes()
}

fn entry_reply(id: StreamId, fields: &Fields) -> Reply {
    let mut fv = Vec::with_capacity(fields.len() * 2);
    for (f, v) in fields {
        fv.push(Reply::bulk(f));
        fv.push(Reply::bulk(v));
    }
    Reply::Array(vec![id_bulk(id), Reply::Array(fv)])
}

fn read_stream<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Stream>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

fn write_stream<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Stream>, Reply> {
    match ctx.lookup_write(key) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

/// A command whose source must be obeyed (AOF loading, a master): no trimming LIMIT.
fn obeys_source(ctx: &Ctx<'_>) -> bool {
    ctx.mode != ExpireMode::Master
}

fn subcommand_syntax(a: &[Vec<u8>]) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        err_arg(&a[1], 128),
        String::from_utf8_lossy(&a[0]).to_ascii_uppercase()
    ))
}

/// A container command's subcommand check: unknown names and arity, as Redis's table does.
fn check_subcommand(a: &[Vec<u8>], table: &[(&str, i32)]) -> Result<String, Reply> {
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

fn help_reply(cmd: &str, lines: &[&'static str]) -> Reply {
    let mut out = vec![Reply::Simple(format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").into())];
    out.extend(lines.iter().map(|l| Reply::simple(l)));
    out.push(Reply::simple("HELP"));
    out.push(Reply::simple("    Prints this help."));
    Reply::Array(out)
}

// ------------------------------------------------------------------ XADD / XTRIM

/// Trimming (and for XADD, ID) arguments.
#[derive(Default)]
struct AddTrimArgs {
    maxlen: Option<u64>,
    minid: Option<StreamId>,
    approx: bool,
    limit: u64,
    /// Position of the MAXLEN / MINID value (for rewriting an approximate trim).
    strategy_idx: usize,
    nomkstream: bool,
    /// XADD: the explicit ID and whether its sequence was given.
    id: Option<(StreamId, bool)>,
    id_pos: usize,
}

impl AddTrimArgs {
    fn trims(&self) -> bool {
        self.maxlen.is_some() || self.minid.is_some()
    }
}

const STRATEGY_CLASH: &str = "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";

fn parse_add_trim(ctx: &Ctx<'_>, a: &[Vec<u8>], xadd: bool) -> Result<AddTrimArgs, Reply> {
    let mut t = AddTrimArgs::default();
    let mut limit_given = false;
    let mut limit: i64 = 0;
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i];
        if xadd && opt.as_slice() == b"*" {
            break;
        } else if (eq_ic(opt, "maxlen") || eq_ic(opt, "minid")) && more > 0 {
            if t.trims() {
                return Err(Reply::err(STRATEGY_CLASH));
            }
            t.approx = false;
            let next = &a[i + 1];
            if more >= 2 && next.as_slice() == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next.as_slice() == b"=" {
                i += 1;
            }
            if eq_ic(opt, "maxlen") {
                let n = arg_i64(&a[i + 1])?;
                if n < 0 {
                    return Err(Reply::err("ERR The MAXLEN argument must be >= 0."));
                }
                t.maxlen = Some(n as u64);
            } else {
                t.minid = Some(parse_strict_id(&a[i + 1], 0)?);
            }
            i += 1;
            t.strategy_idx = i;
        } else if eq_ic(opt, "limit") && more > 0 {
            limit = arg_i64(&a[i + 1])?;
            if limit < 0 {
                return Err(Reply::err("ERR The LIMIT argument must be >= 0."));
            }
            limit_given = true;
            i += 1;
        } else if xadd && eq_ic(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            let id = parse_id_generic(opt, 0, true, true).ok_or_else(invalid_id)?;
            t.id = Some(id);
            break;
        } else {
            return Err(Reply::syntax());
        }
        i += 1;
    }
    t.id_pos = i;
    if limit != 0 && !t.trims() {
        return Err(Reply::err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && !t.trims() {
        return Err(Reply::err("ERR syntax error, XTRIM must be called with a trimming strategy"));
    }
    if obeys_source(ctx) {
        t.limit = 0;
    } else if limit_given {
        if !t.approx {
            return Err(Reply::err("ERR syntax error, LIMIT cannot be used without the special ~ option"));
        }
        t.limit = limit as u64;
    } else if t.approx {
        let l = 100 * ctx.cfg.limits.stream_node_max_entries as u64;
        t.limit = if l == 0 { 10_000 } else { l.min(1_000_000) };
    }
    Ok(t)
}

/// After an approximate trim, propagate the exact effect: `=` and the resulting length
/// or first ID.
fn rewrite_trim(argv: &mut [Vec<u8>], t: &AddTrimArgs, s: &Stream) {
    if !t.approx {
        return;
    }
    argv[t.strategy_idx - 1] = b"=".to_vec();
    argv[t.strategy_idx] =
        if t.maxlen.is_some() { s.len().to_string().into_bytes() } else { id_arg(s.first_id_with_tombstones()) };
}

fn xadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let t = match parse_add_trim(ctx, a, true) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let field_pos = t.id_pos + 1;
    if a.len() < field_pos + 2 || (a.len() - field_pos) % 2 == 1 {
        return Reply::err("ERR wrong number of arguments for 'xadd' command");
    }
    if let Some((id, true)) = t.id {
        if id == MIN_ID {
            return Reply::err("ERR The ID specified in XADD must be greater than 0-0");
        }
    }
    let key = &a[1];
    let (now, limits) = (ctx.now, ctx.cfg.limits);
    match write_stream(ctx, key) {
        Err(e) => return e,
        Ok(None) if t.nomkstream => return Reply::Nil,
        Ok(None) => ctx.db_add(key, Value::Stream(Box::default())),
        Ok(Some(_)) => {}
    }
    let Some(Value::Stream(s)) = ctx.lookup_write(key) else {
        return Reply::wrongtype();
    };
    if s.last_id == MAX_ID {
        return Reply::err("ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    let too_small = || Reply::err("ERR The ID specified in XADD is equal or smaller than the target stream top item");
    let id = match t.id {
        Some((id, true)) => id,
        Some((id, false)) if id.ms == s.last_id.ms => match id_incr(s.last_id) {
            Some(n) if s.last_id.seq < u64::MAX => n,
            _ => return too_small(),
        },
        Some((id, false)) => id,
        None if now >= 0 && now as u64 > s.last_id.ms => StreamId { ms: now as u64, seq: 0 },
        None => match id_incr(s.last_id) {
            Some(n) => n,
            None => return too_small(),
        },
    };
    if id <= s.last_id {
        return too_small();
    }
    let total: usize = a[field_pos..].iter().map(Vec::len).sum();
    if total > (1 << 30) {
        return Reply::err("ERR Elements are too large to be stored");
    }
    let fields: Fields = a[field_pos..].chunks_exact(2).map(|p| (sds(&p[0]), sds(&p[1]))).collect();
    s.append(id, fields, &limits);
    let trimmed = if t.trims() { s.trim(t.maxlen, t.minid, t.approx, t.limit) } else { 0 };
    let mut argv = a.to_vec();
    let mut rewritten = false;
    if t.trims() && t.approx {
        rewrite_trim(&mut argv, &t, s);
        rewritten = true;
    }
    if !matches!(t.id, Some((_, true))) {
        argv[t.id_pos] = id_arg(id);
        rewritten = true;
    }
    ctx.signal_modified(key);
    ctx.notify(notify::STREAM, "xadd", key);
    ctx.dirty += 1;
    if trimmed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    if rewritten {
        ctx.rewrite(argv);
    }
    id_bulk(id)
}

fn xtrim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let t = match parse_add_trim(ctx, a, false) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let key = &a[1];
    let s = match write_stream(ctx, key) {
        Err(e) => return e,
        Ok(None) => return Reply::Int(0),
        Ok(Some(s)) => s,
    };
    let deleted = s.trim(t.maxlen, t.minid, t.approx, t.limit);
    if deleted > 0 {
        let mut argv = a.to_vec();
        rewrite_trim(&mut argv, &t, s);
        ctx.notify(notify::STREAM, "xtrim", key);
        if t.approx {
            ctx.rewrite(argv);
        }
        ctx.signal_modified(key);
        ctx.dirty += deleted;
    }
    Reply::Int(deleted as i64)
}

// ------------------------------------------------------------------ reads

fn xlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_stream(ctx, &a[1]) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(s)) => Reply::Int(s.len() as i64),
    }
}

fn xrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    range_generic(ctx, a, false)
}

fn xrevrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    range_generic(ctx, a, true)
}

fn range_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], rev: bool) -> Reply {
    let (start_arg, end_arg) = if rev { (&a[3], &a[2]) } else { (&a[2], &a[3]) };
    let start = match parse_interval(start_arg, 0, true) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let end = match parse_interval(end_arg, u64::MAX, false) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < a.len() {
        if eq_ic(&a[j], "count") && j + 1 < a.len() {
            count = match arg_i64(&a[j + 1]) {
                Ok(c) => c.max(0),
                Err(e) => return e,
            };
            j += 2;
        } else {
            return Reply::syntax();
        }
    }
    let s = match read_stream(ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Array(Vec::new()),
        Ok(Some(s)) => s,
    };
    if count == 0 {
        return Reply::NilArray;
    }
    let limit = if count < 0 { usize::MAX } else { count as usize };
    let it = s.range(start, end);
    let out: Vec<Reply> = if rev {
        it.rev().take(limit).map(|(id, f)| entry_reply(*id, f)).collect()
    } else {
        it.take(limit).map(|(id, f)| entry_reply(*id, f)).collect()
    };
    Reply::Array(out)
}

/// The options of XREAD / XREADGROUP, up to STREAMS (the server blocks with them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// BLOCK's milliseconds (0: forever), when given.
    pub block_ms: Option<i64>,
    /// COUNT (0: no limit).
    pub count: usize,
    /// XREADGROUP's GROUP group consumer.
    pub group: Option<(Vec<u8>, Vec<u8>)>,
    pub noack: bool,
    /// Where the keys start; the IDs follow them, as many.
    pub streams_arg: usize,
}

impl ReadOptions {
    /// The number of streams read.
    pub fn streams(&self, argc: usize) -> usize {
        (argc - self.streams_arg) / 2
    }
}

/// Parse XREAD [COUNT n] [BLOCK ms] STREAMS key.. id.. and XREADGROUP GROUP g c [COUNT n]
/// [BLOCK ms] [NOACK] STREAMS key.. id.. up to the IDs, with Redis's errors in its order.
/// `from_script`: BLOCK is refused, as Redis 7.0 refuses it to scripts.
pub fn parse_read_options(a: &[Vec<u8>], from_script: bool) -> Result<ReadOptions, Reply> {
    let group_read = a[0].len() == 10;
    let mut o = ReadOptions::default();
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i];
        if eq_ic(opt, "block") && more > 0 {
            if from_script {
                return Err(Reply::error(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&a[0])
                )));
            }
            i += 1;
            match parse_i64(&a[i]) {
                None => return Err(Reply::err("ERR timeout is not an integer or out of range")),
                Some(t) if t < 0 => return Err(Reply::err("ERR timeout is negative")),
                Some(t) => o.block_ms = Some(t),
            }
        } else if eq_ic(opt, "count") && more > 0 {
            i += 1;
            o.count = arg_i64(&a[i])?.max(0) as usize;
        } else if eq_ic(opt, "streams") && more > 0 {
            o.streams_arg = i + 1;
            if !(a.len() - o.streams_arg).is_multiple_of(2) {
                return Err(Reply::err(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if eq_ic(opt, "group") && more >= 2 {
            if !group_read {
                return Err(Reply::err(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            o.group = Some((a[i + 1].clone(), a[i + 2].clone()));
            i += 2;
        } else if eq_ic(opt, "noack") {
            if !group_read {
                return Err(Reply::err(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            o.noack = true;
        } else {
            return Err(Reply::syntax());
        }
        i += 1;
    }
    if o.streams_arg == 0 {
        return Err(Reply::syntax());
    }
    if group_read && o.group.is_none() {
        return Err(Reply::err("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(o)
}

/// An explicit XREAD ID (`ms` or `ms-seq`; not `$` or `>`).
pub fn parse_read_id(b: &[u8]) -> Option<StreamId> {
    parse_id_generic(b, 0, true, false).map(|x| x.0)
}

/// XREAD / XREADGROUP served at once: the entries there are, or a null array. With BLOCK
/// the server parks the client when the answer is the null array (server/src/cmd/xread.rs).
fn xread(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let group_read = a[0].len() == 10;
    let opts = match parse_read_options(a, ctx.fx.from_script) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (count, noack, streams_arg) = (opts.count, opts.noack, opts.streams_arg);
    let group_names: Option<(&[u8], &[u8])> = opts.group.as_ref().map(|(g, c)| (g.as_slice(), c.as_slice()));
    let n = (a.len() - streams_arg) / 2;
    let mut ids = Vec::with_capacity(n);
    for k in 0..n {
        let key = &a[streams_arg + k];
        let arg = &a[streams_arg + n + k];
        let s = match read_stream(ctx, key) {
            Err(e) => return e,
            Ok(s) => s,
        };
        if let Some((g, _)) = group_names {
            if s.as_ref().is_none_or(|s| !s.groups.contains_key(g)) {
                return Reply::error(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    err_arg(key, usize::MAX),
                    err_arg(g, usize::MAX)
                ));
            }
        }
        if arg.as_slice() == b"$" {
            if group_read {
                return Reply::err(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of \
                     this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would \
                     just return an empty result set.",
                );
            }
            ids.push(s.map_or(MIN_ID, |s| s.last_id));
        } else if arg.as_slice() == b">" {
            if !group_read {
                return Reply::err(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> \
                     option.",
                );
            }
            ids.push(MAX_ID);
        } else {
            match parse_strict_id(arg, 0) {
                Ok(id) => ids.push(id),
                Err(e) => return e,
            }
        }
    }
    let mut out = Vec::new();
    for (k, &gt) in ids.iter().enumerate() {
        let key = &a[streams_arg + k];
        let served = match group_names {
            Some((g, c)) => read_group(ctx, key, g, c, gt, count, noack),
            None => read_plain(ctx, key, gt, count),
        };
        if let Some(entries) = served {
            out.push((Reply::bulk(key), entries));
        }
    }
    ctx.suppress_propagation();
    if out.is_empty() {
        Reply::NilArray
    } else {
        Reply::KeyedArrays(out)
    }
}

/// XREAD of one stream: entries after `gt`, or None when there are none.
fn read_plain(ctx: &mut Ctx<'_>, key: &[u8], gt: StreamId, count: usize) -> Option<Reply> {
    let Ok(Some(s)) = read_stream(ctx, key) else { return None };
    let last = s.last_entry().map(|(id, _)| *id)?;
    if last <= gt {
        return None;
    }
    let start = id_incr(gt).unwrap_or(MIN_ID);
    let limit = if count == 0 { usize::MAX } else { count };
    Some(Reply::Array(s.range(start, MAX_ID).take(limit).map(|(id, f)| entry_reply(*id, f)).collect()))
}

/// XREADGROUP of one stream: new entries (`gt` = `>`) or the consumer's pending history.
fn read_group(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    gt: StreamId,
    count: usize,
    noack: bool,
) -> Option<Reply> {
    let now = ctx.now;
    let Ok(Some(s)) = read_stream(ctx, key) else { return None };
    let history = gt != MAX_ID;
    let g = s.groups.get(group)?;
    let gt = if history {
        gt
    } else {
        let last = s.last_entry().map(|(id, _)| *id)?;
        if last <= g.last_id {
            return None;
        }
        g.last_id
    };
    let mut events: Vec<&'static str> = Vec::new();
    let mut props: Vec<Vec<Vec<u8>>> = Vec::new();
    let limit = if count == 0 { usize::MAX } else { count };
    let start = id_incr(gt).unwrap_or(MIN_ID);
    let reply;
    {
        let s: &mut Stream = s;
        let mut g = s.groups.remove(group)?;
        match g.consumers.get_mut(consumer) {
            Some(c) => c.seen_time = now,
            None => {
                g.consumers.insert(sds(consumer), Consumer::new(now));
                events.push("xgroup-createconsumer");
                if noack {
                    props.push(vec![
                        b"XGROUP".to_vec(),
                        b"CREATECONSUMER".to_vec(),
                        key.to_vec(),
                        group.to_vec(),
                        consumer.to_vec(),
                    ]);
                }
            }
        }
        if history {
            let ids: Vec<StreamId> = g
                .consumers
                .get(consumer)
                .map(|c| c.pel.range(start..).take(limit).copied().collect())
                .unwrap_or_default();
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                match s.get(id) {
                    Some(f) => {
                        out.push(entry_reply(id, f));
                        if let Some(n) = g.pel.get_mut(&id) {
                            n.delivery_time = now;
                            n.delivery_count = n.delivery_count.wrapping_add(1);
                        }
                    }
                    None => out.push(Reply::Array(vec![id_bulk(id), Reply::NilArray])),
                }
            }
            reply = Reply::Array(out);
        } else {
            let served: Vec<StreamId> = s.range(start, MAX_ID).take(limit).map(|(id, _)| *id).collect();
            let mut out = Vec::with_capacity(served.len());
            let mut moved = false;
            for id in served {
                if id > g.last_id {
                    if g.entries_read != -1 && !s.range_has_tombstones(id, MAX_ID) {
                        g.entries_read = g.entries_read.wrapping_add(1);
                    } else if s.entries_added > 0 {
                        g.entries_read = s.estimate_distance(id).unwrap_or(-1);
                    }
                    g.last_id = id;
                    moved = true;
                }
                if let Some(f) = s.get(id) {
                    out.push(entry_reply(id, f));
                }
                if !noack {
                    match g.pel.get_mut(&id) {
                        Some(n) => {
                            n.delivery_time = now;
                            n.delivery_count = 1;
                        }
                        None => {
                            g.pel.insert(id, Nack { delivery_time: now, delivery_count: 1, consumer: None });
                        }
                    }
                    g.assign(id, consumer);
                    if let Some(n) = g.pel.get(&id) {
                        props.push(xclaim_argv(key, group, consumer, &id_arg(id), n, g.last_id));
                    }
                }
            }
            if noack && moved {
                props.push(setid_argv(key, group, &g));
            }
            reply = Reply::Array(out);
        }
        s.groups.insert(sds(group), g);
    }
    for e in events {
        ctx.notify(notify::STREAM, e, key);
    }
    for p in props {
        ctx.propagate(p);
    }
    ctx.dirty += 1;
    Some(reply)
}

/// The XCLAIM Redis propagates for a pending entry's new state.
fn xclaim_argv(key: &[u8], group: &[u8], consumer: &[u8], id: &[u8], n: &Nack, last_id: StreamId) -> Vec<Vec<u8>> {
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

fn setid_argv(key: &[u8], group: &[u8], g: &Group) -> Vec<Vec<u8>> {
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

// ------------------------------------------------------------------ XDEL / XSETID

fn xdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let s = match write_stream(ctx, key) {
        Err(e) => return e,
        Ok(None) => return Reply::Int(0),
        Ok(Some(s)) => s,
    };
    let mut ids = Vec::with_capacity(a.len() - 2);
    for arg in &a[2..] {
        match parse_strict_id(arg, 0) {
            Ok(id) => ids.push(id),
            Err(e) => return e,
        }
    }
    let mut deleted = 0u64;
    let mut first_entry = false;
    for id in ids {
        if s.delete(id) {
            if id == s.first_id {
                first_entry = true;
            }
            if id > s.max_deleted_id {
                s.max_deleted_id = id;
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.is_empty() {
            s.first_id = MIN_ID;
        } else if first_entry {
            s.refresh_first_id();
        }
        ctx.signal_modified(key);
        ctx.notify(notify::STREAM, "xdel", key);
        ctx.dirty += deleted;
    }
    Reply::Int(deleted as i64)
}

fn xsetid(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let id = match parse_strict_id(&a[2], 0) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let mut entries_added: i64 = -1;
    let mut max_deleted = MIN_ID;
    let mut i = 3;
    while i < a.len() {
        let more = a.len() - 1 - i;
        if eq_ic(&a[i], "entriesadded") && more > 0 {
            entries_added = match arg_i64(&a[i + 1]) {
                Ok(n) if n < 0 => return Reply::err("ERR entries_added must be positive"),
                Ok(n) => n,
                Err(e) => return e,
            };
        } else if eq_ic(&a[i], "maxdeletedid") && more > 0 {
            max_deleted = match parse_strict_id(&a[i + 1], 0) {
                Ok(m) => m,
                Err(e) => return e,
            };
            if id < max_deleted {
                return Reply::err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
            }
        } else {
            return Reply::syntax();
        }
        i += 2;
    }
    let key = &a[1];
    let s = match write_stream(ctx, key) {
        Err(e) => return e,
        Ok(None) => return no_such_key(),
        Ok(Some(s)) => s,
    };
    if let Some((&top, _)) = s.last_entry() {
        if id < top {
            return Reply::err("ERR The ID specified in XSETID is smaller than the target stream top item");
        }
        if entries_added != -1 && s.len() as i64 > entries_added {
            return Reply::err("ERR The entries_added specified in XSETID is smaller than the target stream length");
        }
    }
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
    }
    if max_deleted != MIN_ID {
        s.max_deleted_id = max_deleted;
    }
    ctx.dirty += 1;
    ctx.notify(notify::STREAM, "xsetid", key);
    Reply::ok()
}

// ------------------------------------------------------------------ XGROUP

const XGROUP_SUBCOMMANDS: &[(&str, i32)] =
    &[("create", -5), ("setid", -5), ("destroy", 4), ("createconsumer", 5), ("delconsumer", 5), ("help", 2)];

const XGROUP_HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

fn xgroup(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let sub = match check_subcommand(a, XGROUP_SUBCOMMANDS) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if sub == "help" {
        return help_reply("XGROUP", XGROUP_HELP);
    }
    let mut mkstream = false;
    let mut entries_read: i64 = -1;
    let mut i = 5;
    while i < a.len() {
        if sub == "create" && eq_ic(&a[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if (sub == "create" || sub == "setid") && eq_ic(&a[i], "entriesread") && i + 1 < a.len() {
            entries_read = match arg_i64(&a[i + 1]) {
                Ok(n) if n < 0 && n != -1 => return Reply::err("ERR value for ENTRIESREAD must be positive or -1"),
                Ok(n) => n,
                Err(e) => return e,
            };
            i += 2;
        } else {
            return subcommand_syntax(a);
        }
    }
    let (key, group) = (&a[2], &a[3]);
    let exists = match write_stream(ctx, key) {
        Err(e) => return e,
        Ok(s) => s.map(|s| s.groups.contains_key(group.as_slice())),
    };
    if !mkstream {
        let Some(has_group) = exists else {
            return Reply::err(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use \
                 the MKSTREAM option to create an empty stream automatically.",
            );
        };
        if !has_group && matches!(sub.as_str(), "setid" | "createconsumer" | "delconsumer") {
            return Reply::error(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                err_arg(group, usize::MAX),
                err_arg(key, usize::MAX)
            ));
        }
    }
    match sub.as_str() {
        "create" if a.len() <= 8 => xgroup_create(ctx, a, exists.is_some(), entries_read),
        "setid" if a.len() == 5 || a.len() == 7 => xgroup_setid(ctx, a, entries_read),
        "destroy" => xgroup_destroy(ctx, a),
        "createconsumer" => xgroup_createconsumer(ctx, a),
        "delconsumer" => xgroup_delconsumer(ctx, a),
        _ => subcommand_syntax(a),
    }
}

/// The stream at `key`, which the caller checked exists.
fn existing<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Option<&'c mut Stream> {
    match ctx.lookup_write(key) {
        Some(Value::Stream(s)) => Some(s),
        _ => None,
    }
}

fn xgroup_create(ctx: &mut Ctx<'_>, a: &[Vec<u8>], exists: bool, entries_read: i64) -> Reply {
    let (key, group) = (&a[2], &a[3]);
    let id = if a[4].as_slice() == b"$" {
        if exists {
            existing(ctx, key).map_or(MIN_ID, |s| s.last_id)
        } else {
            MIN_ID
        }
    } else {
        match parse_strict_id(&a[4], 0) {
            Ok(id) => id,
            Err(e) => return e,
        }
    };
    if !exists {
        ctx.db_add(key, Value::Stream(Box::default()));
    }
    let Some(s) = existing(ctx, key) else { return Reply::wrongtype() };
    if s.groups.contains_key(group.as_slice()) {
        return Reply::err("BUSYGROUP Consumer Group name already exists");
    }
    s.groups.insert(sds(group), Group::new(id, entries_read));
    ctx.dirty += 1;
    ctx.notify(notify::STREAM, "xgroup-create", key);
    Reply::ok()
}

fn xgroup_setid(ctx: &mut Ctx<'_>, a: &[Vec<u8>], entries_read: i64) -> Reply {
    let (key, group) = (&a[2], &a[3]);
    let Some(s) = existing(ctx, key) else { return Reply::wrongtype() };
    let id = if a[4].as_slice() == b"$" {
        s.last_id
    } else {
        match parse_id(&a[4], 0) {
            Ok(id) => id,
            Err(e) => return e,
        }
    };
    let Some(g) = s.groups.get_mut(group.as_slice()) else { return Reply::wrongtype() };
    g.last_id = id;
    g.entries_read = entries_read;
    ctx.dirty += 1;
    ctx.notify(notify::STREAM, "xgroup-setid", key);
    Reply::ok()
}

fn xgroup_destroy(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, group) = (&a[2], &a[3]);
    let Some(s) = existing(ctx, key) else { return Reply::wrongtype() };
    if s.groups.remove(group.as_slice()).is_none() {
        return Reply::Int(0);
    }
    ctx.dirty += 1;
    ctx.notify(notify::STREAM, "xgroup-destroy", key);
    // Clients blocked in XREADGROUP on this group get NOGROUP.
    ctx.signal_ready(key);
    Reply::Int(1)
}

fn xgroup_createconsumer(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, group, consumer) = (&a[2], &a[3], &a[4]);
    let now = ctx.now;
    let Some(s) = existing(ctx, key) else { return Reply::wrongtype() };
    let Some(g) = s.groups.get_mut(group.as_slice()) else { return Reply::wrongtype() };
    if g.consumers.contains_key(consumer.as_slice()) {
        return Reply::Int(0);
    }
    g.consumers.insert(sds(consumer), Consumer::new(now));
    ctx.dirty += 1;
    ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    Reply::Int(1)
}

fn xgroup_delconsumer(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, group, consumer) = (&a[2], &a[3], &a[4]);
    let Some(s) = existing(ctx, key) else { return Reply::wrongtype() };
    let Some(g) = s.groups.get_mut(group.as_slice()) else { return Reply::wrongtype() };
    let Some(c) = g.consumers.remove(consumer.as_slice()) else { return Reply::Int(0) };
    for id in &c.pel {
        g.pel.remove(id);
    }
    ctx.dirty += 1;
    ctx.notify(notify::STREAM, "xgroup-delconsumer", key);
    Reply::Int(c.pel.len() as i64)
}

// ------------------------------------------------------------------ XACK / XPENDING

fn xack(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let s = match read_stream(ctx, &a[1]) {
        Err(e) => return e,
        Ok(s) => s,
    };
    let Some(g) = s.and_then(|s| s.groups.get_mut(a[2].as_slice())) else {
        return Reply::Int(0);
    };
    let mut ids = Vec::with_capacity(a.len() - 3);
    for arg in &a[3..] {
        match parse_strict_id(arg, 0) {
            Ok(id) => ids.push(id),
            Err(e) => return e,
        }
    }
    let acked = ids.into_iter().filter(|id| g.remove_nack(*id).is_some()).count();
    ctx.dirty += acked as u64;
    Reply::Int(acked as i64)
}

fn nogroup(key: &[u8], group: &[u8]) -> Reply {
    Reply::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        err_arg(key, usize::MAX),
        err_arg(group, usize::MAX)
    ))
}

fn xpending(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let summary = a.len() == 3;
    if a.len() != 3 && !(6..=9).contains(&a.len()) {
        return Reply::syntax();
    }
    let (mut start, mut end, mut count, mut min_idle) = (MIN_ID, MAX_ID, 0i64, 0i64);
    let mut consumer: Option<&[u8]> = None;
    if !summary {
        let mut at = 3;
        if eq_ic(&a[3], "idle") {
            min_idle = match arg_i64(&a[4]) {
                Ok(n) => n,
                Err(e) => return e,
            };
            if a.len() < 8 {
                return Reply::syntax();
            }
            at += 2;
        }
        count = match arg_i64(&a[at + 2]) {
            Ok(n) => n.max(0),
            Err(e) => return e,
        };
        start = match parse_interval(&a[at], 0, true) {
            Ok(i) => i,
            Err(e) => return e,
        };
        end = match parse_interval(&a[at + 1], u64::MAX, false) {
            Ok(i) => i,
            Err(e) => return e,
        };
        consumer = a.get(at + 3).map(Vec::as_slice);
    }
    let now = ctx.now;
    let s = match read_stream(ctx, &a[1]) {
        Err(e) => return e,
        Ok(s) => s,
    };
    let Some(g) = s.and_then(|s| s.groups.get(a[2].as_slice())) else {
        return nogroup(&a[1], &a[2]);
    };
    if summary {
        let (Some(first), Some(last)) = (g.pel.keys().next(), g.pel.keys().next_back()) else {
            return Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::NilArray]);
        };
        let owners = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(n, c)| Reply::Array(vec![Reply::bulk(n), Reply::Bulk(c.pel.len().to_string().into_bytes())]))
            .collect();
        return Reply::Array(vec![
            Reply::Int(g.pel.len() as i64),
            id_bulk(*first),
            id_bulk(*last),
            Reply::Array(owners),
        ]);
    }
    let ids: Box<dyn Iterator<Item = StreamId> + '_> = match consumer {
        Some(name) => match g.consumers.get(name) {
            None => return Reply::Array(Vec::new()),
            Some(c) if start <= end => Box::new(c.pel.range(start..=end).copied()),
            Some(_) => Box::new(std::iter::empty()),
        },
        None if start <= end => Box::new(g.pel.range(start..=end).map(|(k, _)| *k)),
        None => Box::new(std::iter::empty()),
    };
    let mut out = Vec::new();
    for id in ids {
        if count == 0 {
            break;
        }
        let Some(n) = g.pel.get(&id) else { continue };
        let idle = now.saturating_sub(n.delivery_time);
        if min_idle != 0 && idle < min_idle {
            continue;
        }
        count -= 1;
        out.push(Reply::Array(vec![
            id_bulk(id),
            Reply::bulk(n.consumer.as_deref().unwrap_or_default()),
            Reply::Int(idle.max(0)),
            Reply::Int(n.delivery_count as i64),
        ]));
    }
    Reply::Array(out)
}

// ------------------------------------------------------------------ XCLAIM / XAUTOCLAIM

fn xclaim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, group, name) = (&a[1], &a[2], &a[3]);
    match read_stream(ctx, key) {
        Err(e) => return e,
        Ok(s) if s.as_ref().is_none_or(|s| !s.groups.contains_key(group.as_slice())) => return nogroup(key, group),
        Ok(_) => {}
    }
    let min_idle = match parse_i64(&a[4]) {
        Some(n) => n.max(0),
        None => return Reply::err("ERR Invalid min-idle-time argument for XCLAIM"),
    };
    let mut j = 5;
    let mut ids = Vec::new();
    while j < a.len() {
        match parse_strict_id(&a[j], 0) {
            Ok(id) => ids.push((id, j)),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now;
    let (mut force, mut justid) = (false, false);
    let mut retry: i64 = -1;
    let mut delivery: i64 = -1;
    let mut last_id = MIN_ID;
    while j < a.len() {
        let more = a.len() - 1 - j;
        let opt = &a[j];
        let num = |b: &[u8], what: &str| {
            parse_i64(b).ok_or_else(|| Reply::error(format!("ERR Invalid {what} option argument for XCLAIM")))
        };
        if eq_ic(opt, "force") {
            force = true;
        } else if eq_ic(opt, "justid") {
            justid = true;
        } else if eq_ic(opt, "idle") && more > 0 {
            j += 1;
            delivery = match num(&a[j], "IDLE") {
                Ok(n) => now.wrapping_sub(n),
                Err(e) => return e,
            };
        } else if eq_ic(opt, "time") && more > 0 {
            j += 1;
            delivery = match num(&a[j], "TIME") {
                Ok(n) => n,
                Err(e) => return e,
            };
        } else if eq_ic(opt, "retrycount") && more > 0 {
            j += 1;
            retry = match num(&a[j], "RETRYCOUNT") {
                Ok(n) => n,
                Err(e) => return e,
            };
        } else if eq_ic(opt, "lastid") && more > 0 {
            j += 1;
            last_id = match parse_strict_id(&a[j], 0) {
                Ok(id) => id,
                Err(e) => return e,
            };
        } else {
            return Reply::error(format!("ERR Unrecognized XCLAIM option '{}'", err_arg(opt, usize::MAX)));
        }
        j += 1;
    }
    let delivery = if delivery < 0 || delivery > now { now } else { delivery };
    let Ok(Some(s)) = read_stream(ctx, key) else { return nogroup(key, group) };
    let Some(mut g) = s.groups.remove(group.as_slice()) else { return nogroup(key, group) };
    let mut propagate_last_id = false;
    if last_id > g.last_id {
        g.last_id = last_id;
        propagate_last_id = true;
    }
    let mut props = Vec::new();
    let mut created = false;
    let mut have_consumer = false;
    let mut out = Vec::new();
    let mut dirty = 0u64;
    for (id, pos) in ids {
        if !s.contains(id) {
            if let Some(n) = g.pel.get(&id) {
                let owner = n.consumer.clone().unwrap_or_default();
                props.push(xclaim_argv(key, group, &owner, &a[pos], n, g.last_id));
                propagate_last_id = false;
                dirty += 1;
                g.remove_nack(id);
            }
            continue;
        }
        if force && !g.pel.contains_key(&id) {
            g.pel.insert(id, Nack { delivery_time: now, delivery_count: 1, consumer: None });
        }
        let Some(n) = g.pel.get(&id) else { continue };
        if n.consumer.is_some() && min_idle != 0 && now.saturating_sub(n.delivery_time) < min_idle {
            continue;
        }
        if !have_consumer {
            have_consumer = true;
            if consumer_seen(&mut g, name, now) {
                created = true;
                dirty += 1;
            }
        }
        g.assign(id, name);
        let Some(n) = g.pel.get_mut(&id) else { continue };
        n.delivery_time = delivery;
        if retry >= 0 {
            n.delivery_count = retry as u64;
        } else if !justid {
            n.delivery_count = n.delivery_count.wrapping_add(1);
        }
        if justid {
            out.push(id_bulk(id));
        } else if let Some(f) = s.get(id) {
            out.push(entry_reply(id, f));
        }
        props.push(xclaim_argv(key, group, name, &a[pos], n, g.last_id));
        propagate_last_id = false;
        dirty += 1;
    }
    if propagate_last_id {
        props.push(setid_argv(key, group, &g));
        dirty += 1;
    }
    s.groups.insert(sds(group), g);
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.suppress_propagation();
    for p in props {
        ctx.propagate(p);
    }
    ctx.dirty += dirty;
    Reply::Array(out)
}

fn xautoclaim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, group, name) = (&a[1], &a[2], &a[3]);
    let min_idle = match parse_i64(&a[4]) {
        Some(n) => n.max(0),
        None => return Reply::err("ERR Invalid min-idle-time argument for XAUTOCLAIM"),
    };
    let start = match parse_interval(&a[5], 0, true) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < a.len() {
        let more = a.len() - 1 - j;
        if eq_ic(&a[j], "count") && more > 0 {
            count = match parse_i64(&a[j + 1]) {
                Some(n) if (1..=i64::MAX / 16).contains(&n) => n,
                _ => return Reply::err("ERR COUNT must be > 0"),
            };
            j += 1;
        } else if eq_ic(&a[j], "justid") {
            justid = true;
        } else {
            return Reply::syntax();
        }
        j += 1;
    }
    let now = ctx.now;
    let s = match read_stream(ctx, key) {
        Err(e) => return e,
        Ok(Some(s)) if s.groups.contains_key(group.as_slice()) => s,
        Ok(_) => return nogroup(key, group),
    };
    let Some(mut g) = s.groups.remove(group.as_slice()) else { return nogroup(key, group) };
    let mut attempts = count.saturating_mul(10);
    let mut cursor = Some(start);
    let (mut out, mut deleted, mut props) = (Vec::new(), Vec::new(), Vec::new());
    let mut created = false;
    let mut have_consumer = false;
    let mut dirty = 0u64;
    while attempts > 0 && count > 0 {
        attempts -= 1;
        let Some(from) = cursor else { break };
        let Some(id) = g.pel.range(from..).next().map(|(k, _)| *k) else {
            cursor = None;
            break;
        };
        cursor = id_incr(id);
        if !s.contains(id) {
            if let Some(n) = g.pel.get(&id) {
                let owner = n.consumer.clone().unwrap_or_default();
                props.push(xclaim_argv(key, group, &owner, &id_arg(id), n, g.last_id));
            }
            dirty += 1;
            g.remove_nack(id);
            deleted.push(id_bulk(id));
            count -= 1;
            continue;
        }
        if min_idle != 0 && g.pel.get(&id).is_some_and(|n| now.saturating_sub(n.delivery_time) < min_idle) {
            continue;
        }
        if !have_consumer {
            have_consumer = true;
            if consumer_seen(&mut g, name, now) {
                created = true;
                dirty += 1;
            }
        }
        g.assign(id, name);
        let Some(n) = g.pel.get_mut(&id) else { continue };
        n.delivery_time = now;
        if !justid {
            n.delivery_count = n.delivery_count.wrapping_add(1);
        }
        if justid {
            out.push(id_bulk(id));
        } else if let Some(f) = s.get(id) {
            out.push(entry_reply(id, f));
        }
        count -= 1;
        props.push(xclaim_argv(key, group, name, &id_arg(id), n, g.last_id));
        dirty += 1;
    }
    let next = cursor.and_then(|c| g.pel.range(c..).next().map(|(k, _)| *k)).unwrap_or(MIN_ID);
    s.groups.insert(sds(group), g);
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.suppress_propagation();
    for p in props {
        ctx.propagate(p);
    }
    ctx.dirty += dirty;
    Reply::Array(vec![id_bulk(next), Reply::Array(out), Reply::Array(deleted)])
}

// ------------------------------------------------------------------ XINFO

const XINFO_SUBCOMMANDS: &[(&str, i32)] = &[("consumers", 4), ("groups", 3), ("stream", -3), ("help", 2)];

const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

fn field(name: &'static str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk(name.as_bytes()), v)
}

fn xinfo(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let sub = match check_subcommand(a, XINFO_SUBCOMMANDS) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if sub == "help" {
        return help_reply("XINFO", XINFO_HELP);
    }
    let now = ctx.now;
    let s = match read_stream(ctx, &a[2]) {
        Err(e) => return e,
        Ok(None) => return no_such_key(),
        Ok(Some(s)) => &*s,
    };
    match sub.as_str() {
        "consumers" => {
            let Some(g) = s.groups.get(a[3].as_slice()) else {
                return Reply::error(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    err_arg(&a[3], usize::MAX),
                    err_arg(&a[2], usize::MAX)
                ));
            };
            Reply::Array(
                g.consumers
                    .iter()
                    .map(|(n, c)| {
                        Reply::Map(vec![
                            field("name", Reply::bulk(n)),
                            field("pending", Reply::Int(c.pel.len() as i64)),
                            field("idle", Reply::Int(now.saturating_sub(c.seen_time).max(0))),
                        ])
                    })
                    .collect(),
            )
        }
        "groups" => Reply::Array(
            s.groups
                .iter()
                .map(|(n, g)| {
                    Reply::Map(vec![
                        field("name", Reply::bulk(n)),
                        field("consumers", Reply::Int(g.consumers.len() as i64)),
                        field("pending", Reply::Int(g.pel.len() as i64)),
                        field("last-delivered-id", id_bulk(g.last_id)),
                        field("entries-read", entries_read_reply(g)),
                        field("lag", s.group_lag(g).map_or(Reply::Nil, Reply::Int)),
                    ])
                })
                .collect(),
        ),
        _ => xinfo_stream(s, a),
    }
}

fn entries_read_reply(g: &Group) -> Reply {
    if g.entries_read == -1 {
        Reply::Nil
    } else {
        Reply::Int(g.entries_read)
    }
}

fn xinfo_stream(s: &Stream, a: &[Vec<u8>]) -> Reply {
    let opts = &a[3..];
    let mut count: i64 = 10;
    let full = !opts.is_empty();
    if full {
        if (opts.len() != 1 && opts.len() != 3) || !eq_ic(&opts[0], "full") {
            return subcommand_syntax(a);
        }
        if opts.len() == 3 {
            if !eq_ic(&opts[1], "count") {
                return subcommand_syntax(a);
            }
            count = match arg_i64(&opts[2]) {
                Ok(n) if n < 0 => 10,
                Ok(n) => n,
                Err(e) => return e,
            };
        }
    }
    let mut m = vec![
        field("length", Reply::Int(s.len() as i64)),
        field("radix-tree-keys", Reply::Int(s.node_count() as i64)),
        field("radix-tree-nodes", Reply::Int(s.rax_nodes() as i64)),
        field("last-generated-id", id_bulk(s.last_id)),
        field("max-deleted-entry-id", id_bulk(s.max_deleted_id)),
        field("entries-added", Reply::Int(s.entries_added as i64)),
        field("recorded-first-entry-id", id_bulk(s.first_id)),
    ];
    if !full {
        m.push(field("groups", Reply::Int(s.groups.len() as i64)));
        m.push(field("first-entry", s.first_entry().map_or(Reply::Nil, |(id, f)| entry_reply(*id, f))));
        m.push(field("last-entry", s.last_entry().map_or(Reply::Nil, |(id, f)| entry_reply(*id, f))));
        return Reply::Map(m);
    }
    let limit = if count == 0 { usize::MAX } else { count as usize };
    m.push(field(
        "entries",
        Reply::Array(s.range(MIN_ID, MAX_ID).take(limit).map(|(id, f)| entry_reply(*id, f)).collect()),
    ));
    let groups = s
        .groups
        .iter()
        .map(|(name, g)| {
            let pending = g
                .pel
                .iter()
                .take(limit)
                .map(|(id, n)| {
                    Reply::Array(vec![
                        id_bulk(*id),
                        Reply::bulk(n.consumer.as_deref().unwrap_or_default()),
                        Reply::Int(n.delivery_time),
                        Reply::Int(n.delivery_count as i64),
                    ])
                })
                .collect();
            let consumers = g
                .consumers
                .iter()
                .map(|(cn, c)| {
                    let pel = c
                        .pel
                        .iter()
                        .take(limit)
                        .map(|id| {
                            let n = g.pel.get(id);
                            Reply::Array(vec![
                                id_bulk(*id),
                                Reply::Int(n.map_or(0, |n| n.delivery_time)),
                                Reply::Int(n.map_or(0, |n| n.delivery_count as i64)),
                            ])
                        })
                        .collect();
                    Reply::Map(vec![
                        field("name", Reply::bulk(cn)),
                        field("seen-time", Reply::Int(c.seen_time)),
                        field("pel-count", Reply::Int(c.pel.len() as i64)),
                        field("pending", Reply::Array(pel)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                field("name", Reply::bulk(name)),
                field("last-delivered-id", id_bulk(g.last_id)),
                field("entries-read", entries_read_reply(g)),
                field("lag", s.group_lag(g).map_or(Reply::Nil, Reply::Int)),
                field("pel-count", Reply::Int(g.pel.len() as i64)),
                field("pending", Reply::Array(pending)),
                field("consumers", Reply::Array(consumers)),
            ])
        })
        .collect();
    m.push(field("groups", Reply::Array(groups)));
    Reply::Map(m)
}

/// The consumer `name` of `g`, created if missing, seen now (XCLAIM, XAUTOCLAIM); true when
/// it was created.
fn consumer_seen(g: &mut Group, name: &[u8], now: i64) -> bool {
    match g.consumers.get_mut(name) {
        Some(c) => {
            c.seen_time = now;
            false
        }
        None => {
            g.consumers.insert(sds(name), Consumer::new(now));
            true
        }
    }
}
