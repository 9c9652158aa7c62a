-- The scripting sandbox, built once per Lua state (and again after SCRIPT FLUSH).
-- `native` holds the Rust functions; `hooks` is where the running EVAL puts its
-- redis.call implementation. Returns the environment scripts run in, the compiler
-- and the runner.
--
-- Protection as Redis 7.0: the globals and every library table are read-only
-- (writing one fails with "Attempt to modify a readonly table"), and reading a
-- global that does not exist fails. Stock Lua 5.1 has no read-only tables, so each
-- protected table is an empty proxy whose metatable reads through to the real one.
local native, hooks = ...

local G = _G
local error, type, tostring, select, rawget, rawset = error, type, tostring, select, rawget, rawset
local orig_setmetatable, orig_getmetatable = setmetatable, getmetatable
local orig_next, orig_pcall, orig_xpcall = next, pcall, xpcall
local orig_loadstring, orig_setfenv = loadstring, setfenv
local byte, sub, find, gsub = string.byte, string.sub, string.find, string.gsub

local READONLY = "Attempt to modify a readonly table"

-- proxy -> real table, and proxy -> the metatable getmetatable() shows.
local real_of = orig_setmetatable({}, { __mode = "k" })
local shown_meta = orig_setmetatable({}, { __mode = "k" })

local function readonly_newindex()
    error(READONLY, 2)
end

local function protect(t, index, shown)
    local proxy = {}
    real_of[proxy] = t
    shown_meta[proxy] = shown
    orig_setmetatable(proxy, { __index = index or t, __newindex = readonly_newindex, __metatable = false })
    return proxy
end

-- Redis's error tables: "-CODE msg" keeps its code, anything else gets ERR.
local function error_table(s)
    local code, msg
    if sub(s, 1, 1) == "-" then
        local sp = find(s, " ", 1, true)
        if sp then
            code, msg = sub(s, 2, sp - 1), sub(s, sp + 1)
        else
            code, msg = "ERR", sub(s, 2)
        end
    else
        code, msg = "ERR", s
    end
    msg = gsub(msg, "^[\r\n]+", "")
    msg = gsub(msg, "[\r\n]+$", "")
    return { err = code .. " " .. msg }
end

-- ------------------------------------------------------------------ redis

local redis = {}

-- These raise errors from Rust; they are C functions, so a script's `return
-- redis.call(...)` keeps the script's frame, and its line, on the stack.
redis.call = native.call
redis.pcall = native.pcall
redis.sha1hex = native.sha1hex

redis.error_reply = function(...)
    local s = ...
    if select("#", ...) ~= 1 or type(s) ~= "string" then
        return error_table("wrong number or type of arguments")
    end
    if sub(s, 1, 1) ~= "-" then
        s = "-" .. s
    end
    return error_table(s)
end

redis.status_reply = function(...)
    local s = ...
    if select("#", ...) ~= 1 or type(s) ~= "string" then
        return error_table("wrong number or type of arguments")
    end
    return { ok = s }
end

redis.log = native.log
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REDIS_VERSION = native.version
redis.REDIS_VERSION_NUM = native.version_num

redis.setresp = native.setresp
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3

redis.set_repl = native.set_repl

redis.replicate_commands = function()
    return true
end
redis.breakpoint = function()
    return false
end
redis.debug = function() end

redis.acl_check_cmd = native.acl_check_cmd

-- ------------------------------------------------------------------ libraries

math.random = native.random
math.randomseed = native.randomseed

G.bit = native.bit
G.cjson = native.cjson
G.cmsgpack = native.cmsgpack
G.struct = native.struct

-- A binary chunk is never loaded (Redis refuses them too).
local function safe_loadstring(s, name)
    if type(s) == "string" and byte(s, 1) == 27 then
        return nil, "binary chunks are not allowed"
    end
    local f, e = orig_loadstring(s, name)
    if f then
        orig_setfenv(f, hooks.env)
    end
    return f, e
end
G.loadstring = safe_loadstring
G.load = function(fn, name)
    local parts = {}
    while true do
        local piece = fn()
        if piece == nil or piece == "" then
            break
        end
        if type(piece) ~= "string" then
            return nil, "reader function must return a string"
        end
        parts[#parts + 1] = piece
    end
    return safe_loadstring(table.concat(parts), name or "=(load)")
end

-- pcall hands back the message of an error table, as Redis's pcall does.
local unwrap = native.unwrap
local killed = native.killed
local function pcall_result(ok, ...)
    if ok then
        return true, ...
    end
    -- A killed script cannot catch its end.
    if killed() then
        error((...), 0)
    end
    local e = unwrap((...))
    if type(e) == "table" then
        local m = e.err
        if type(m) == "string" or type(m) == "number" then
            return false, m
        end
    end
    return false, e
end
G.pcall = function(...)
    return pcall_result(orig_pcall(...))
end
local function xpcall_result(ok, ...)
    if not ok and killed() then
        error((...), 0)
    end
    return ok, ...
end
G.xpcall = function(f, h)
    return xpcall_result(orig_xpcall(f, function(e)
        if killed() then
            return e
        end
        return h(unwrap(e))
    end))
end

-- The protected tables look like the real ones to the iteration functions.
G.next = function(t, k)
    local r = real_of[t]
    if r then
        return orig_next(r, k)
    end
    return orig_next(t, k)
end
local next_seen = G.next
G.pairs = function(t)
    local r = real_of[t]
    if r then
        return next_seen, t, nil
    end
    return orig_next, t, nil
end
G.ipairs = function(t)
    local src = real_of[t] or t
    local function step(_, i)
        i = i + 1
        local v = rawget(src, i)
        if v ~= nil then
            return i, v
        end
    end
    return step, t, 0
end
G.setmetatable = function(t, m)
    if real_of[t] then
        error(READONLY, 0)
    end
    return orig_setmetatable(t, m)
end
G.getmetatable = function(t)
    if real_of[t] then
        return shown_meta[t]
    end
    return orig_getmetatable(t)
end
G.rawset = function(t, k, v)
    if real_of[t] then
        error(READONLY, 0)
    end
    return rawset(t, k, v)
end
G.rawget = function(t, k)
    local r = real_of[t]
    if r then
        return rawget(r, k)
    end
    return rawget(t, k)
end

-- Not in Redis's sandbox.
for _, name in orig_next, { "dofile", "loadfile", "print", "getfenv", "setfenv", "module", "require", "newproxy", "debug", "io", "os", "package" } do
    G[name] = nil
end

-- The error handler of a script run: an error table with where it happened.
local function err_handler(err)
    local source, line = native.where()
    err = unwrap(err)
    if type(err) ~= "table" then
        -- `plain`: the message as raised, which Redis 6.2 replies with.
        err = { err = "ERR " .. tostring(err), plain = tostring(err) }
    end
    if source then
        err.source = source
        err.line = line
    end
    return err
end
G.__redis__err__handler = err_handler

-- Redis 7.4's os library: clock alone.
if native.os_clock then
    G.os = { clock = native.os_clock }
end

G.redis = redis
for _, name in orig_next, { "redis", "string", "math", "table", "coroutine", "bit", "cjson", "cmsgpack", "struct", "os" } do
    if G[name] ~= nil then
        G[name] = protect(G[name])
    end
end

-- The globals: missing names are an error (raised at the caller's level 3: the script).
local function missing(k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 3)
end
local function global_index(_, k)
    local v = G[k]
    if v == nil then
        missing(k)
    end
    return v
end
local env_meta_shown = protect({ __index = global_index, __newindex = readonly_newindex })
local env = protect(G, global_index, env_meta_shown)
G._G = env
hooks.env = env

local function compile(body, chunkname)
    if byte(body, 1) == 27 then
        return nil, sub(chunkname, 2) .. ": binary chunks are not allowed"
    end
    local f, e = orig_loadstring(body, chunkname)
    if not f then
        return nil, e
    end
    orig_setfenv(f, env)
    return f
end

local function run(f)
    local ok, v = orig_xpcall(f, err_handler)
    return ok, v
end

-- Functions (FUNCTION LOAD / FCALL). While a library's code runs, its only global is
-- `redis`, the loading API: register_function, log and the version, nothing else.
local loading = false
local load_api = {
    register_function = native.register_function,
    log = redis.log,
    LOG_DEBUG = 0,
    LOG_VERBOSE = 1,
    LOG_NOTICE = 2,
    LOG_WARNING = 3,
    REDIS_VERSION = native.version,
    REDIS_VERSION_NUM = native.version_num,
}
local load_redis = protect(load_api, function(_, k)
    local v = load_api[k]
    if v == nil then
        missing(k)
    end
    return v
end)
local function library_index(_, k)
    if loading then
        if k == "redis" then
            return load_redis
        end
        missing(k)
    end
    local v = G[k]
    if v == nil then
        missing(k)
    end
    return v
end
local library_env = protect(G, library_index, env_meta_shown)

local function load_library(body)
    if byte(body, 1) == 27 then
        return nil, "user_function: binary chunks are not allowed"
    end
    local f, e = orig_loadstring(body, "@user_function")
    if not f then
        return nil, e
    end
    orig_setfenv(f, library_env)
    return f
end

local function run_library(f)
    loading = true
    local ok, v = orig_xpcall(f, err_handler)
    loading = false
    return ok, v
end

local function run_function(f, keys, args)
    return orig_xpcall(function()
        return f(keys, args)
    end, err_handler)
end

return env, compile, run, load_library, run_library, run_function, redis
