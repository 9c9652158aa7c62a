//! `rdbtool restore` against real Redis (Debian's 7.0): a corpus of every type (big keys,
//! TTLs, a -0 score, a consumer group, a function library, two databases) saved by one
//! server is restored into another, standalone and a 3-master + 3-replica cluster, and
//! every key reads back with the same DEBUG DIGEST-VALUE and TTL; a reshard running during
//! the restore loses nothing; a user the target's ACL limits gets exit 4 and the count.

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;

use common::redis::{key_states, key_states_in, resp_all};
use ferrokv::format::crc::hash_slot;
use ferrokv_testkit::certs::Certs;
use ferrokv_testkit::{cli, free_port, pipe_into, Server as Redis, TempDir};

fn rdbtool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdbtool")).args(args).output().expect("rdbtool")
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// Keys of every type in database 0: `n` of each small kind, big ones past 100 elements.
fn corpus(n: usize) -> Vec<Vec<String>> {
    let mut c = Vec::new();
    for i in 0..n {
        let s = i.to_string();
        c.push(cmd(&["SET", &format!("user:{i}"), &s]));
        c.push(cmd(&["SET", &format!("{{user:{i}}}:bio"), &"b".repeat(i % 90)]));
        c.push(cmd(&["HSET", &format!("{{user:{i}}}:profile"), "name", &s, "age", "42"]));
        if i % 5 == 0 {
            c.push(cmd(&["RPUSH", &format!("list:{i}"), "a", "b", &s]));
            c.push(cmd(&["SADD", &format!("ints:{i}"), "1", "2", &s]));
            c.push(cmd(&["SADD", &format!("set:{i}"), "x", "y", &s]));
            c.push(cmd(&["ZADD", &format!("zset:{i}"), "1.5", "a", &s, "b"]));
            c.push(cmd(&["XADD", &format!("stream:{i}"), &format!("{}-1", i + 1), "f", &s]));
            c.push(cmd(&["PEXPIRE", &format!("user:{i}"), "100000000"]));
            c.push(cmd(&["PEXPIRE", &format!("{{user:{i}}}:profile"), "100000000"]));
        }
    }
    let mut big_list = cmd(&["RPUSH", "big:list"]);
    let mut big_hash = cmd(&["HSET", "big:hash"]);
    let mut big_zset = cmd(&["ZADD", "big:zset"]);
    let mut big_set = cmd(&["SADD", "big:set"]);
    for i in 0..700 {
        big_list.push(format!("e{i}"));
        big_hash.extend([format!("f{i}"), "v".repeat(i % 13)]);
        big_zset.extend([format!("{}", i as f64 / 7.0), format!("m{i}")]);
        big_set.push(format!("s{i}"));
    }
    c.extend([big_list, big_hash, big_zset, big_set]);
    c.push(cmd(&["PEXPIRE", "big:hash", "100000000"]));
    // Commands cannot carry these whole: RESTORE does.
    c.push(cmd(&["ZADD", "negzero", "-0", "a", "1", "b"]));
    c.push(cmd(&["XADD", "grouped", "1-1", "f", "v"]));
    c.push(cmd(&["XGROUP", "CREATE", "grouped", "g", "0"]));
    c.push(cmd(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "grouped", ">"]));
    c.push(cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=restorelib\nredis.register_function('f', function(k, a) return 1 end)",
    ]));
    c
}

/// A server saved with `commands`; its dump.rdb (in the returned directory).
/// Keys with their digest and TTL, by database.
type States = BTreeMap<u64, BTreeMap<String, (String, i64)>>;

/// A master's port, node id and slot ranges.
type Master = (u16, String, Vec<(u16, u16)>);

fn saved(commands: &[Vec<String>]) -> (TempDir, States) {
    let source = Redis::start();
    pipe_into(source.port, &resp_all(commands));
    source.cli(&["SAVE"]);
    let mut states = BTreeMap::new();
    for db in 0..16 {
        let s = key_states_in(source.port, db);
        if !s.is_empty() {
            states.insert(db, s);
        }
    }
    (source.stop(), states)
}

fn summary(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {} / {}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

#[test]
fn restores_every_type_into_a_standalone_redis() {
    let mut commands = corpus(200);
    // Past 8 MiB: written to the socket as it is read, never whole in memory.
    for chunk in 0..20 {
        let mut c = cmd(&["RPUSH", "huge:list"]);
        c.extend((0..10_000).map(|i| format!("{chunk:02}-{i:06}-{}", "x".repeat(40))));
        commands.push(c);
    }
    commands.push(cmd(&["SELECT", "2"]));
    commands.push(cmd(&["SET", "elsewhere", "in db 2"]));
    commands.push(cmd(&["HSET", "elsewhere:h", "a", "1"]));
    let (dir, expected) = saved(&commands);
    let rdb = dir.path().join("dump.rdb").display().to_string();
    let keys: usize = expected.values().map(BTreeMap::len).sum();

    let target = Redis::start();
    let url = format!("redis://127.0.0.1:{}", target.port);
    let out = rdbtool(&["restore", &rdb, "--to", &url, "--big-key-elements", "100", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&out);
    assert_eq!(s["keys"].as_u64(), Some(keys as u64), "{s}");
    assert_eq!(s["batched_keys"].as_u64(), Some(5), "the five big keys: {s}");
    assert_eq!(s["function_loads"].as_u64(), Some(1));
    for (db, states) in &expected {
        assert_eq!(&key_states_in(target.port, *db), states, "db {db}");
    }
    assert!(target.cli(&["FUNCTION", "LIST"]).contains("restorelib"));
    assert_eq!(target.cli(&["OBJECT", "ENCODING", "big:list"]), "quicklist");
    assert!(target.cli(&["--scan", "--pattern", "__ferrokv_restore*"]).is_empty(), "a temporary key is left");

    // Again over itself: REPLACE, and a library already there is replaced.
    let again = rdbtool(&["restore", &rdb, "--to", &url, "--big-key-elements", "100"]);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(key_states(target.port), expected[&0]);

    // A dry run sends nothing and says what would go.
    let empty = Redis::start();
    let dry = rdbtool(&["restore", &rdb, "--to", &format!("127.0.0.1:{}", empty.port), "--dry-run", "--json"]);
    assert_eq!(dry.status.code(), Some(0));
    assert_eq!(summary(&dry)["keys"].as_u64(), Some(keys as u64));
    assert_eq!(empty.cli(&["DBSIZE"]), "0");

    // Filters: one database, a pattern.
    let only = rdbtool(&["restore", &rdb, "--to", &format!("127.0.0.1:{}", empty.port), "--db", "2", "--json"]);
    assert_eq!(summary(&only)["keys"].as_u64(), Some(2));
    assert_eq!(key_states_in(empty.port, 2), expected[&2]);
    assert_eq!(empty.cli(&["DBSIZE"]), "0", "database 0 untouched");

    // A file cut short: exit 1, the error names the offset, and the keys before it are in
    // the target, as many as the summary says.
    let bytes = std::fs::read(&rdb).expect("the rdb");
    let cut = dir.path().join("cut.rdb");
    std::fs::write(&cut, &bytes[..bytes.len() * 3 / 5]).expect("write");
    let partial_target = Redis::start();
    let url_p = format!("127.0.0.1:{}", partial_target.port);
    let out = rdbtool(&["restore", &cut.display().to_string(), "--to", &url_p, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("offset"), "{}", String::from_utf8_lossy(&out.stderr));
    let landed = summary(&out)["keys"].as_u64().expect("keys");
    assert!(landed > 0);
    let dbsize: u64 = partial_target.cli(&["DBSIZE"]).parse().expect("a count");
    assert_eq!(dbsize, landed);

    // A user the target's ACL limits to user:* keys: the others are refused, counted by
    // kind, exit 4; the allowed ones land.
    let limited = Redis::start();
    limited.cli(&["ACL", "SETUSER", "app", "on", ">s3cret", "~user:*", "+@all", "-@dangerous", "+restore"]);
    let url = format!("redis://app:s3cret@127.0.0.1:{}", limited.port);
    let partial = rdbtool(&["restore", &rdb, "--to", &url, "--db", "0", "--json"]);
    assert_eq!(partial.status.code(), Some(4), "{}", String::from_utf8_lossy(&partial.stderr));
    let s = summary(&partial);
    let allowed = expected[&0].keys().filter(|k| k.starts_with("user:")).count() as u64;
    assert_eq!(s["keys"].as_u64(), Some(allowed), "{s}");
    assert_eq!(s["errors"]["NOPERM"].as_u64(), Some(expected[&0].len() as u64 - allowed), "{s}");
    assert_eq!(limited.cli(&["DBSIZE"]), allowed.to_string());
    let bad = rdbtool(&["restore", &rdb, "--to", &format!("redis://app:wrong@127.0.0.1:{}", limited.port)]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("WRONGPASS"), "{}", String::from_utf8_lossy(&bad.stderr));
}

fn shared(name: &str) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("FERROKV_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    let p = dir.join("bin").join(name);
    p.exists().then_some(p)
}

/// Each version gets payloads it loads: the 7.0 corpus restored into 6.2 (ziplists, RDB
/// 9), 7.4 and Valkey 8 reads back with the digests of the same commands run on that
/// version (7.4 formats a score's digest its own way).
#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn restores_into_every_version() {
    let commands = corpus(100);
    let (dir, _) = saved(&commands);
    let rdb = dir.path().join("dump.rdb").display().to_string();
    for (bin, debug) in [("redis-server-6.2.16", false), ("redis-server-7.4.1", true), ("valkey-server-8.0.1", true)] {
        let Some(path) = shared(bin) else {
            eprintln!("skipped: ../shared/bin/{bin} is absent");
            continue;
        };
        let tmp = TempDir::new("restore-version");
        let mut args = vec!["--bind", "127.0.0.1", "--save", ""];
        if debug {
            args.extend(["--enable-debug-command", "yes"]);
        }
        let truth_dir = TempDir::new("restore-truth");
        let truth = ferrokv_testkit::Spawned::start(bin, &path, truth_dir.path(), &args, None);
        let runs: Vec<Vec<String>> =
            commands.iter().filter(|c| !(c[0] == "FUNCTION" && bin.contains("6.2"))).cloned().collect();
        pipe_into(truth.port, &resp_all(&runs));
        let mut expected = BTreeMap::from([(0, key_states(truth.port))]);
        if bin.contains("6.2") {
            // 6.2 keeps ZADD's -0 in a ziplist; the 7.0 source file already holds 0.
            expected.get_mut(&0).map(|e| e.remove("negzero"));
        }
        let server = ferrokv_testkit::Spawned::start(bin, &path, tmp.path(), &args, None);
        let out = rdbtool(&["restore", &rdb, "--to", &format!("127.0.0.1:{}", server.port), "--json"]);
        let s = summary(&out);
        assert_eq!(out.status.code(), Some(0), "{bin}: {s}");
        let functions = if bin.contains("6.2") { 0 } else { 1 };
        assert_eq!(s["function_loads"].as_u64(), Some(functions), "{bin}: {s}");
        let mut got = key_states(server.port);
        if bin.contains("6.2") {
            got.remove("negzero");
        }
        let differ: Vec<_> =
            expected[&0].iter().filter(|(k, v)| got.get(*k) != Some(*v)).map(|(k, _)| k).take(5).collect();
        assert!(
            differ.is_empty() && got.len() == expected[&0].len(),
            "{bin}: {} keys; differing {differ:?}; {s}",
            got.len()
        );
    }
}

/// Three masters with a replica each, on loopback, made by `redis-cli --cluster create`.
struct Cluster {
    nodes: Vec<Redis>,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::start_with(|_| Vec::new())
    }

    /// With more arguments for node `i`.
    fn start_with(extra: impl Fn(usize) -> Vec<String>) -> Cluster {
        let nodes: Vec<Redis> = (0..6)
            .map(|i| {
                let bus = free_port().to_string();
                let mut args: Vec<String> =
                    ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", &bus]
                        .map(String::from)
                        .to_vec();
                args.extend(extra(i));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Redis::start_in(TempDir::new("cluster-node"), &args)
            })
            .collect();
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        args.extend(["--cluster-replicas".into(), "1".into(), "--cluster-yes".into()]);
        let made = Command::new("redis-cli").args(&args).output().expect("redis-cli --cluster create");
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stdout));
        let c = Cluster { nodes };
        c.wait_ok();
        c
    }

    fn wait_ok(&self) {
        let start = Instant::now();
        for n in &self.nodes {
            while !n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                assert!(start.elapsed() < Duration::from_secs(60), "the cluster stays down");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// Each master's port and node id with the slots it serves, from CLUSTER NODES.
    fn masters(&self) -> Vec<Master> {
        let text = self.nodes[0].cli(&["CLUSTER", "NODES"]);
        let mut out = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() < 8 || !f[2].contains("master") {
                continue;
            }
            let port: u16 = f[1].split(['@', ':']).nth(1).and_then(|p| p.parse().ok()).expect("a port");
            let slots: Vec<(u16, u16)> = f[8..]
                .iter()
                .filter(|r| !r.starts_with('['))
                .map(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    (a.parse().expect("a slot"), b.parse().expect("a slot"))
                })
                .collect();
            // A node just made a replica may still show as a master without slots.
            if !slots.is_empty() {
                out.push((port, f[0].to_string(), slots));
            }
        }
        out
    }

    /// Every master's keys, each checked to be in a slot that master serves.
    fn contents(&self) -> BTreeMap<String, (String, i64)> {
        let mut union = BTreeMap::new();
        for (port, _, slots) in self.masters() {
            for (k, v) in key_states(port) {
                let slot = hash_slot(k.as_bytes());
                assert!(slots.iter().any(|&(a, b)| (a..=b).contains(&slot)), "{k} (slot {slot}) on {port}");
                assert!(union.insert(k, v).is_none(), "a key on two masters");
            }
        }
        union
    }
}

/// Over TLS (`tls-cluster yes`): every master is reached on its TLS port, as CLUSTER SLOTS
/// names them to a TLS client.
#[test]
fn restores_into_a_tls_cluster() {
    let (dir, expected) = saved(&corpus(300));
    let expected = &expected[&0];
    let rdb = dir.path().join("dump.rdb").display().to_string();
    let certs = Certs::make();
    let tls_ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
    let cluster = Cluster::start_with(|i| {
        let mut a = certs.server_args(tls_ports[i]);
        a.extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from));
        a.extend(["--tls-client-cert-file".into(), certs.file("client.crt")]);
        a.extend(["--tls-client-key-file".into(), certs.file("client.key")]);
        a
    });
    let url = format!("rediss://127.0.0.1:{}", tls_ports[0]);
    let (ca, cert, key) = (certs.file("ca.crt"), certs.file("client.crt"), certs.file("client.key"));
    let tls = ["--cacert", &ca, "--cert", &cert, "--cert-key", &key];
    let out = rdbtool(&[&["restore", &rdb, "--to", &url, "--json"][..], &tls].concat());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&out);
    assert_eq!(s["keys"].as_u64(), Some(expected.len() as u64), "{s}");
    let nodes: Vec<String> = s["per_node"].as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
    assert_eq!(nodes.len(), 3, "three masters: {s}");
    for node in &nodes {
        let port: u16 = node.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port");
        assert!(tls_ports.contains(&port), "{node} is not a TLS port: {s}");
    }
    let got = cluster.contents();
    assert!(&got == expected, "{} keys vs {}", got.len(), expected.len());
    // split --by-node asks the same way: one file per master.
    let shards = TempDir::new("split-tls");
    let out_dir = shards.path().display().to_string();
    let out = rdbtool(&[&["split", &rdb, "--by-node", &url, "--out", &out_dir][..], &tls].concat());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let files = std::fs::read_dir(shards.path())
        .expect("shards")
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "rdb")));
    assert_eq!(files.count(), 3);
}

#[test]
fn restores_into_a_cluster_and_survives_a_reshard() {
    let (dir, expected) = saved(&corpus(3000));
    let expected = &expected[&0];
    let rdb = dir.path().join("dump.rdb").display().to_string();
    let cluster = Cluster::start();
    let url = format!("redis://127.0.0.1:{}", cluster.nodes[0].port);

    let out = rdbtool(&["restore", &rdb, "--to", &url, "--big-key-elements", "100", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&out);
    assert_eq!(s["keys"].as_u64(), Some(expected.len() as u64), "{s}");
    assert_eq!(s["per_node"].as_object().map(|o| o.len()), Some(3), "three masters: {s}");
    assert_eq!(s["function_loads"].as_u64(), Some(3), "the library to every master: {s}");
    let got = cluster.contents();
    assert!(&got == expected, "{} keys vs {}", got.len(), expected.len());
    for (port, _, _) in cluster.masters() {
        let list = cli(port, &["FUNCTION", "LIST"]);
        assert!(list.contains("restorelib"), "master {port} lacks the library");
    }

    // Again into an empty cluster, slowly, while 2000 slots move from one master to another.
    for (port, _, _) in cluster.masters() {
        cli(port, &["FLUSHALL"]);
    }
    let masters = cluster.masters();
    let (from, to) = (masters[0].1.clone(), masters[1].1.clone());
    let rdb2 = rdb.clone();
    let url2 = url.clone();
    let restore = std::thread::spawn(move || {
        rdbtool(&["restore", &rdb2, "--to", &url2, "--rate", "4000", "--big-key-elements", "100", "--json"])
    });
    std::thread::sleep(Duration::from_millis(300));
    let reshard = Command::new("redis-cli")
        .args(["--cluster", "reshard", &format!("127.0.0.1:{}", cluster.nodes[0].port)])
        .args(["--cluster-from", &from, "--cluster-to", &to, "--cluster-slots", "2000", "--cluster-yes"])
        .output()
        .expect("redis-cli --cluster reshard");
    assert!(reshard.status.success(), "{}", String::from_utf8_lossy(&reshard.stdout));
    let out = restore.join().expect("the restore thread");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&out);
    eprintln!("restore during a reshard: {s}");
    assert!(s["seconds"].as_f64().unwrap_or(0.0) > 2.0, "the restore overlapped the reshard: {s}");
    cluster.wait_ok();
    let got = cluster.contents();
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(*k)).take(5).collect();
    assert!(&got == expected, "{} keys vs {}; missing {missing:?}", got.len(), expected.len());
    assert!(s["moved"].as_u64().unwrap_or(0) + s["ask"].as_u64().unwrap_or(0) > 0, "no redirection seen: {s}");

    // split --by-node: one file per master, with the slots it serves after the reshard
    // (one master now has two ranges), each key in its master's file.
    let shards_dir = TempDir::new("split-by-node");
    let split =
        rdbtool(&["split", &rdb, "--by-node", &url, "--json", "--out", &shards_dir.path().display().to_string()]);
    assert!(split.status.success(), "{}", String::from_utf8_lossy(&split.stderr));
    let split = summary(&split);
    let shards = split["shards"].as_array().expect("shards");
    let masters = cluster.masters();
    assert_eq!(shards.len(), masters.len(), "{split}");
    let mut keys = 0;
    for shard in shards {
        let node = shard["node"].as_str().expect("a node");
        let port: u16 = node.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port");
        let ranges = &masters.iter().find(|m| m.0 == port).expect("a master").2;
        let dumped = rdbtool(&["dump", shard["file"].as_str().expect("a file")]);
        for line in String::from_utf8_lossy(&dumped.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("jsonl");
            let Some(key) = v["key"].as_str() else { continue };
            let slot = hash_slot(key.as_bytes());
            assert!(ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)), "{key} in the file of {node}");
            keys += 1;
        }
    }
    assert_eq!(keys, expected.len());

    // Keys of a slot being migrated: ASK sends them to the importing node (an MSET one SET
    // a key, as a slot in migration takes no multi-key command); a batched key, whose
    // RENAME the importing node refuses with TRYAGAIN, lands once the slot has moved.
    let mut mig = Vec::new();
    for i in 0..60 {
        mig.push(cmd(&["SET", &format!("{{mig}}:{i}"), &i.to_string()]));
    }
    let mut big = cmd(&["HSET", "{mig}:big"]);
    for i in 0..300 {
        big.extend([format!("f{i}"), i.to_string()]);
    }
    mig.push(big);
    mig.push(cmd(&["ZADD", "{mig}:z", "1", "a"]));
    let (dir_mig, expected_mig) = saved(&mig);
    let rdb_mig = dir_mig.path().join("dump.rdb").display().to_string();
    for (port, _, _) in cluster.masters() {
        cli(port, &["FLUSHALL"]);
    }
    let slot = hash_slot(b"{mig}");
    let masters = cluster.masters();
    let owner = masters.iter().position(|m| m.2.iter().any(|&(a, b)| (a..=b).contains(&slot))).expect("an owner");
    let (a, b) = (&masters[owner], &masters[(owner + 1) % masters.len()]);
    let slot_s = slot.to_string();
    assert_eq!(cli(b.0, &["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &a.1]), "OK");
    assert_eq!(cli(a.0, &["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &b.1]), "OK");
    let url_a = format!("redis://127.0.0.1:{}", a.0);
    let restore = std::thread::spawn(move || {
        rdbtool(&["restore", &rdb_mig, "--to", &url_a, "--big-key-elements", "100", "--json"])
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(cli(b.0, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &b.1]), "OK");
    assert_eq!(cli(a.0, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &b.1]), "OK");
    let out = restore.join().expect("the restore thread");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&out);
    eprintln!("restore into a migrating slot: {s}");
    assert!(s["ask"].as_u64().unwrap_or(0) > 0, "{s}");
    assert_eq!(key_states(b.0), expected_mig[&0]);
    cluster.wait_ok();

    // A cluster has only database 0: a file with keys elsewhere is refused before anything
    // is written, unless --db picks the database.
    let (dir3, _) = saved(&[cmd(&["SET", "zero", "0"]), cmd(&["SELECT", "3"]), cmd(&["SET", "three", "3"])]);
    let rdb3 = dir3.path().join("dump.rdb").display().to_string();
    for (port, _, _) in cluster.masters() {
        cli(port, &["FLUSHALL"]);
    }
    let refused = rdbtool(&["restore", &rdb3, "--to", &url]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("db 3 key 'three'"));
    assert!(cluster.contents().is_empty(), "nothing written");
    let picked = rdbtool(&["restore", &rdb3, "--to", &url, "--db", "3", "--json"]);
    assert_eq!(summary(&picked)["keys"].as_u64(), Some(1));
    assert_eq!(cluster.contents().keys().collect::<Vec<_>>(), ["three"]);
}

/// A jsonl dump and an AOF directory restore to the same keys as the RDB they came from.
#[test]
fn restores_jsonl_dumps_and_aof_directories() {
    let commands = corpus(50);
    let source = Redis::start_in(TempDir::new("restore-aof"), &["--appendonly", "yes"]);
    pipe_into(source.port, &resp_all(&commands));
    source.cli(&["SAVE"]);
    let expected = key_states(source.port);
    let dir = source.shutdown();
    let rdb = dir.path().join("dump.rdb");
    let jsonl = dir.path().join("dump.jsonl");
    let dumped = rdbtool(&["dump", &rdb.display().to_string()]);
    assert!(dumped.status.success());
    std::fs::write(&jsonl, &dumped.stdout).expect("write the jsonl");
    for input in [jsonl, dir.path().join("appendonlydir")] {
        let target = Redis::start();
        let out = rdbtool(&["restore", &input.display().to_string(), "--to", &format!("127.0.0.1:{}", target.port)]);
        assert_eq!(out.status.code(), Some(0), "{}: {}", input.display(), String::from_utf8_lossy(&out.stderr));
        assert_eq!(key_states(target.port), expected, "{}", input.display());
        assert!(target.cli(&["FUNCTION", "LIST"]).contains("restorelib"), "{}", input.display());
    }
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "hello").expect("write");
    let refused = rdbtool(&["restore", &junk.display().to_string(), "--to", "127.0.0.1:1"]);
    assert_eq!(refused.status.code(), Some(2));
}
