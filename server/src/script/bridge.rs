//! redis.call / redis.pcall: a command a script runs, checked as Redis checks it (ACL,
//! flags, write after a deny-oom, no-writes scripts) and run through the server's call.

use std::cell::RefCell;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::flags;
use ferrokv::{Reply, Session};
use mlua::{Lua, MultiValue, Value};

use super::convert;
use super::vm::{raise, RunState};
use crate::client::Client;
use crate::cmd;
use crate::server::Server;

/// redis.acl_check_cmd inside a script: may the caller's user run this command?
pub(super) fn acl_check_cmd(
    ctx: &RefCell<(&mut Server, &mut Client, &mut Session)>,
    args: MultiValue,
) -> mlua::Result<bool> {
    let argv = call_argv(args).map_err(|e| raise(e.trim_start_matches("ERR ")))?;
    let guard = ctx.try_borrow().map_err(|_| raise("recursive redis.call"))?;
    let (s, c, _) = &*guard;
    s.acl_script_check(c, &argv).ok_or_else(|| raise("Invalid command passed to redis.acl_check_cmd()"))
}

/// The argv of a redis.call, or the error text for its arguments.
pub(super) type CallArgv = Result<Vec<Vec<u8>>, &'static str>;

pub(super) fn call_argv(args: MultiValue) -> CallArgv {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(args.len());
    for v in args {
        match convert::call_arg(&v) {
            Some(b) => argv.push(b),
            None => return Err("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    Ok(argv)
}

/// Commands Redis 7.0 refuses in scripts that this server does not have (or not yet):
/// a script gets Redis's refusal rather than "unknown command".
pub(super) const NOSCRIPT_ELSEWHERE: &[&str] = &[
    "blpop",
    "brpop",
    "brpoplpush",
    "blmove",
    "blmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
    "subscribe",
    "psubscribe",
    "unsubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "cluster",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "acl",
    "failover",
];

/// Redis 6.2's words for refusals of a redis.call, which it prefixes with the place.
const REFUSALS_62: &[(&str, &str)] = &[
    (
        "ERR Please specify at least one argument for this redis lib call",
        "Please specify at least one argument for redis.call()",
    ),
    (
        "ERR Lua redis lib command arguments must be strings or integers",
        "Lua redis() command arguments must be strings or integers",
    ),
    ("ERR Unknown Redis command called from script", "Unknown Redis command called from Lua script"),
    (
        "ERR Wrong number of args calling Redis command from script",
        "Wrong number of args calling Redis command From Lua script",
    ),
    ("ERR This Redis command is not allowed from script", "This Redis command is not allowed from scripts"),
];

/// The error table of a refused redis.call: Redis 7's text, or Redis 6.2's as its
/// luaPushError writes it (`@user_script: 1: Unknown Redis command called from Lua script`).
fn refusal_table(lua: &Lua, text: &str) -> mlua::Result<mlua::Table> {
    if crate::version::version().behaves_as() >= ServerVersion::Redis70 {
        return convert::error_table(lua, text);
    }
    let text = REFUSALS_62.iter().find(|(new, _)| *new == text).map_or(text, |(_, old)| old);
    match super::vm::script_place(lua) {
        Some((source, Some(line))) => convert::error_table(lua, &format!("{source}: {line}: {text}")),
        _ => convert::error_table(lua, text),
    }
}

pub(super) fn script_call(
    lua: &Lua,
    s: &mut Server,
    c: &mut Client,
    session: &mut Session,
    st: &RunState,
    readonly: bool,
    argv: CallArgv,
) -> mlua::Result<(bool, Value)> {
    let argv = match argv {
        Ok(argv) => argv,
        Err(e) => return Ok((true, Value::Table(refusal_table(lua, e)?))),
    };
    // From here on a refusal counts in INFO errorstats, and as a rejected call of the
    // command when there is one (Redis's scriptCall).
    let refuse = |s: &mut Server, found: Option<cmd::Found>, text: &str| -> mlua::Result<(bool, Value)> {
        s.stats.error_replies += 1;
        s.stats.count_error(text);
        if let Some(found) = found {
            s.stats.commands.entry(crate::stats::StatKey::command(found.name)).or_default().rejected += 1;
        }
        let t = refusal_table(lua, text)?;
        t.raw_set(convert::STATS_COUNTED, true)?;
        Ok((true, Value::Table(t)))
    };
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
    if NOSCRIPT_ELSEWHERE.contains(&name.as_str()) && cmd::lookup(&argv[0]).is_none() {
        return refuse(s, None, "ERR This Redis command is not allowed from script");
    }
    let Some(found) = cmd::lookup(&argv[0]) else {
        return refuse(s, None, "ERR Unknown Redis command called from script");
    };
    if !found.arity_ok(argv.len()) {
        return refuse(s, Some(found), "ERR Wrong number of args calling Redis command from script");
    }
    let f = found.flags_for(&argv);
    if f & flags::NOSCRIPT != 0 && !s.scripts.disable_deny {
        return refuse(s, Some(found), "ERR This Redis command is not allowed from script");
    }
    if f & flags::STALE == 0 && crate::admission::serving_stale_refused(s) {
        return refuse(s, Some(found), "ERR Can not execute the command on a stale replica");
    }
    if let Some(refused) = s.acl_script_refusal(c, found, &argv) {
        return refuse(s, Some(found), &refused);
    }
    if readonly && f & (flags::WRITE | flags::MAY_REPLICATE) != 0 {
        return refuse(s, Some(found), "ERR Write commands are not allowed from read-only scripts.");
    }
    if let Some(refused) = crate::admission::script_call_refusal(s, f, st.wrote.get()) {
        return refuse(s, Some(found), &refused);
    }
    if f & flags::WRITE != 0 {
        st.wrote.set(true);
    }
    let before = s.engine.effects().propagate.len();
    std::mem::swap(&mut c.session, session);
    let caller_resp3 = std::mem::replace(&mut c.resp3, st.resp3.get());
    let reply = s.call(c, found, &argv);
    c.resp3 = caller_resp3;
    std::mem::swap(&mut c.session, session);
    // redis.set_repl: this command's effects go to the AOF (1), the replicas (2), both
    // or neither.
    let fx = s.engine.effects_mut();
    match st.repl.get() & 3 {
        0 => fx.propagate.truncate(before),
        1 => fx.aof_only.extend(before..fx.propagate.len()),
        2 => fx.replicas_only.extend(before..fx.propagate.len()),
        _ => {}
    }
    let failed = reply.is_error();
    if let Reply::Error(text) = &reply {
        // The command's error reply counts as any reply would (its error table says so).
        s.stats.error_replies += 1;
        s.stats.count_error(text);
    }
    Ok((failed, convert::reply_to_lua(lua, &reply, st.resp3.get())?))
}
