//! `rdbtool split` against real Redis: a corpus written by Debian's Redis 7.0 (every type,
//! hash tags, TTLs, a function library) is split into cluster shards; each shard file
//! verifies, loads in a cluster-enabled redis-server, holds only keys of its slots (as
//! that server's CLUSTER KEYSLOT says), and the shards together hold every key of the
//! source with the same DEBUG DIGEST-VALUE and TTL.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

mod common;

use common::redis::{key_states as contents, resp};
use ferrokv_testkit::{pipe_into, Client, Server as Redis, TempDir};

fn corpus() -> Vec<u8> {
    let mut out = Vec::new();
    let mut add = |a: &[&str]| out.extend(resp(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
    for i in 0..300 {
        let (s, k) = (i.to_string(), format!("user:{i}"));
        add(&["SET", &k, &s]);
        add(&["SET", &format!("{{user:{i}}}:name"), &"n".repeat(i % 70)]);
        add(&["HSET", &format!("{{user:{i}}}:profile"), "a", &s, "b", "x"]);
        if i % 10 == 0 {
            add(&["RPUSH", &format!("list:{i}"), "a", "b", &s]);
            add(&["SADD", &format!("set:{i}"), "1", "2", &s]);
            add(&["ZADD", &format!("zset:{i}"), "1.5", "a", &s, "b"]);
            add(&["XADD", &format!("stream:{i}"), "*", "f", &s]);
            add(&["EXPIRE", &k, "100000"]);
        }
    }
    add(&["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('f', function(k, a) return 1 end)"]);
    out
}

fn rdbtool(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rdbtool")).args(args).output().expect("rdbtool")
}

#[test]
fn shards_load_in_redis_and_together_hold_the_source() {
    let source = Redis::start();
    pipe_into(source.port, &corpus());
    source.cli(&["SAVE"]);
    let expected = contents(source.port);
    let dir = source.stop();
    let rdb = dir.path().join("dump.rdb");
    let out = TempDir::new("split-out");

    let run = rdbtool(&["split", &rdb.display().to_string(), "--shards", "3", "--json", "--out"]);
    assert!(!run.status.success(), "--out needs a value");
    let o = out.path().display().to_string();
    let run = rdbtool(&["split", &rdb.display().to_string(), "--shards", "3", "--json", "--out", &o]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).expect("a JSON summary");
    let shards = summary["shards"].as_array().expect("shards");
    assert_eq!(
        shards.iter().map(|s| s["slots"].as_str().unwrap_or("")).collect::<Vec<_>>(),
        ["0-5460", "5461-10922", "10923-16383"]
    );

    let mut union = BTreeMap::new();
    for (i, s) in shards.iter().enumerate() {
        let file = s["file"].as_str().expect("a file");
        let verify = rdbtool(&["verify", file]);
        assert!(verify.status.success(), "shard {i}: {}", String::from_utf8_lossy(&verify.stdout));
        let node_dir = TempDir::new("split-node");
        std::fs::copy(file, node_dir.path().join("dump.rdb")).expect("copy the shard");
        // A node alone covers only the slots of the keys it loads (it claims them).
        let node = Redis::start_in(
            node_dir,
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-require-full-coverage",
                "no",
            ],
        );
        // A node serves keys two seconds after it starts (CLUSTER_WRITABLE_DELAY).
        let start = std::time::Instant::now();
        while !node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
            assert!(start.elapsed() < std::time::Duration::from_secs(20), "shard {i}: the cluster stays down");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let keys = contents(node.port);
        assert_eq!(keys.len() as u64, s["keys"].as_u64().unwrap_or(0), "shard {i}");
        assert!(!keys.is_empty(), "shard {i} is empty");
        let (first, last) = {
            let r = s["slots"].as_str().unwrap_or("").split_once('-').expect("a range");
            (r.0.parse::<i64>().expect("a slot"), r.1.parse::<i64>().expect("a slot"))
        };
        let mut c = Client::connect(node.port);
        for k in keys.keys() {
            let slot: i64 = String::from_utf8_lossy(&c.call_str(&["CLUSTER", "KEYSLOT", k]))
                .trim_start_matches(':')
                .trim()
                .parse()
                .expect("a slot");
            assert!((first..=last).contains(&slot), "shard {i}: {k} is in slot {slot}");
        }
        // The function library goes to every shard.
        assert!(node.cli(&["FUNCTION", "LIST"]).contains("lib"), "shard {i} lacks the library");
        union.extend(keys);
        drop(node);
    }
    let differ: Vec<_> = expected.iter().filter(|(k, v)| union.get(*k) != Some(*v)).map(|(k, _)| k).take(5).collect();
    assert!(
        differ.is_empty() && union.len() == expected.len(),
        "{} vs {} keys; differing: {differ:?}",
        union.len(),
        expected.len()
    );
    assert!(expected.values().any(|(_, ttl)| *ttl == 1), "TTLs compared");

    // A key outside database 0 is refused unless --db names the database, and nothing is
    // left behind.
    let two = Redis::start();
    pipe_into(two.port, &resp(&["SET".into(), "a".into(), "1".into()]));
    two.cli(&["SELECT", "0"]);
    let mut c = two.client();
    c.call_str(&["SELECT", "3"]);
    c.call_str(&["SET", "b", "2"]);
    c.call_str(&["SAVE"]);
    let dir2 = two.stop();
    let rdb2 = dir2.path().join("dump.rdb").display().to_string();
    let out2 = TempDir::new("split-db");
    let o2 = out2.path().display().to_string();
    let refused = rdbtool(&["split", &rdb2, "--shards", "2", "--out", &o2]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("db 3 key 'b'"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(std::fs::read_dir(out2.path()).expect("the directory").count(), 0, "files left behind");
    let picked = rdbtool(&["split", &rdb2, "--shards", "2", "--db", "3", "--out", &o2]);
    assert!(picked.status.success(), "{}", String::from_utf8_lossy(&picked.stderr));
    assert!(String::from_utf8_lossy(&picked.stdout).contains("1 keys of other databases than --db left out"));
    let keys: u64 = (0..2)
        .map(|i| {
            let p = Path::new(&o2).join(format!("shard-{i}.rdb")).display().to_string();
            let info = rdbtool(&["info", "--json", &p]);
            serde_json::from_slice::<serde_json::Value>(&info.stdout).expect("info")["keys"].as_u64().unwrap_or(0)
        })
        .sum();
    assert_eq!(keys, 1);
}
