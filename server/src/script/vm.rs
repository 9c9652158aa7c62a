//! The Lua interpreters with Redis's sandbox and `redis` table, the script cache, and what
//! a run's Lua-side functions change (RunState).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Instant;

use ferrokv::Reply;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use super::registry::{Registered, Registry};
use super::{cjson, cmsgpack, convert, libs, lstruct};

/// The version scripts see (redis.REDIS_VERSION / _NUM: 0x00MMmmpp).
pub(super) fn version_num(release: &str) -> f64 {
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
pub(super) struct RunState {
    /// redis.setresp(3) was called.
    pub(super) resp3: Cell<bool>,
    /// redis.set_repl flags: 1 AOF, 2 replicas.
    pub(super) repl: Cell<u8>,
    pub(super) started: Cell<Option<Instant>>,
    /// Runs since the last garbage collection step.
    pub(super) runs: Cell<u32>,
    /// busy-reply-threshold (ms) for this run: past it, other clients are served BUSY.
    pub(super) limit_ms: Cell<u64>,
    /// The script ran past the threshold: other clients get BUSY.
    pub(super) busy: Cell<bool>,
    /// SCRIPT KILL / FUNCTION KILL (or SHUTDOWN) asked for it to stop.
    pub(super) killed: Cell<bool>,
    /// It ran a write command (it can no longer be killed).
    pub(super) wrote: Cell<bool>,
    /// A library's code runs (FUNCTION LOAD): it may take LOAD_TIMEOUT_MS at most.
    pub(super) loading: Cell<bool>,
}

/// How long a library's code may run at FUNCTION LOAD (it only registers functions).
const LOAD_TIMEOUT_MS: u128 = 500;

pub(super) struct Cached {
    /// In the Lua registry, not held as a handle (see [`super::registry::Entry::func`]).
    pub(super) func: mlua::RegistryKey,
    pub(super) flags: u32,
    /// Its place in [`Scripts::eval_lru`] when EVAL created it and EVAL's scripts are
    /// evicted (Redis 7.4, Valkey 8.0); SCRIPT LOAD's scripts stay.
    lru_tick: Option<u64>,
    body_len: usize,
}

/// How many scripts EVAL may create before the least recently used is evicted (Redis 7.4).
const EVAL_SCRIPTS_KEPT: usize = 500;

/// One Lua interpreter with the sandbox: EVAL scripts have one, functions another (as
/// in Redis, so SCRIPT FLUSH and FUNCTION FLUSH reset them apart).
pub(super) struct Vm {
    pub(super) lua: Lua,
    /// Where a running script's "serve the other clients" function is put.
    pub(super) hooks: Table,
    pub(super) compile: Function,
    pub(super) runner: Function,
    pub(super) load_library: Function,
    pub(super) run_library: Function,
    pub(super) run_function: Function,
    pub(super) run: Rc<RunState>,
    /// The functions the library being loaded registered (Some while loading).
    pub(super) registered: Rc<RefCell<Option<Vec<Registered>>>>,
    /// The real `redis` table: a running script's redis.call and redis.pcall are put
    /// there, as C functions called straight from the script.
    pub(super) redis: Table,
    /// redis.call and redis.pcall outside a script run.
    pub(super) stubs: (Function, Function),
}

/// The interpreters, the script cache (SHA1 → compiled script) and the function libraries.
pub struct Scripts {
    pub(super) eval: Vm,
    pub(super) func: Vm,
    pub(super) cache: HashMap<String, Cached>,
    /// Bytes of the cached bodies (INFO used_memory_scripts_eval).
    pub(super) cache_bytes: usize,
    /// EVAL's evictable scripts by last use, oldest first, and the use counter.
    eval_lru: BTreeMap<u64, String>,
    lru_clock: u64,
    /// FUNCTION LOAD's libraries, compiled in `func` (their code is the engine's).
    pub(super) functions: Registry,
    pub(super) rng: libs::Lrand48,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call `noscript` commands (Redis's tests).
    pub disable_deny: bool,
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
            eval_lru: BTreeMap::new(),
            lru_clock: 0,
            functions: Default::default(),
            rng,
            disable_deny: false,
        })
    }

    /// SCRIPT FLUSH: a new interpreter, an empty cache (the PRNG goes on, as in Redis).
    pub fn flush(&mut self) -> Result<(), String> {
        self.eval = Vm::new(self.rng.clone()).map_err(|e| e.to_string())?;
        self.cache.clear();
        self.cache_bytes = 0;
        self.eval_lru.clear();
        Ok(())
    }

    /// FUNCTION FLUSH: a new interpreter for functions, no library.
    pub fn flush_functions(&mut self) -> Result<(), String> {
        self.func = Vm::new(self.rng.clone()).map_err(|e| e.to_string())?;
        self.functions = Default::default();
        Ok(())
    }

    /// A script runs past its threshold (other clients are served meanwhile).
    pub fn busy(&self) -> bool {
        self.eval.run.busy.get() || self.func.run.busy.get()
    }

    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Memory of the EVAL interpreter, bytes.
    pub fn lua_memory(&self) -> usize {
        self.eval.lua.used_memory()
    }

    /// Bytes the function registry takes beside its interpreter (used_memory_functions).
    pub fn functions_memory(&self) -> usize {
        self.functions.memory()
    }

    pub fn cache_memory(&self) -> usize {
        self.cache_bytes + self.cache.len() * 64
    }

    /// Compile `body` into the cache (no-op when it is there); its SHA1, or the error reply.
    /// `evictable` (EVAL's scripts under Redis 7.4) first evicts the least recently used
    /// of those past [`EVAL_SCRIPTS_KEPT`], counted in `evicted`.
    pub(super) fn create(&mut self, body: &[u8], evictable: bool, evicted: &mut u64) -> Result<String, Reply> {
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
        let func = self.eval.keep(func)?;
        let lru_tick = if evictable {
            while self.eval_lru.len() >= EVAL_SCRIPTS_KEPT {
                let Some((_, oldest)) = self.eval_lru.pop_first() else { break };
                if let Some(old) = self.cache.remove(&oldest) {
                    self.cache_bytes -= old.body_len + 40;
                    // Gone from the interpreter too; a failure only leaves it to Lua's collector.
                    let _ = self.eval.lua.remove_registry_value(old.func);
                }
                *evicted += 1;
            }
            self.lru_clock += 1;
            self.eval_lru.insert(self.lru_clock, sha.clone());
            Some(self.lru_clock)
        } else {
            None
        };
        self.cache_bytes += body.len() + 40;
        self.cache.insert(sha.clone(), Cached { func, flags, lru_tick, body_len: body.len() });
        Ok(sha)
    }

    /// A cached script was run: it becomes EVAL's most recently used.
    pub(super) fn touch(&mut self, sha: &str) {
        let Some(cached) = self.cache.get_mut(sha) else { return };
        let Some(tick) = cached.lru_tick else { return };
        if let Some(sha) = self.eval_lru.remove(&tick) {
            self.lru_clock += 1;
            self.eval_lru.insert(self.lru_clock, sha);
            cached.lru_tick = Some(self.lru_clock);
        }
    }
}

impl Vm {
    /// Put `f` in this interpreter's registry (see [`super::registry::Entry::func`]).
    pub(super) fn keep(&self, f: Function) -> Result<mlua::RegistryKey, Reply> {
        self.lua.create_registry_value(f).map_err(lua_failure)
    }

    fn new(rng: libs::Lrand48) -> mlua::Result<Vm> {
        let registered: Rc<RefCell<Option<Vec<Registered>>>> = Rc::new(RefCell::new(None));
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        let run = Rc::new(RunState::default());
        let native = lua.create_table()?;
        native.raw_set("version", crate::version::release())?;
        native.raw_set("version_num", version_num(crate::version::release()))?;
        if crate::version::version().since_redis74() {
            // C's clock(): the process's CPU time in seconds.
            native.raw_set(
                "os_clock",
                lua.create_function(|_, ()| {
                    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
                    Ok(t.tv_sec as f64 + t.tv_nsec as f64 / 1e9)
                })?,
            )?;
        }
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
                crate::log::log(&parts.join(" "));
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
                Ok(script_place(lua).map_or((None, None), |(source, line)| (Some(source), line.map(|l| l as f64))))
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
            lua.create_function(move |_, args: MultiValue| register_function(&reg, args))?,
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
            if st.loading.get() {
                if started.elapsed().as_millis() > LOAD_TIMEOUT_MS {
                    return Err(raise("FUNCTION LOAD timeout"));
                }
                return Ok(VmState::Continue);
            }
            let limit = st.limit_ms.get();
            if !st.killed.get() && limit > 0 && started.elapsed().as_millis() as u64 >= limit {
                if !st.busy.get() {
                    st.busy.set(true);
                    crate::log::log(&format!(
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
pub(super) struct ScriptError {
    pub(super) text: String,
    pub(super) counted: bool,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for ScriptError {}

/// A redis.* argument error (`ERR ` + text, as Redis's luaPushError).
pub(super) fn raise(text: &str) -> mlua::Error {
    mlua::Error::external(ScriptError { text: format!("ERR {text}"), counted: false })
}

/// What a Lua error value raised by Rust stands for: an error table for
/// [`ScriptError`], the message for other errors (as luaL_error raises it); any other
/// value is returned as it is.
pub(super) fn unwrap_error(lua: &Lua, v: Value) -> mlua::Result<Value> {
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

pub(super) fn lua_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => std::str::from_utf8(&s.as_bytes()).ok().and_then(|t| t.trim().parse().ok()),
        _ => None,
    }
}

pub(super) fn lua_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Integer(i) => Some(convert::lua_number_text(*i as f64)),
        Value::Number(n) => Some(convert::lua_number_text(*n)),
        _ => None,
    }
}

/// Where the script's own code is running: its source name and line (C functions, the
/// sandbox's own Lua and tail-call placeholders skipped).
pub(super) fn script_place(lua: &Lua) -> Option<(String, Option<usize>)> {
    let mut level = 1;
    while let Some((what, source, line)) = lua.inspect_stack(level, |d| {
        let s = d.source();
        (s.what, s.source.map(|x| x.into_owned()).unwrap_or_default(), d.current_line())
    }) {
        if what != "C" && what != "tail" && !source.starts_with("=ferrokv") && source != "=(tail call)" {
            return Some((source, line));
        }
        level += 1;
    }
    None
}

pub(super) fn lua_failure(e: mlua::Error) -> Reply {
    Reply::error(format!("ERR Lua failure: {e}"))
}

/// The flags of a script's shebang line and the line's length (0 without one).
pub(super) fn parse_shebang(body: &[u8]) -> Result<(u32, usize), String> {
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

/// INFO memory's scripting fields.
pub fn info_memory(s: &Scripts) -> Vec<(&'static str, String)> {
    let lua = s.lua_memory() as u64;
    let vm_functions = s.func.lua.used_memory() as u64;
    let functions = s.functions_memory() as u64;
    let scripts = s.cache_memory() as u64;
    if crate::version::version().is_redis62() {
        // Redis 6.2's fields, in its order (one interpreter, no functions).
        return vec![
            ("used_memory_lua", lua.to_string()),
            ("used_memory_lua_human", human_bytes(lua)),
            ("used_memory_scripts", scripts.to_string()),
            ("used_memory_scripts_human", human_bytes(scripts)),
            ("number_of_cached_scripts", s.cached().to_string()),
        ];
    }
    vec![
        ("used_memory_lua", lua.to_string()),
        ("used_memory_vm_eval", lua.to_string()),
        ("used_memory_lua_human", human_bytes(lua)),
        ("used_memory_scripts_eval", scripts.to_string()),
        ("number_of_cached_scripts", s.cached().to_string()),
        ("number_of_functions", s.functions.function_count().to_string()),
        ("number_of_libraries", s.functions.library_count().to_string()),
        ("used_memory_vm_functions", vm_functions.to_string()),
        ("used_memory_vm_total", (lua + vm_functions).to_string()),
        ("used_memory_vm_total_human", human_bytes(lua + vm_functions)),
        ("used_memory_functions", functions.to_string()),
        ("used_memory_scripts", (scripts + functions).to_string()),
        ("used_memory_scripts_human", human_bytes(scripts + functions)),
    ]
}

pub(super) fn human_bytes(b: u64) -> String {
    let f = b as f64;
    if f < 1024.0 {
        format!("{b}B")
    } else if f < 1024.0 * 1024.0 {
        format!("{:.2}K", f / 1024.0)
    } else {
        format!("{:.2}M", f / (1024.0 * 1024.0))
    }
}

pub(super) const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

pub(super) const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// redis.register_function(name, callback) or redis.register_function{function_name=,
/// callback=, flags=, description=}, while a library loads.
pub(super) fn register_function(reg: &RefCell<Option<Vec<Registered>>>, args: MultiValue) -> mlua::Result<()> {
    // Outside FUNCTION LOAD before anything else, then the arguments, as Redis checks.
    if reg.borrow().is_none() {
        return Err(raise("redis.register_function can only be called on FUNCTION LOAD command"));
    }
    let (name, func, flags, description) = match (args.len(), args.front()) {
        (0, _) | (3.., _) => return Err(raise("wrong number of arguments to redis.register_function")),
        (1, Some(Value::Table(t))) => {
            let (mut name, mut func, mut flags, mut description) = (None, None, 0, None);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let key = match &k {
                    Value::String(s) => s.as_bytes().to_vec(),
                    _ => return Err(raise("named argument key given to redis.register_function is not a string")),
                };
                match (key.as_slice(), v) {
                    (b"function_name", Value::String(s)) => name = Some(s.as_bytes().to_vec()),
                    (b"function_name", _) => {
                        return Err(raise("function_name argument given to redis.register_function must be a string"))
                    }
                    (b"callback", Value::Function(f)) => func = Some(f),
                    (b"callback", _) => {
                        return Err(raise("callback argument given to redis.register_function must be a function"))
                    }
                    (b"description", Value::String(d)) => description = Some(d.as_bytes().to_vec()),
                    (b"description", _) => {
                        return Err(raise("description argument given to redis.register_function must be a string"))
                    }
                    (b"flags", Value::Table(ft)) => {
                        for f in ft.sequence_values::<Value>() {
                            let Value::String(f) = f? else {
                                return Err(raise("unknown flag given"));
                            };
                            match script_flags::NAMES.iter().find(|(n, _)| n.as_bytes() == &f.as_bytes()[..]) {
                                Some((_, bit)) => flags |= bit,
                                None => return Err(raise("unknown flag given")),
                            }
                        }
                    }
                    (b"flags", _) => {
                        return Err(raise(
                            "flags argument to redis.register_function must be a table representing function flags",
                        ))
                    }
                    _ => return Err(raise("unknown argument given to redis.register_function")),
                }
            }
            let Some(name) = name else {
                return Err(raise("redis.register_function must get a function name argument"));
            };
            let Some(func) = func else {
                return Err(raise("redis.register_function must get a callback argument"));
            };
            (name, func, flags, description)
        }
        (1, _) => {
            return Err(raise(
                "calling redis.register_function with a single argument is only applicable to Lua table \
                 (representing named arguments).",
            ))
        }
        _ => {
            let mut it = args.into_iter();
            // lua_isstring: a number is a string to Lua.
            let name = match it.next() {
                Some(Value::String(n)) => n.as_bytes().to_vec(),
                Some(Value::Integer(i)) => i.to_string().into_bytes(),
                _ => return Err(raise("first argument to redis.register_function must be a string")),
            };
            let Some(Value::Function(f)) = it.next() else {
                return Err(raise("second argument to redis.register_function must be a function"));
            };
            (name, f, 0, None)
        }
    };
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
        // Redis 7's text for a function name too.
        return Err(raise(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    let name = String::from_utf8_lossy(&name).into_owned();
    let mut guard = reg.borrow_mut();
    let Some(list) = guard.as_mut() else {
        return Err(raise("redis.register_function can only be called on FUNCTION LOAD command"));
    };
    if list.iter().any(|r| r.name == name) {
        return Err(raise("Function already exists in the library"));
    }
    list.push(Registered { name, func, flags, description });
    Ok(())
}
