//! FUNCTION and FCALL, as Redis 7.0: libraries compiled in the functions' interpreter.
//!
//! The code of every library is the engine's (`Keyspace::functions`, ferrokv::functions),
//! which saves it in RDB files and AOF bases and loads it back; this module keeps what
//! running it needs (the compiled functions, their flags and descriptions) in step with it:
//! FUNCTION LOAD / DELETE / FLUSH / RESTORE change both and propagate as sent, and after
//! the engine's libraries were replaced (startup, DEBUG RELOAD, DEBUG LOADAOF)
//! [`install`] compiles them again.

use std::time::Instant;

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::format::rdb::read_function_payload;
use ferrokv::functions::{self as libs, Libraries, RestorePolicy};
use ferrokv::Reply;
use mlua::{Function, Value};

use super::busy::kill;
use super::convert;
use super::eval::run_script;
use super::registry::{Registered, Registry};
use super::vm::{lua_failure, script_flags, Vm, BUSY_EVAL};
use crate::client::Client;
use crate::cmd;
use crate::server::Server;

/// Compile a library's code and run it to collect what it registers: its name and
/// functions, or Redis's error reply.
fn compile(vm: &Vm, code: &[u8]) -> Result<(String, Vec<Registered>), Reply> {
    let name = libs::check(code).map_err(|e| Reply::error(format!("ERR {e}")))?;
    let body = libs::header(code).map(|h| h.body).unwrap_or(0);
    let loaded = vm.lua.create_string(&code[body..]).and_then(|body| {
        let (f, err): (Option<Function>, Option<mlua::LuaString>) = vm.load_library.call(body)?;
        Ok((f, err))
    });
    let (func, err) = loaded.map_err(lua_failure)?;
    let Some(func) = func else {
        let msg = err.map(|e| String::from_utf8_lossy(&e.as_bytes()).into_owned()).unwrap_or_default();
        return Err(Reply::error(format!("ERR Error compiling function: {msg}")));
    };
    *vm.registered.borrow_mut() = Some(Vec::new());
    vm.run.started.set(Some(Instant::now()));
    vm.run.loading.set(true);
    let ran: mlua::Result<(bool, Value)> = vm.run_library.call(func);
    vm.run.loading.set(false);
    vm.run.started.set(None);
    let registered = vm.registered.borrow_mut().take().unwrap_or_default();
    match ran {
        Err(e) => return Err(lua_failure(e)),
        Ok((false, v)) => {
            let msg = convert::error_parts(&v).0.unwrap_or_default();
            return Err(Reply::error(format!("ERR Error registering functions: {msg}")));
        }
        Ok((true, _)) => {}
    }
    if registered.is_empty() {
        return Err(Reply::err("ERR No functions registered"));
    }
    Ok((name, registered))
}

/// Compile every library of `libs` into a new registry and put it in place; on an error,
/// nothing changes.
fn replace_all(s: &mut Server, libs: &Libraries) -> Result<(), Reply> {
    let mut next = Registry::default();
    for (_, code) in libs.iter() {
        let (name, registered) = compile(&s.scripts.func, code)?;
        next.add(&name, registered, |f| s.scripts.func.keep(f))?;
    }
    s.scripts.functions = next;
    Ok(())
}

/// Compile the engine's libraries (after loading, DEBUG RELOAD, DEBUG LOADAOF).
pub fn install(s: &mut Server) -> Result<(), String> {
    let libs = s.engine.keyspace().functions.clone();
    replace_all(s, &libs).map_err(|r| match r {
        Reply::Error(e) => format!("Failed loading library: {e}"),
        _ => "Failed loading library".into(),
    })
}

/// A successful FUNCTION write: propagated as the client sent it (SELECT first when the
/// database differs, as for any write), and counted as a change.
fn propagate(s: &mut Server, c: &Client, argv: &[Vec<u8>]) {
    s.engine.effects_mut().propagate.push((c.session.db, argv.to_vec()));
    s.engine.stats_mut().dirty += 1;
    if !c.in_exec {
        s.engine.flush();
    }
}

/// FUNCTION LOAD [REPLACE] code.
fn load(s: &mut Server, c: &Client, a: &[Vec<u8>]) -> Reply {
    let code = &a[a.len() - 1];
    let mut replace = false;
    for opt in &a[2..a.len() - 1] {
        if !eq_ic(opt, "replace") {
            return Reply::error(format!("ERR Unknown option given: {}", String::from_utf8_lossy(opt)));
        }
        replace = true;
    }
    let name = match libs::check(code) {
        Ok(n) => n,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    if !replace && s.engine.keyspace().functions.get(&name).is_some() {
        return Reply::error(format!("ERR Library '{name}' already exists"));
    }
    let (name, registered) = match compile(&s.scripts.func, code) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let func_vm = &s.scripts.func;
    if let Err(e) = s.scripts.functions.add(&name, registered, |f| func_vm.keep(f)) {
        return e;
    }
    s.engine.keyspace_mut().functions.insert(name.clone(), code.clone());
    propagate(s, c, a);
    Reply::Bulk(name.into_bytes())
}

/// Redis's addReplySubcommandSyntaxError: the subcommand as the client wrote it.
fn syntax_error(a: &[Vec<u8>]) -> Reply {
    let sub: String = String::from_utf8_lossy(&a[1]).chars().take(128).collect();
    Reply::error(format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try FUNCTION HELP."))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
fn restore(s: &mut Server, c: &Client, a: &[Vec<u8>]) -> Reply {
    if a.len() > 4 {
        return syntax_error(a);
    }
    let policy = match a.get(3) {
        None => RestorePolicy::Append,
        Some(p) => match RestorePolicy::parse(p) {
            Some(p) => p,
            None => {
                return Reply::err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
            }
        },
    };
    let max_version = ferrokv::format::rdb::Target::Redis70.version() as u16;
    let codes = match read_function_payload(&a[2], max_version) {
        Ok(c) => c,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    let mut incoming = Libraries::default();
    for code in codes {
        if let Err(e) = incoming.load(code) {
            return Reply::error(format!("ERR {e}"));
        }
    }
    let mut next = s.engine.keyspace().functions.clone();
    if let Err(e) = next.merge(incoming, policy) {
        return Reply::error(format!("ERR {e}"));
    }
    if let Err(e) = replace_all(s, &next) {
        return e;
    }
    s.engine.keyspace_mut().functions = next;
    propagate(s, c, a);
    Reply::ok()
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn list(s: &Server, a: &[Vec<u8>]) -> Reply {
    let (mut pattern, mut with_code) = (None::<&[u8]>, false);
    let mut i = 2;
    while i < a.len() {
        if eq_ic(&a[i], "withcode") && !with_code {
            with_code = true;
        } else if eq_ic(&a[i], "libraryname") && pattern.is_none() {
            let Some(p) = a.get(i + 1) else {
                return Reply::err("ERR library name argument was not given");
            };
            pattern = Some(p);
            i += 1;
        } else {
            return Reply::error(format!("ERR Unknown argument {}", String::from_utf8_lossy(&a[i])));
        }
        i += 1;
    }
    let reg = &s.scripts.functions;
    let mut out = Vec::new();
    for (lib, names) in &reg.libraries {
        if pattern.is_some_and(|p| !ferrokv::glob::matches_nocase(p, lib.as_bytes())) {
            continue;
        }
        let functions = names
            .iter()
            .filter_map(|n| reg.functions.get(n))
            .map(|f| {
                let flags = script_flags::NAMES.iter().filter(|(_, bit)| f.flags & bit != 0);
                Reply::Map(vec![
                    (Reply::bulk(b"name"), Reply::bulk(f.name.as_bytes())),
                    (Reply::bulk(b"description"), f.description.as_ref().map_or(Reply::Nil, |d| Reply::bulk(d))),
                    (Reply::bulk(b"flags"), Reply::Set(flags.map(|(n, _)| Reply::simple(n)).collect())),
                ])
            })
            .collect();
        let mut fields = vec![
            (Reply::bulk(b"library_name"), Reply::bulk(lib.as_bytes())),
            (Reply::bulk(b"engine"), Reply::bulk(b"LUA")),
            (Reply::bulk(b"functions"), Reply::Array(functions)),
        ];
        if with_code {
            let code = s.engine.keyspace().functions.get(lib).unwrap_or_default();
            fields.push((Reply::bulk(b"library_code"), Reply::bulk(code)));
        }
        out.push(Reply::Map(fields));
    }
    Reply::Array(out)
}

/// FUNCTION STATS: the function running now, and the engine's counts.
fn stats(s: &Server) -> Reply {
    if s.scripts.eval.run.busy.get() {
        return Reply::err(BUSY_EVAL);
    }
    let reg = &s.scripts.functions;
    let running = match &reg.running {
        Some((name, argv, started)) => Reply::Map(vec![
            (Reply::bulk(b"name"), Reply::bulk(name.as_bytes())),
            (Reply::bulk(b"command"), Reply::Array(argv.iter().map(|a| Reply::bulk(a)).collect())),
            (Reply::bulk(b"duration_ms"), Reply::Int(started.elapsed().as_millis() as i64)),
        ]),
        None => Reply::Nil,
    };
    Reply::Map(vec![
        (Reply::bulk(b"running_script"), running),
        (
            Reply::bulk(b"engines"),
            Reply::Map(vec![(
                Reply::bulk(b"LUA"),
                Reply::Map(vec![
                    (Reply::bulk(b"libraries_count"), Reply::Int(reg.libraries.len() as i64)),
                    (Reply::bulk(b"functions_count"), Reply::Int(reg.functions.len() as i64)),
                ]),
            )]),
        ),
    ])
}

const FUNCTION_HELP: &[&str] = &[
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];

/// FUNCTION LOAD / DELETE / FLUSH / DUMP / RESTORE / LIST / STATS / KILL / HELP.
pub fn function(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = &a[1];
    if a.len() == 2 && eq_ic(sub, "help") {
        let version = crate::version::version();
        if version.since_redis74() {
            // 7.4's (and Valkey 8's) list of what LIST returns has no library description.
            let lines: Vec<&'static str> =
                FUNCTION_HELP.iter().copied().filter(|l| *l != "    * Library description").collect();
            return Reply::help("FUNCTION", &lines, version);
        }
        return Reply::help("FUNCTION", FUNCTION_HELP, version);
    }
    let arity_ok = |min: usize, exact: bool| if exact { a.len() == min } else { a.len() >= min };
    let sub_name = sub.to_ascii_lowercase();
    let (min, exact) = match sub_name.as_slice() {
        b"load" | b"restore" => (3, false),
        b"delete" => (3, true),
        b"flush" | b"list" => (2, false),
        b"dump" | b"stats" | b"kill" => (2, true),
        _ => return cmd::unknown_subcommand(sub, "function"),
    };
    if !arity_ok(min, exact) {
        return cmd::sub_arity("function", sub);
    }
    match sub_name.as_slice() {
        b"load" => load(s, c, a),
        b"restore" => restore(s, c, a),
        b"delete" => {
            let lib = String::from_utf8_lossy(&a[2]).into_owned();
            if !s.scripts.functions.remove(&lib) {
                return Reply::err("ERR Library not found");
            }
            s.engine.keyspace_mut().functions.remove(&lib);
            propagate(s, c, a);
            Reply::ok()
        }
        b"flush" => {
            if a.len() > 3 {
                return syntax_error(a);
            }
            if a.len() == 3 && !(eq_ic(&a[2], "sync") || eq_ic(&a[2], "async")) {
                return Reply::err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            if let Err(e) = s.scripts.flush_functions() {
                return Reply::error(format!("ERR {e}"));
            }
            s.engine.keyspace_mut().functions.clear();
            propagate(s, c, a);
            Reply::ok()
        }
        b"dump" => {
            let mut enc = ferrokv::format::rdb::Encoder::new(ferrokv::format::rdb::Target::Redis70);
            enc.limits.compression = s.engine.config().rdbcompression;
            Reply::Bulk(s.engine.keyspace().functions.dump(&enc))
        }
        b"list" => list(s, a),
        b"stats" => stats(s),
        _ => kill(s, false),
    }
}

pub fn fcall(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    fcall_generic(s, c, a, false)
}

pub fn fcall_ro(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    fcall_generic(s, c, a, true)
}

fn fcall_generic(s: &mut Server, c: &mut Client, a: &[Vec<u8>], ro: bool) -> Reply {
    let Some(entry) = s.scripts.functions.functions.get(&String::from_utf8_lossy(&a[1]).to_ascii_lowercase()) else {
        return Reply::err("ERR Function not found");
    };
    let func: Function = match s.scripts.func.lua.registry_value(&entry.func) {
        Ok(f) => f,
        Err(e) => return super::vm::lua_failure(e),
    };
    let (fflags, name) = (entry.flags, entry.name.clone());
    let Some(numkeys) = parse_i64(&a[2]) else {
        return Reply::err("ERR Bad number of keys provided");
    };
    if numkeys > (a.len() - 3) as i64 {
        return Reply::err("ERR Number of keys can't be greater than number of args");
    }
    if numkeys < 0 {
        return Reply::err("ERR Number of keys can't be negative");
    }
    if fflags & script_flags::NO_WRITES == 0 && ro {
        return Reply::err("ERR Can not execute a script with write flag using *_ro command.");
    }
    if let Some(refused) = crate::admission::script_start_refusal(s, fflags) {
        return refused;
    }
    let readonly = ro || fflags & script_flags::NO_WRITES != 0;
    let numkeys = numkeys as usize;
    s.scripts.functions.running = Some((name.clone(), a.to_vec(), Instant::now()));
    let r = run_script(s, c, true, func, &name, &a[3..3 + numkeys], &a[3 + numkeys..], readonly);
    s.scripts.functions.running = None;
    r
}
