//! aoftool verify and dump on AOFs written by a real redis-server 7.0: plain, with an RDB
//! preamble, multi-part across BGREWRITEAOF, with timestamps; and on broken manifests and
//! commands the engine's table rejects.

#[path = "aof_common/mod.rs"]
mod aof_common;

use std::path::Path;
use std::process::Command;

use aof_common::*;
use ferrokv_tools::aof::check::verify;
use ferrokv_tools::aof::Kind;

fn batch(tag: &str, n: usize) -> Vec<Argv> {
    let mut cmds = Vec::new();
    for i in 0..n {
        cmds.push(args(&["SET", &format!("{tag}:s{i}"), &format!("v{i}")]));
        cmds.push(args(&["RPUSH", &format!("{tag}:l"), &i.to_string()]));
        if i % 3 == 0 {
            cmds.push(args(&["HSET", &format!("{tag}:h"), &format!("f{i}"), "x"]));
            cmds.push(args(&["SADD", &format!("{tag}:set"), &i.to_string()]));
            cmds.push(args(&["ZADD", &format!("{tag}:z"), &i.to_string(), &format!("m{i}")]));
            cmds.push(args(&["INCR", &format!("{tag}:n")]));
        }
    }
    cmds.push(args(&["SET", &format!("{tag}:bin"), "a\u{e9}\r\nb"]));
    cmds.push(args(&["DEL", &format!("{tag}:s0")]));
    cmds
}

/// Commands in db 2, after a SELECT 2.
fn in_db2(tag: &str) -> Vec<Argv> {
    vec![args(&["SET", &format!("{tag}:db2"), "x"]), args(&["RPUSH", &format!("{tag}:db2l"), "a", "b"])]
}

fn assert_verifies(path: &Path) -> ferrokv_tools::aof::check::VerifyReport {
    let r = verify(path, Default::default()).expect("verify runs");
    assert!(r.problem.is_none(), "{}", r.problem.map(|p| p.to_string()).unwrap_or_default());
    r
}

/// Run one configuration: batch A, (a rewrite), batch B; check verify and dump.
fn scenario(extra: &[&str], rewrite_between: bool) -> (ferrokv_testkit::TempDir, std::path::PathBuf) {
    let s = aof_server(extra);
    let a = batch("a", 40);
    send(&s, &a);
    let mut c = s.client();
    c.call_str(&["SELECT", "2"]);
    for argv in in_db2("a") {
        c.call(&argv);
    }
    drop(c);
    if rewrite_between {
        rewrite(&s);
    }
    let b = batch("b", 30);
    send(&s, &b);
    let (dir, aof) = stop(s);
    let rep = assert_verifies(&aof);
    let lines = dump_jsonl(&aof);
    let incr = incr_files(&aof);
    assert_eq!(incr.len(), 1, "one incr file after a rewrite: {incr:?}");
    let got = commands_of(&lines, &incr[0]);
    let mut want: Vec<Argv> = Vec::new();
    if !rewrite_between {
        want.extend(a);
        want.extend(in_db2("a"));
    }
    want.extend(b);
    assert_eq!(got, want, "the incr file holds every command sent, in order");
    // Commands after SELECT 2 run in db 2; the others in db 0.
    for l in lines.iter().filter(|l| l["file"] == incr[0].as_str()) {
        let key = l["argv"].get(1).and_then(|k| k.as_str()).unwrap_or("");
        if key.ends_with(":db2") || key.ends_with(":db2l") {
            assert_eq!(l["db"], 2, "{l}");
        } else if !l["argv"][0].as_str().unwrap_or("").eq_ignore_ascii_case("select") {
            assert_eq!(l["db"], 0, "{l}");
        }
    }
    if rewrite_between {
        // The base holds batch A, as RDB or as rewritten commands.
        let base = &rep.files[0];
        match &base.rdb {
            Some(rdb) => assert!(rdb.keys >= 40, "{:?}", base),
            None => assert!(base.commands >= 40, "{:?}", base),
        }
    }
    (dir, aof)
}

#[test]
fn plain_aof_verifies_and_dumps_every_command() {
    scenario(&["--aof-use-rdb-preamble", "no"], false);
}

#[test]
fn preamble_and_multipart_with_rewrites() {
    let (_dir, aof) = scenario(&["--aof-use-rdb-preamble", "yes"], true);
    let r = assert_verifies(&aof);
    assert!(r.files[0].rdb.is_some(), "the base is an RDB");
    let (_dir, aof) = scenario(&["--aof-use-rdb-preamble", "no"], true);
    let r = assert_verifies(&aof);
    assert!(r.files[0].rdb.is_none() && r.files[0].commands > 0);
    // A manifest path and the directory verify alike.
    assert_verifies(&aof.join("appendonly.aof.manifest"));
}

#[test]
fn timestamps_are_read() {
    let s = aof_server(&["--aof-use-rdb-preamble", "no", "--aof-timestamp-enabled", "yes"]);
    send(&s, &batch("t", 5));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    send(&s, &batch("u", 5));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    send(&s, &batch("w", 5));
    let (_dir, aof) = stop(s);
    assert_verifies(&aof);
    let now = ferrokv_tools::now_ms() / 1000;
    let lines = dump_jsonl(&aof);
    let incr = &incr_files(&aof)[0];
    let ts: Vec<i64> = lines.iter().filter(|l| l["file"] == incr.as_str()).filter_map(|l| l["ts"].as_i64()).collect();
    // An annotation is written when the second changes, so the first commands of a new
    // incr file may have none.
    assert!(ts.len() >= 40, "commands carry #TS: annotations: {ts:?}");
    assert!(ts.iter().all(|&t| (now - 120..=now + 5).contains(&t)), "{ts:?} vs now {now}");
    assert!(ts.windows(2).all(|w| w[0] <= w[1]) && ts.first() < ts.last(), "{ts:?}");
}

fn plain_dir() -> (ferrokv_testkit::TempDir, std::path::PathBuf) {
    let s = aof_server(&["--aof-use-rdb-preamble", "no"]);
    send(&s, &batch("m", 10));
    rewrite(&s);
    send(&s, &batch("n", 10));
    stop(s)
}

fn problem_of(path: &Path) -> ferrokv_tools::aof::Problem {
    verify(path, Default::default()).expect("verify runs").problem.expect("a problem")
}

#[test]
fn manifest_problems_are_named() {
    let (_d, aof) = plain_dir();
    let manifest = aof.join("appendonly.aof.manifest");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let incr = incr_files(&aof)[0].clone();

    // A missing incr file.
    let dir = copy_tree(&aof, "aof-missing");
    std::fs::remove_file(dir.path().join(&incr)).unwrap();
    let p = problem_of(dir.path());
    assert_eq!(p.kind, Kind::Manifest);
    assert!(p.to_string().contains(&format!("names the incr file {incr}, which does not exist")), "{p}");
    assert!(p.to_string().starts_with("file appendonly.aof.manifest offset "), "{p}");

    // A second base.
    let dir = copy_tree(&aof, "aof-dup-base");
    std::fs::write(dir.path().join("appendonly.aof.manifest"), format!("{text}file other.base.aof seq 9 type b\n"))
        .unwrap();
    let p = problem_of(dir.path());
    assert_eq!((p.kind, p.line), (Kind::Manifest, Some(3)), "{p}");
    assert!(p.what.contains("duplicate base"), "{p}");
    assert_eq!(p.offset, Some(text.len()));

    // Incr files out of sequence.
    let dir = copy_tree(&aof, "aof-seq");
    std::fs::write(dir.path().join("appendonly.aof.1.incr.aof"), b"").unwrap();
    std::fs::write(
        dir.path().join("appendonly.aof.manifest"),
        format!("{text}file appendonly.aof.1.incr.aof seq 1 type i\n"),
    )
    .unwrap();
    let p = problem_of(dir.path());
    assert!(p.what.contains("non-monotonic sequence"), "{p}");

    // No base at all: Redis loads the incr files alone (a warning).
    let dir = copy_tree(&aof, "aof-no-base");
    let no_base: String = text.lines().filter(|l| !l.ends_with("type b")).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("appendonly.aof.manifest"), no_base).unwrap();
    let r = verify(dir.path(), Default::default()).expect("verify runs");
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert!(r.warnings.iter().any(|w| w.what.contains("names no base file")), "{:?}", r.warnings);

    // A form feed inside a line separates nothing (sdssplitargs ends an argument only at
    // a space, tab, CR or LF): five words, as Redis and Valkey refuse it.
    let dir = copy_tree(&aof, "aof-form-feed");
    std::fs::write(dir.path().join("appendonly.aof.manifest"), text.replacen(" type", "\x0ctype", 1)).unwrap();
    assert!(problem_of(dir.path()).what.contains("Invalid AOF manifest file format"));

    // A file the manifest does not name: Redis loads the directory without it (a warning).
    let dir = copy_tree(&aof, "aof-extra");
    std::fs::write(dir.path().join("appendonly.aof.7.incr.aof"), b"").unwrap();
    let r = verify(dir.path(), Default::default()).expect("verify runs");
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert!(r
        .warnings
        .iter()
        .any(|w| w.what.contains("appendonly.aof.7.incr.aof is in the AOF directory but not in the manifest")));
}

#[test]
fn command_problems_name_file_offset_and_number() {
    let (_d, aof) = plain_dir();
    let incr = incr_files(&aof)[0].clone();
    let size = std::fs::metadata(aof.join(&incr)).unwrap().len() as usize;
    let n = verify(&aof, Default::default()).unwrap().files[1].commands;
    // What Redis's loader refuses is a problem; what it runs anyway (an error it ignores)
    // is a warning, named the same way.
    let cases: [(&[u8], &str, bool); 8] = [
        (b"*2\r\n$4\r\nNOPE\r\n$1\r\nx\r\n", "unknown command 'NOPE'", true),
        (b"*1\r\n$3\r\nSET\r\n", "wrong number of arguments for 'set' (0 given)", true),
        (b"*2\r\n$3\r\nGET\r\n$1\r\nx\r\nxyz\r\n", "expected '*' (a command), found byte 0x78", true),
        (b"*1\r\n$4\r\nEXEC\r\n", "EXEC without MULTI", false),
        (b"*1\r\n$5\r\nMULTI\r\n*1\r\n$5\r\nMULTI\r\n", "MULTI inside the MULTI at offset", false),
        (b"*3\r\n$3\r\nGET\r\n$1\r\nx\r\n$1\r\ny\r\n", "wrong number of arguments for 'get' (2 given", false),
        // Too few: XADD counts its own arguments (an error back, as Redis 7.0, 7.4 and
        // Valkey 8.0 load it); SADD reads past them (the loader crashes).
        (
            b"*4\r\n$4\r\nXADD\r\n$1\r\nz\r\n$3\r\n1.5\r\n$1\r\na\r\n",
            "wrong number of arguments for 'xadd' (3 given",
            false,
        ),
        (b"*2\r\n$4\r\nSADD\r\n$1\r\ns\r\n", "wrong number of arguments for 'sadd' (1 given)", true),
    ];
    for (tail, what, refused) in cases {
        let dir = copy_tree(&aof, "aof-cmd");
        let path = dir.path().join(&incr);
        let mut data = std::fs::read(&path).unwrap();
        data.extend_from_slice(tail);
        std::fs::write(&path, &data).unwrap();
        let r = verify(dir.path(), Default::default()).expect("verify runs");
        let p = if refused {
            r.problem.clone().expect("a problem")
        } else {
            assert!(r.problem.is_none(), "{what}: {:?}", r.problem);
            r.files.iter().flat_map(|f| f.warnings.clone()).find(|w| w.what.contains(what)).expect("a warning")
        };
        assert!(p.what.contains(what), "{p}");
        let text = p.to_string();
        assert!(text.starts_with(&format!("file {incr} offset ")), "{text}");
        let k = p.command.expect("a command number");
        assert!(k > n, "{text}");
        assert!(p.offset.unwrap() >= size, "{text}");
    }
}

#[test]
fn cli_exit_codes_and_json() {
    let (_d, aof) = plain_dir();
    let bin = env!("CARGO_BIN_EXE_aoftool");
    let ok = Command::new(bin).args(["verify", "--json"]).arg(&aof).output().unwrap();
    assert_eq!(ok.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert!(v["commands"].as_u64().unwrap() > 0);
    let dir = copy_tree(&aof, "aof-cli");
    let incr = dir.path().join(&incr_files(&aof)[0]);
    let mut data = std::fs::read(&incr).unwrap();
    let size = data.len();
    data.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1");
    std::fs::write(&incr, &data).unwrap();
    // A cut tail: Redis loads the rest (a warning); --strict makes it the problem.
    let cut = Command::new(bin).arg("verify").arg(dir.path()).output().unwrap();
    assert_eq!(cut.status.code(), Some(0));
    let text = String::from_utf8_lossy(&cut.stdout);
    assert!(text.contains(&format!("warning: file {} offset {size} (command #", incr_files(&aof)[0])), "{text}");
    let bad = Command::new(bin).args(["verify", "--strict"]).arg(dir.path()).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let text = String::from_utf8_lossy(&bad.stdout);
    assert!(text.starts_with(&format!("file {} offset {size} (command #", incr_files(&aof)[0])), "{text}");
    let dump = Command::new(bin).args(["dump", "--format", "text"]).arg(&aof).output().unwrap();
    assert_eq!(dump.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&dump.stdout).contains("db=0 ts=- \"SET\" \"n:s1\" \"v1\""));
    let missing = Command::new(bin).args(["verify", "/nonexistent/aof"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
}
