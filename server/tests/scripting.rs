//! Lua scripting (EVAL, EVALSHA, SCRIPT, FUNCTION/FCALL) compared with a real
//! redis-server 7.0: the same raw RESP sessions, RESP2 and RESP3, byte for byte; and
//! what a script writes to the AOF.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

mod support;
use support::{mask_ids, raw_session, resp_vecs, Ours};

use ferrokv_testkit::{cli, TempDir};

const LOCK_RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

fn sha1hex(s: &str) -> String {
    sha1_smol::Sha1::from(s).digest().to_string()
}

/// Sessions whose replies must equal real Redis 7.0's, byte for byte.
fn sessions() -> Vec<(&'static str, Vec<u8>)> {
    let lock_sha = sha1hex(LOCK_RELEASE);
    vec![
        (
            "lock pattern",
            resp_vecs(&[
                vec!["SET", "lock", "token-a", "NX", "PX", "30000"],
                vec!["SET", "lock", "token-b", "NX", "PX", "30000"],
                vec!["EVAL", LOCK_RELEASE, "1", "lock", "token-b"],
                vec!["GET", "lock"],
                vec!["EVAL", LOCK_RELEASE, "1", "lock", "token-a"],
                vec!["EXISTS", "lock"],
                vec!["SCRIPT", "LOAD", LOCK_RELEASE],
                vec!["SET", "lock", "t", "NX", "PX", "30000"],
                vec!["EVALSHA", "e6b2ab6f5e2b1f1a1e51c0d4dcf0e8f0d2b1a0a0", "1", "lock", "t"],
                vec!["EVALSHA", &lock_sha, "1", "lock", "other"],
                vec!["EVALSHA", &lock_sha, "1", "lock", "t"],
                vec!["SCRIPT", "EXISTS", &lock_sha, "nosuch"],
            ]),
        ),
        (
            "lua to resp",
            resp_vecs(&[
                vec!["EVAL", "return 100.5", "0"],
                vec!["EVAL", "return -2.9", "0"],
                vec!["EVAL", "return 1e20", "0"],
                vec!["EVAL", "return 'hello world'", "0"],
                vec!["EVAL", "return true", "0"],
                vec!["EVAL", "return false", "0"],
                vec!["EVAL", "return nil", "0"],
                vec!["EVAL", "return", "0"],
                vec!["EVAL", "return {ok='fine'}", "0"],
                vec!["EVAL", "return {ok='a\\r\\nb'}", "0"],
                vec!["EVAL", "return {err='ERR this is an error'}", "0"],
                vec!["EVAL", "return {err='MY code\\nline'}", "0"],
                vec!["EVAL", "return {1,2,3,'ciao',{1,2}}", "0"],
                vec!["EVAL", "return {1,2,nil,4}", "0"],
                vec!["EVAL", "return {1,{2,{3,'x'}},false,true}", "0"],
                vec!["EVAL", "return {err=1}", "0"],
                vec!["EVAL", "return _G", "0"],
                vec!["EVAL", "local a = {}; setmetatable(a,{__index=function() foo() end}) return a", "0"],
                vec!["EVAL", "return {map={a=1}}", "0"],
                vec!["EVAL", "return {set={x=true}}", "0"],
                vec!["EVAL", "return {double=3.5}", "0"],
                vec!["EVAL", "return {big_number='123456789012345678901234567890'}", "0"],
                vec!["EVAL", "return {verbatim_string={format='txt',string='hi'}}", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return true", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return false", "0"],
                vec!["EVAL", "return redis.status_reply('MY_OK custom')", "0"],
                vec!["EVAL", "return redis.error_reply('MY_ERR custom msg')", "0"],
                vec!["EVAL", "return redis.error_reply('x')", "0"],
                vec!["EVAL", "return redis.error_reply('-x y')", "0"],
                vec!["EVAL", "return redis.error_reply('')", "0"],
                vec!["EVAL", "return redis.status_reply(1)", "0"],
            ]),
        ),
        (
            "resp to lua",
            resp_vecs(&[
                vec!["SET", "s", "v"],
                vec!["RPUSH", "l", "a", "b", "c"],
                vec!["HSET", "h", "f", "v", "g", "w"],
                vec!["SADD", "set", "m"],
                vec!["ZADD", "z", "1.5", "m"],
                vec!["EVAL", "local r = redis.call('incr', 'n'); return {type(r), r}", "0"],
                vec!["EVAL", "local r = redis.call('get', 's'); return {type(r), r}", "0"],
                vec!["EVAL", "local r = redis.call('get', 'nosuch'); return {type(r), r == false}", "0"],
                vec!["EVAL", "local r = redis.call('lrange', 'l', 0, -1); return {type(r), r[1], #r}", "0"],
                vec!["EVAL", "local r = redis.call('set', 'k', 'v'); return {type(r), r['ok']}", "0"],
                vec!["EVAL", "local r = redis.pcall('incr', 's'); return {type(r), r['err']}", "0"],
                vec!["EVAL", "return redis.call('hgetall', 'h')", "0"],
                vec!["EVAL", "return redis.call('zscore', 'z', 'm')", "0"],
                vec!["EVAL", "return redis.call('zrange', 'z', 0, -1, 'withscores')", "0"],
                vec!["EVAL", "return redis.call('ping')", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return redis.call('hgetall', 'h')", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return redis.call('smembers', 'set')", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return redis.call('zscore', 'z', 'm')", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return redis.call('get', 'nosuch') == nil", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); local m = redis.call('hgetall', 'h'); return m.map.f", "0"],
                vec!["EVAL", "return redis.call('set', 'num', 3.25)", "0"],
                vec!["EVAL", "redis.call('set', 'num', 9007199254740991); return redis.call('get', 'num')", "0"],
                vec!["EVAL", "redis.call('set', 'num', 0.1); return redis.call('get', 'num')", "0"],
                vec!["EVAL", "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}", "2", "a", "b", "c", "d"],
                vec!["SADD", "myset", "b", "a", "zz", "c", "aa", "10", "9"],
                vec!["EVAL", "return redis.call('sort', KEYS[1], 'by', '_')", "1", "myset"],
                vec!["EVAL", "return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', '_:*')", "1", "myset"],
                vec!["EVAL", "return redis.call('sort', KEYS[1], 'alpha', 'desc')", "1", "myset"],
            ]),
        ),
        (
            "resp3 client",
            resp_vecs(&[
                vec!["HELLO", "3"],
                vec!["HSET", "h", "f", "v"],
                vec!["SADD", "set", "m"],
                vec!["EVAL", "return redis.call('hgetall', 'h')", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return redis.call('hgetall', 'h')", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return redis.call('smembers', 'set')", "0"],
                vec!["EVAL", "return {double=3.5}", "0"],
                vec!["EVAL", "return {big_number='12'}", "0"],
                vec!["EVAL", "return {map={a=1,b=2}}", "0"],
                vec!["EVAL", "return {set={x=true}}", "0"],
                vec!["EVAL", "return true", "0"],
                vec!["EVAL", "return false", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return false", "0"],
                vec!["EVAL", "return nil", "0"],
                vec!["EVAL", "return {verbatim_string={format='txt',string='hi'}}", "0"],
                vec!["EVAL", "redis.setresp_vecs(3); return redis.call('get', 'nosuch')", "0"],
                vec!["HELLO", "2"],
            ]),
        ),
        (
            "errors",
            resp_vecs(&[
                vec!["EVAL", "return a", "0"],
                vec!["EVAL", "a = 10", "0"],
                vec!["EVAL", "redis = 1", "0"],
                vec!["EVAL", "redis.call = function() return 1 end", "0"],
                vec!["EVAL", "cjson.encode = function() return 1 end", "0"],
                vec!["EVAL", "setmetatable(_G, {})", "0"],
                vec!["EVAL", "local g = getmetatable(_G); g.__index = {}", "0"],
                vec!["EVAL", "_G = {}", "0"],
                vec!["EVAL", "loadfile('x')", "0"],
                vec!["EVAL", "dofile('x')", "0"],
                vec!["EVAL", "print('x')", "0"],
                vec!["EVAL", "return loadstring(string.dump(function() return 1 end))()", "0"],
                vec!["EVAL", "redis.call('nosuch')", "0"],
                vec!["EVAL", "return redis.call('nosuch')", "0"],
                vec!["EVAL", "redis.call('get', 'a', 'b', 'c')", "0"],
                vec!["EVAL", "return redis.call('eval', 'return 1', '0')", "0"],
                vec!["EVAL", "return redis.call('client', 'list')", "0"],
                vec!["SET", "foo", "bar"],
                vec!["EVAL", "redis.call('lpush', KEYS[1], 'val')", "1", "foo"],
                vec!["EVAL", "return redis.call()", "0"],
                vec!["EVAL", "return redis.pcall()", "0"],
                vec!["EVAL", "return redis.call({})", "0"],
                vec!["EVAL", "return redis.sha1hex()", "0"],
                vec!["EVAL", "return redis.setresp_vecs(4)", "0"],
                vec!["EVAL", "return redis.set_repl(12345)", "0"],
                vec!["EVAL", "return redis.log(9, 'x')", "0"],
                vec!["EVAL", "return redis.log(1)", "0"],
                vec!["EVAL", "error('boom')", "0"],
                vec!["EVAL", "error({err='MY boom'})", "0"],
                vec!["EVAL", "error(nil)", "0"],
                vec!["EVAL", "local t = nil; return t.x", "0"],
                vec!["EVAL", "local f = function() error('in f') end\nf()", "0"],
                vec!["EVAL", "\n\nredis.call('nosuch')", "0"],
                vec!["EVAL", "return 1 +", "0"],
                vec!["EVAL", "return bit.band()", "0"],
                vec!["EVAL", "return cjson.decode('[1,')", "0"],
                vec!["EVAL", "return math.random(0)", "0"],
                vec!["EVAL", "return 1", "5"],
                vec!["EVAL", "return 1", "-1"],
                vec!["EVAL", "return 1", "x"],
                vec!["EVAL", "return 1"],
                vec!["EVAL", "#!not-lua\nreturn 1", "0"],
                vec!["EVAL", "#!lua badger=data\nreturn 1", "0"],
                vec!["EVAL", "#!lua flags=allow-oom,what?\nreturn 1", "0"],
                vec!["EVAL", "#!lua", "0"],
                vec!["EVAL", "#!lua\nreturn 1", "0"],
                vec!["EVAL", "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')", "0"],
            ]),
        ),
        (
            "pcall",
            resp_vecs(&[
                vec!["EVAL", "return {pcall(function() redis.call('nosuch') end)}", "0"],
                vec!["EVAL", "return {pcall(function() return foo end)}", "0"],
                vec!["EVAL", "return {pcall(redis.call, 'incr')}", "0"],
                vec!["EVAL", "return {pcall(cjson.decode, '{')}", "0"],
                vec!["EVAL", "local ok, r = pcall(function() return 1 end); return {tostring(ok), r}", "0"],
                vec!["EVAL", "return {pcall(error, {err='MY x'})}", "0"],
                vec!["SET", "str", "x"],
                vec!["EVAL", "return redis.pcall('incr', 'str')", "0"],
                vec!["EVAL", "local e = redis.pcall('incr', 'str'); return e.err", "0"],
                vec!["EVAL", "return redis.pcall('select', 99)", "0"],
            ]),
        ),
        (
            "evalsha and script",
            resp_vecs(&[
                vec!["SET", "mykey", "myval"],
                vec!["EVAL", "return redis.call('get',KEYS[1])", "1", "mykey"],
                vec!["EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey"],
                vec!["EVALSHA", "FD758D1589D044DD850A6F05D52F2EEFD27F033F", "1", "mykey"],
                vec!["EVALSHA", "NotValidShaSUM", "0"],
                vec!["EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"],
                vec!["EVALSHA_RO", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey"],
                vec!["SCRIPT", "EXISTS", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "FD758D1589D044DD850A6F05D52F2EEFD27F033F", "x"],
                vec!["SCRIPT", "LOAD", "return 'loaded'"],
                vec!["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
                vec!["SCRIPT", "LOAD", "return +"],
                vec!["SCRIPT", "FLUSH", "x"],
                vec!["SCRIPT", "FLUSH"],
                vec!["EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey"],
                vec!["SCRIPT", "FLUSH", "ASYNC"],
                vec!["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8"],
                vec!["SCRIPT", "NOSUCH"],
                vec!["SCRIPT", "HELP"],
                vec!["SCRIPT", "KILL"],
                vec!["SCRIPT"],
            ]),
        ),
        (
            "read-only scripts",
            resp_vecs(&[
                vec!["SET", "foo", "bar"],
                vec!["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "foo"],
                vec!["EVAL_RO", "redis.call('del', KEYS[1])", "1", "foo"],
                vec!["EVAL_RO", "return redis.pcall('del', KEYS[1])", "1", "foo"],
                vec!["EVAL_RO", "#!lua\nreturn 1", "0"],
                vec!["EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('get', 'foo')", "0"],
                vec!["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'foo')", "0"],
                vec!["GET", "foo"],
            ]),
        ),
        (
            "selected db",
            resp_vecs(&[
                vec!["SELECT", "1"],
                vec!["SET", "k", "db1"],
                vec!["EVAL", "return redis.call('get', 'k')", "0"],
                vec!["EVAL", "redis.call('select', '2'); return redis.call('set', 'k', 'db2')", "0"],
                vec!["GET", "k"],
                vec!["SELECT", "2"],
                vec!["GET", "k"],
                vec!["EVAL", "return redis.pcall('select', '99')", "0"],
            ]),
        ),
        (
            "libraries",
            resp_vecs(&[
                vec!["EVAL", "return cjson.encode({1,2,'a'})", "0"],
                vec!["EVAL", "return cjson.encode({a={1,2,{b='x/y\\n'}}, n=3.25})", "0"],
                vec!["EVAL", "return cjson.encode(cjson.decode('{\"a\":[1,2.5,\"\\\\u00e9\",null,true]}'))", "0"],
                vec!["EVAL", "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')", "0"],
                vec!["EVAL", "local d = cjson.decode('{\"keya\": \"a\", \"keyb\": \"b\"}'); return {d.keya, d.keyb}", "0"],
                vec!["EVAL", "return {pcall(cjson.encode, {[false]='x'})}", "0"],
                vec!["EVAL", "return {pcall(cjson.encode, {1, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, 12})}", "0"],
                vec![
                    "EVAL",
                    "return {bit.tohex(65535), bit.tohex(-1,-4), bit.lshift(1,31), bit.rshift(-1,28), bit.arshift(-256,4), bit.bswap(1), bit.rol(1,33), bit.tobit(2^32+5), bit.bor(1,2,4,8,16,32,64,128), bit.bxor(1,2), bit.bnot(0)}",
                    "0",
                ],
                vec!["EVAL", "local e = cmsgpack.pack(0.1, -1099511627776, {1,2,{a=1}}, 'x', true, nil, 1.5, 300, -200, 70000, string.rep('y', 40)) return e", "0"],
                vec!["EVAL", "local a = {x=nil,y=5} local b = {x=a} a['x'] = b return cmsgpack.pack(a)", "0"],
                vec!["EVAL", "return {cmsgpack.unpack(cmsgpack.pack(1,'a',{1,2},{k='v'}))}", "0"],
                vec!["EVAL", "return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 1, 0)}", "0"],
                vec!["EVAL", "return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 2)}", "0"],
                vec!["EVAL", "return cmsgpack.unpack('\\xcd')", "0"],
                vec![
                    "EVAL",
                    "return struct.pack('>I2 <i4 b B h H l L T d f s c3 x', 258, -2, -1, 255, -300, 65535, -5, 7, 9, 1.5, 0.25, 'ab', 'xyz')",
                    "0",
                ],
                vec!["EVAL", "return struct.pack('!4 b i4 b d', 1, 2, 3, 4)", "0"],
                vec!["EVAL", "return {struct.unpack('>I2 <i4 b B h s c3', struct.pack('>I2 <i4 b B h s c3', 258, -2, -1, 255, -300, 'ab', 'xyz'))}", "0"],
                vec!["EVAL", "return {struct.size('!8 b d i2 c5'), struct.unpack('B c0', struct.pack('B c0', 3, 'abc'))}", "0"],
                vec!["EVAL", "return struct.pack('q', 1)", "0"],
                vec!["EVAL", "return struct.unpack('i4', 'ab')", "0"],
                vec!["EVAL", "local t={} for k,v in pairs(_G) do t[#t+1]=k end table.sort(t) return t", "0"],
                vec!["EVAL", "return redis.sha1hex('Pizza & Mandolino')", "0"],
                vec!["EVAL", "return redis.sha1hex('')", "0"],
                vec!["EVAL", "math.randomseed(10); return {tostring(math.random()), math.random(100), math.random(5,10)}", "0"],
                vec!["EVAL", "return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM, _VERSION, redis.LOG_WARNING, redis.REPL_ALL}", "0"],
                vec!["EVAL", "return redis.replicate_commands()", "0"],
                vec!["EVAL", "return tostring(redis.set_repl(redis.REPL_ALL))", "0"],
                vec!["EVAL", "local t={} for k,v in pairs(redis) do t[#t+1]=k end table.sort(t) return t", "0"],
                vec!["EVAL", "local t={} for k,v in pairs(string) do t[#t+1]=k end table.sort(t) return t", "0"],
                vec!["EVAL", "return string.format('%5.2f|%s', 3.14159, 'x')", "0"],
                vec!["EVAL", "return tostring(0.1)", "0"],
                vec!["EVAL", "return 'hello' --trailing comment", "0"],
            ]),
        ),
        (
            "scripts in multi",
            resp_vecs(&[
                vec!["MULTI"],
                vec!["EVAL", "return redis.call('incr', 'c')", "0"],
                vec!["EVAL", "return redis.call('nosuch')", "0"],
                vec!["EXEC"],
                vec!["WATCH", "w"],
                vec!["EVAL", "return redis.call('set', 'w', '1')", "0"],
                vec!["MULTI"],
                vec!["PING"],
                vec!["EXEC"],
            ]),
        ),
        (
            "functions",
            resp_vecs(&[
                vec!["FUNCTION", "FLUSH"],
                vec!["FUNCTION", "LOAD", "#!lua name=test\nredis.register_function('test', function(KEYS, ARGV)\n return a \nend)"],
                vec!["FCALL", "test", "0"],
                vec![
                    "FUNCTION",
                    "LOAD",
                    "REPLACE",
                    "#!lua name=test\nredis.register_function('test', function(KEYS, ARGV)\n return {KEYS[1], ARGV[1], redis.call('ping')} \nend)",
                ],
                vec!["FCALL", "test", "1", "k", "a"],
                vec!["FCALL", "nosuch", "0"],
                vec!["FCALL", "test", "x"],
                vec!["FCALL", "test", "5"],
                vec!["FUNCTION", "LOAD", "#!lua name=test\nredis.register_function('test', function() return 1 end)"],
                vec!["FUNCTION", "LOAD", "return 1"],
                vec!["FUNCTION", "LOAD", "#!lua name=t2\nreturn 1"],
                vec![
                    "FUNCTION",
                    "LOAD",
                    "#!lua name=t3\nredis.register_function{function_name='t3', callback=function(KEYS, ARGV) return redis.call('set','x','y') end, flags={'no-writes'}}",
                ],
                vec!["FCALL", "t3", "0"],
                vec!["FCALL_RO", "t3", "0"],
                vec!["FCALL_RO", "test", "0"],
                vec!["FUNCTION", "LOAD", "#!lua name=t4\nredis.call('ping')"],
                vec!["FUNCTION", "LOAD", "#!lua name=t5\nredis.register_function('t5', function() return 1 end) x = 1"],
                vec!["FUNCTION", "LOAD", "#!lua name=t6\nlocal a = "],
                vec!["FUNCTION", "DELETE", "test"],
                vec!["FUNCTION", "DELETE", "test"],
                vec!["FUNCTION", "FLUSH", "SYNC"],
                vec!["FCALL", "t3", "0"],
            ]),
        ),
    ]
}

#[test]
fn scripting_replies_match_redis_byte_for_byte() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("scripting-bytes");
    let ours = Ours::start(dir.path(), &[]);
    let mut failures = Vec::new();
    for (name, input) in sessions() {
        cli(redis.port, &["FLUSHALL"]);
        cli(ours.port, &["FLUSHALL"]);
        cli(redis.port, &["SCRIPT", "FLUSH"]);
        cli(ours.port, &["SCRIPT", "FLUSH"]);
        let want = mask_ids(&raw_session(redis.port, &input));
        let got = mask_ids(&raw_session(ours.port, &input));
        assert!(!want.is_empty(), "{name}: redis-server sent nothing");
        if want != got {
            let (w, g) = (String::from_utf8_lossy(&want), String::from_utf8_lossy(&got));
            let at = w.chars().zip(g.chars()).take_while(|(a, b)| a == b).count();
            let ctx = |s: &str| s.chars().skip(at.saturating_sub(80)).take(240).collect::<String>();
            failures.push(format!("{name} (from char {at}):\n  redis: {:?}\n  ours:  {:?}", ctx(&w), ctx(&g)));
        }
    }
    assert!(failures.is_empty(), "{} sessions differ:\n{}", failures.len(), failures.join("\n"));
}

/// The incr AOF of a server's AOF directory, with unix-ms timestamps masked.
fn incr_aof(dir: &Path) -> Vec<u8> {
    let aof_dir = dir.join("appendonlydir");
    let mut files: Vec<_> = std::fs::read_dir(&aof_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        out.extend(std::fs::read(f).unwrap());
    }
    // Absolute expiry times depend on when each server ran the command.
    let text = String::from_utf8_lossy(&out).into_owned();
    text.split("\r\n")
        .map(|l| if l.len() == 13 && l.bytes().all(|b| b.is_ascii_digit()) { "<ms>" } else { l })
        .collect::<Vec<_>>()
        .join("\r\n")
        .into_bytes()
}

#[test]
fn script_effects_reach_the_aof_as_in_redis() {
    let redis = ferrokv_testkit::Server::start_with(None, &["--appendonly", "yes", "--appendfsync", "always"]);
    let dir = TempDir::new("scripting-aof");
    let ours = Ours::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let incrby = "return redis.call('incrby', KEYS[1], ARGV[1])";
    let incrby_sha = sha1hex(incrby);
    let script: Vec<Vec<&str>> = vec![
        // No write: nothing logged.
        vec!["EVAL", "return redis.call('get', 'nokey')", "0"],
        // One write: the command alone.
        vec!["EVAL", "return redis.call('set', 'a', '1')", "0"],
        // Several, across databases: MULTI ... EXEC with SELECTs inside.
        vec!["EVAL", "redis.call('set','b','1'); redis.call('incr','b'); redis.call('select','3'); redis.call('lpush','l','x','y'); return 1", "0"],
        // Rewritten commands (EXPIRE -> PEXPIREAT, SET EX -> SET PXAT).
        vec!["EVAL", "redis.call('expire','a','100'); redis.call('set','c','v','ex','100'); return 1", "0"],
        // A failed command after a write: the write is logged.
        vec!["EVAL", "redis.call('incr','a'); redis.call('nosuch')", "0"],
        // set_repl(REPL_NONE) leaves a command out.
        vec!["EVAL", "redis.call('set','p','1'); redis.set_repl(redis.REPL_NONE); redis.call('set','q','2'); redis.set_repl(redis.REPL_ALL); redis.call('set','r','3')", "0"],
        // EVALSHA logs effects, never the script.
        vec!["SCRIPT", "LOAD", incrby],
        vec!["EVALSHA", &incrby_sha, "1", "n", "5"],
        vec!["EVAL", incrby, "1", "n", "5"],
        // Inside MULTI: one unit with the transaction's other commands.
        vec!["MULTI"],
        vec!["EVAL", "redis.call('set','m1','1'); redis.call('set','m2','2')", "0"],
        vec!["SET", "m3", "3"],
        vec!["EXEC"],
        vec!["EVAL", "return redis.call('spop', 'nosuch')", "0"],
        vec!["EVAL", "redis.call('del', 'nosuch')", "0"],
    ];
    let input = resp_vecs(&script);
    let want = raw_session(redis.port, &input);
    let got = raw_session(ours.port, &input);
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
    // A lazily expired key read by a script: its DEL is logged.
    for port in [redis.port, ours.port] {
        cli(port, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        cli(port, &["SET", "e", "v", "PX", "1"]);
    }
    std::thread::sleep(Duration::from_millis(20));
    for port in [redis.port, ours.port] {
        assert_eq!(cli(port, &["EVAL", "return redis.call('get', 'e')", "0"]), "");
    }
    let want = incr_aof(redis.dir.path());
    let got = incr_aof(dir.path());
    assert!(want.len() > 200, "redis-server's AOF: {:?}", String::from_utf8_lossy(&want));
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
}

#[test]
fn a_recursive_table_ends_in_an_error_and_the_connection_lives() {
    let dir = TempDir::new("scripting-recursive");
    let ours = Ours::start(dir.path(), &[]);
    let input = resp_vecs(&[vec!["EVAL", "local a = {}; local b = {a}; a[1] = b; return a", "0"], vec!["PING"]]);
    let out = raw_session(ours.port, &input);
    // Redis stops at 7995 levels (its Lua stack); we stop where mlua's references run
    // out, a little earlier, with the same error.
    assert!(out.ends_with(b"-ERR reached lua stack limit\r\n+PONG\r\n"), "{:?}", &out[out.len().saturating_sub(60)..]);
    assert!(out.starts_with(b"*1\r\n*1\r\n*1\r\n"));
}

#[test]
fn script_time_stands_still_and_the_lock_pattern_works() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("scripting-time");
    let ours = Ours::start(dir.path(), &[]);
    // A key that expires while the script runs still exists for the script (the
    // script's time stands at its start, Redis 7.0), and is gone afterwards.
    let wait_5ms = "local function now() local t = redis.call('time'); \
                    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end \
                    redis.call('set', 'k', 'v', 'px', '1'); local s = now(); \
                    while now() < s + 5 do end; return redis.call('exists', 'k')";
    for port in [redis.port, ours.port] {
        assert_eq!(cli(port, &["EVAL", wait_5ms, "0"]), "1");
    }
    std::thread::sleep(Duration::from_millis(10));
    for port in [redis.port, ours.port] {
        assert_eq!(cli(port, &["EXISTS", "k"]), "0");
    }
    // The redis crate drives the lock pattern: SET NX PX, release by compare-and-delete.
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", ours.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    let acquired: Option<String> =
        redis::cmd("SET").arg("lock").arg("me").arg("NX").arg("PX").arg(30000).query(&mut con).unwrap();
    assert_eq!(acquired.as_deref(), Some("OK"));
    let again: Option<String> =
        redis::cmd("SET").arg("lock").arg("you").arg("NX").arg("PX").arg(30000).query(&mut con).unwrap();
    assert_eq!(again, None);
    let release = |token: &str, con: &mut redis::Connection| -> i64 {
        redis::cmd("EVAL").arg(LOCK_RELEASE).arg(1).arg("lock").arg(token).query(con).unwrap()
    };
    assert_eq!(release("you", &mut con), 0);
    assert_eq!(release("me", &mut con), 1);
    let exists: i64 = redis::cmd("EXISTS").arg("lock").query(&mut con).unwrap();
    assert_eq!(exists, 0);
}

/// Read one reply line (errors and simple replies are all these tests need).
fn read_line(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while !out.ends_with(b"\r\n") {
        match s.read(&mut b) {
            Ok(1) => out.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// PING until the server answers BUSY (the script passed lua-time-limit).
fn wait_busy(port: u16) -> String {
    let start = Instant::now();
    loop {
        let r = cli(port, &["PING"]);
        if r.starts_with("BUSY") || start.elapsed() > Duration::from_secs(20) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn busy_scripts_answer_busy_and_die_by_script_kill_as_in_redis() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("scripting-busy");
    let ours = Ours::start(dir.path(), &[]);
    let mut got = Vec::new();
    for port in [redis.port, ours.port] {
        let mut seen = Vec::new();
        cli(port, &["CONFIG", "SET", "lua-time-limit", "50"]);
        // A read-only loop, even one that catches errors, is killed.
        let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
        a.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let body = "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end";
        a.write_all(&resp_vecs(&[vec!["EVAL", body, "0"], vec!["PING"]])).unwrap();
        seen.push(wait_busy(port));
        seen.push(cli(port, &["FUNCTION", "KILL"]));
        seen.push(cli(port, &["SCRIPT", "KILL"]));
        seen.push(read_line(&mut a));
        seen.push(read_line(&mut a));
        seen.push(cli(port, &["SCRIPT", "KILL"]));
        // After a write it cannot be killed.
        a.write_all(&resp_vecs(&[vec!["EVAL", "redis.call('set', 'x', '1') while true do end", "0"]])).unwrap();
        seen.push(wait_busy(port));
        seen.push(cli(port, &["SCRIPT", "KILL"]));
        got.push(seen);
    }
    assert_eq!(got[1], got[0]);
    let seen = &got[1];
    assert!(seen[0].starts_with("BUSY"), "{seen:?}");
    assert!(seen[3].contains("Script killed by user with SCRIPT KILL..."), "{seen:?}");
    assert_eq!(seen[4], "+PONG\r\n");
    assert!(seen[7].starts_with("UNKILLABLE"), "{seen:?}");
    // SHUTDOWN NOSAVE ends it (and the server).
    for port in [redis.port, ours.port] {
        cli(port, &["SHUTDOWN", "NOSAVE"]);
    }
    // The process itself must end (a PING could be answered by another test's server
    // that took the port).
    ours.wait_exit();
}

/// A busy script's writes are not served to a blocked client while other clients get in
/// (here HELLO, which the script waits for): the BLPOP client gets the list as the script
/// left it, as Redis 7.0 (a real redis-server, the same session) serves it.
#[test]
fn a_busy_script_does_not_serve_blocked_clients_midway() {
    use support::{run_session, send, Step};
    let script = "redis.call('lpush',KEYS[1],'y'); local clients; \
                  while true do clients = redis.call('client','list'); \
                  if string.find(clients, 'abortscript') ~= nil then break end end; \
                  redis.call('lpush',KEYS[1],'z'); return 'done'";
    let steps = || {
        vec![
            send(0, &[&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"], &["CONFIG", "SET", "lua-time-limit", "10"]]),
            Step::Recv(0, 2),
            send(1, &[&["BLPOP", "x", "0"]]),
            Step::Blocked(1),
            send(2, &[&["EVAL", script, "1", "x"]]),
            Step::Pause(200),
            send(3, &[&["HELLO", "2", "SETNAME", "abortscript"]]),
            Step::Recv(3, 1),
            Step::Recv(1, 1),
            Step::Recv(2, 1),
            send(0, &[&["LRANGE", "x", "0", "-1"]]),
            Step::Recv(0, 1),
        ]
    };
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("busy-blocked");
    let ours = Ours::start(dir.path(), &[]);
    // HELLO's reply names each server: left out.
    let without_hello = |mut r: Vec<Vec<u8>>| {
        r.remove(1);
        r
    };
    let theirs = without_hello(run_session(redis.port, &steps()));
    let mine = without_hello(run_session(ours.port, &steps()));
    assert_eq!(theirs, mine);
    assert_eq!(String::from_utf8_lossy(&mine[1]), "*2\r\n$1\r\nx\r\n$1\r\nz\r\n");
}
