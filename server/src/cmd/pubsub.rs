//! Pub/sub commands: SUBSCRIBE PSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB.
//! The (un)subscribe commands answer with one notice per channel, written straight
//! into the output buffer (`Client::raw_reply`).

use ferrokv::Reply;

use super::{sub_arity, unknown_subcommand};
use crate::client::Client;
use crate::server::Server;

pub fn subscribe(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    for ch in &a[1..] {
        s.subscribe_channel(c, ch);
    }
    c.raw_reply = true;
    Reply::Nil
}

pub fn psubscribe(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    for p in &a[1..] {
        s.subscribe_pattern(c, p);
    }
    c.raw_reply = true;
    Reply::Nil
}

pub fn unsubscribe(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len() == 1 {
        s.unsubscribe_all_channels(c, true);
    } else {
        for ch in &a[1..] {
            s.unsubscribe_channel(c, ch, true);
        }
    }
    c.raw_reply = true;
    Reply::Nil
}

pub fn punsubscribe(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len() == 1 {
        s.unsubscribe_all_patterns(c, true);
    } else {
        for p in &a[1..] {
            s.unsubscribe_pattern(c, p, true);
        }
    }
    c.raw_reply = true;
    Reply::Nil
}

pub fn ssubscribe(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    for ch in &a[1..] {
        s.subscribe_shard(c, ch);
    }
    c.raw_reply = true;
    Reply::Nil
}

pub fn sunsubscribe(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len() == 1 {
        s.unsubscribe_all_shard(c, true);
    } else {
        for ch in &a[1..] {
            s.unsubscribe_shard(c, ch, true);
        }
    }
    c.raw_reply = true;
    Reply::Nil
}

pub fn spublish(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let n = s.publish_shard(Some(c), &a[1], &a[2]);
    to_replicas_only(s, c, a);
    Reply::Int(n as i64)
}

/// The commands whose reply is a push message (Redis's cmdHasPushAsReply).
pub fn replies_with_push(name: &str) -> bool {
    matches!(name, "subscribe" | "ssubscribe" | "psubscribe" | "unsubscribe" | "sunsubscribe" | "punsubscribe")
}

pub fn publish(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let n = s.publish(Some(c), &a[1], &a[2]);
    to_replicas_only(s, c, a);
    Reply::Int(n as i64)
}

/// PUBLISH and SPUBLISH reach the replicas (their subscribers hear it too), never the
/// AOF, as Redis propagates them outside cluster mode.
fn to_replicas_only(s: &mut Server, c: &Client, a: &[Vec<u8>]) {
    let fx = s.engine.effects_mut();
    fx.replicas_only.push(fx.propagate.len());
    fx.propagate.push((c.session.db, a.to_vec()));
    if !c.in_exec {
        s.engine.flush();
    }
}

const HELP: &[&str] = &[
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
];

pub fn pubsub(s: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = a[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"help" if a.len() == 2 => Reply::help("PUBSUB", HELP, crate::version::version()),
        b"channels" | b"shardchannels" if a.len() <= 3 => {
            let pat = a.get(2);
            let map = if sub.as_slice() == b"channels" { &s.pubsub.channels } else { &s.pubsub.shard_channels };
            let mut names: Vec<&Vec<u8>> =
                map.keys().filter(|ch| pat.is_none_or(|p| ferrokv::glob::matches(p, ch))).collect();
            names.sort();
            Reply::Array(names.into_iter().map(|n| Reply::Bulk(n.clone())).collect())
        }
        b"numsub" => {
            let mut out = Vec::with_capacity((a.len() - 2) * 2);
            for ch in &a[2..] {
                out.push(Reply::Bulk(ch.clone()));
                out.push(Reply::Int(s.pubsub.channels.get(ch).map_or(0, Vec::len) as i64));
            }
            Reply::Array(out)
        }
        b"numpat" if a.len() == 2 => Reply::Int(s.pubsub.patterns.len() as i64),
        b"shardnumsub" => {
            let mut out = Vec::with_capacity((a.len() - 2) * 2);
            for ch in &a[2..] {
                out.push(Reply::Bulk(ch.clone()));
                out.push(Reply::Int(s.pubsub.shard_channels.get(ch).map_or(0, Vec::len) as i64));
            }
            Reply::Array(out)
        }
        b"help" | b"numpat" => sub_arity("pubsub", &a[1]),
        // Past the table's arity (-2), the command's own check answers.
        b"channels" | b"shardchannels" => Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(&a[1])
        )),
        _ => unknown_subcommand(&a[1], "pubsub"),
    }
}

/// Redis 7.0's container commands: errors name them with their subcommand (`object|encoding`).
const CONTAINERS: &[&str] = &[
    "acl", "client", "cluster", "command", "config", "debug", "function", "latency", "memory", "module", "object",
    "pubsub", "script", "slowlog", "xgroup", "xinfo",
];

/// RESP2 clients in subscribed mode may only run a few commands (Redis's error).
pub fn refused_in_subscribed_mode(c: &Client, found: super::Found, argv: &[Vec<u8>]) -> Option<Reply> {
    if c.resp3 || !c.subs.active() {
        return None;
    }
    let name = found.name;
    match name {
        "ping" | "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" | "ssubscribe" | "sunsubscribe"
        | "quit" | "reset" => None,
        _ => {
            let full = match argv.get(1) {
                Some(sub) if CONTAINERS.contains(&name) => {
                    format!("{name}|{}", String::from_utf8_lossy(sub).to_ascii_lowercase())
                }
                _ => name.to_string(),
            };
            Some(Reply::error(format!(
                "ERR Can't execute '{full}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
            )))
        }
    }
}
