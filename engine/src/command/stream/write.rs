//! XADD, XTRIM, XDEL and XSETID: appending, trimming, deleting and setting the last ID.

use super::common::{
    id_arg, id_bulk, invalid_id, no_such_key, obeys_source, parse_id_generic, parse_strict_id, write_stream,
};
use crate::command::catalog::ServerVersion;
use crate::command::{arg_i64, eq_ic, notify, Ctx, Reply};
use crate::format::rdb::StreamId;
use crate::value::stream::{id_incr, Fields, MAX_ID, MIN_ID};
use crate::value::{Stream, Value};

#[derive(Default)]
pub(super) struct AddTrimArgs {
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

pub(super) const STRATEGY_CLASH: &str =
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";

pub(super) fn parse_add_trim(ctx: &Ctx<'_>, a: &[Vec<u8>], xadd: bool) -> Result<AddTrimArgs, Reply> {
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
pub(super) fn rewrite_trim(argv: &mut [Vec<u8>], t: &AddTrimArgs, s: &Stream) {
    if !t.approx {
        return;
    }
    argv[t.strategy_idx - 1] = b"=".to_vec();
    argv[t.strategy_idx] =
        if t.maxlen.is_some() { s.len().to_string().into_bytes() } else { id_arg(s.first_id_with_tombstones()) };
}

pub(super) fn xadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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
    let fields = Fields::new(a[field_pos..].chunks_exact(2).map(|p| (p[0].as_slice(), p[1].as_slice())));
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

pub(super) fn xtrim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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

pub(super) fn xdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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

pub(super) fn xsetid(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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
    // Redis 7.2 on: no ID below the greatest one deleted.
    let checks_max_deleted = ctx.cfg.version.behaves_as() >= ServerVersion::Redis72;
    let s = match write_stream(ctx, key) {
        Err(e) => return e,
        Ok(None) => return no_such_key(),
        Ok(Some(s)) => s,
    };
    if id < s.max_deleted_id && checks_max_deleted {
        return Reply::err("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id");
    }
    if let Some((top, _)) = s.last_entry() {
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
