//! XINFO STREAM / GROUPS / CONSUMERS / HELP.

use super::common::{
    check_subcommand, entries_reply, entry_reply, id_bulk, no_such_key, read_stream, subcommand_syntax, tracks_activity,
};
use crate::command::{arg_i64, eq_ic, err_arg, Ctx, Reply};
use crate::value::stream::Group;
use crate::value::Stream;

pub(super) const XINFO_SUBCOMMANDS: &[(&str, i32)] = &[("consumers", 4), ("groups", 3), ("stream", -3), ("help", 2)];

pub(super) const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

pub(super) fn field(name: &'static str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk(name.as_bytes()), v)
}

pub(super) fn xinfo(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let sub = match check_subcommand(a, XINFO_SUBCOMMANDS) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if sub == "help" {
        return Reply::help("XINFO", XINFO_HELP, ctx.cfg.version);
    }
    let now = ctx.now;
    // Redis 6.2's streams have no entries-added, max-deleted-id or group lag to report.
    let redis62 = ctx.cfg.version.is_redis62();
    // Redis 7.2 reports when consumers last got an entry.
    let activity = tracks_activity(ctx);
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
                        let mut m = vec![
                            field("name", Reply::bulk(n)),
                            field("pending", Reply::Int(c.pel.len() as i64)),
                            field("idle", Reply::Int(now.saturating_sub(c.seen_time).max(0))),
                        ];
                        if activity {
                            let inactive = if c.active_time == -1 { -1 } else { now.saturating_sub(c.active_time) };
                            m.push(field("inactive", Reply::Int(inactive)));
                        }
                        Reply::Map(m)
                    })
                    .collect(),
            )
        }
        "groups" => Reply::Array(
            s.groups
                .iter()
                .map(|(n, g)| {
                    let mut m = vec![
                        field("name", Reply::bulk(n)),
                        field("consumers", Reply::Int(g.consumers.len() as i64)),
                        field("pending", Reply::Int(g.pel.len() as i64)),
                        field("last-delivered-id", id_bulk(g.last_id)),
                    ];
                    if !redis62 {
                        m.push(field("entries-read", entries_read_reply(g)));
                        m.push(field("lag", s.group_lag(g).map_or(Reply::Nil, Reply::Int)));
                    }
                    Reply::Map(m)
                })
                .collect(),
        ),
        _ => xinfo_stream(s, a, redis62, activity),
    }
}

pub(super) fn entries_read_reply(g: &Group) -> Reply {
    if g.entries_read == -1 {
        Reply::Nil
    } else {
        Reply::Int(g.entries_read)
    }
}

pub(super) fn xinfo_stream(s: &Stream, a: &[Vec<u8>], redis62: bool, activity: bool) -> Reply {
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
    ];
    if !redis62 {
        m.push(field("max-deleted-entry-id", id_bulk(s.max_deleted_id)));
        m.push(field("entries-added", Reply::Int(s.entries_added as i64)));
        m.push(field("recorded-first-entry-id", id_bulk(s.first_id)));
    }
    if !full {
        m.push(field("groups", Reply::Int(s.groups.len() as i64)));
        m.push(field("first-entry", s.first_entry().map_or(Reply::Nil, |(id, f)| entry_reply(id, f))));
        m.push(field("last-entry", s.last_entry().map_or(Reply::Nil, |(id, f)| entry_reply(id, f))));
        return Reply::Map(m);
    }
    let limit = if count == 0 { s.len() } else { (count as usize).min(s.len()) };
    m.push(field("entries", entries_reply(s.entries(), limit)));
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
                    let mut m = vec![field("name", Reply::bulk(cn)), field("seen-time", Reply::Int(c.seen_time))];
                    if activity {
                        m.push(field("active-time", Reply::Int(c.active_time)));
                    }
                    m.push(field("pel-count", Reply::Int(c.pel.len() as i64)));
                    m.push(field("pending", Reply::Array(pel)));
                    Reply::Map(m)
                })
                .collect();
            let mut m = vec![field("name", Reply::bulk(name)), field("last-delivered-id", id_bulk(g.last_id))];
            if !redis62 {
                m.push(field("entries-read", entries_read_reply(g)));
                m.push(field("lag", s.group_lag(g).map_or(Reply::Nil, Reply::Int)));
            }
            m.push(field("pel-count", Reply::Int(g.pel.len() as i64)));
            m.push(field("pending", Reply::Array(pending)));
            m.push(field("consumers", Reply::Array(consumers)));
            Reply::Map(m)
        })
        .collect();
    m.push(field("groups", Reply::Array(groups)));
    Reply::Map(m)
}
