//! The rdbtool binary: exit codes, error lines, output formats, broken pipes.

mod common;

use std::process::{Command, Stdio};

use common::fixtures_dir;

fn rdbtool() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rdbtool"))
}

fn fixture() -> String {
    fixtures_dir().join("rdb/redis-7.0/all-types.rdb").display().to_string()
}

#[test]
fn verify_exit_codes() {
    let ok = rdbtool().args(["verify", &fixture()]).output().expect("run");
    assert_eq!(ok.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&ok.stdout).starts_with("OK: "));

    let data = std::fs::read(fixture()).expect("read");
    let tmp = std::env::temp_dir().join(format!("ferrokv-cli-{}.rdb", std::process::id()));
    std::fs::write(&tmp, &data[..data.len() / 2]).expect("write");
    let bad = rdbtool().args(["verify"]).arg(&tmp).output().expect("run");
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.starts_with("rdbtool: ") && err.contains(": offset "), "{err}");

    let js = rdbtool().args(["verify", "--json"]).arg(&tmp).output().expect("run");
    assert_eq!(js.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&js.stdout).expect("json report");
    assert_eq!(v["ok"], false);
    assert!(v["error"]["offset"].as_u64().is_some());
    assert_eq!(v["error"]["kind"], "truncated");
    let _ = std::fs::remove_file(&tmp);

    let missing = rdbtool().args(["verify", "/nonexistent/dump.rdb"]).output().expect("run");
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn info_and_verify_json() {
    let out = rdbtool().args(["info", "--json", &fixture()]).output().expect("run");
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["magic"], "REDIS0010");
    assert_eq!(v["aux"]["redis-ver"], "7.0.15");
    assert!(v["keys"].as_u64().expect("keys") > 100);
}

#[test]
fn dump_reads_stdin_and_survives_a_closed_pipe() {
    let data = std::fs::read(fixture()).expect("read");
    let mut child = rdbtool()
        .args(["dump", "-", "--format", "resp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::{Read, Write};
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(&data).expect("write");
        drop(stdin);
        let mut first = [0u8; 16];
        child.stdout.as_mut().expect("stdout").read_exact(&mut first).expect("read");
        assert_eq!(first[0], b'*');
        // Close our end early: the tool must stop quietly with exit 0.
        drop(child.stdout.take());
    }
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn unknown_type_is_a_usage_error() {
    let out = rdbtool().args(["dump", &fixture(), "--type", "bogus"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
}

/// `dump --format resp` rebuilds what commands cannot with RESTORE (`--resp-restore auto`):
/// a Redis 6.2 ziplist's -0 score (a Redis 7 ZADD stores 0) and a stream's consumer groups
/// load into a real Redis 7.0 with the DEBUG DIGEST and ZSCORE of loading the file itself;
/// `never` writes commands and names the key on stderr.
#[test]
fn dump_resp_restores_what_commands_cannot_carry() {
    use ferrokv_testkit::{cli, pipe_into, Server, TempDir};
    let dir = TempDir::new("resp-restore");
    // A Redis 6.2 log (one file, no preamble): aof-rewrite keeps its writer's version.
    let log = dir.path().join("in.aof");
    let mut resp = Vec::new();
    for cmd in [
        &["ZADD", "z", "-0", "a", "1", "b"][..],
        &["XADD", "st", "1-1", "f", "v"],
        &["XADD", "st", "2-1", "f", "w"],
        &["XGROUP", "CREATE", "st", "g", "0"],
        &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "st", ">"],
        &["SET", "s", "v"],
    ] {
        resp.extend(ferrokv_testkit::encode_command(&cmd.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>()));
    }
    std::fs::write(&log, resp).unwrap();
    let rdb = dir.path().join("v9.rdb");
    let out = Command::new(std::path::Path::new(env!("CARGO_BIN_EXE_rdbtool")).with_file_name("aof-rewrite"))
        .arg(&log)
        .arg(&rdb)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&rdb).unwrap().starts_with(b"REDIS0009"));

    let direct = Server::start_with(Some(&rdb), &[]);
    let truth = (direct.cli(&["DEBUG", "DIGEST"]), direct.cli(&["ZSCORE", "z", "a"]));
    assert_eq!(truth.1, "-0");
    let auto = rdbtool().args(["dump", "--format", "resp"]).arg(&rdb).output().unwrap();
    assert!(auto.status.success() && auto.stderr.is_empty(), "{}", String::from_utf8_lossy(&auto.stderr));
    let text = String::from_utf8_lossy(&auto.stdout);
    assert_eq!(text.matches("RESTORE").count(), 2, "{text}");
    let fed = Server::start();
    pipe_into(fed.port, &auto.stdout);
    assert_eq!((fed.cli(&["DEBUG", "DIGEST"]), fed.cli(&["ZSCORE", "z", "a"])), truth);
    assert_eq!(cli(fed.port, &["XPENDING", "st", "g"]), cli(direct.port, &["XPENDING", "st", "g"]));

    let never = rdbtool().args(["dump", "--format", "resp", "--resp-restore", "never"]).arg(&rdb).output().unwrap();
    let said = String::from_utf8_lossy(&never.stderr);
    assert!(never.status.success() && !String::from_utf8_lossy(&never.stdout).contains("RESTORE"));
    assert!(said.contains("db 0 key 'z'") && said.contains("db 0 key 'st'"), "{said}");
    let always = rdbtool().args(["dump", "--format", "resp", "--resp-restore", "always"]).arg(&rdb).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&always.stdout).matches("RESTORE").count(), 3);
}
