//! replay and aof-rewrite on AOFs written by a real redis-server 7.0: the expiry check on a
//! log of keys expiring lazily and actively (DEL, then UNLINK), the same log without its
//! deletions, the replayed state against the server's SAVE, and rewritten AOFs loading in
//! Redis with the source's DEBUG DIGEST. The 7.4.1 expiry corpus runs under `make compat`.

mod aof_common;
mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use aof_common::{aof_server, args, copy_tree, send, stop, Argv};
use ferrokv::format::aof::CommandReader;
use ferrokv_testkit::{Server, TempDir};
use ferrokv_tools::replay::{Input, Options, Replay};

fn now_ms() -> i64 {
    ferrokv_tools::now_ms()
}

fn run(bin: &str, argv: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(bin).args(argv).output().expect("run the tool");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

fn replay_bin(argv: &[&std::ffi::OsStr]) -> (i32, String) {
    run(env!("CARGO_BIN_EXE_replay"), argv)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn info_field(s: &Server, section: &str, field: &str) -> i64 {
    let info = s.cli(&["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
}

/// The keys one phase writes again after they expired, and the command each gets.
struct Phase {
    rewritten: Vec<String>,
}

/// One phase: keys with 50-1500 ms TTLs; `lazy:*` expire when touched (GET), `re:*` when
/// written again (SET, INCR, RPUSH, HSET), `act:*` through the active cycle.
fn phase(s: &Server, tag: &str, lazyfree: &str) -> Phase {
    send(s, &[args(&["CONFIG", "SET", "lazyfree-lazy-expire", lazyfree]), args(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"])]);
    let mut cmds: Vec<Argv> = Vec::new();
    let ttl = |i: usize| (50 + i * 97 % 1451).to_string();
    for i in 0..10 {
        let k = format!("lazy:{tag}:{i}");
        cmds.push(args(&["SET", &k, "v", "PX", &ttl(i)]));
    }
    let types = ["string", "list", "hash", "set"];
    let mut rewritten = Vec::new();
    for (i, t) in types.iter().enumerate() {
        let k = format!("re:{tag}:{t}");
        match *t {
            "string" => cmds.push(args(&["SET", &k, "old"])),
            "list" => cmds.push(args(&["RPUSH", &k, "a", "b"])),
            "hash" => cmds.push(args(&["HSET", &k, "f", "old"])),
            _ => cmds.push(args(&["SADD", &k, "m"])),
        }
        cmds.push(args(&["PEXPIRE", &k, &ttl(i + 3)]));
        rewritten.push(k);
    }
    for i in 0..12 {
        let k = format!("act:{tag}:{i}");
        cmds.push(args(&["RPUSH", &k, "x", "y"]));
        cmds.push(args(&["PEXPIRE", &k, &ttl(i + 5)]));
    }
    cmds.push(args(&["SET", &format!("long:{tag}"), "v", "PX", "100000000"]));
    send(s, &cmds);
    // Past every TTL and into a later #TS: second, so the log proves the expiry.
    std::thread::sleep(Duration::from_millis(1500 + 1300));
    let mut c = s.client();
    for i in 0..10 {
        assert_eq!(c.call_str(&["GET", &format!("lazy:{tag}:{i}")]), b"$-1\r\n");
    }
    send(
        s,
        &[
            args(&["SET", &rewritten[0], "new"]),
            args(&["INCR", &rewritten[1]]),
            args(&["RPUSH", &rewritten[2], "n"]),
            args(&["HSET", &rewritten[3], "f", "new"]),
        ],
    );
    let before = info_field(s, "stats", "expired_keys");
    send(s, &[args(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"])]);
    wait_for("the active cycle", || info_field(s, "stats", "expired_keys") >= before + 12);
    Phase { rewritten }
}

/// The AOF with every DEL and UNLINK record cut out (annotations and the rest kept).
fn without_deletions(aof: &Path, out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    for e in std::fs::read_dir(aof).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let name = p.file_name().unwrap();
        if !name.to_string_lossy().ends_with(".incr.aof") {
            std::fs::copy(&p, out.join(name)).unwrap();
            continue;
        }
        let mut kept = Vec::new();
        let mut from = 0;
        for cmd in CommandReader::at(&data, 0) {
            let cmd = cmd.unwrap();
            if cmd.is("del") || cmd.is("unlink") {
                kept.extend_from_slice(&data[from..cmd.offset]);
                from = cmd.end;
            }
        }
        kept.extend_from_slice(&data[from..]);
        std::fs::write(out.join(name), kept).unwrap();
    }
}

struct Recorded {
    _dir: TempDir,
    aof: PathBuf,
    rdb: PathBuf,
    digest: String,
    rewritten: Vec<String>,
}

/// Both phases on one server: lazyfree-lazy-expire no (DEL), then yes (UNLINK).
fn record() -> Recorded {
    let s = aof_server(&["--aof-timestamp-enabled", "yes", "--appendfsync", "always"]);
    send(&s, &[args(&["SET", "plain", "1"]), args(&["HSET", "h", "a", "1", "b", "2"])]);
    let a = phase(&s, "a", "no");
    let b = phase(&s, "b", "yes");
    send(&s, &[args(&["SELECT", "3"]), args(&["SET", "in3", "x", "PX", "100000000"])]);
    let _ = s.cli(&["KEYS", "*"]);
    assert_eq!(s.cli(&["SAVE"]), "OK");
    let digest = s.cli(&["DEBUG", "DIGEST"]);
    let (dir, aof) = stop(s);
    let rdb = dir.path().join("dump.rdb");
    let mut rewritten = a.rewritten;
    rewritten.extend(b.rewritten);
    Recorded { _dir: dir, aof, rdb, digest, rewritten }
}

#[test]
fn expiry_check_state_and_rewrite_on_a_real_log() {
    let rec = record();
    let input = Input { aof: rec.aof.clone(), rdb: None };

    // The real log: every expiry reached it, as DEL then UNLINK.
    let opts = Options { check_expiry: true, until: Some(now_ms()), ..Options::default() };
    let r = Replay::run(&input, &opts).unwrap();
    assert!(r.violations.is_empty(), "{}", r.report_text());
    assert!(r.pending.is_empty(), "{}", r.report_text());
    let m = &r.summary;
    assert_eq!((m.expired_by_del, m.expired_by_unlink), (26, 26), "{}", r.report_text());
    assert_eq!(m.expired_then_overwritten, 8, "{}", r.report_text());
    assert!(m.skipped.is_empty(), "{:?}", m.skipped);
    let (code, out) = replay_bin(&["--check-expiry".as_ref(), rec.aof.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("violations: 0"), "{out}");

    // The state equals the server's own SAVE.
    let (code, out) = replay_bin(&[rec.aof.as_os_str(), "--against".as_ref(), rec.rdb.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("same:"), "{out}");

    // Without its DEL/UNLINK records the log fails, naming each key written again.
    let tmp = TempDir::new("replay-stripped");
    let stripped = tmp.path().join("appendonlydir");
    without_deletions(&rec.aof, &stripped);
    let r = Replay::run(&Input { aof: stripped.clone(), rdb: None }, &opts).unwrap();
    let named: BTreeSet<String> = r.violations.iter().map(|v| String::from_utf8_lossy(&v.key).into_owned()).collect();
    let expected: BTreeSet<String> = rec.rewritten.iter().cloned().collect();
    assert_eq!(named, expected, "{}", r.report_text());
    for v in &r.violations {
        let data = std::fs::read(&v.file).unwrap();
        let cmd = CommandReader::at(&data, v.offset).next().unwrap().unwrap();
        assert_eq!(cmd.offset, v.offset);
        assert_eq!(cmd.argv[1], v.key.as_slice(), "{v:?}");
        assert!(v.clock_ms > v.expire_ms && v.clock_source.starts_with("#TS:"), "{v:?}");
    }
    // Keys that only expired (touched by reads, or by the active cycle) are pending, and
    // so are the keys whose stale value the write kept with its TTL (all but SET's).
    let pending: BTreeSet<String> = r.pending.iter().map(|p| String::from_utf8_lossy(&p.key).into_owned()).collect();
    let expired_only = pending.iter().filter(|k| k.starts_with("lazy:") || k.starts_with("act:")).count();
    assert_eq!(expired_only, 44, "{pending:?}");
    assert_eq!(pending.len(), 44 + 6, "{pending:?}");
    let (code, out) = replay_bin(&["--check-expiry".as_ref(), stripped.as_os_str()]);
    assert_eq!(code, 1, "{out}");
    for k in &rec.rewritten {
        assert!(out.contains(&format!("key '{k}' expired at")), "{k}: {out}");
    }
    let until = format!("{}ms", now_ms());
    let (code, out) = replay_bin(&["--until".as_ref(), until.as_ref(), "--strict".as_ref(), stripped.as_os_str()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("pending: 50"), "{out}");
    let (code, out) = replay_bin(&["--until".as_ref(), until.as_ref(), stripped.as_os_str()]);
    assert_eq!(code, 0, "{out}");

    // aof-rewrite: both bases, as a directory and as one file, load in Redis 7.0 with the
    // source's digest.
    let bin = env!("CARGO_BIN_EXE_aof-rewrite");
    for base in ["rdb", "resp"] {
        let out_dir = tmp.path().join(format!("rewritten-{base}"));
        let (code, out) = run(bin, &[rec.aof.as_os_str(), out_dir.as_os_str(), "--base".as_ref(), base.as_ref()]);
        assert_eq!(code, 0, "{out}");
        let manifest = std::fs::read_to_string(out_dir.join("appendonly.aof.manifest")).unwrap();
        let ext = if base == "rdb" { "rdb" } else { "aof" };
        assert_eq!(
            manifest,
            format!("file appendonly.aof.2.base.{ext} seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n")
        );
        assert_eq!(std::fs::metadata(out_dir.join("appendonly.aof.2.incr.aof")).unwrap().len(), 0);
        let dir = TempDir::new("rewritten");
        let target = dir.path().join("appendonlydir");
        std::fs::create_dir_all(&target).unwrap();
        for e in std::fs::read_dir(&out_dir).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, target.join(p.file_name().unwrap())).unwrap();
        }
        let s = Server::start_in(dir, &["--appendonly", "yes"]);
        assert_eq!(s.cli(&["DEBUG", "DIGEST"]), rec.digest, "base {base}");

        let one = tmp.path().join(format!("one-{base}.aof"));
        let (code, out) = run(bin, &[rec.aof.as_os_str(), one.as_os_str(), "--base".as_ref(), base.as_ref()]);
        assert_eq!(code, 0, "{out}");
        let dir = TempDir::new("rewritten-one");
        std::fs::copy(&one, dir.path().join("appendonly.aof")).unwrap();
        let s = Server::start_in(dir, &["--appendonly", "yes"]);
        assert_eq!(s.cli(&["DEBUG", "DIGEST"]), rec.digest, "one file, base {base}");
    }
    // Keys expired at --now are left out.
    let later = tmp.path().join("later");
    let far = (now_ms() + 200_000_000).to_string();
    let (code, out) = run(bin, &[rec.aof.as_os_str(), later.as_os_str(), "--now".as_ref(), far.as_ref()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("(3 expired left out)"), "{out}");
}

/// Streams (with a group, a pending entry and an idle consumer) from an RDB, rewritten
/// with a RESP base through the shared stream emitter, load in Redis with the same digest.
#[test]
fn rewrite_keeps_streams() {
    let s = Server::start();
    send(
        &s,
        &[
            args(&["XADD", "st", "1-1", "a", "1"]),
            args(&["XADD", "st", "2-1", "b", "2", "c", "3"]),
            args(&["XADD", "st", "3-1", "d", "4"]),
            args(&["XDEL", "st", "2-1"]),
            args(&["XGROUP", "CREATE", "st", "g", "0"]),
            args(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "st", ">"]),
            args(&["XGROUP", "CREATECONSUMER", "st", "g", "bob"]),
            args(&["XADD", "empty", "5-5", "x", "y"]),
            args(&["XDEL", "empty", "5-5"]),
            args(&["RPUSH", "l", "1", "2"]),
        ],
    );
    assert_eq!(s.cli(&["SAVE"]), "OK");
    let digest = s.cli(&["DEBUG", "DIGEST"]);
    let tmp = copy_tree(s.dir.path(), "rewrite-streams");
    drop(s);
    let out_dir = tmp.path().join("out");
    let (code, out) = run(
        env!("CARGO_BIN_EXE_aof-rewrite"),
        &[tmp.path().join("dump.rdb").as_os_str(), out_dir.as_os_str(), "--base".as_ref(), "resp".as_ref()],
    );
    assert_eq!(code, 0, "{out}");
    let dir = TempDir::new("rewritten-streams");
    std::fs::rename(&out_dir, dir.path().join("appendonlydir")).unwrap();
    let s = Server::start_in(dir, &["--appendonly", "yes"]);
    assert_eq!(s.cli(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(s.cli(&["XPENDING", "st", "g"]).lines().next(), Some("1"));
}

/// The 7.4.1 expiry corpus: 400 DEL, 400 UNLINK and 164 HDEL of expired fields, no
/// violation; without those records every key and field is pending at the end.
#[test]
#[ignore = "needs ../shared; run with make compat"]
fn corpus_expire_7_4_1_check_expiry() {
    let dir = common::shared_dir().join("corpus/expire-7.4.1");
    assert!(dir.is_dir(), "{} is missing: make compat needs ../shared", dir.display());
    let aof = dir.join("aof/appendonlydir");
    let until = Some(now_ms().max(1_900_000_000_000));
    let opts = Options { check_expiry: true, until, ..Options::default() };
    let r = Replay::run(&Input { aof: aof.clone(), rdb: None }, &opts).unwrap();
    assert!(r.violations.is_empty(), "{}", r.report_text());
    assert!(r.pending.is_empty(), "{}", r.report_text());
    let m = &r.summary;
    assert_eq!((m.expired_by_del, m.expired_by_unlink, m.expired_fields_by_hdel), (400, 400, 164));
    let (code, out) = replay_bin(&[
        "--check-expiry".as_ref(),
        aof.as_os_str(),
        "--against".as_ref(),
        dir.join("dump.rdb").as_os_str(),
    ]);
    assert_eq!(code, 0, "{out}");

    let tmp = TempDir::new("replay-corpus");
    let stripped = tmp.path().join("appendonlydir");
    without_deletions(&aof, &stripped);
    for e in std::fs::read_dir(&stripped).unwrap() {
        // HDEL records go too.
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".incr.aof") {
            let data = std::fs::read(&p).unwrap();
            let mut kept = Vec::new();
            let mut from = 0;
            for cmd in CommandReader::at(&data, 0) {
                let cmd = cmd.unwrap();
                if cmd.is("hdel") {
                    kept.extend_from_slice(&data[from..cmd.offset]);
                    from = cmd.end;
                }
            }
            kept.extend_from_slice(&data[from..]);
            std::fs::write(&p, kept).unwrap();
        }
    }
    let r = Replay::run(&Input { aof: stripped, rdb: None }, &opts).unwrap();
    assert_eq!(r.pending.iter().filter(|p| p.field.is_none()).count(), 800, "{}", r.report_text());
    assert_eq!(r.pending.iter().filter(|p| p.field.is_some()).count(), 164, "{}", r.report_text());
}

/// The base's keys, in three databases, of every type, some with TTLs, and a library.
fn streamed_base(s: &Server) {
    let mut cmds = Vec::new();
    for db in 0..3 {
        cmds.push(args(&["SELECT", &db.to_string()]));
        for i in 0..40 {
            let k = |t: &str| format!("{t}:{db}:{i}");
            cmds.push(args(&["SET", &k("s"), &format!("value-{i}")]));
            cmds.push(args(&["SET", &k("n"), &i.to_string()]));
            cmds.push(args(&["RPUSH", &k("l"), "a", "b", &i.to_string()]));
            cmds.push(args(&["HSET", &k("h"), "f1", "v1", "f2", &i.to_string()]));
            cmds.push(args(&["SADD", &k("set"), "x", "y", &i.to_string()]));
            cmds.push(args(&["ZADD", &k("z"), "1", "m1", "2.5", "m2", &i.to_string(), "m3"]));
            if i % 5 == 0 {
                cmds.push(args(&["XADD", &k("x"), "*", "f", &i.to_string()]));
                cmds.push(args(&["PEXPIRE", &k("s"), "100000000"]));
            }
        }
    }
    cmds.push(args(&["SELECT", "0"]));
    cmds.push(args(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=baselib\nredis.register_function('basef', function(keys, args) return 1 end)",
    ]));
    send(s, &cmds);
}

/// Commands after the base touch some of its keys in every way the log can: in place,
/// deleted, renamed, moved and copied to other databases, TTLs set and removed, a database
/// flushed and refilled, a library replaced, a transaction.
fn streamed_changes() -> Vec<Argv> {
    vec![
        args(&["APPEND", "s:0:1", "-more"]),
        args(&["INCR", "n:0:2"]),
        args(&["SETRANGE", "s:0:3", "2", "XY"]),
        args(&["LPUSH", "l:0:1", "front"]),
        args(&["LMOVE", "l:0:2", "l:0:3", "LEFT", "RIGHT"]),
        args(&["HSET", "h:0:1", "f3", "new"]),
        args(&["HDEL", "h:0:2", "f1"]),
        args(&["SMOVE", "set:0:1", "set:0:2", "x"]),
        args(&["SINTERSTORE", "dest:set", "set:0:3", "set:0:4"]),
        args(&["ZINCRBY", "z:0:1", "10", "m1"]),
        args(&["ZUNIONSTORE", "dest:z", "2", "z:0:2", "z:0:3"]),
        args(&["XADD", "x:0:0", "*", "g", "h"]),
        args(&["EXPIRE", "n:0:4", "100000"]),
        args(&["PERSIST", "s:0:5"]),
        args(&["DEL", "s:0:6", "l:0:6"]),
        args(&["RENAME", "h:0:7", "h:renamed"]),
        args(&["MOVE", "z:0:8", "1"]),
        args(&["COPY", "set:0:9", "set:copied", "DB", "2"]),
        args(&["MULTI"]),
        args(&["INCRBY", "n:0:10", "5"]),
        args(&["RPOP", "l:0:10"]),
        args(&["EXEC"]),
        args(&["SELECT", "1"]),
        args(&["SET", "s:1:1", "overwritten"]),
        args(&["HINCRBY", "h:1:2", "f2", "7"]),
        args(&["SELECT", "2"]),
        args(&["FLUSHDB"]),
        args(&["SET", "after:flush", "1"]),
        args(&["SELECT", "0"]),
        args(&[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=baselib\nredis.register_function('basef2', function(keys, args) return 2 end)",
        ]),
        args(&["SET", "brand:new", "1", "PX", "100000000"]),
    ]
}

/// aof-rewrite of a multi-part AOF with an RDB base holds only the keys the incr files
/// touch and copies the rest of the base: the output loads in Redis 7.0 with the source's
/// digest and libraries. A SWAPDB in the log moves keys it does not name, so that log is
/// rewritten whole, with the same result.
#[test]
fn rewrite_streams_an_rdb_base() {
    for swap in [false, true] {
        let s = aof_server(&["--appendfsync", "always"]);
        streamed_base(&s);
        aof_common::rewrite(&s);
        let mut changes = streamed_changes();
        if swap {
            changes.push(args(&["SWAPDB", "0", "1"]));
        }
        send(&s, &changes);
        let digest = s.cli(&["DEBUG", "DIGEST"]);
        let functions = s.cli(&["FUNCTION", "LIST"]);
        let keys = s.cli(&["DBSIZE"]);
        let (dir, aof) = stop(s);
        let tmp = TempDir::new("streamed");
        for layout in ["dir", "one.aof"] {
            let out = tmp.path().join(format!("{swap}-{layout}"));
            let (code, text) = run(env!("CARGO_BIN_EXE_aof-rewrite"), &[aof.as_os_str(), out.as_os_str()]);
            assert_eq!(code, 0, "{text}");
            assert_eq!(text.contains("the base RDB was streamed through"), !swap, "{text}");
            let target = TempDir::new("streamed-load");
            if layout == "dir" {
                std::fs::rename(&out, target.path().join("appendonlydir")).unwrap();
            } else {
                std::fs::copy(&out, target.path().join("appendonly.aof")).unwrap();
            }
            let loaded = Server::start_in(target, &["--appendonly", "yes"]);
            assert_eq!(loaded.cli(&["DEBUG", "DIGEST"]), digest, "{layout} swap {swap}: {text}");
            assert_eq!(loaded.cli(&["FUNCTION", "LIST"]), functions, "{layout} swap {swap}");
            if !swap {
                assert_eq!(loaded.cli(&["DBSIZE"]), keys);
                assert!(text.contains("held in memory"), "{text}");
            }
        }
        drop(dir);
    }
}

/// One random write over `streamed_base`'s keys (and new ones), and the database it runs in.
fn random_change(rng: &mut fastrand::Rng) -> (usize, Argv) {
    let db = rng.usize(0..3);
    let k = |rng: &mut fastrand::Rng, t: &str| format!("{t}:{db}:{}", rng.usize(0..40));
    let v = |rng: &mut fastrand::Rng| format!("v{}", rng.u32(0..1000));
    let n = |rng: &mut fastrand::Rng| rng.i32(-50..50).to_string();
    let words: Vec<String> = match rng.usize(1..46) {
        1 => vec!["SET".into(), k(rng, "s"), v(rng)],
        2 => vec!["APPEND".into(), k(rng, "s"), v(rng)],
        3 => vec!["INCRBY".into(), k(rng, "n"), n(rng)],
        4 => vec!["SETRANGE".into(), k(rng, "s"), rng.usize(0..12).to_string(), v(rng)],
        5 => vec!["GETDEL".into(), k(rng, "s")],
        6 => vec!["GETEX".into(), k(rng, "s"), "PX".into(), "90000000".into()],
        7 => vec!["MSET".into(), k(rng, "s"), v(rng), format!("new:{db}:{}", rng.u8(..)), v(rng)],
        8 => vec!["RENAME".into(), k(rng, "h"), k(rng, "h")],
        9 => vec!["RENAMENX".into(), k(rng, "l"), format!("renamed:{}", rng.u8(..))],
        10 => vec!["COPY".into(), k(rng, "z"), k(rng, "z"), "DB".into(), rng.usize(0..3).to_string(), "REPLACE".into()],
        11 => vec!["MOVE".into(), k(rng, "set"), rng.usize(0..3).to_string()],
        12 => vec!["DEL".into(), k(rng, "s"), k(rng, "l")],
        13 => vec!["UNLINK".into(), k(rng, "x")],
        14 => vec!["EXPIRE".into(), k(rng, "h"), "100000".into()],
        15 => vec!["PEXPIREAT".into(), k(rng, "z"), "4102444800000".into()],
        16 => vec!["PERSIST".into(), k(rng, "s")],
        17 => vec!["LPUSH".into(), k(rng, "l"), v(rng)],
        18 => vec!["RPOP".into(), k(rng, "l")],
        19 => vec!["LMOVE".into(), k(rng, "l"), k(rng, "l"), "LEFT".into(), "RIGHT".into()],
        20 => vec!["LSET".into(), k(rng, "l"), "0".into(), v(rng)],
        21 => vec!["LTRIM".into(), k(rng, "l"), "0".into(), "1".into()],
        22 => vec!["LINSERT".into(), k(rng, "l"), "BEFORE".into(), "b".into(), v(rng)],
        23 => vec!["HSET".into(), k(rng, "h"), v(rng), v(rng)],
        24 => vec!["HDEL".into(), k(rng, "h"), "f1".into()],
        25 => vec!["HINCRBY".into(), k(rng, "h"), "f2".into(), n(rng)],
        26 => vec!["HSETNX".into(), k(rng, "h"), "f9".into(), v(rng)],
        27 => vec!["SADD".into(), k(rng, "set"), v(rng)],
        28 => vec!["SREM".into(), k(rng, "set"), "x".into()],
        29 => vec!["SMOVE".into(), k(rng, "set"), k(rng, "set"), "y".into()],
        30 => vec!["SUNIONSTORE".into(), k(rng, "set"), k(rng, "set"), k(rng, "set")],
        31 => vec!["SDIFFSTORE".into(), format!("diff:{db}"), k(rng, "set"), k(rng, "set")],
        32 => vec!["ZADD".into(), k(rng, "z"), n(rng), v(rng)],
        33 => vec!["ZINCRBY".into(), k(rng, "z"), n(rng), "m1".into()],
        34 => vec![
            "ZINTERSTORE".into(),
            k(rng, "z"),
            "2".into(),
            k(rng, "z"),
            k(rng, "z"),
            "WEIGHTS".into(),
            "2".into(),
            "3".into(),
        ],
        35 => vec!["ZRANGESTORE".into(), format!("zr:{db}"), k(rng, "z"), "0".into(), "1".into()],
        36 => vec!["ZPOPMIN".into(), k(rng, "z")],
        37 => vec!["ZREMRANGEBYRANK".into(), k(rng, "z"), "0".into(), "0".into()],
        38 => vec!["XADD".into(), k(rng, "x"), "*".into(), "f".into(), v(rng)],
        39 => vec!["XTRIM".into(), k(rng, "x"), "MAXLEN".into(), "1".into()],
        40 => vec!["SORT".into(), k(rng, "l"), "ALPHA".into(), "STORE".into(), k(rng, "l")],
        41 => vec!["HINCRBYFLOAT".into(), k(rng, "h"), "f2".into(), "1.5".into()],
        42 => vec!["SINTERSTORE".into(), k(rng, "set"), k(rng, "set"), k(rng, "set")],
        43 => vec!["ZUNIONSTORE".into(), format!("zu:{db}"), "2".into(), k(rng, "z"), k(rng, "z")],
        44 => vec!["SETNX".into(), k(rng, "s"), v(rng)],
        _ => vec!["INCR".into(), k(rng, "n")],
    };
    (db, words.iter().map(|w| w.as_bytes().to_vec()).collect())
}

/// 3,000 random writes over an RDB base, in three databases, three seeds: the streamed
/// rewrite loads in Redis 7.0 with the source's digest, as the whole replay (RESP base) does.
#[test]
fn streamed_rewrite_of_random_writes_matches_the_source() {
    for seed in [19, 20, 21] {
        random_writes_rewritten(seed);
    }
}

fn random_writes_rewritten(seed: u64) {
    let s = aof_server(&["--appendfsync", "no"]);
    streamed_base(&s);
    aof_common::rewrite(&s);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut c = s.client();
    let mut failed = 0;
    for _ in 0..3000 {
        let (db, argv) = random_change(&mut rng);
        c.call(&[b"SELECT".to_vec(), db.to_string().into_bytes()]);
        // Errors (a type the command does not take) are not logged, as in any client's traffic.
        failed += usize::from(c.call(&argv).starts_with(b"-"));
    }
    assert!(failed < 600, "{failed} of 3000 changes failed");
    let digest = s.cli(&["DEBUG", "DIGEST"]);
    let (dir, aof) = stop(s);
    let tmp = TempDir::new("streamed-random");
    for base in ["rdb", "resp"] {
        let out = tmp.path().join(base);
        let (code, text) = run(
            env!("CARGO_BIN_EXE_aof-rewrite"),
            &[aof.as_os_str(), out.as_os_str(), "--base".as_ref(), base.as_ref()],
        );
        assert_eq!(code, 0, "{text}");
        assert_eq!(text.contains("streamed through"), base == "rdb", "{text}");
        let target = TempDir::new("streamed-random-load");
        std::fs::rename(&out, target.path().join("appendonlydir")).unwrap();
        let loaded = Server::start_in(target, &["--appendonly", "yes"]);
        assert_eq!(loaded.cli(&["DEBUG", "DIGEST"]), digest, "seed {seed}, base {base}: {text}");
    }
    drop(dir);
}
