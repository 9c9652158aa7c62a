//! aoftool capture from a real Redis 7.0 under a write load, its link dropped twice: every
//! reconnection continues (PSYNC), the files hold the stream up to the master's offset,
//! `aoftool verify` accepts the directory and a real Redis 7.0 loads it with the master's
//! DEBUG DIGEST.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrokv_testkit::{info_field, wait_for, Client, Server as Redis, TempDir};

/// Writes of several kinds in several databases, transactions and TTLs among them.
fn write_load(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut c = Client::connect(port);
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let k = i % 50;
            c.call_str(&["INCR", &format!("n{k}")]);
            c.call_str(&["HSET", &format!("h{k}"), &format!("f{i}"), "v"]);
            if i.is_multiple_of(10) {
                for cmd in [
                    &["SELECT", "3"][..],
                    &["MULTI"],
                    &["RPUSH", "list", &i.to_string()],
                    &["SET", &format!("ttl{k}"), "x", "EX", "1000"],
                    &["EXEC"],
                    &["SELECT", "0"],
                ] {
                    c.call_str(cmd);
                }
            }
            if i.is_multiple_of(25) {
                c.call_str(&["SET", &format!("short{k}"), "x", "PX", "50"]);
            }
            i += 1;
        }
        i
    })
}

#[test]
fn capture_follows_a_live_redis_through_dropped_links() {
    let master = Redis::start();
    master.cli(&["SET", "before", "the capture"]);
    let out = TempDir::new("capture");
    let dir = out.path().join("appendonlydir");
    let child = Command::new(env!("CARGO_BIN_EXE_aoftool"))
        .args(["capture", &format!("redis://127.0.0.1:{}", master.port)])
        .arg(&dir)
        .args(["--duration", "6", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("aoftool");
    wait_for("the capture to attach", || info_field(master.port, "replication", "connected_slaves") == "1");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = write_load(master.port, stop.clone());
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(master.cli(&["CLIENT", "KILL", "TYPE", "replica"]), "1");
        wait_for("the capture to come back", || info_field(master.port, "replication", "connected_slaves") == "1");
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().expect("writer");
    assert!(writes > 100, "{writes} writes");
    let done = child.wait_with_output().expect("aoftool capture");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    let sum: serde_json::Value = serde_json::from_slice(&done.stdout).expect("json summary");
    assert_eq!(
        sum["offset"].as_u64().map(|o| o.to_string()),
        Some(info_field(master.port, "replication", "master_repl_offset"))
    );
    assert_eq!(sum["replid"], info_field(master.port, "replication", "master_replid"));
    assert_eq!((sum["full_syncs"].as_u64(), sum["partial_syncs"].as_u64()), (Some(1), Some(2)), "{stderr}");
    assert_eq!(info_field(master.port, "stats", "sync_partial_ok"), "2");
    let verify = Command::new(env!("CARGO_BIN_EXE_aoftool")).arg("verify").arg(&dir).output().expect("verify");
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stdout));
    // The keys with a 50 ms TTL are gone on both sides by now (the DELs are in the files).
    let digest = master.cli(&["DEBUG", "DIGEST"]);
    let loaded = Redis::start_in(out, &["--appendonly", "yes", "--appenddirname", "appendonlydir"]);
    assert_eq!(loaded.cli(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(loaded.cli(&["GET", "before"]), "the capture");
}
