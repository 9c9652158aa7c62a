//! Redis 6.2's AOF is one file, `appendonly.aof`: ferrokv-server as `--redis-version 6.2`
//! writes it as real Redis 6.2.16 does (appended to, rewritten whole by BGREWRITEAOF with
//! the writes made meanwhile after the new base, made by CONFIG SET appendonly yes), and
//! each server loads what the other wrote with the same DEBUG DIGEST (`make compat`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod support;
use support::{shared_bin, start_shared, Ours};

use ferrokv_testkit::{cli, dataset_state, info_field, wait_for, TempDir};

/// The data directory's files but the server's log.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "server.log")
        .collect();
    v.sort();
    v
}

/// Writes of every type, in two databases, some with TTLs; `round` keeps keys apart.
fn populate(port: u16, round: usize) {
    for i in 0..20 {
        let k = format!("r{round}:{i}");
        cli(port, &["SET", &format!("{k}:s"), &format!("value {i}")]);
        cli(port, &["RPUSH", &format!("{k}:l"), "a", "b", &i.to_string()]);
        cli(port, &["SADD", &format!("{k}:set"), "x", "y", &i.to_string()]);
        cli(port, &["ZADD", &format!("{k}:z"), "1.5", "m1", "-0", "m0", &i.to_string(), "mi"]);
        cli(port, &["HSET", &format!("{k}:h"), "f", "v", "n", &i.to_string()]);
        cli(port, &["INCRBY", &format!("r{round}:counter"), "3"]);
        cli(port, &["PEXPIRE", &format!("{k}:s"), "100000000"]);
    }
    cli(port, &["-n", "2", "SET", &format!("r{round}:db2"), "in db 2"]);
}

fn wait_rewrite(port: u16) {
    wait_for("the AOF rewrite", || {
        info_field(port, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(port, "persistence", "aof_rewrite_scheduled") == "0"
    });
}

/// BGREWRITEAOF while a client keeps writing (those writes land after the new base).
fn rewrite_under_writes(port: u16, round: usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) || n < 200 {
                redis::cmd("SET").arg(format!("r{round}:during:{n}")).arg(n).exec(&mut c).unwrap();
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(cli(port, &["BGREWRITEAOF"]), "Background append only file rewriting started");
    wait_rewrite(port);
    stop.store(true, Ordering::Relaxed);
    assert!(writer.join().unwrap() >= 200);
}

#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn one_aof_file_written_and_read_as_redis_6_2() {
    let Some(bin) = shared_bin("redis-server-6.2.16") else {
        eprintln!("skipped: ../shared/bin/redis-server-6.2.16 is absent");
        return;
    };
    for preamble in ["yes", "no"] {
        let dir = TempDir::new("r62-aof");
        let d = dir.path();
        let ours =
            Ours::start(d, &["--redis-version", "6.2", "--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
        // 6.2 makes its one file at start, empty.
        assert_eq!(files(d), ["appendonly.aof"], "preamble {preamble}");
        populate(ours.port, 0);
        rewrite_under_writes(ours.port, 0);
        populate(ours.port, 1);
        assert_eq!(files(d), ["appendonly.aof"], "preamble {preamble}: no directory, no temp file");
        let head = std::fs::read(d.join("appendonly.aof")).unwrap();
        assert_eq!(head.starts_with(b"REDIS0009"), preamble == "yes");
        let ours_state = dataset_state(ours.port, false);
        ours.kill9();

        // Real Redis 6.2 reads it, writes on, rewrites it; ferrokv reads that back.
        let real = start_shared(&bin, d, &["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
        assert_eq!(dataset_state(real.port, false), ours_state, "6.2.16 loads ours (preamble {preamble})");
        populate(real.port, 2);
        rewrite_under_writes(real.port, 2);
        populate(real.port, 3);
        let real_state = dataset_state(real.port, false);
        real.shutdown();
        let ours = Ours::start(d, &["--redis-version", "6.2", "--appendonly", "yes"]);
        assert_eq!(dataset_state(ours.port, false), real_state, "ours loads 6.2.16's (preamble {preamble})");
        assert_eq!(files(d), ["appendonly.aof"]);
    }
}

/// CONFIG SET appendonly yes, as 6.2 does it: the file appears when the first rewrite ends
/// (with the writes made during it), and real 6.2 starts from it.
#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn appendonly_turned_on_makes_the_one_file_as_redis_6_2() {
    let Some(bin) = shared_bin("redis-server-6.2.16") else {
        eprintln!("skipped: ../shared/bin/redis-server-6.2.16 is absent");
        return;
    };
    let dir = TempDir::new("r62-enable");
    let d = dir.path();
    let ours = Ours::start(d, &["--redis-version", "6.2"]);
    populate(ours.port, 0);
    assert_eq!(cli(ours.port, &["CONFIG", "SET", "appendonly", "yes"]), "OK");
    populate(ours.port, 1);
    wait_rewrite(ours.port);
    populate(ours.port, 2);
    assert_eq!(files(d), ["appendonly.aof"]);
    let state = dataset_state(ours.port, false);
    ours.kill9();
    let real = start_shared(&bin, d, &["--appendonly", "yes"]);
    assert_eq!(dataset_state(real.port, false), state);
}
