//! XLEN, XRANGE, XREVRANGE, XREAD and XREADGROUP.

use super::common::{
    consumer_seen, createconsumer_argv, entries_reply, entry_reply, id_arg, id_bulk, parse_id_generic, parse_interval,
    parse_strict_id, read_stream, setid_argv, tracks_activity, write_stream, xclaim_argv,
};
use crate::command::catalog::ServerVersion;
use crate::command::{arg_i64, eq_ic, err_arg, notify, parse_i64, Ctx, Reply};
use crate::format::rdb::StreamId;
use crate::value::stream::{id_decr, id_incr, Nack, MAX_ID, MIN_ID};
use crate::value::{sds, Stream};

pub(super) fn xlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_stream(ctx, &a[1]) {
        Err(e) => e,
        Ok(None) => Reply::Int(0),
        Ok(Some(s)) => Reply::Int(s.len() as i64),
    }
}

pub(super) fn xrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    range_generic(ctx, a, false)
}

pub(super) fn xrevrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    range_generic(ctx, a, true)
}

pub(super) fn range_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], rev: bool) -> Reply {
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
    let limit = if count < 0 { s.len() } else { (count as usize).min(s.len()) };
    let it = s.range(start, end);
    if rev {
        entries_reply(it.rev(), limit)
    } else {
        entries_reply(it, limit)
    }
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
/// `refuse_block`: BLOCK is an error, as Redis 7.0 makes it in scripts.
pub fn parse_read_options(a: &[Vec<u8>], refuse_block: bool, version: ServerVersion) -> Result<ReadOptions, Reply> {
    let group_read = a[0].len() == 10;
    let mut o = ReadOptions::default();
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i];
        if eq_ic(opt, "block") && more > 0 {
            if refuse_block {
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
                if version.behaves_as() < ServerVersion::Redis72 {
                    return Err(Reply::err(
                        "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                    ));
                }
                let (name, symbol) = if group_read { ("xreadgroup", '>') } else { ("xread", '$') };
                return Err(Reply::error(format!(
                    "ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{symbol}' must be specified."
                )));
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
pub(super) fn xread(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let group_read = a[0].len() == 10;
    // Redis 7.4 lets a script's BLOCK answer as a timeout would.
    let refuse_block = ctx.fx.from_script && !ctx.cfg.version.since_redis74();
    let opts = match parse_read_options(a, refuse_block, ctx.cfg.version) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (count, noack, streams_arg) = (opts.count, opts.noack, opts.streams_arg);
    let group_names: Option<(&[u8], &[u8])> = opts.group.as_ref().map(|(g, c)| (g.as_slice(), c.as_slice()));
    let n = (a.len() - streams_arg) / 2;
    let mut ids = Vec::with_capacity(n);
    let last_entry_id = ctx.cfg.version.since_redis74();
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
        } else if arg.as_slice() == b"+" && last_entry_id {
            // Redis 7.4: the stream's last entry, read as the entries after the ID before it.
            if group_read {
                return Reply::err(
                    "ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of \
                     this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would \
                     just return an empty result set.",
                );
            }
            match s.map(|s| id_decr(s.last_id)) {
                None => ids.push(MIN_ID),
                Some(Some(before_last)) => ids.push(before_last),
                Some(None) => return Reply::err("ERR the stream last element ID is 0-0"),
            }
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
pub(super) fn read_plain(ctx: &mut Ctx<'_>, key: &[u8], gt: StreamId, count: usize) -> Option<Reply> {
    let Ok(Some(s)) = read_stream(ctx, key) else { return None };
    let last = s.last_entry().map(|(id, _)| id)?;
    if last <= gt {
        return None;
    }
    let start = id_incr(gt).unwrap_or(MIN_ID);
    let limit = if count == 0 { s.len() } else { count.min(s.len()) };
    Some(entries_reply(s.range(start, MAX_ID), limit))
}

/// Redis 7.2+'s XREADGROUP makes its consumer (and marks it seen) whether or not there is
/// anything to serve, propagating the creation only under NOACK, as Redis does.
fn enlist_consumer(ctx: &mut Ctx<'_>, key: &[u8], group: &[u8], consumer: &[u8], noack: bool) {
    let now = ctx.now;
    let Ok(Some(s)) = write_stream(ctx, key) else { return };
    let Some(g) = s.groups.get_mut(group) else { return };
    if !consumer_seen(g, consumer, now, true) {
        return;
    }
    ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    ctx.dirty += 1;
    if noack {
        ctx.propagate(createconsumer_argv(key, group, consumer));
    }
}

/// XREADGROUP of one stream: new entries (`gt` = `>`) or the consumer's pending history.
pub(super) fn read_group(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    gt: StreamId,
    count: usize,
    noack: bool,
) -> Option<Reply> {
    let now = ctx.now;
    let tracks = tracks_activity(ctx);
    let setid_always = ctx.cfg.version.since_redis74();
    if tracks {
        enlist_consumer(ctx, key, group, consumer, noack);
    }
    let Ok(Some(s)) = read_stream(ctx, key) else { return None };
    let history = gt != MAX_ID;
    let g = s.groups.get(group)?;
    let gt = if history {
        gt
    } else {
        let last = s.last_entry().map(|(id, _)| id)?;
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
        if consumer_seen(&mut g, consumer, now, tracks) {
            events.push("xgroup-createconsumer");
            if noack {
                props.push(createconsumer_argv(key, group, consumer));
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
            let served: Vec<StreamId> = s.range(start, MAX_ID).take(limit).map(|(id, _)| id).collect();
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
                    g.deliver(id, consumer, now, tracks);
                    if let Some(n) = g.pel.get(&id) {
                        props.push(xclaim_argv(key, group, consumer, &id_arg(id), n, g.last_id));
                    }
                }
            }
            // Redis 7.4 and Valkey 8 send the group's new last ID (with its entries-read)
            // after every read that moved it; before, only NOACK reads, whose XCLAIMs are
            // not sent.
            if moved && (noack || setid_always) {
                props.push(setid_argv(key, group, &g));
            }
            reply = Reply::Array(out);
        }
        s.groups.insert(sds(group), g);
    }
    for e in events {
        ctx.notify(notify::STREAM, e, key);
    }
    // Redis 7.4 counts a change only when something was propagated (a read of the
    // history changes no more than delivery counts); 7.0, 7.2 and Valkey count every one.
    if ctx.cfg.version != ServerVersion::Redis74 || !props.is_empty() {
        ctx.dirty += 1;
    }
    for p in props {
        ctx.propagate(p);
    }
    Some(reply)
}
