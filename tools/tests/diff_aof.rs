//! `rdbtool diff` with AOF inputs (a directory, a manifest, one file), on AOFs and saves
//! written by a real redis-server 7.0.

mod aof_common;
mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use aof_common::{aof_server, args, copy_tree, rewrite, send, stop, Argv};
use ferrokv_testkit::TempDir;

fn rdbtool(argv: &[&OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rdbtool")).args(argv).output().expect("run rdbtool");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn diff(a: &Path, b: &Path) -> (i32, String) {
    let (code, out, err) = rdbtool(&["diff".as_ref(), a.as_os_str(), b.as_os_str()]);
    (code, format!("{out}{err}"))
}

fn writes(tag: &str) -> Vec<Argv> {
    let mut cmds = Vec::new();
    for i in 0..50 {
        cmds.push(args(&["SET", &format!("{tag}:s:{i}"), &"v".repeat(i)]));
        cmds.push(args(&["RPUSH", &format!("{tag}:l:{}", i % 7), &i.to_string()]));
        cmds.push(args(&["HSET", &format!("{tag}:h:{}", i % 5), &format!("f{i}"), &i.to_string()]));
        cmds.push(args(&["SADD", &format!("{tag}:set:{}", i % 3), &(i * 7).to_string()]));
        cmds.push(args(&["ZADD", &format!("{tag}:z"), &(i as f64 / 3.0).to_string(), &format!("m{i}")]));
    }
    cmds.push(args(&["SET", &format!("{tag}:ttl"), "x", "PX", "100000000"]));
    cmds.push(args(&["EXPIRE", &format!("{tag}:l:1"), "100000"]));
    cmds.push(args(&["INCRBYFLOAT", &format!("{tag}:f"), "1.5"]));
    cmds.push(args(&["DEL", &format!("{tag}:s:3")]));
    cmds
}

#[test]
fn aof_inputs_compare_with_saves_and_with_each_other() {
    // A base (RDB preamble, from BGREWRITEAOF) and an incr file, in two databases.
    let s = aof_server(&["--appendfsync", "always"]);
    send(&s, &writes("a"));
    rewrite(&s);
    let mut more = vec![args(&["SELECT", "2"])];
    more.extend(writes("b"));
    send(&s, &more);
    assert_eq!(s.cli(&["SAVE"]), "OK");
    let work = TempDir::new("diff-aof");
    let snapshot = work.path().join("snapshot.rdb");
    std::fs::copy(s.dir.path().join("dump.rdb"), &snapshot).unwrap();
    // The AOF as it was at the SAVE (appendfsync always: complete on disk).
    let at_save = copy_tree(&s.dir.path().join("appendonlydir"), "diff-aof-at-save");
    send(&s, &[args(&["SELECT", "2"]), args(&["SET", "only-in-aof", "1"])]);
    let (_dir, aof) = stop(s);
    let at_save_dir = at_save.path();

    // The same dataset: exit 0, through the directory or its manifest, either side.
    let manifest = at_save_dir.join("appendonly.aof.manifest");
    for (a, b) in [(at_save_dir, snapshot.as_path()), (snapshot.as_path(), manifest.as_path())] {
        let (code, out) = diff(a, b);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("same:"), "{out}");
    }
    // One more write, only in the AOF: exit 1 naming the key, against the save and against
    // the earlier AOF.
    for b in [snapshot.as_path(), at_save_dir] {
        let (code, out) = diff(&aof, b);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("only-in-aof"), "{out}");
        assert_eq!(out.lines().filter(|l| l.contains("only-in-aof")).count(), 1, "{out}");
    }
    // The report names the inputs as given.
    let (code, out, _) =
        rdbtool(&["diff".as_ref(), aof.as_os_str(), snapshot.as_os_str(), "--format".as_ref(), "json".as_ref()]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["a"].as_str(), Some(aof.display().to_string().as_str()), "{out}");

    // Single-file AOFs (an RDB preamble plus RESP, and RESP only) from aof-rewrite.
    for base in ["rdb", "resp"] {
        let one = work.path().join(format!("one-{base}.aof"));
        let out = Command::new(env!("CARGO_BIN_EXE_aof-rewrite"))
            .args([at_save_dir.as_os_str(), one.as_os_str(), "--base".as_ref(), base.as_ref()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let (code, out) = diff(&one, &snapshot);
        assert_eq!(code, 0, "{base}: {out}");
        let (code, out) = diff(&aof, &one);
        assert_eq!(code, 1, "{base}: {out}");
        assert!(out.contains("only-in-aof"), "{out}");
    }

    // An AOF that does not parse is an error (exit 2) naming the file, with no verdict.
    let bad = work.path().join("bad.aof");
    std::fs::write(&bad, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPI").unwrap();
    let bad_mid = work.path().join("bad-mid.aof");
    std::fs::write(&bad_mid, b"*2\r\n$3\r\nGET\r\nxx\r\n*1\r\n$4\r\nPING\r\n").unwrap();
    let (code, out, err) = rdbtool(&["diff".as_ref(), bad_mid.as_os_str(), snapshot.as_os_str()]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("bad-mid.aof"), "{err}");
    // A cut last command is dropped with the rest, as Redis's loader does: a verdict.
    let (code, out) = diff(&bad, &snapshot);
    assert_eq!(code, 1, "{out}");
}
