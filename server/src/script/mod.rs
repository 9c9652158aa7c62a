//! Lua scripting, as Redis 7.0: EVAL EVALSHA EVAL_RO EVALSHA_RO and SCRIPT, on Lua 5.1
//! (mlua, vendored). Scripting lives in the server, beside the other commands that
//! need a client: a script's `redis.call` runs commands through [`Server::call`], so it
//! reaches the engine's commands and the server's (PING, INFO, TIME ...) alike.
//!
//! A script is atomic: it runs to its end on the event loop's thread. Its effects are
//! what propagates (Redis 7.0's effects replication): the write commands it ran, as one
//! unit, so several are wrapped in MULTI/EXEC; nothing when it wrote nothing. The AOF
//! never sees EVAL, so the AOF loader needs no scripting. Lua only ever runs scripts
//! that clients send; no file is parsed by it.

pub mod cjson;
pub mod cmsgpack;
pub mod convert;
pub mod functions;
pub mod libs;
pub mod lstruct;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use ferrokv::command::{eq_ic, flags, parse_i64};
use ferrokv::keyspace::Clock;
use ferrokv::{Reply, Session};
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use crate::client::Client;
use crate::cmd;
use crate::server::Server;

/// The version scripts see (redis.REDIS_VERSION / _NUM: 0x00MMmmpp).
fn version_num(release: &str) -> f64 {
    let parts: Vec<u32> = release.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    let part = |i: usize| parts.get(i).copied().unwrap_or(0);
    f64::from((part(0) << 16) | (part(1) << 8) | part(2))
}

/// Script flags (shebang `#!lua flags=...`).
pub mod script_flags {
    /// No shebang: Redis's compatibility mode.
    pub const EVAL_COMPAT: u32 = 1 << 0;
    pub const NO_WRITES: u32 = 1 << 1;
    pub const ALLOW_OOM: u32 = 1 << 2;
    pub const ALLOW_STALE: u32 = 1 << 3;
    pub const NO_CLUSTER: u32 = 1 << 4;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 5;

    pub const NAMES: &[(&str, u32)] = &[
        ("no-writes", NO_WRITES),
        ("allow-oom", ALLOW_OOM),
        ("allow-stale", ALLOW_STALE),
        ("no-cluster", NO_CLUSTER),
        ("allow-cross-slot-keys", ALLOW_CROSS_SLOT),
    ];
}

/// State of the running script that the Lua-side functions change.
#[derive(Debug, Default)]
struct RunState {
    /// redis.setresp(3) was called.
    resp3: Cell<bool>,
    /// redis.set_repl flags: 1 AOF, 2 replicas.
    repl: Cell<u8>,
    started: Cell<Option<Instant>>,
    /// Runs since the last garbage collection step.
    runs: Cell<u32>,
    /// busy-reply-threshold (ms) for this run: past it, other clients are served BUSY.
    limit_ms: Cell<u64>,
    /// The script ran past the threshold: other clients get BUSY.
    busy: Cell<bool>,
    /// SCRIPT KILL / FUNCTION KILL (or SHUTDOWN) asked for it to stop.
    killed: Cell<bool>,
    /// It ran a write command (it can no longer be killed).
    wrote: Cell<bool>,
}

struct Cached {
    func: Function,
    flags: u32,
}

/// One Lua interpreter with the sandbox: EVAL scripts have one, functions another (as
/// in Redis, so SCRIPT FLUSH and FUNCTION FLUSH reset them apart).
struct Vm {
    lua: Lua,
    /// Where a running script's "serve the other clients" function is put.
    hooks: Table,
    compile: Function,
    runner: Function,
    load_library: Function,
    run_library: Function,
    run_function: Function,
    run: Rc<RunState>,
    /// The functions the library being loaded registered (Some while loading).
    registered: Rc<RefCell<Option<Vec<functions::Registered>>>>,
    /// The real `redis` table: a running script's redis.call and redis.pcall are put
    /// there, as C functions called straight from the script.
    redis: Table,
    /// redis.call and redis.pcall outside a script run.
    stubs: (Function, Function),
}

/// The interpreters, the script cache (SHA1 → compiled script) and the function libraries.
pub struct Scripts {
    eval: Vm,
    func: Vm,
    cache: HashMap<String, Cached>,
    /// Bytes of the cached bodies (INFO used_memory_scripts_eval).
    cache_bytes: usize,
    /// FUNCTION LOAD's libraries, compiled in `func` (their code is the engine's).
    functions: functions::Registry,
    rng: libs::Lrand48,
}

impl Scripts {
    pub fn new() -> Result<Scripts, String> {
        let rng = libs::Lrand48::default();
        let mk = |rng: &libs::Lrand48| Vm::new(rng.clone()).map_err(|e| format!("Lua scripting: {e}"));
        Ok(Scripts {
            eval: mk(&rng)?,
            func: mk(&rng)?,
            cache: HashMap::new(),
            cache_bytes: 0,
            functions: Default::default(),
            rng,
        })
    }

    /// SCRIPT FLUSH: a new interpreter, an empty cache (the PRNG goes on, as in Redis).
    pub fn flush(&mut self) -> Result<(), String> {
        self.eval = Vm::new(self.rng.clone()).map_err(|e| e.to_string())?;
        self.cache.clear();
        self.cache_bytes = 0;
        Ok(())
    }

    /// FUNCTION FLUSH: a new interpreter for functions, no library.
    pub fn flush_functions(&mut self) -> Result<(), String> {
        self.func = Vm::new(self.rng.clone()).map_err(|e| e.to_string())?;
        self.functions = Default::default();
        Ok(())
    }

    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Memory of the EVAL interpreter, bytes.
    pub fn lua_memory(&self) -> usize {
        self.eval.lua.used_memory()
    }

    pub fn cache_memory(&self) -> usize {
        self.cache_bytes + self.cache.len() * 64
    }

    /// Compile `body` into the cache (no-op when it is there); its SHA1, or the error reply.
    fn create(&mut self, body: &[u8]) -> Result<String, Reply> {
        let sha = libs::sha1hex(body);
        if self.cache.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, shebang_len) = parse_shebang(body).map_err(|e| Reply::error(format!("ERR {e}")))?;
        let code = self.eval.lua.create_string(&body[shebang_len..]).map_err(lua_failure)?;
        let (func, err): (Option<Function>, Option<mlua::LuaString>) =
            self.eval.compile.call((code, "@user_script")).map_err(lua_failure)?;
        let Some(func) = func else {
            let msg = err.map(|e| String::from_utf8_lossy(&e.as_bytes()).into_owned()).unwrap_or_default();
            return Err(Reply::error(format!("ERR Error compiling script (new function): {msg}")));
        };
        self.cache_bytes += body.len() + 40;
        self.cache.insert(sha.clone(), Cached { func, flags });
        Ok(sha)
    }
}

impl Vm {
    fn new(rng: libs::Lrand48) -> mlua::Result<Vm> {
        let registered: Rc<RefCell<Option<Vec<functions::Registered>>>> = Rc::new(RefCell::new(None));
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        let run = Rc::new(RunState::default());
        let native = lua.create_table()?;
        native.raw_set("version", cmd::release())?;
        native.raw_set("version_num", version_num(cmd::release()))?;
        native.raw_set(
            "sha1hex",
            lua.create_function(|_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise("wrong number of arguments"));
                }
                let data = match &args[0] {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(i) => convert::lua_number_text(*i as f64).into_bytes(),
                    Value::Number(n) => convert::lua_number_text(*n).into_bytes(),
                    _ => Vec::new(),
                };
                Ok(libs::sha1hex(&data))
            })?,
        )?;
        native.raw_set(
            "log",
            lua.create_function(|_, args: MultiValue| {
                if args.len() < 2 {
                    return Err(raise("redis.log() requires two arguments or more."));
                }
                let Some(level) = lua_number(&args[0]) else {
                    return Err(raise("First argument must be a number (log level)."));
                };
                if !(0.0..4.0).contains(&level) {
                    return Err(raise("Invalid debug level."));
                }
                let parts: Vec<String> = args.iter().skip(1).filter_map(lua_text).collect();
                crate::server::log(&parts.join(" "));
                Ok(())
            })?,
        )?;
        let st = Rc::clone(&run);
        native.raw_set("killed", lua.create_function(move |_, ()| Ok(st.killed.get()))?)?;
        let st = Rc::clone(&run);
        native.raw_set(
            "setresp",
            lua.create_function(move |_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise("redis.setresp() requires one argument."));
                }
                let v = lua_number(&args[0]).unwrap_or(0.0) as i64;
                if v != 2 && v != 3 {
                    return Err(raise("RESP version must be 2 or 3."));
                }
                st.resp3.set(v == 3);
                Ok(())
            })?,
        )?;
        let st = Rc::clone(&run);
        native.raw_set(
            "set_repl",
            lua.create_function(move |_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise("redis.set_repl() requires two arguments."));
                }
                let v = lua_number(&args[0]).unwrap_or(0.0) as i64;
                if !(0..=3).contains(&v) {
                    return Err(raise("Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."));
                }
                st.repl.set(v as u8);
                Ok(())
            })?,
        )?;
        native.raw_set(
            "acl_check_cmd",
            // A running script gets the real check (run_script); this is for code outside one.
            lua.create_function(|_, _: MultiValue| -> mlua::Result<bool> {
                Err(raise("redis.acl_check_cmd can only be called inside a script invocation"))
            })?,
        )?;
        native.raw_set("unwrap", lua.create_function(|lua, v: Value| unwrap_error(lua, v))?)?;
        native.raw_set(
            "where",
            lua.create_function(|lua, ()| {
                let mut level = 1;
                while let Some((what, source, line)) = lua.inspect_stack(level, |d| {
                    let s = d.source();
                    (s.what, s.source.map(|x| x.into_owned()).unwrap_or_default(), d.current_line())
                }) {
                    // Skip C functions, the sandbox's own Lua and tail-call placeholders.
                    if what != "C" && what != "tail" && !source.starts_with("=ferrokv") && source != "=(tail call)" {
                        return Ok((Some(source), line.map(|l| l as f64)));
                    }
                    level += 1;
                }
                Ok((None, None))
            })?,
        )?;
        let (random, seed) = libs::random_functions(&lua, &rng)?;
        native.raw_set("random", libs::located(&lua, random)?)?;
        native.raw_set("randomseed", libs::located(&lua, seed)?)?;
        let bit = libs::bit_library(&lua)?;
        libs::locate_all(&lua, &bit)?;
        native.raw_set("bit", bit)?;
        let json = cjson::library(&lua)?;
        libs::locate_all(&lua, &json)?;
        native.raw_set("cjson", json)?;
        let msgpack = cmsgpack::library(&lua)?;
        libs::locate_all(&lua, &msgpack)?;
        native.raw_set("cmsgpack", msgpack)?;
        let structs = lstruct::library(&lua)?;
        libs::locate_all(&lua, &structs)?;
        native.raw_set("struct", structs)?;

        let hooks = lua.create_table()?;
        for name in ["call", "pcall"] {
            native.raw_set(
                name,
                lua.create_function(|_, _: MultiValue| -> mlua::Result<()> {
                    Err(raise("redis.call/pcall can only be called inside a script invocation"))
                })?,
            )?;
        }
        let reg = Rc::clone(&registered);
        native.raw_set(
            "register_function",
            lua.create_function(move |_, args: MultiValue| functions::register_function(&reg, args))?,
        )?;
        let (_env, compile, runner, load_library, run_library, run_function, redis): (
            Table,
            Function,
            Function,
            Function,
            Function,
            Function,
            Table,
        ) = lua.load(include_str!("sandbox.lua")).set_name("=ferrokv").call((native, hooks.clone()))?;

        let st = Rc::clone(&run);
        let busy_hooks = hooks.clone();
        lua.set_hook(HookTriggers::new().every_nth_instruction(100_000), move |_, _| {
            let Some(started) = st.started.get() else {
                return Ok(VmState::Continue);
            };
            let limit = st.limit_ms.get();
            if !st.killed.get() && limit > 0 && started.elapsed().as_millis() as u64 >= limit {
                if !st.busy.get() {
                    st.busy.set(true);
                    crate::server::log(&format!(
                        "Slow script detected: still in execution after {} milliseconds. \
                         You can try killing the script using the SCRIPT KILL command.",
                        started.elapsed().as_millis()
                    ));
                }
                // Serve the other clients (BUSY, SCRIPT KILL, SHUTDOWN NOSAVE) meanwhile.
                if let Ok(Value::Function(serve)) = busy_hooks.raw_get::<Value>("busy") {
                    let _ = serve.call::<()>(());
                }
            }
            if st.killed.get() {
                return Err(mlua::Error::RuntimeError("Script killed by user with SCRIPT KILL...".into()));
            }
            Ok(VmState::Continue)
        })?;
        let stubs = (redis.raw_get("call")?, redis.raw_get("pcall")?);
        lua.gc_collect()?;
        Ok(Vm { lua, hooks, compile, runner, load_library, run_library, run_function, run, registered, redis, stubs })
    }
}

/// An error a redis.* function raises: the script sees the table `{err = text}`; `counted` when INFO errorstats already has it
/// (a command's error, or a refusal of the command), so the script's error reply is not
/// counted again (Redis's `ignore_error_stats_update`).
#[derive(Debug)]
struct ScriptError {
    text: String,
    counted: bool,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for ScriptError {}

/// A redis.* argument error (`ERR ` + text, as Redis's luaPushError).
fn raise(text: &str) -> mlua::Error {
    mlua::Error::external(ScriptError { text: format!("ERR {text}"), counted: false })
}

/// What a Lua error value raised by Rust stands for: an error table for
/// [`ScriptError`], the message for other errors (as luaL_error raises it); any other
/// value is returned as it is.
fn unwrap_error(lua: &Lua, v: Value) -> mlua::Result<Value> {
    let Value::Error(e) = v else {
        return Ok(v);
    };
    let mut e: &mlua::Error = &e;
    loop {
        match e {
            mlua::Error::CallbackError { cause, .. } => e = cause,
            mlua::Error::WithContext { cause, .. } => e = cause,
            mlua::Error::ExternalError(x) => {
                if let Some(se) = x.downcast_ref::<ScriptError>() {
                    let t = convert::error_table(lua, &se.text)?;
                    if se.counted {
                        t.raw_set(convert::STATS_COUNTED, true)?;
                    }
                    return Ok(Value::Table(t));
                }
                return Ok(Value::String(lua.create_string(x.to_string())?));
            }
            mlua::Error::RuntimeError(m) => return Ok(Value::String(lua.create_string(m)?)),
            other => return Ok(Value::String(lua.create_string(other.to_string())?)),
        }
    }
}

fn lua_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => std::str::from_utf8(&s.as_bytes()).ok().and_then(|t| t.trim().parse().ok()),
        _ => None,
    }
}

fn lua_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Integer(i) => Some(convert::lua_number_text(*i as f64)),
        Value::Number(n) => Some(convert::lua_number_text(*n)),
        _ => None,
    }
}

fn lua_failure(e: mlua::Error) -> Reply {
    Reply::error(format!("ERR Lua failure: {e}"))
}

/// The flags of a script's shebang line and the line's length (0 without one).
fn parse_shebang(body: &[u8]) -> Result<(u32, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((script_flags::EVAL_COMPAT, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let parts = ferrokv::format::args::split_args(&body[..end]).unwrap_or_default();
    let Some(engine) = parts.first() else {
        return Err("Invalid engine in script shebang".into());
    };
    if engine.as_slice() != b"#!lua" {
        return Err(format!("Unexpected engine in script shebang: {}", String::from_utf8_lossy(engine)));
    }
    let mut out = 0;
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix(b"flags=") else {
            return Err(format!("Unknown lua shebang option: {}", String::from_utf8_lossy(p)));
        };
        for f in list.split(|&b| b == b',') {
            if f.is_empty() && list.is_empty() {
                continue;
            }
            match script_flags::NAMES.iter().find(|(n, _)| n.as_bytes() == f) {
                Some((_, bit)) => out |= bit,
                None => return Err(format!("Unexpected flag in script shebang: {}", String::from_utf8_lossy(f))),
            }
        }
    }
    Ok((out, end))
}

fn noscript() -> Reply {
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

fn eval_generic(s: &mut Server, c: &mut Client, a: &[Vec<u8>], evalsha: bool, ro: bool) -> Reply {
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
        match s.scripts.create(&a[1]) {
            Ok(sha) => sha,
            Err(e) => return e,
        }
    };
    let Some(cached) = s.scripts.cache.get(&sha) else {
        return noscript();
    };
    let func = cached.func.clone();
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
    run_script(s, c, false, func, &sha, &a[3..3 + numkeys], &a[3 + numkeys..], readonly)
}

fn string_array(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Table> {
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
fn run_script(
    s: &mut Server,
    c: &mut Client,
    is_function: bool,
    func: Function,
    name: &str,
    keys: &[Vec<u8>],
    args: &[Vec<u8>],
    readonly: bool,
) -> Reply {
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
    let frozen = Clock::virtual_at(s.engine.clock.now_ms());
    let saved_clock = std::mem::replace(&mut s.engine.clock, frozen);
    let was_in_exec = c.in_exec;
    // Engine commands join one propagation unit, flushed below (or by EXEC).
    c.in_exec = true;
    s.engine.fx.from_script = true;

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
    s.engine.fx.from_script = false;
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
    s.engine.clock = saved_clock;
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

/// redis.acl_check_cmd inside a script: may the caller's user run this command?
fn acl_check_cmd(ctx: &RefCell<(&mut Server, &mut Client, &mut Session)>, args: MultiValue) -> mlua::Result<bool> {
    let argv = call_argv(args).map_err(|e| raise(e.trim_start_matches("ERR ")))?;
    let guard = ctx.try_borrow().map_err(|_| raise("recursive redis.call"))?;
    let (s, c, _) = &*guard;
    s.acl_script_check(c, &argv).ok_or_else(|| raise("Invalid command passed to redis.acl_check_cmd()"))
}

/// The reply for a script that raised an error: its message, and where it was raised.
fn failure_reply(v: &Value, sha: &str) -> Reply {
    let (msg, source, line) = convert::error_parts(v);
    let msg = msg.unwrap_or_else(|| "ERR unknown error".into());
    match (source, line) {
        (Some(src), Some(line)) => Reply::error(format!("{msg} script: {sha}, on {src}:{line}.")),
        _ => Reply::error(msg),
    }
}

/// redis.call / redis.pcall: (failed, reply as a Lua value).
/// The argv of a redis.call, or the error text for its arguments.
type CallArgv = Result<Vec<Vec<u8>>, &'static str>;

fn call_argv(args: MultiValue) -> CallArgv {
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
const NOSCRIPT_ELSEWHERE: &[&str] = &[
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
    "monitor",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "acl",
    "failover",
];

fn script_call(
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
        Err(e) => return Ok((true, Value::Table(convert::error_table(lua, e)?))),
    };
    // From here on a refusal counts in INFO errorstats, and as a rejected call of the
    // command when there is one (Redis's scriptCall).
    let refuse = |s: &mut Server, found: Option<cmd::Found>, text: &str| -> mlua::Result<(bool, Value)> {
        s.stats.error_replies += 1;
        s.stats.count_error(text);
        if let Some(found) = found {
            s.stats.commands.entry(found.name()).or_default().rejected += 1;
        }
        let t = convert::error_table(lua, text)?;
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
    let f = found.flags();
    if f & flags::NOSCRIPT != 0 {
        return refuse(s, Some(found), "ERR This Redis command is not allowed from script");
    }
    if let Some(refused) = s.acl_script_refusal(c, found, &argv) {
        return refuse(s, Some(found), &refused);
    }
    if readonly && f & (flags::WRITE | flags::MAY_REPLICATE) != 0 {
        return refuse(s, Some(found), "ERR Write commands are not allowed from read-only scripts.");
    }
    if let Some(refused) = crate::admission::script_call_refusal(s, found, st.wrote.get()) {
        return refuse(s, Some(found), &refused);
    }
    if f & flags::WRITE != 0 {
        st.wrote.set(true);
    }
    let before = s.engine.fx.propagate.len();
    std::mem::swap(&mut c.session, session);
    let caller_resp3 = std::mem::replace(&mut c.resp3, st.resp3.get());
    let reply = s.call(c, found, &argv);
    c.resp3 = caller_resp3;
    std::mem::swap(&mut c.session, session);
    if st.repl.get() & 1 == 0 {
        // redis.set_repl without REPL_AOF: this command's effects are not logged.
        s.engine.fx.propagate.truncate(before);
    }
    let failed = reply.is_error();
    if let Reply::Error(text) = &reply {
        // The command's error reply counts as any reply would (its error table says so).
        s.stats.error_replies += 1;
        s.stats.count_error(text);
    }
    Ok((failed, convert::reply_to_lua(lua, &reply, st.resp3.get())?))
}

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
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
    "HELP",
    "    Prints this help.",
];

pub fn script(s: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = &a[1];
    if a.len() == 2 && eq_ic(sub, "help") {
        return Reply::Array(SCRIPT_HELP.iter().map(|l| Reply::Simple((*l).into())).collect());
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
        return match s.scripts.create(&a[2]) {
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

const BUSY_EVAL: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const BUSY_FUNCTION: &str = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// SCRIPT KILL (`eval`) or FUNCTION KILL of the script running past its threshold.
fn kill(s: &mut Server, eval: bool) -> Reply {
    let (e, f) = (&s.scripts.eval.run, &s.scripts.func.run);
    let running = if e.busy.get() {
        e
    } else if f.busy.get() {
        f
    } else {
        return Reply::err("NOTBUSY No scripts in execution right now.");
    };
    if running.wrote.get() {
        return Reply::err(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either \
             wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
        );
    }
    if eval && !e.busy.get() {
        return Reply::err(BUSY_FUNCTION);
    }
    if !eval && !f.busy.get() {
        return Reply::err(BUSY_EVAL);
    }
    running.killed.set(true);
    Reply::ok()
}

/// While a script runs past its threshold, the reply to any other client's command but
/// those Redis allows then (SCRIPT/FUNCTION KILL, SHUTDOWN, AUTH, HELLO ...).
pub fn busy_refusal(s: &Server, argv: &[Vec<u8>]) -> Option<Reply> {
    let eval_busy = s.scripts.eval.run.busy.get();
    if !eval_busy && !s.scripts.func.run.busy.get() {
        return None;
    }
    let name = argv.first().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
    let sub_is = |what: &str| argv.get(1).is_some_and(|x| eq_ic(x, what));
    let allowed = match name.as_slice() {
        // Redis 7.0's allow-busy commands.
        b"auth" | b"hello" | b"shutdown" | b"quit" | b"reset" | b"multi" | b"discard" | b"watch" | b"unwatch" => true,
        b"script" => sub_is("kill"),
        b"function" => sub_is("kill") || sub_is("stats"),
        _ => false,
    };
    if allowed {
        return None;
    }
    Some(Reply::err(if eval_busy { BUSY_EVAL } else { BUSY_FUNCTION }))
}

/// The flags a script declared, for the checks made before it runs (maxmemory,
/// min-replicas-to-write): EVAL's shebang (EVAL_COMPAT without one), EVALSHA's cached
/// script, FCALL's function. None when the script is unknown or its shebang invalid.
pub fn declared_flags(s: &Scripts, command: &str, argv: &[Vec<u8>]) -> Option<u32> {
    let target = argv.get(1)?;
    match command {
        "eval" | "eval_ro" => parse_shebang(target).ok().map(|(f, _)| f),
        "evalsha" | "evalsha_ro" => s.cache.get(&String::from_utf8_lossy(target).to_ascii_lowercase()).map(|c| c.flags),
        _ => s.functions.flags(&String::from_utf8_lossy(target)),
    }
}

/// EXEC refused while busy: the transaction is discarded with the refusal's text.
pub fn exec_abort(refusal: &Reply) -> Reply {
    match refusal {
        Reply::Error(text) => Reply::error(format!("EXECABORT Transaction discarded because of: {text}")),
        other => other.clone(),
    }
}

/// INFO memory's scripting fields.
pub fn info_memory(s: &Scripts) -> Vec<(&'static str, String)> {
    let lua = s.lua_memory() as u64;
    let scripts = s.cache_memory() as u64;
    vec![
        ("used_memory_lua", lua.to_string()),
        ("used_memory_vm_eval", lua.to_string()),
        ("used_memory_lua_human", human_bytes(lua)),
        ("used_memory_scripts_eval", scripts.to_string()),
        ("number_of_cached_scripts", s.cached().to_string()),
        ("number_of_functions", s.functions.function_count().to_string()),
        ("number_of_libraries", s.functions.library_count().to_string()),
        ("used_memory_vm_functions", "0".into()),
        ("used_memory_vm_total", lua.to_string()),
        ("used_memory_vm_total_human", human_bytes(lua)),
        ("used_memory_functions", "0".into()),
        ("used_memory_scripts", scripts.to_string()),
        ("used_memory_scripts_human", human_bytes(scripts)),
    ]
}

fn human_bytes(b: u64) -> String {
    let f = b as f64;
    if f < 1024.0 {
        format!("{b}B")
    } else if f < 1024.0 * 1024.0 {
        format!("{:.2}K", f / 1024.0)
    } else {
        format!("{:.2}M", f / (1024.0 * 1024.0))
    }
}
