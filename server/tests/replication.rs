//! Replication with real servers, both ways (full resync, then the stream).
//!
//! Always, against Debian's redis-server 7.0: ferrokv as the replica of a real master
//! ends with the master's DEBUG DIGEST, function libraries and replication offset, refuses
//! writes (READONLY) until REPLICAOF NO ONE; a real replica of ferrokv ends with ours,
//! and WAIT counts its acknowledgements; ferrokv replicates to ferrokv.
//! Against a real redis-server 7.4.1 (../shared/bin; `make compat`): the same with hash
//! field TTLs, the fields the master expires reaching the replica as HDELs.

use std::time::Duration;

mod support;
use support::{shared_bin, start_shared, Ours};

use ferrokv_testkit::{cli, dataset_state, info_field, wait_for, Server as Redis, TempDir};

/// What a replica must end with: every key and value, and the libraries.
fn state(port: u16) -> (String, String) {
    dataset_state(port, true)
}

fn info(port: u16, field: &str) -> String {
    info_field(port, "replication", field)
}

/// The replica's offset reached the master's and the link is up.
fn wait_in_sync(master: u16, replica: u16) {
    wait_for("the replica to catch up", || {
        info(replica, "master_link_status") == "up"
            && info(replica, "master_repl_offset") == info(master, "master_repl_offset")
    });
}

/// Writes of every kind a stream carries: SELECT, MULTI/EXEC, scripts (their effects),
/// functions, expiry (relative times made absolute, and the DEL when a key expires).
fn write_traffic(port: u16) {
    let run = |args: &[&str]| {
        let out = cli(port, args);
        assert!(!out.starts_with("ERR"), "{args:?}: {out}");
    };
    run(&["SET", "s", "1"]);
    run(&["INCR", "s"]);
    run(&["RPUSH", "l", "a", "b", "c"]);
    run(&["SADD", "set", "x", "y", "1"]);
    run(&["ZADD", "z", "1.5", "m", "-0", "n"]);
    run(&["HSET", "h", "f", "v", "g", "w"]);
    run(&["XADD", "st", "1-1", "a", "1"]);
    run(&["XGROUP", "CREATE", "st", "grp", "0"]);
    run(&["SET", "gone", "x", "PX", "150"]);
    run(&["SET", "later", "x", "EX", "1000"]);
    run(&["EXPIRE", "l", "5000"]);
    run(&["EVAL", "redis.call('set','fromlua',ARGV[1]); return redis.call('lpush','l2','q')", "0", "v"]);
    run(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=rlib\nredis.register_function('rf', function(k) return redis.call('incr', k[1]) end)",
    ]);
    run(&["FCALL", "rf", "1", "counter"]);
    let mut c = ferrokv_testkit::Client::connect(port);
    for cmd in [&["SELECT", "5"][..], &["MULTI"], &["SET", "in5", "v"], &["DEL", "nothing"], &["EXEC"]] {
        c.call_str(cmd);
    }
    std::thread::sleep(Duration::from_millis(300));
    // A read of the expired key makes the master delete it (and propagate the DEL).
    run(&["GET", "gone"]);
}

#[test]
fn ferrokv_replica_follows_a_real_master() {
    let master = Redis::start();
    master.cli(&["SET", "before", "sync"]);
    master.cli(&["FUNCTION", "LOAD", "#!lua name=first\nredis.register_function('one', function() return 1 end)"]);
    let dir = TempDir::new("replica");
    let ours = Ours::start(dir.path(), &[]);
    assert_eq!(ours.cli(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]), "OK");
    wait_in_sync(master.port, ours.port);
    write_traffic(master.port);
    wait_in_sync(master.port, ours.port);
    assert_eq!(state(ours.port), state(master.port));
    assert_eq!(info(ours.port, "role"), "slave");
    assert_eq!(ours.cli(&["SET", "k", "v"]), "READONLY You can't write against a read only replica.");
    assert_eq!(ours.cli(&["GET", "before"]), "sync");
    let role = ours.cli(&["ROLE"]);
    assert!(role.starts_with("slave\n127.0.0.1\n"), "{role}");
    // The snapshot became the dump file, as a Redis replica keeps it.
    assert!(dir.path().join("dump.rdb").exists());
    assert_eq!(ours.cli(&["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(ours.cli(&["SET", "k", "v"]), "OK");
    assert_eq!(info(ours.port, "role"), "master");
}

#[test]
fn real_replica_follows_ferrokv() {
    let dir = TempDir::new("master");
    let ours = Ours::start(dir.path(), &[]);
    ours.cli(&["SET", "before", "sync"]);
    let replica = Redis::start();
    assert_eq!(replica.cli(&["REPLICAOF", "127.0.0.1", &ours.port.to_string()]), "OK");
    wait_in_sync(ours.port, replica.port);
    write_traffic(ours.port);
    assert_eq!(ours.cli(&["WAIT", "1", "5000"]), "1");
    wait_in_sync(ours.port, replica.port);
    assert_eq!(state(replica.port), state(ours.port));
    assert_eq!(info(ours.port, "connected_slaves"), "1");
    assert!(info(ours.port, "slave0").starts_with("ip=127.0.0.1,port="));
    // WAIT for more replicas than there are times out with the count.
    assert_eq!(ours.cli(&["WAIT", "2", "200"]), "1");
    // The replica's link going away stops the stream.
    drop(replica);
    wait_for("the replica to be gone", || info(ours.port, "connected_slaves") == "0");
    assert_eq!(ours.cli(&["WAIT", "1", "100"]), "0");
}

/// Backups taken over replication with redis-cli, from ferrokv as from Redis 7.0: `--rdb`
/// (every key and library), `--functions-rdb` (REPLCONF rdb-filter-only functions: the
/// libraries alone), each loaded by a real redis-server 7.0; and a `--replica` link that
/// CLIENT KILL TYPE replica ends.
#[test]
fn redis_cli_backups_over_replication() {
    let lib = "#!lua name=lib1\nredis.register_function('f1', function() return 1 end)";
    let take = |port: u16, dir: &std::path::Path| {
        cli(port, &["DEBUG", "POPULATE", "1000"]);
        cli(port, &["FUNCTION", "LOAD", lib]);
        let mut seen = Vec::new();
        for (flag, name) in [("--rdb", "all.rdb"), ("--functions-rdb", "functions.rdb")] {
            let file = dir.join(name);
            let out = std::process::Command::new("redis-cli")
                .args(["-p", &port.to_string(), flag])
                .arg(&file)
                .output()
                .expect("redis-cli");
            assert!(String::from_utf8_lossy(&out.stderr).contains("Transfer finished with success"), "{flag}");
            let loaded = Redis::start_with(Some(&file), &[]);
            seen.push((loaded.cli(&["DBSIZE"]), loaded.cli(&["FUNCTION", "LIST"])));
        }
        // A --replica link is a replica client: CLIENT KILL TYPE replica ends it.
        let mut follower = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "--replica"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-cli --replica");
        wait_for("the --replica link", || info(port, "connected_slaves") == "1");
        let listed = cli(port, &["CLIENT", "LIST", "TYPE", "replica"]).lines().count();
        let killed = cli(port, &["CLIENT", "KILL", "TYPE", "replica"]);
        let ended = follower.wait().map(|st| !st.success()).unwrap_or(false);
        seen.push((listed.to_string(), format!("{killed} {ended}")));
        seen
    };
    let dir = TempDir::new("cli-backups");
    let ours = Ours::start(dir.path(), &[]);
    let redis = Redis::start();
    let their_dir = TempDir::new("cli-backups-redis");
    let theirs = take(redis.port, their_dir.path());
    let mine = take(ours.port, dir.path());
    assert_eq!(mine, theirs);
    assert_eq!(mine[0].0, "1000");
    assert_eq!(mine[1].0, "0");
    assert!(mine[1].1.contains("lib1"), "{:?}", mine[1]);
}

#[test]
fn ferrokv_replicates_to_ferrokv() {
    let (d1, d2) = (TempDir::new("m"), TempDir::new("r"));
    let master = Ours::start(d1.path(), &[]);
    let replica = Ours::start(d2.path(), &["--appendonly", "yes"]);
    master.cli(&["SET", "before", "sync"]);
    assert_eq!(replica.cli(&["SLAVEOF", "127.0.0.1", &master.port.to_string()]), "OK");
    assert_eq!(
        replica.cli(&["SLAVEOF", "127.0.0.1", &master.port.to_string()]),
        "OK Already connected to specified master"
    );
    wait_in_sync(master.port, replica.port);
    write_traffic(master.port);
    assert_eq!(master.cli(&["WAIT", "1", "0"]), "1");
    wait_in_sync(master.port, replica.port);
    assert_eq!(state(replica.port), state(master.port));
    assert_eq!(master.cli(&["WAIT", "1", "0"]), "1");
    assert!(replica.cli(&["WAIT", "1", "0"]).starts_with("ERR WAIT cannot be used with replica instances"));
}

/// Field TTLs both ways with Redis 7.4.1: set on the master, expired by the master's
/// active cycle, carried as HPEXPIREAT and HDEL.
fn field_ttl_traffic(port: u16) {
    for cmd in [
        &["HSET", "hf", "a", "1", "b", "2", "c", "3"][..],
        &["HEXPIRE", "hf", "1000", "FIELDS", "1", "a"],
        &["HPEXPIRE", "hf", "100", "FIELDS", "1", "b"],
        &["HSET", "hbig", "x", "1", "y", "2"],
        &["HPEXPIRE", "hbig", "100", "FIELDS", "2", "x", "y"],
    ] {
        let out = cli(port, cmd);
        assert!(!out.starts_with("ERR"), "{cmd:?}: {out}");
    }
    std::thread::sleep(Duration::from_millis(400));
}

#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn field_ttls_replicate_with_redis_7_4() {
    let Some(bin) = shared_bin("redis-server-7.4.1") else {
        eprintln!("skipped: ../shared/bin/redis-server-7.4.1 is absent");
        return;
    };
    // ferrokv replica of a real 7.4.1 master.
    let (d1, d2) = (TempDir::new("m74"), TempDir::new("r74"));
    let master = start_shared(&bin, d1.path(), &[]);
    let ours = Ours::start(d2.path(), &["--redis-version", "7.4"]);
    ours.cli(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_in_sync(master.port, ours.port);
    write_traffic(master.port);
    field_ttl_traffic(master.port);
    wait_in_sync(master.port, ours.port);
    assert_eq!(state(ours.port), state(master.port));
    assert_eq!(
        cli(ours.port, &["HTTL", "hf", "FIELDS", "2", "a", "b"]),
        cli(master.port, &["HTTL", "hf", "FIELDS", "2", "a", "b"])
    );
    assert_eq!(cli(ours.port, &["EXISTS", "hbig"]), "0");

    // A real 7.4.1 replica of ferrokv.
    let (d3, d4) = (TempDir::new("m74o"), TempDir::new("r74r"));
    let ours = Ours::start(d3.path(), &["--redis-version", "7.4"]);
    let replica = start_shared(&bin, d4.path(), &[]);
    cli(replica.port, &["REPLICAOF", "127.0.0.1", &ours.port.to_string()]);
    wait_in_sync(ours.port, replica.port);
    write_traffic(ours.port);
    field_ttl_traffic(ours.port);
    assert_eq!(ours.cli(&["WAIT", "1", "5000"]), "1");
    wait_in_sync(ours.port, replica.port);
    assert_eq!(state(replica.port), state(ours.port));
    assert_eq!(
        cli(replica.port, &["HPEXPIRETIME", "hf", "FIELDS", "1", "a"]),
        ours.cli(&["HPEXPIRETIME", "hf", "FIELDS", "1", "a"])
    );
    assert_eq!(cli(replica.port, &["EXISTS", "hbig"]), "0");
}
