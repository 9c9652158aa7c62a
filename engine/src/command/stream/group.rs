//! Consumer groups: XGROUP, XACK, XPENDING, XCLAIM and XAUTOCLAIM.

use super::common::{
    check_subcommand, consumer_seen, entry_reply, id_arg, id_bulk, parse_id, parse_interval, parse_strict_id,
    read_stream, setid_argv, subcommand_syntax, tracks_activity, write_stream, xclaim_argv,
};
use crate::command::{arg_i64, eq_ic, err_arg, notify, parse_i64, Ctx, Reply};
use crate::format::rdb::StreamId;
use crate::value::stream::{id_incr, Consumer, Group, Nack, MAX_ID, MIN_ID};
use crate::value::{sds, Stream, Value};

pub(super) const XGROUP_SUBCOMMANDS: &[(&str, i32)] =
    &[("create", -5), ("setid", -5), ("destroy", 4), ("createconsumer", 5), ("delconsumer", 5), ("help", 2)];

pub(super) const XGROUP_HELP: &[&str] = &[
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

pub(super) fn xgroup(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let sub = match check_subcommand(a, XGROUP_SUBCOMMANDS) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if sub == "help" {
        return Reply::help("XGROUP", XGROUP_HELP, ctx.cfg.version);
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
pub(super) fn existing<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Option<&'c mut Stream> {
    match ctx.lookup_write(key) {
        Some(Value::Stream(s)) => Some(s),
        _ => None,
    }
}

pub(super) fn xgroup_create(ctx: &mut Ctx<'_>, a: &[Vec<u8>], exists: bool, entries_read: i64) -> Reply {
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

pub(super) fn xgroup_setid(ctx: &mut Ctx<'_>, a: &[Vec<u8>], entries_read: i64) -> Reply {
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

pub(super) fn xgroup_destroy(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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

pub(super) fn xgroup_createconsumer(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, group, consumer) = (&a[2], &a[3], &a[4]);
    let now = ctx.now;
    let tracks = tracks_activity(ctx);
    let Some(s) = existing(ctx, key) else { return Reply::wrongtype() };
    let Some(g) = s.groups.get_mut(group.as_slice()) else { return Reply::wrongtype() };
    if g.consumers.contains_key(consumer.as_slice()) {
        return Reply::Int(0);
    }
    g.consumers.insert(sds(consumer), Consumer::new(now, tracks));
    ctx.dirty += 1;
    ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    Reply::Int(1)
}

pub(super) fn xgroup_delconsumer(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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

pub(super) fn xack(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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

pub(super) fn nogroup(key: &[u8], group: &[u8]) -> Reply {
    Reply::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        err_arg(key, usize::MAX),
        err_arg(group, usize::MAX)
    ))
}

pub(super) fn xpending(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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

pub(super) fn xclaim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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
    let tracks = tracks_activity(ctx);
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
            if consumer_seen(&mut g, name, now, tracks) {
                created = true;
                dirty += 1;
            }
        }
        g.deliver(id, name, now, tracks);
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

pub(super) fn xautoclaim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
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
    let tracks = tracks_activity(ctx);
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
            if consumer_seen(&mut g, name, now, tracks) {
                created = true;
                dirty += 1;
            }
        }
        g.deliver(id, name, now, tracks);
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
