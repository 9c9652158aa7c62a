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
