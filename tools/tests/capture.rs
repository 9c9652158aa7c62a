//! aoftool capture from a real Redis 7.0 under a write load, its link dropped twice: every
//! reconnection continues (PSYNC), the files hold the stream up to the master's offset,
//! `aoftool verify` accepts the directory, `replay --check-expiry` finds the master's
//! expirations in it, and a real Redis 7.0 loads it with the master's DEBUG DIGEST. Then a
//! point in time rebuilt from a capture.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::redis::spawn_capture;
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
    // A backlog the writes of a reconnection's second cannot outrun on a busy machine.
    assert_eq!(master.cli(&["CONFIG", "SET", "repl-backlog-size", "64mb"]), "OK");
    master.cli(&["SET", "before", "the capture"]);
    let out = TempDir::new("capture");
    let dir = out.path().join("appendonlydir");
    // Long enough for both reconnections on a loaded machine: a capture whose time ran
    // out before the second never came back (make test, 2026-11-29).
    let child = spawn_capture(&format!("redis://127.0.0.1:{}", master.port), &[], &dir, 12);
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
    // Two keys expire; `exp:b`'s deletion reaches the stream before `exp:a` is written again.
    master.cli(&["SET", "exp:a", "1", "PX", "100"]);
    master.cli(&["SET", "exp:b", "1", "PX", "110"]);
    std::thread::sleep(Duration::from_millis(300));
    master.cli(&["GET", "exp:b"]);
    master.cli(&["SET", "exp:a", "2"]);
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
    // The master's traffic keeps the expiry rule: each key with a 50 ms TTL written again
    // reached the stream as a DEL first.
    let check = Command::new(env!("CARGO_BIN_EXE_replay")).arg(&dir).arg("--check-expiry").output().expect("replay");
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{said}");
    assert!(said.contains("violations: 0"), "{said}");
    let seen = said.lines().find_map(|l| l.strip_prefix("expired keys seen: ")).and_then(|l| l.split(' ').next());
    assert!(seen.and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n > 0), "{said}");
    // Without the DEL of `exp:a`, its next write is named: `exp:b`'s DEL proves the time
    // (the capture's `#TS:` are receive times, which do not).
    let stripped = TempDir::new("capture-stripped");
    for entry in std::fs::read_dir(&dir).expect("dir") {
        let path = entry.expect("entry").path();
        let mut data = std::fs::read(&path).expect("read");
        if path.extension().is_some_and(|e| e == "aof") {
            let del = b"*2\r\n$3\r\nDEL\r\n$5\r\nexp:a\r\n";
            while let Some(at) = data.windows(del.len()).position(|w| w == del) {
                data.drain(at..at + del.len());
            }
        }
        std::fs::write(stripped.path().join(path.file_name().expect("name")), data).expect("write");
    }
    let check = Command::new(env!("CARGO_BIN_EXE_replay")).arg(stripped.path()).arg("--check-expiry").output();
    let said = String::from_utf8_lossy(&check.as_ref().expect("replay").stdout).into_owned();
    assert_eq!(check.expect("replay").status.code(), Some(1), "{said}");
    assert!(said.contains("SET on db 0 key 'exp:a' expired at"), "{said}");
    assert!(said.contains("violations: 1 "), "{said}");
    // The keys with a 50 ms TTL are gone on both sides by now (the DELs are in the files).
    let digest = master.cli(&["DEBUG", "DIGEST"]);
    let loaded = Redis::start_in(out, &["--appendonly", "yes", "--appenddirname", "appendonlydir"]);
    assert_eq!(loaded.cli(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(loaded.cli(&["GET", "before"]), "the capture");
}

/// Sleep past the next second boundary (and `margin_ms` more): `#TS:` annotations are whole
/// seconds, so writes before and after fall under different ones.
fn past_next_second(margin_ms: u64) {
    let ms = ferrokv_tools::now_ms() as u64 % 1000;
    std::thread::sleep(Duration::from_millis(1000 - ms + margin_ms));
}

fn write_for(port: u16, how_long: Duration) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let writer = write_load(port, stop.clone());
    std::thread::sleep(how_long);
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer")
}

/// Point in time from a capture: writes, a dropped link, more writes; the master's SAVE
/// and DEBUG DIGEST at T; writes after T. `aof-rewrite --until T` rebuilds the dataset of
/// T (a real Redis loads it with the digest of T) and `replay --until T --against` the
/// SAVE of T finds no difference, while the whole capture does.
#[test]
fn point_in_time_rebuilt_from_a_capture_is_the_masters_dataset_then() {
    let master = Redis::start();
    assert_eq!(master.cli(&["CONFIG", "SET", "repl-backlog-size", "64mb"]), "OK");
    let out = TempDir::new("capture-pit");
    let dir = out.path().join("appendonlydir");
    // Long enough for the reconnection and the writes after T on a loaded machine.
    let child = spawn_capture(&format!("redis://127.0.0.1:{}", master.port), &[], &dir, 12);
    wait_for("the capture to attach", || info_field(master.port, "replication", "connected_slaves") == "1");
    assert!(write_for(master.port, Duration::from_millis(600)) > 10);
    assert_eq!(master.cli(&["CLIENT", "KILL", "TYPE", "replica"]), "1");
    wait_for("the capture to come back", || info_field(master.port, "replication", "connected_slaves") == "1");
    assert!(write_for(master.port, Duration::from_millis(600)) > 10);
    // Quiet until the keys with 50 ms TTLs are gone and a new second began: T.
    past_next_second(300);
    let t_ms = ferrokv_tools::now_ms();
    assert_eq!(master.cli(&["SAVE"]), "OK");
    let digest_at_t = master.cli(&["DEBUG", "DIGEST"]);
    let saved = out.path().join("at-t.rdb");
    std::fs::copy(master.dir.path().join("dump.rdb"), &saved).expect("copy the SAVE");
    past_next_second(300);
    assert!(write_for(master.port, Duration::from_millis(800)) > 10);
    let done = child.wait_with_output().expect("aoftool capture");
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stderr));
    assert_ne!(master.cli(&["DEBUG", "DIGEST"]), digest_at_t, "writes after T");

    // T as unix seconds with a fraction, and as RFC 3339.
    let t_secs = format!("{}.{:03}", t_ms / 1000, t_ms % 1000);
    let t_rfc = jiff::Timestamp::from_millisecond(t_ms).expect("time").to_string();
    let rebuilt = TempDir::new("pit-rebuilt");
    let o = Command::new(env!("CARGO_BIN_EXE_aof-rewrite"))
        .arg(&dir)
        .arg(rebuilt.path().join("appendonly.aof"))
        .args(["--until", &t_secs])
        .output()
        .expect("aof-rewrite");
    let said = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&o.stderr));
    assert!(said.contains("stopped at --until: file "), "{said}");
    let loaded = Redis::start_in(rebuilt, &["--appendonly", "yes"]);
    assert_eq!(loaded.cli(&["DEBUG", "DIGEST"]), digest_at_t, "the dataset of T\n{said}");

    let replay = |until: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_replay"));
        cmd.arg(&dir).arg("--against").arg(&saved);
        if let Some(t) = until {
            cmd.args(["--until", t]);
        }
        cmd.output().expect("replay")
    };
    let o = replay(Some(&t_rfc));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    let o = replay(None);
    assert_eq!(o.status.code(), Some(1), "the whole capture is past T: {}", String::from_utf8_lossy(&o.stdout));
}

/// A capture killed (kill -9, under writes) and started again on its directory continues
/// with PSYNC from the offset its state file recorded, not a full sync; the directory
/// then loads in Redis with the master's digest.
#[test]
fn a_restarted_capture_resumes_its_own_files() {
    let master = Redis::start();
    assert_eq!(master.cli(&["CONFIG", "SET", "repl-backlog-size", "64mb"]), "OK");
    let out = TempDir::new("capture-resume");
    let dir = out.path().join("appendonlydir");
    let url = format!("redis://127.0.0.1:{}", master.port);
    let mut first = spawn_capture(&url, &[], &dir, 60);
    wait_for("the capture to attach", || info_field(master.port, "replication", "connected_slaves") == "1");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = write_load(master.port, stop.clone());
    std::thread::sleep(Duration::from_millis(2500));
    first.kill().expect("kill -9");
    let _ = first.wait();
    std::thread::sleep(Duration::from_millis(300));
    let second = spawn_capture(&url, &[], &dir, 3);
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    assert!(writer.join().expect("writer") > 100);
    let done = second.wait_with_output().expect("aoftool capture");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("resuming"), "{stderr}");
    let sum: serde_json::Value = serde_json::from_slice(&done.stdout).expect("json summary");
    assert_eq!((sum["full_syncs"].as_u64(), sum["partial_syncs"].as_u64()), (Some(0), Some(1)), "{stderr}");
    assert_eq!(info_field(master.port, "stats", "sync_full"), "1");
    assert_eq!(info_field(master.port, "stats", "sync_partial_ok"), "1");
    assert_eq!(
        sum["offset"].as_u64().map(|o| o.to_string()),
        Some(info_field(master.port, "replication", "master_repl_offset"))
    );
    let verify = Command::new(env!("CARGO_BIN_EXE_aoftool")).arg("verify").arg(&dir).output().expect("verify");
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stdout));
    // Without its state file the directory is not resumed: a full sync, whose files take
    // the next numbers (never a name the old manifest holds) and replace the old ones.
    std::fs::remove_file(dir.join("appendonly.aof.capture")).expect("state file");
    master.cli(&["SET", "after", "the restart"]);
    let third = spawn_capture(&url, &[], &dir, 2).wait_with_output().expect("aoftool capture");
    let stderr = String::from_utf8_lossy(&third.stderr);
    let sum: serde_json::Value = serde_json::from_slice(&third.stdout).expect("json summary");
    assert_eq!((sum["full_syncs"].as_u64(), sum["partial_syncs"].as_u64()), (Some(1), Some(0)), "{stderr}");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let want =
        ["appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof", "appendonly.aof.capture", "appendonly.aof.manifest"];
    assert_eq!(names, want, "{stderr}");
    let digest = master.cli(&["DEBUG", "DIGEST"]);
    let loaded = Redis::start_in(out, &["--appendonly", "yes", "--appenddirname", "appendonlydir"]);
    assert_eq!(loaded.cli(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(loaded.cli(&["GET", "after"]), "the restart");
}
