//! What a real server keeps is kept exactly: the order of a hash in a DUMP payload, and a
//! sorted set's `-0` score in a ziplist that Redis 6.2 wrote (Redis 7.0 loads it as it is).
//! Checked against a real redis-server 7.0 fed the same bytes.

use ferrokv::format::rdb::{RdbWriter, Target};
use ferrokv::logical::Logical;
use ferrokv_testkit::{Client, Server as Redis, TempDir};

mod support;
use support::Ours;

fn argv(a: &[&str]) -> Vec<Vec<u8>> {
    a.iter().map(|x| x.as_bytes().to_vec()).collect()
}

/// A bulk reply's contents.
fn bulk(reply: &[u8]) -> Vec<u8> {
    let at = reply.iter().position(|&b| b == b'\n').expect("a bulk");
    reply[at + 1..reply.len() - 2].to_vec()
}

/// RESTORE of listpack hashes, sets and zsets a real server dumped: the same order
/// (HGETALL, SMEMBERS, ZRANGE) and the same digest as in that server.
#[test]
fn restore_keeps_a_payload_s_order() {
    let redis = Redis::start();
    let dir = TempDir::new("exact-restore");
    let ours = Ours::start(dir.path(), &[]);
    let mut r = Client::connect(redis.port);
    let mut o = Client::connect(ours.port);
    let mut hset = argv(&["HSET", "h"]);
    for i in 0..60 {
        hset.push(format!("f{}", 59 - i).into_bytes());
        hset.push(format!("v{i}").into_bytes());
    }
    r.call(&hset);
    let mut sadd = argv(&["SADD", "s"]);
    sadd.extend((0..40).map(|i| format!("{}", (i * 7919) % 1000).into_bytes()));
    r.call(&sadd);
    r.call(&argv(&["ZADD", "z", "1", "b", "1", "a", "0", "c", "-0", "d"]));
    for (key, read) in
        [("h", vec!["HGETALL", "h"]), ("s", vec!["SMEMBERS", "s"]), ("z", vec!["ZRANGE", "z", "0", "-1", "WITHSCORES"])]
    {
        let payload = bulk(&r.call(&argv(&["DUMP", key])));
        let mut restore = argv(&["RESTORE", key, "0"]);
        restore.push(payload);
        assert_eq!(o.call(&restore), b"+OK\r\n".to_vec(), "{key}");
        assert_eq!(
            String::from_utf8_lossy(&o.call(&argv(&read))),
            String::from_utf8_lossy(&r.call(&argv(&read))),
            "{key}"
        );
    }
    assert_eq!(o.call(&argv(&["DEBUG", "DIGEST"])), r.call(&argv(&["DEBUG", "DIGEST"])));
}

/// A Redis 6.2 RDB (version 9) whose ziplist zset holds `-0` scores: loaded by Redis 7.0
/// and by ferrokv, ZSCORE says `-0`, and the digests agree.
#[test]
fn a_ziplist_s_negative_zero_survives_loading() {
    let dir = TempDir::new("exact-negzero");
    let mut w = RdbWriter::new(Vec::new(), Target::Redis62, 0).expect("header");
    w.select_db(0, None).expect("db");
    let z = Logical::Zset(vec![(b"neg".to_vec(), -0.0), (b"pos".to_vec(), 0.0), (b"one".to_vec(), 1.0)]);
    w.key(b"z", None, None, None, &z, &mut Vec::new()).expect("key");
    let big: Vec<(Vec<u8>, f64)> =
        (0..200).map(|i| (format!("m{i}").into_bytes(), if i % 2 == 0 { -0.0 } else { 0.0 })).collect();
    w.key(b"big", None, None, None, &Logical::Zset(big), &mut Vec::new()).expect("key");
    let file = w.finish().expect("rdb");
    let rdb = dir.path().join("negzero.rdb");
    std::fs::write(&rdb, &file).expect("write");
    let redis = Redis::start_with(Some(&rdb), &[]);
    let ours_dir = TempDir::new("exact-negzero-ours");
    std::fs::copy(&rdb, ours_dir.path().join("dump.rdb")).expect("copy");
    let ours = Ours::start(ours_dir.path(), &[]);
    let mut r = Client::connect(redis.port);
    let mut o = Client::connect(ours.port);
    for cmd in [
        vec!["ZSCORE", "z", "neg"],
        vec!["ZSCORE", "z", "pos"],
        vec!["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        vec!["OBJECT", "ENCODING", "z"],
        vec!["ZSCORE", "big", "m0"],
        vec!["OBJECT", "ENCODING", "big"],
        vec!["DEBUG", "DIGEST-VALUE", "z", "big"],
        vec!["DEBUG", "DIGEST"],
    ] {
        assert_eq!(
            String::from_utf8_lossy(&o.call(&argv(&cmd))),
            String::from_utf8_lossy(&r.call(&argv(&cmd))),
            "{cmd:?}"
        );
    }
    assert_eq!(o.call(&argv(&["ZSCORE", "z", "neg"])), b"$2\r\n-0\r\n".to_vec());
}

/// ZADD of a -0 score as each version keeps it: Redis 6.2 always (its ziplist holds the
/// text "-0"), Redis 7.0 never when ZADD creates the key (its listpack stores integers,
/// and a big ZADD fills a listpack first), Redis 7.2+ in a zset ZADD creates as a skiplist;
/// all keep it in an existing skiplist. ZSCORE and DEBUG DIGEST-VALUE equal the real
/// server's (7.0 always; 6.2 and 7.4 with ../shared, `make compat`).
fn negative_zero_as(version: &str, real: u16) {
    let dir = TempDir::new("negzero");
    let ours = Ours::start(dir.path(), &["--redis-version", version]);
    let many: Vec<String> = (1..=130).flat_map(|i| [i.to_string(), format!("m{i}")]).collect();
    let mut cmds: Vec<Vec<String>> = vec![vec!["ZADD".into(), "small".into(), "-0".into(), "a".into()]];
    let mut big = vec!["ZADD".to_string(), "big".into(), "-0".into(), "a".into()];
    big.extend(many.iter().cloned());
    cmds.push(big);
    let mut existing = vec!["ZADD".to_string(), "grown".into()];
    existing.extend(many.iter().cloned());
    cmds.push(existing);
    cmds.push(vec!["ZADD".into(), "grown".into(), "-0".into(), "a".into()]);
    cmds.push(vec!["ZINCRBY".into(), "small".into(), "-0".into(), "a".into()]);
    let (mut r, mut o) = (Client::connect(real), Client::connect(ours.port));
    for c in &cmds {
        let a: Vec<Vec<u8>> = c.iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(o.call(&a), r.call(&a), "{version}: {:?}", &c[..2]);
    }
    for key in ["small", "big", "grown"] {
        for probe in [&["ZSCORE", key, "a"][..], &["DEBUG", "DIGEST-VALUE", key], &["OBJECT", "ENCODING", key]] {
            assert_eq!(o.call(&argv(probe)), r.call(&argv(probe)), "{version}: {probe:?}");
        }
    }
}

#[test]
fn zadd_negative_zero_as_redis_7_0() {
    let redis = Redis::start();
    negative_zero_as("7.0", redis.port);
}

#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn zadd_negative_zero_as_redis_6_2_7_4_and_valkey_8_0() {
    for (version, bin) in
        [("6.2", "redis-server-6.2.16"), ("7.4", "redis-server-7.4.1"), ("valkey-8.0", "valkey-server-8.0.1")]
    {
        let Some(bin) = support::shared_bin(bin) else {
            eprintln!("skipped: ../shared/bin/{bin} is absent");
            return;
        };
        let dir = TempDir::new("negzero-real");
        let real = support::start_shared(&bin, dir.path(), &[]);
        negative_zero_as(version, real.port);
    }
}

/// The scripts of the commands whose replies differ by version (engine/tests/scripts/, which
/// vs_redis runs against Redis 7.0) as Redis 6.2, 7.4 and Valkey 8.0 answer them, RESP2 and
/// RESP3: GEO (6.2 prints distances with `%.4f`, 7.0 and later in fixed point; 6.2's units
/// are lower case only), BITPOS (BYTE|BIT from 7.0), and HyperLogLog strings byte for byte.
#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn geo_and_bitmap_replies_as_redis_6_2_7_4_and_valkey_8_0() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../engine/tests/scripts/");
    let script = ["geo.redis", "bitmap.redis", "hll.redis"]
        .map(|f| std::fs::read_to_string(format!("{dir}{f}")).expect("a script"))
        .join("\n");
    let lines: Vec<Vec<Vec<u8>>> = script
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| ferrokv_testkit::split_args(l).expect("a command line"))
        .collect();
    for (version, bin) in
        [("6.2", "redis-server-6.2.16"), ("7.4", "redis-server-7.4.1"), ("valkey-8.0", "valkey-server-8.0.1")]
    {
        let Some(bin) = support::shared_bin(bin) else {
            eprintln!("skipped: ../shared/bin/{bin} is absent");
            return;
        };
        for resp3 in [false, true] {
            let dir = TempDir::new("geo-real");
            let real = support::start_shared(&bin, dir.path(), &[]);
            let ours_dir = TempDir::new("geo-ours");
            let ours = Ours::start(ours_dir.path(), &["--redis-version", version]);
            let (mut r, mut o) = (Client::connect(real.port), Client::connect(ours.port));
            if resp3 {
                r.call(&argv(&["HELLO", "3"]));
                o.call(&argv(&["HELLO", "3"]));
            }
            for a in &lines {
                assert_eq!(
                    String::from_utf8_lossy(&o.call(a)),
                    String::from_utf8_lossy(&r.call(a)),
                    "{version} resp3={resp3}: {:?}",
                    a.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect::<Vec<_>>()
                );
            }
        }
    }
}

/// Where Redis 6.2's words and encodings differ from 7.0's (found by the differential
/// fuzzer against 6.2.16): each reply as a real Redis 6.2 gives it (`make compat`).
#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn replies_as_redis_6_2() {
    let Some(bin) = support::shared_bin("redis-server-6.2.16") else {
        eprintln!("skipped: ../shared/bin/redis-server-6.2.16 is absent");
        return;
    };
    let long = "f".repeat(70);
    let session: Vec<Vec<&str>> = vec![
        vec!["SET", "k", "v", "NX", "GET"],
        vec!["SET", "k", "v", "GET", "NX"],
        vec!["SETEX", "k", "-1", "v"],
        vec!["SET", "k", "v", "EX", "0"],
        vec!["EXPIRE", "k", "9223372036854775807"],
        vec!["RPUSH", "l", "a"],
        vec!["LPOS", "l", "a", "RANK", "0"],
        vec!["DECRBY", "n", "-9223372036854775808"],
        vec!["HINCRBY", "h", &long, "1"],
        vec!["OBJECT", "ENCODING", "h"],
        vec!["HINCRBYFLOAT", "h2", "f", "1e308"],
        vec!["OBJECT", "ENCODING", "h2"],
        vec!["HSET", "h3", "a", "b"],
        vec!["HSETNX", "h3", "a", &long],
        vec!["OBJECT", "ENCODING", "h3"],
        vec!["SETBIT", "b", "100", "0"],
        vec!["NOSUCH", "a", "b"],
        vec!["SET", "s", "abc"],
        vec!["EVAL", "return redis.call('INCR', KEYS[1])", "1", "s"],
        vec!["EVAL", "return error('boom')", "0"],
        vec!["EVAL", "return redis.call('nosuchcmd')", "0"],
        vec!["EVAL", "return redis.pcall('nosuchcmd')", "0"],
        vec!["EVAL", "return redis.call('get')", "0"],
        vec!["EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "s"],
        vec!["XADD", "x", "MAXLEN", "0", "1-1", "f", "v"],
        vec!["DEBUG", "RELOAD"],
        vec!["OBJECT", "ENCODING", "h"],
        vec!["XINFO", "STREAM", "x"],
        vec!["XADD", "x", "2-1", "f", "v"],
        vec!["XGROUP", "CREATE", "x", "g", "0"],
        vec!["XINFO", "GROUPS", "x"],
        vec!["XINFO", "STREAM", "x", "FULL"],
    ];
    let dir = TempDir::new("r62-real");
    let real = support::start_shared(&bin, dir.path(), &[]);
    let ours_dir = TempDir::new("r62-ours");
    let ours = Ours::start(ours_dir.path(), &["--redis-version", "6.2", "--enable-debug-command", "yes"]);
    let (mut r, mut o) = (Client::connect(real.port), Client::connect(ours.port));
    for a in &session {
        let a = argv(a);
        assert_eq!(
            String::from_utf8_lossy(&o.call(&a)),
            String::from_utf8_lossy(&r.call(&a)),
            "{:?}",
            a.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect::<Vec<_>>()
        );
    }
}
