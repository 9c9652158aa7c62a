//! EVAL, EVALSHA (and their _RO forms) and SCRIPT: running a script with its keys and
//! arguments, its effects propagated as one unit.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::keyspace::Clock;
use ferrokv::Reply;
use mlua::{Function, Lua, MultiValue, Table, Value};

use super::bridge::{acl_check_cmd, call_argv, script_call};
use super::busy::kill;
use super::convert;
use super::vm::{lua_failure, raise, script_flags, ScriptError};
use crate::client::Client;
use crate::cmd;
use crate::server::Server;

pub(super) fn noscript() -> Reply {
    if crate::version::version() == ServerVersion::Valkey80 {
        return Reply::err("NOSCRIPT No matching script.");
    }
    Reply::err("NOSCRIPT No matching script. Please use EVAL.")
}

pub fn eval(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    eval_generic(s, c, a, false, false)
}

pub fn eval_ro(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    eval_generic(s, c, a, false, true)
}

pub fn evalsha(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    eval_generic(s, c, a, true, false)
}

pub fn evalsha_ro(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    eval_generic(s, c, a, true, true)
}

/// EVAL's key positions: `numkeys` keys after it.
pub fn eval_keys(argv: &[Vec<u8>]) -> Vec<usize> {
    let n = argv.get(2).and_then(|b| parse_i64(b)).unwrap_or(0).max(0) as usize;
    (3..argv.len()).take(n).collect()
}

pub(super) fn eval_generic(s: &mut Server, c: &mut Client, a: &[Vec<u8>], evalsha: bool, ro: bool) -> Reply {
    if evalsha && a[1].len() != 40 {
        return noscript();
    }
    let Some(numkeys) = parse_i64(&a[2]) else {
        return Reply::not_integer();
    };
    if numkeys > (a.len() - 3) as i64 {
        return Reply::err("ERR Number of keys can't be greater than number of args");
    }
    if numkeys < 0 {
        return Reply::err("ERR Number of keys can't be negative");
    }
    let sha = if evalsha {
        String::from_utf8_lossy(&a[1]).to_ascii_lowercase()
    } else {
        // Redis 7.4 and Valkey 8.0 evict EVAL's least recently used scripts past 500.
        let evictable = s.engine.config().version.since_redis74();
        match s.scripts.create(&a[1], evictable, &mut s.stats.evicted_scripts) {
            Ok(sha) => sha,
            Err(e) => return e,
        }
    };
    let Some(cached) = s.scripts.cache.get(&sha) else {
        return noscript();
    };
    let func: Function = match s.scripts.eval.lua.registry_value(&cached.func) {
        Ok(f) => f,
        Err(e) => return lua_failure(e),
    };
    let sflags = cached.flags;
    let compat = sflags & script_flags::EVAL_COMPAT != 0;
    if !compat && sflags & script_flags::NO_WRITES == 0 && ro {
        return Reply::err("ERR Can not execute a script with write flag using *_ro command.");
    }
    if let Some(refused) = crate::admission::script_start_refusal(s, sflags) {
        return refused;
    }
    let readonly = ro || (!compat && sflags & script_flags::NO_WRITES != 0);
    let numkeys = numkeys as usize;
    let reply = run_script(s, c, false, func, &sha, &a[3..3 + numkeys], &a[3 + numkeys..], readonly);
    s.scripts.touch(&sha);
    reply
}

pub(super) fn string_array(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, it) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(it)?)?;
    }
    Ok(t)
}

/// Run a compiled script for client `c`: KEYS and ARGV set, the time frozen at its
/// start (lazy expiry sees one instant, as in Redis 7.0), its commands' propagation
/// gathered into one unit.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_script(
    s: &mut Server,
    c: &mut Client,
    is_function: bool,
    func: Function,
    name: &str,
    keys: &[Vec<u8>],
    args: &[Vec<u8>],
    readonly: bool,
) -> Reply {
    let keys_argv = keys;
    let vm = if is_function { &s.scripts.func } else { &s.scripts.eval };
    let lua = vm.lua.clone();
    let redis_api = vm.redis.clone();
    let stubs = vm.stubs.clone();
    let runner = if is_function { vm.run_function.clone() } else { vm.runner.clone() };
    let st = Rc::clone(&vm.run);
    let (keys, args) = match string_array(&lua, keys).and_then(|k| Ok((k, string_array(&lua, args)?))) {
        Ok(x) => x,
        Err(e) => return lua_failure(e),
    };
    if !is_function {
        // EVAL scripts see them as globals; functions get them as arguments.
        let globals = lua.globals();
        if let Err(e) = globals.raw_set("KEYS", keys.clone()).and_then(|()| globals.raw_set("ARGV", args.clone())) {
            return lua_failure(e);
        }
    }
    st.resp3.set(false);
    st.repl.set(3);
    st.busy.set(false);
    st.killed.set(false);
    st.wrote.set(false);
    st.limit_ms.set(s.cfg.busy_reply_threshold);
    st.started.set(Some(Instant::now()));
    let hooks = if is_function { s.scripts.func.hooks.clone() } else { s.scripts.eval.hooks.clone() };

    let mut session = c.session.clone();
    let frozen = Clock::virtual_at(s.engine.now_ms());
    let saved_clock = s.engine.clock().clone();
    s.engine.set_clock(frozen);
    let was_in_exec = c.in_exec;
    // Engine commands join one propagation unit, flushed below (or by EXEC).
    c.in_exec = true;
    s.engine.effects_mut().from_script = true;
    // Redis 7.0 tracks a script's declared keys when it reads; 7.2 on, the keys it read.
    let tracks_declared = s.engine.config().version.behaves_as() < ferrokv::command::catalog::ServerVersion::Redis72;
    s.tracking.script_started(c.tracking.is_some() && tracks_declared, keys_argv);

    let ctx = RefCell::new((&mut *s, &mut *c, &mut session));
    let outcome = lua.scope(|scope| {
        let make = |raises: bool| {
            let (ctx, st) = (&ctx, &st);
            scope.create_function(move |lua, args: MultiValue| {
                let argv = call_argv(args);
                let mut guard = ctx.try_borrow_mut().map_err(|_| raise("recursive redis.call"))?;
                let (s, c, session) = &mut *guard;
                let (failed, v) = script_call(lua, s, c, session, st, readonly, argv)?;
                if failed && raises {
                    let text = convert::error_parts(&v).0.unwrap_or_default();
                    let counted = convert::stats_counted(&v);
                    return Err(mlua::Error::external(ScriptError { text, counted }));
                }
                Ok(v)
            })
        };
        redis_api.raw_set("call", make(true)?)?;
        redis_api.raw_set("pcall", make(false)?)?;
        let acl_stub: Value = redis_api.raw_get("acl_check_cmd")?;
        redis_api.raw_set("acl_check_cmd", scope.create_function(|_, args: MultiValue| acl_check_cmd(&ctx, args))?)?;
        let busy = scope.create_function(|_, ()| {
            if let Ok(mut guard) = ctx.try_borrow_mut() {
                let (s, _, _) = &mut *guard;
                s.serve_while_busy();
                if s.exit {
                    // SHUTDOWN while the script ran: it stops here.
                    st.killed.set(true);
                }
            }
            Ok(())
        })?;
        hooks.raw_set("busy", busy)?;
        let ran: mlua::Result<(bool, Value)> =
            if is_function { runner.call((func, keys, args)) } else { runner.call(func) };
        redis_api.raw_set("call", stubs.0.clone())?;
        redis_api.raw_set("pcall", stubs.1.clone())?;
        redis_api.raw_set("acl_check_cmd", acl_stub)?;
        hooks.raw_set("busy", Value::Nil)?;
        let (ok, v) = ran?;
        let reply = if ok { convert::lua_to_reply(&v, st.resp3.get()) } else { failure_reply(&v, name) };
        Ok((reply, convert::stats_counted(&v)))
    });

    st.started.set(None);
    st.busy.set(false);
    s.engine.effects_mut().from_script = false;
    s.tracking.script_ended();
    // A collection step every 50 runs, as Redis does, so garbage never piles up.
    st.runs.set(st.runs.get() + 1);
    if st.runs.get() >= 50 {
        st.runs.set(0);
        for _ in 0..50 {
            if lua.gc_step().unwrap_or(true) {
                break;
            }
        }
    }
    c.in_exec = was_in_exec;
    s.engine.set_clock(saved_clock);
    if !was_in_exec {
        s.engine.flush();
    }
    match outcome {
        Ok((reply, counted)) => {
            // An error already in INFO errorstats: the caller's reply is not counted again.
            s.error_counted = counted && reply.is_error();
            reply
        }
        Err(e) => lua_failure(e),
    }
}

/// The reply for a script that raised an error: its message, and where it was raised
/// (Redis 6.2 puts the place first, in its own words, after the script's function name).
pub(super) fn failure_reply(v: &Value, sha: &str) -> Reply {
    let (msg, source, line) = convert::error_parts(v);
    if crate::version::version().is_redis62() {
        let raised = convert::error_field(v, "plain").or(msg).unwrap_or_default();
        let place = match (source, line) {
            (Some(src), Some(line)) => format!("{src}:{line}: "),
            _ => String::new(),
        };
        return Reply::error(format!("ERR Error running script (call to f_{sha}): {place}{raised}"));
    }
    let msg = msg.unwrap_or_else(|| "ERR unknown error".into());
    match (source, line) {
        (Some(src), Some(line)) => Reply::error(format!("{msg} script: {sha}, on {src}:{line}.")),
        _ => Reply::error(msg),
    }
}

pub(super) const SCRIPT_HELP: &[&str] = &[
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
];

pub fn script(s: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = &a[1];
    if a.len() == 2 && eq_ic(sub, "help") {
        return Reply::help("SCRIPT", SCRIPT_HELP, crate::version::version());
    }
    if eq_ic(sub, "flush") {
        let ok = a.len() == 2 || (a.len() == 3 && (eq_ic(&a[2], "sync") || eq_ic(&a[2], "async")));
        if !ok {
            return Reply::err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        }
        return match s.scripts.flush() {
            Ok(()) => Reply::ok(),
            Err(e) => Reply::error(format!("ERR {e}")),
        };
    }
    if eq_ic(sub, "exists") {
        return Reply::Array(
            a[2..]
                .iter()
                .map(|sha| {
                    let key = String::from_utf8_lossy(sha).to_ascii_lowercase();
                    Reply::Int(i64::from(s.scripts.cache.contains_key(&key)))
                })
                .collect(),
        );
    }
    if a.len() == 3 && eq_ic(sub, "load") {
        return match s.scripts.create(&a[2], false, &mut s.stats.evicted_scripts) {
            Ok(sha) => Reply::Bulk(sha.into_bytes()),
            Err(e) => e,
        };
    }
    if a.len() == 2 && eq_ic(sub, "kill") {
        return kill(s, true);
    }
    if a.len() == 3 && eq_ic(sub, "debug") {
        return Reply::err("ERR SCRIPT DEBUG is not supported");
    }
    cmd::unknown_subcommand(sub, "script")
}
