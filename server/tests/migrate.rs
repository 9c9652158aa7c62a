//! MIGRATE from ferrokv-server and from a real redis-server 7.0 into a real redis-server 7.0
//! target, the same steps on both: every reply equal, the same keys moved (with their
//! TTLs) and deleted, and MIGRATE propagated as DEL.

mod support;
use support::Ours;

use ferrokv_testkit::{free_port, Server, TempDir};

/// What a session sees: each reply, then the source's and the target's keys.
fn session(source_port: u16, cli: &dyn Fn(&[&str]) -> String) -> Vec<String> {
    let target = Server::start_with(None, &["--requirepass", "pw"]);
    let t = target.port.to_string();
    let tcli = |args: &[&str]| target.cli(&[&["--no-auth-warning", "-a", "pw"][..], args].concat());
    let closed = free_port().to_string();
    let mut seen = Vec::new();
    for c in [
        &["SET", "a", "1"][..],
        &["SET", "b", "2", "PX", "100000"],
        &["HSET", "h", "f", "v"],
        &["RPUSH", "l", "x", "y"],
        &["SET", "c", "3"],
        &["MIGRATE", "127.0.0.1", &t, "a", "0", "1000"],
        &["MIGRATE", "127.0.0.1", &t, "a", "0", "1000", "AUTH", "wrong"],
        &["MIGRATE", "127.0.0.1", &t, "a", "0", "1000", "AUTH", "pw"],
        &["EXISTS", "a"],
        &["MIGRATE", "127.0.0.1", &t, "nokey", "0", "1000", "AUTH", "pw"],
        &["MIGRATE", "127.0.0.1", &t, "", "3", "1000", "AUTH2", "default", "pw", "KEYS", "b", "h", "missing"],
        &["MIGRATE", "127.0.0.1", &t, "l", "0", "1000", "COPY", "AUTH", "pw"],
        &["MIGRATE", "127.0.0.1", &t, "l", "0", "1000", "COPY", "AUTH", "pw"],
        &["MIGRATE", "127.0.0.1", &t, "l", "0", "1000", "COPY", "REPLACE", "AUTH", "pw"],
        &["MIGRATE", "127.0.0.1", &t, "c", "0", "1000", "KEYS", "c"],
        &["MIGRATE", "127.0.0.1", &t, "c", "0", "1000", "NOPE"],
        &["MIGRATE", "127.0.0.1", &t, "c", "zero", "1000"],
        &["MIGRATE", "127.0.0.1", &closed, "c", "0", "1000"],
    ] {
        let shown: Vec<&str> = c
            .iter()
            .map(|a| {
                if *a == t {
                    "<target>"
                } else if *a == closed {
                    "<closed>"
                } else {
                    a
                }
            })
            .collect();
        seen.push(format!("{shown:?} -> {}", cli(c)));
    }
    let mut keys: Vec<String> = cli(&["KEYS", "*"]).lines().map(str::to_string).collect();
    keys.sort();
    seen.push(format!("source keys {keys:?}"));
    for db in ["0", "3"] {
        let mut keys: Vec<String> = tcli(&["-n", db, "KEYS", "*"]).lines().map(str::to_string).collect();
        keys.sort();
        seen.push(format!("target db {db} keys {keys:?}"));
    }
    let ttl: i64 = tcli(&["-n", "3", "PTTL", "b"]).parse().unwrap_or(-9);
    seen.push(format!("b's TTL kept: {}", ttl > 90_000));
    seen.push(format!("h: {}", tcli(&["-n", "3", "HGETALL", "h"])));
    seen.push(format!("l: {}", tcli(&["LRANGE", "l", "0", "-1"])));
    let _ = source_port;
    seen
}

#[test]
fn migrate_matches_redis() {
    let redis = Server::start_with(None, &["--appendonly", "yes", "--aof-timestamp-enabled", "no"]);
    let dir = TempDir::new("migrate-ours");
    let ours = Ours::start(dir.path(), &["--appendonly", "yes", "--aof-timestamp-enabled", "no"]);
    let want = session(redis.port, &|a| redis.cli(a));
    let got = session(ours.port, &|a| ours.cli(a));
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w);
    }
    assert_eq!(got.len(), want.len());
    // MIGRATE propagates as DEL of the keys moved.
    let aof = |d: &std::path::Path| {
        std::fs::read(d.join("appendonlydir/appendonly.aof.1.incr.aof"))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let ours_aof = aof(dir.path()).unwrap_or_default();
    let redis_aof = aof(redis.dir.path()).unwrap_or_default();
    assert!(ours_aof.contains("DEL\r\n$1\r\nb\r\n$1\r\nh"), "{ours_aof}");
    assert_eq!(ours_aof.matches("DEL").count(), redis_aof.matches("DEL").count());
}
