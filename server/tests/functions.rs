//! FUNCTION and FCALL against a real redis-server 7.0: replies byte for byte (RESP2 and
//! RESP3), the AOF bytes they propagate, and libraries that survive everything Redis
//! keeps them through: restarts from the RDB and from the AOF, BGREWRITEAOF with both base
//! kinds, DEBUG RELOAD; files with libraries written here load in real Redis and the
//! reverse.

use std::path::Path;
use std::time::{Duration, Instant};

mod support;
use support::{mask_ids, raw_session, resp_vecs, Ours};

use ferrokv_testkit::{cli, Server as Redis, TempDir};

const LIB: &str = "#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return args[1] end)";
/// One function with a description and flags (a server lists a library's functions in
/// its hash order, which varies from process to process).
const LIB3: &str = "#!lua name=lib3\n\
    redis.register_function{function_name='getter', callback=function(keys, args) \
    return redis.call('GET', keys[1]) end, flags={'no-writes', 'allow-oom'}, description='gets a key'}";
const LIB2: &str = "#!lua name=lib2\n\
    redis.register_function{function_name='setter', callback=function(keys, args) \
    return redis.call('SET', keys[1], args[1]) end, description='sets a key'}\n\
    redis.register_function{function_name='getter', callback=function(keys, args) \
    return redis.call('GET', keys[1]) end, flags={'no-writes', 'allow-oom'}}";

/// Sessions sent to both servers; every reply byte must be equal.
fn sessions() -> Vec<(&'static str, Vec<Vec<&'static str>>)> {
    vec![
        (
            "load and its errors",
            vec![
                vec!["FUNCTION", "LOAD", LIB],
                vec!["FUNCTION", "LOAD", LIB],
                vec!["FUNCTION", "LOAD", "REPLACE", LIB],
                vec!["FUNCTION", "LOAD", "replace", "REPLACE", LIB],
                vec!["FUNCTION", "LOAD", "FOO", LIB],
                vec!["FUNCTION", "LOAD", "REPLACE"],
                vec!["FUNCTION", "LOAD", "return 1"],
                vec!["FUNCTION", "LOAD", "#!lua name=x"],
                vec!["FUNCTION", "LOAD", "#!lua\nreturn 1"],
                vec!["FUNCTION", "LOAD", "#!lua foo=b\nreturn 1"],
                vec!["FUNCTION", "LOAD", "#!lua name=a name=b\nreturn 1"],
                vec!["FUNCTION", "LOAD", "#!js name=x\nreturn 1"],
                vec!["FUNCTION", "LOAD", "#!lua name=a-b\nreturn 1"],
                vec!["FUNCTION", "LOAD", "#!lua name=empty\nreturn 1"],
                vec![
                    "FUNCTION",
                    "LOAD",
                    "#!lua name=clash\nredis.register_function('MyFunc', function() return 1 end)",
                ],
                vec!["FUNCTION", "LOAD", "#!LUA name=upper\nredis.register_function('up', function() return 2 end)"],
                vec!["FCALL", "MYFUNC", "0", "hello"],
                vec!["FCALL", "up", "0"],
                vec!["FUNCTION", "LOAD"],
            ],
        ),
        (
            "list, stats, delete, flush",
            vec![
                vec!["FUNCTION", "LOAD", LIB3],
                vec!["FUNCTION", "LIST"],
                vec!["FUNCTION", "LIST", "WITHCODE"],
                vec!["FUNCTION", "LIST", "LIBRARYNAME", "LIB*", "WITHCODE"],
                vec!["FUNCTION", "LIST", "LIBRARYNAME", "nomatch"],
                vec!["FUNCTION", "LIST", "LIBRARYNAME"],
                vec!["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
                vec!["FUNCTION", "LIST", "BOGUS"],
                vec!["FUNCTION", "STATS"],
                vec!["FUNCTION", "LOAD", LIB],
                vec!["FCALL", "myfunc", "1", "k", "v"],
                vec!["FCALL_RO", "getter", "1", "k"],
                vec!["FCALL_RO", "myfunc", "1", "k", "v"],
                vec!["FCALL", "nosuch", "0"],
                vec!["FCALL", "getter", "x"],
                vec!["FCALL", "getter", "5", "k"],
                vec!["FCALL", "getter", "-1"],
                vec!["FUNCTION", "DELETE", "nosuch"],
                vec!["FUNCTION", "DELETE", "LIB3"],
                vec!["FUNCTION", "DELETE", "lib3"],
                vec!["FUNCTION", "STATS"],
                vec!["FUNCTION", "FLUSH", "BOGUS"],
                vec!["FUNCTION", "FLUSH", "SYNC", "X"],
                vec!["FUNCTION", "FLUSH", "ASYNC"],
                vec!["FUNCTION", "FLUSH"],
                vec!["FUNCTION", "DUMP", "X"],
                vec!["FUNCTION", "KILL"],
                vec!["FUNCTION", "NOPE"],
            ],
        ),
        (
            "dump and restore",
            vec![
                vec!["FUNCTION", "DUMP"],
                vec!["FUNCTION", "LOAD", LIB],
                vec!["FUNCTION", "DUMP"],
                vec!["FUNCTION", "RESTORE", "garbage"],
                vec!["FUNCTION", "RESTORE", "x", "BOGUS"],
                vec!["FUNCTION", "RESTORE", "x", "FLUSH", "more"],
            ],
        ),
    ]
}

#[test]
fn function_commands_reply_as_redis_byte_for_byte() {
    let redis = Redis::start();
    let dir = TempDir::new("functions-bytes");
    let ours = Ours::start(dir.path(), &[]);
    let mut failures = Vec::new();
    for (resp3, hello) in [(false, vec![]), (true, vec![vec!["HELLO", "3"]])] {
        for (name, cmds) in sessions() {
            let mut all = hello.clone();
            all.push(vec!["FUNCTION", "FLUSH"]);
            all.extend(cmds);
            let input = resp_vecs(&all);
            let want = mask_ids(&raw_session(redis.port, &input));
            let got = mask_ids(&raw_session(ours.port, &input));
            if want != got {
                let (w, g) = (String::from_utf8_lossy(&want), String::from_utf8_lossy(&got));
                let at = w.chars().zip(g.chars()).take_while(|(a, b)| a == b).count();
                let ctx = |s: &str| s.chars().skip(at.saturating_sub(80)).take(240).collect::<String>();
                failures.push(format!(
                    "{name} resp3={resp3} (char {at}):\n  redis: {:?}\n  ours:  {:?}",
                    ctx(&w),
                    ctx(&g)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} sessions differ:\n{}", failures.len(), failures.join("\n"));
}

/// FUNCTION RESTORE of payloads a real server made, under each policy, and of ours in it.
#[test]
fn dump_payloads_restore_both_ways() {
    let redis = Redis::start();
    let dir = TempDir::new("functions-restore");
    let ours = Ours::start(dir.path(), &[]);
    for s in [redis.port, ours.port] {
        assert_eq!(cli(s, &["FUNCTION", "LOAD", LIB2]), "lib2");
    }
    let theirs = dump(redis.port);
    assert_eq!(dump(ours.port), theirs, "FUNCTION DUMP differs");
    for policy in ["APPEND", "REPLACE", "FLUSH"] {
        for port in [redis.port, ours.port] {
            let mut c = ferrokv_testkit::Client::connect(port);
            let r = c.call(&[b"FUNCTION".to_vec(), b"RESTORE".to_vec(), theirs.clone(), policy.as_bytes().to_vec()]);
            let want =
                if policy == "APPEND" { b"-ERR Library lib2 already exists\r\n".to_vec() } else { b"+OK\r\n".to_vec() };
            assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(&want), "{policy} on {port}");
        }
    }
    assert_eq!(libraries(ours.port), libraries(redis.port));
}

fn dump(port: u16) -> Vec<u8> {
    let mut c = ferrokv_testkit::Client::connect(port);
    let r = c.call(&[b"FUNCTION".to_vec(), b"DUMP".to_vec()]);
    let at = r.iter().position(|&b| b == b'\n').expect("a bulk");
    r[at + 1..r.len() - 2].to_vec()
}

/// What FUNCTION writes propagate: the AOF's incr file, byte for byte as Redis's.
#[test]
fn function_writes_reach_the_aof_as_in_redis() {
    let redis = Redis::start_with(None, &["--appendonly", "yes", "--appendfsync", "always"]);
    let dir = TempDir::new("functions-aof");
    let ours = Ours::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let payload = {
        let other = Redis::start();
        cli(other.port, &["FUNCTION", "LOAD", LIB]);
        dump(other.port)
    };
    let cmds: Vec<Vec<&str>> = vec![
        vec!["SELECT", "3"],
        vec!["FUNCTION", "LOAD", LIB],
        vec!["FUNCTION", "LOAD", LIB],
        vec!["FUNCTION", "LOAD", "REPLACE", LIB],
        vec!["FUNCTION", "LOAD", LIB2],
        vec!["FCALL", "setter", "1", "k", "v"],
        vec!["FCALL", "getter", "1", "k"],
        vec!["FUNCTION", "DELETE", "lib2"],
        vec!["FUNCTION", "DELETE", "lib2"],
        vec!["MULTI"],
        vec!["FUNCTION", "DELETE", "mylib"],
        vec!["SET", "x", "1"],
        vec!["EXEC"],
        vec!["FUNCTION", "FLUSH", "ASYNC"],
        vec!["FUNCTION", "FLUSH"],
    ];
    let input = resp_vecs(&cmds);
    assert_eq!(
        String::from_utf8_lossy(&raw_session(ours.port, &input)),
        String::from_utf8_lossy(&raw_session(redis.port, &input))
    );
    for port in [redis.port, ours.port] {
        let mut c = ferrokv_testkit::Client::connect(port);
        let r = c.call(&[b"FUNCTION".to_vec(), b"RESTORE".to_vec(), payload.clone(), b"FLUSH".to_vec()]);
        assert_eq!(r, b"+OK\r\n");
    }
    assert_eq!(
        String::from_utf8_lossy(&incr_files(dir.path())),
        String::from_utf8_lossy(&incr_files(redis.dir.path()))
    );
}

fn incr_files(dir: &Path) -> Vec<u8> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    files.iter().flat_map(|f| std::fs::read(f).unwrap()).collect()
}

/// Each library's FUNCTION LIST WITHCODE entry, its functions sorted (servers list
/// libraries and functions in their hash order).
fn libraries(port: u16) -> Vec<String> {
    ["mylib", "lib2"]
        .iter()
        .map(|l| {
            let text = cli(port, &["FUNCTION", "LIST", "LIBRARYNAME", l, "WITHCODE"]);
            let (head, rest) = text.split_once("\nfunctions\n").unwrap_or((&text, ""));
            let (funcs, code) = rest.split_once("\nlibrary_code\n").unwrap_or((rest, ""));
            let mut fs: Vec<&str> =
                funcs.split("name\n").map(|f| f.trim_end_matches('\n')).filter(|f| !f.is_empty()).collect();
            fs.sort();
            format!("{head}\nfunctions\n{}\nlibrary_code\n{code}", fs.join("|"))
        })
        .collect()
}

fn wait_rewrite(port: u16) {
    let start = Instant::now();
    while !cli(port, &["INFO", "persistence"]).contains("aof_rewrite_in_progress:0") {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Libraries survive a restart from dump.rdb, from the AOF, after BGREWRITEAOF with either
/// base, and DEBUG RELOAD; FLUSHALL keeps them; and they can be called afterwards.
#[test]
fn libraries_survive_restarts_rewrites_and_reloads() {
    let dir = TempDir::new("functions-restart");
    let s = Ours::start(dir.path(), &["--save", "3600 1"]);
    s.cli(&["FUNCTION", "LOAD", LIB]);
    s.cli(&["FUNCTION", "LOAD", LIB2]);
    s.cli(&["FLUSHALL"]);
    let want = libraries(s.port);
    assert!(want.iter().all(|l| l.contains("library_code")), "{want:?}");
    assert_eq!(s.cli(&["DEBUG", "RELOAD"]), "OK");
    assert_eq!(libraries(s.port), want, "after DEBUG RELOAD");
    assert_eq!(s.cli(&["SAVE"]), "OK");
    drop(s);
    let mut s = Ours::start(dir.path(), &[]);
    assert_eq!(libraries(s.port), want, "from dump.rdb");
    for preamble in ["yes", "no"] {
        s.cli(&["CONFIG", "SET", "aof-use-rdb-preamble", preamble]);
        s.cli(&["CONFIG", "SET", "appendonly", "yes"]);
        wait_rewrite(s.port);
        // In the incr file, then in the rewritten base, then in the next incr file.
        s.cli(&["FUNCTION", "DELETE", "lib2"]);
        s.cli(&["FUNCTION", "LOAD", LIB2]);
        assert!(s.cli(&["BGREWRITEAOF"]).starts_with("Background"));
        wait_rewrite(s.port);
        s.cli(&["FUNCTION", "LOAD", "REPLACE", LIB]);
        drop(s);
        s = Ours::start(dir.path(), &["--appendonly", "yes"]);
        assert_eq!(libraries(s.port), want, "from the AOF, preamble {preamble}");
        assert_eq!(s.cli(&["FCALL", "myfunc", "0", "hi"]), "hi");
        s.cli(&["CONFIG", "SET", "appendonly", "no"]);
    }
}

/// A data directory with libraries written here loads in a real redis-server 7.0 (dump.rdb,
/// and the AOF with each base), and one written by real Redis loads here.
#[test]
fn files_with_libraries_load_both_ways() {
    for (args, what) in [
        (vec!["--appendonly", "no"], "dump.rdb"),
        (vec!["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"], "AOF, RDB base"),
        (vec!["--appendonly", "yes", "--aof-use-rdb-preamble", "no"], "AOF, RESP base"),
    ] {
        // Ours → Redis.
        let dir = TempDir::new("functions-ours");
        let ours = Ours::start(dir.path(), &args);
        ours.cli(&["FUNCTION", "LOAD", LIB]);
        ours.cli(&["FUNCTION", "LOAD", LIB2]);
        ours.cli(&["SET", "k", "v"]);
        if args[1] == "yes" {
            ours.cli(&["BGREWRITEAOF"]);
            wait_rewrite(ours.port);
            ours.cli(&["FUNCTION", "DELETE", "mylib"]);
            ours.cli(&["FUNCTION", "LOAD", LIB]);
        } else {
            ours.cli(&["SAVE"]);
        }
        let want = libraries(ours.port);
        drop(ours);
        let redis = Redis::start_in(dir, &args);
        assert_eq!(libraries(redis.port), want, "ours → redis, {what}");
        // Redis → ours (its files, as it rewrites or saves them).
        if args[1] == "yes" {
            redis.cli(&["BGREWRITEAOF"]);
            wait_rewrite(redis.port);
            redis.cli(&["FUNCTION", "LOAD", "REPLACE", LIB]);
        } else {
            redis.cli(&["SAVE"]);
        }
        let copy = TempDir::new("functions-theirs");
        let cp = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", redis.dir.path().display()))
            .arg(copy.path())
            .status()
            .expect("cp");
        assert!(cp.success());
        let ours = Ours::start(copy.path(), &args);
        assert_eq!(libraries(ours.port), want, "redis → ours, {what}");
        assert_eq!(ours.cli(&["FCALL", "setter", "1", "k2", "x"]), "OK");
    }
}

/// On a replica whose link is down with replica-serve-stale-data no, a function without
/// `allow-stale` is refused (MASTERDOWN), and one with it runs but its calls of commands
/// not flagged `stale` fail (`Can not execute the command on a stale replica`), as on a
/// real redis-server 7.0.
#[test]
fn allow_stale_functions_on_a_stale_replica_as_redis() {
    let lib = "#!lua name=stale\n\
               redis.register_function{function_name='f1', callback=function() return 'hello' end, flags={'no-writes'}}\n\
               redis.register_function{function_name='f2', callback=function() return 'hello' end, flags={'allow-stale', 'no-writes'}}\n\
               redis.register_function{function_name='f3', callback=function() return redis.call('get', 'x') end, flags={'allow-stale', 'no-writes'}}\n\
               redis.register_function{function_name='f4', callback=function() return redis.pcall('ping') end, flags={'allow-stale', 'no-writes'}}";
    let session: Vec<Vec<&str>> = vec![
        vec!["FUNCTION", "LOAD", lib],
        vec!["CONFIG", "SET", "replica-serve-stale-data", "no"],
        vec!["REPLICAOF", "127.0.0.1", "1"],
        vec!["FCALL", "f1", "0"],
        vec!["FCALL", "f2", "0"],
        vec!["FCALL", "f3", "1", "x"],
        vec!["FCALL", "f4", "0"],
        vec!["EVAL", "#!lua flags=allow-stale,no-writes\nreturn redis.pcall('get', 'x')", "0"],
        vec!["REPLICAOF", "NO", "ONE"],
    ];
    let redis = Redis::start();
    let dir = TempDir::new("fn-stale");
    let ours = Ours::start(dir.path(), &[]);
    let theirs = raw_session(redis.port, &resp_vecs(&session));
    let mine = raw_session(ours.port, &resp_vecs(&session));
    assert_eq!(String::from_utf8_lossy(&theirs), String::from_utf8_lossy(&mine));
    assert!(String::from_utf8_lossy(&mine).contains("Can not execute the command on a stale replica"));
}
