//! What Redis 7.2 added that clients see, with `--redis-version 7.4`: CLIENT SETINFO,
//! CLIENT NO-TOUCH, WAITAOF, ZRANK/ZREVRANK WITHSCORE, CLIENT INFO's `watch=` and
//! `lib-name=`/`lib-ver=`. Against a
//! real redis-server 7.4.1 (../shared/bin; `make compat`) every reply is the same; under
//! the default 7.0 they are unknown, as in Redis 7.0 (always).

mod support;
use support::{assert_same_replies, shared_bin, start_shared, with_shared_and_ours, Ours};

use ferrokv_testkit::{Client, Server as Redis, TempDir};

fn argv(a: &[&str]) -> Vec<Vec<u8>> {
    a.iter().map(|x| if *x == BIG { vec![b'z'; 8300] } else { x.as_bytes().to_vec() }).collect()
}

/// The parts of CLIENT INFO two servers share (ids, addresses, ages and buffers differ).
fn client_info_shape(reply: &[u8]) -> Vec<String> {
    let keep = ["name", "flags", "db", "multi", "watch", "cmd", "user", "resp", "lib-name", "lib-ver"];
    String::from_utf8_lossy(reply)
        .split_whitespace()
        .filter(|f| f.split('=').next().is_some_and(|k| keep.contains(&k)))
        .map(str::to_string)
        .collect()
}

/// A RESP reply with every non-negative integer shown as `:N` (times, counts), -1 kept.
fn times_masked(reply: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(reply)
        .split("\r\n")
        .map(|l| if l.len() > 1 && l.starts_with(':') && l[1..].bytes().all(|b| b.is_ascii_digit()) { ":N" } else { l })
        .collect::<Vec<_>>()
        .join("\r\n")
        .into_bytes()
}

/// Stands for an element past the 8 KB listpack limit (made by `argv`).
const BIG: &str = "<8300 bytes>";

const SESSION: &[&[&str]] = &[
    &["CLIENT", "SETINFO", "lib-name", "redis-py"],
    &["CLIENT", "SETINFO", "LIB-VER", "5.0.1"],
    &["CLIENT", "SETINFO", "lib-ver", "1 2"],
    &["CLIENT", "SETINFO", "lib-name", "a\nb"],
    &["CLIENT", "SETINFO", "other", "x"],
    &["CLIENT", "SETINFO", "lib-name"],
    &["CLIENT", "NO-TOUCH", "maybe"],
    &["CLIENT", "NO-TOUCH", "ON"],
    &["SET", "k", "v"],
    &["WATCH", "k"],
    &["CLIENT", "NO-TOUCH", "off"],
    &["WAITAOF", "0", "0", "0"],
    &["WAITAOF", "1", "0", "0"],
    &["WAITAOF", "x", "0", "0"],
    &["WAITAOF", "0", "0", "-1"],
    &["WAITAOF", "0", "0"],
    &["ZADD", "zr", "1", "a", "2.5", "b"],
    &["ZRANK", "zr", "b", "WITHSCORE"],
    &["ZREVRANK", "zr", "b", "withscore"],
    &["ZRANK", "zr", "nope", "WITHSCORE"],
    &["ZRANK", "nokey", "a", "WITHSCORE"],
    &["ZRANK", "zr", "b", "foo"],
    &["ZRANK", "zr", "b", "WITHSCORE", "x"],
    &["ZRANK", "zr", "b"],
    // Doubles: Redis 7.2 writes them with d2string (shortest digits, integers plain).
    &["ZADD", "zd", "0.1", "a", "1e17", "b", "1.5e-7", "c", "-2.5e300", "d", "3", "e", "5e18", "f"],
    &["ZSCORE", "zd", "a"],
    &["ZRANGE", "zd", "0", "-1", "WITHSCORES"],
    &["ZINCRBY", "zd", "0.2", "a"],
    &["ZMSCORE", "zd", "a", "b", "nope"],
    &["ZADD", "zd", "INCR", "0.1", "c"],
    &["ZPOPMAX", "zd"],
    &["ZRANGE", "zd", "(0", "+inf", "BYSCORE", "WITHSCORES", "LIMIT", "0", "2"],
    &["EVAL", "return redis.call('ZSCORE', KEYS[1], 'a')", "1", "zd"],
    &["EVAL", "return redis.call('ZRANGE', KEYS[1], 0, 1, 'WITHSCORES')", "1", "zd"],
    &["DUMP", "zd"],
    // Grisu2's digits, not the shortest: 17 where 16 would read back the same.
    &["ZADD", "zg", "49.327663132303456", "a", "2.0109665394744898", "b", "0.07535929339681641", "c"],
    &["ZADD", "zg", "630889.8093865654", "d", "1e-320", "e", "-123456789012345680000", "f"],
    &["ZRANGE", "zg", "0", "-1", "WITHSCORES"],
    &["ZINCRBY", "zg", "0.1", "c"],
    &["DEBUG", "DIGEST-VALUE", "zg"],
    // 7.2's DEBUG DIGEST writes scores with fpconv_dtoa too.
    &["DEBUG", "DIGEST-VALUE", "zd"],
    &["DEBUG", "DIGEST"],
    // Redis 7.2 keeps small lists as one listpack and converts both ways.
    &["RPUSH", "pl", "a", "b", "c"],
    &["OBJECT", "ENCODING", "pl"],
    &["RPUSH", "pl", BIG],
    &["OBJECT", "ENCODING", "pl"],
    &["RPOP", "pl"],
    &["OBJECT", "ENCODING", "pl"],
    &["LSET", "pl", "0", BIG],
    &["OBJECT", "ENCODING", "pl"],
    &["LSET", "pl", "0", "x"],
    &["OBJECT", "ENCODING", "pl"],
    &["LINSERT", "pl", "BEFORE", "nope", BIG],
    &["OBJECT", "ENCODING", "pl"],
    &["LREM", "pl", "0", "x"],
    &["OBJECT", "ENCODING", "pl"],
    &["LMOVE", "pl", "pl2", "LEFT", "RIGHT"],
    &["OBJECT", "ENCODING", "pl2"],
    &["CONFIG", "SET", "list-max-listpack-size", "4"],
    &["RPUSH", "pc", "1", "2", "3", "4"],
    &["OBJECT", "ENCODING", "pc"],
    &["RPUSH", "pc", "5"],
    &["OBJECT", "ENCODING", "pc"],
    &["LPOP", "pc"],
    &["OBJECT", "ENCODING", "pc"],
    &["LTRIM", "pc", "0", "1"],
    &["OBJECT", "ENCODING", "pc"],
    &["RPUSH", "pc", "6", "7", "8"],
    &["SORT", "pc", "STORE", "ps"],
    &["OBJECT", "ENCODING", "ps"],
    &["DUMP", "pc"],
    &["CONFIG", "SET", "list-max-listpack-size", "-2"],
    &["RPUSH", "pd", "1", "2"],
    &["SADD", "sl", "1", "d"],
    &["SREM", "sl", "d"],
    &["DEBUG", "RELOAD"],
    &["OBJECT", "ENCODING", "pd"],
    // A listpack set of integers is loaded as a listpack (7.2+), not made an intset.
    &["OBJECT", "ENCODING", "sl"],
    // Valkey 8.0 makes a listpack zset a skiplist when a ZADD names a long member, even
    // one XX keeps out; Redis does not (found by the differential fuzzer).
    &["ZADD", "zv", "1", "a"],
    &["ZADD", "zv", "XX", "2", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"],
    &["OBJECT", "ENCODING", "zv"],
    &["ZADD", "zv2", "1", "a", "2", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"],
    &["OBJECT", "ENCODING", "zv2"],
    // 7.2 reads LPOS's rank in -LONG_MAX..LONG_MAX.
    &["RPUSH", "lp", "c", "d", "c"],
    &["LPOS", "lp", "c", "RANK", "-9223372036854775808"],
    &["LPOS", "lp", "c", "RANK", "-9223372036854775807"],
    &["CLIENT", "CAPA", "redirect"],
    &["CLIENT", "CAPA", "other", "REDIRECT"],
    &["CLIENT", "CAPA"],
];

fn assert_same(theirs: &[Vec<u8>], mine: &[Vec<u8>], tag: &str) {
    assert_same_replies(SESSION, theirs, mine, tag);
}

fn run(port: u16) -> Vec<Vec<u8>> {
    let mut c = Client::connect(port);
    let mut out: Vec<Vec<u8>> = SESSION.iter().map(|cmd| c.call(&argv(cmd))).collect();
    out.push(client_info_shape(&c.call(&argv(&["CLIENT", "INFO"]))).join(" ").into_bytes());
    c.call(&argv(&["CLIENT", "NO-TOUCH", "on"]));
    out.push(client_info_shape(&c.call(&argv(&["CLIENT", "INFO"]))).join(" ").into_bytes());
    // Consumers' activity (Redis 7.2's `inactive` and `active-time`, -1 until a consumer
    // got an entry); the times themselves differ between the servers, so they are masked.
    for cmd in [
        &["XADD", "xs", "1-1", "f", "v"][..],
        &["XGROUP", "CREATE", "xs", "g", "0"],
        &["XGROUP", "CREATECONSUMER", "xs", "g", "idle-one"],
        &["XREADGROUP", "GROUP", "g", "reader", "STREAMS", "xs", ">"],
        &["XREADGROUP", "GROUP", "g", "empty-handed", "STREAMS", "xs", ">"],
        &["XCLAIM", "xs", "g", "claimer", "0", "1-1"],
    ] {
        c.call(&argv(cmd));
    }
    for cmd in [&["XINFO", "CONSUMERS", "xs", "g"][..], &["XINFO", "STREAM", "xs", "FULL"]] {
        out.push(times_masked(&c.call(&argv(cmd))));
    }
    // RESP3 doubles.
    c.call(&argv(&["HELLO", "3"]));
    for cmd in [&["ZSCORE", "zd", "a"][..], &["ZRANGE", "zd", "0", "-1", "WITHSCORES"], &["ZINCRBY", "zd", "1e20", "x"]]
    {
        out.push(c.call(&argv(cmd)));
    }
    out
}

#[test]
fn unknown_as_redis_7_0() {
    let redis = Redis::start();
    let dir = TempDir::new("r72-70");
    let ours = Ours::start(dir.path(), &[]);
    assert_same(&run(redis.port), &run(ours.port), "7.0");
}

#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn as_redis_7_4() {
    let Some(bin) = shared_bin("redis-server-7.4.1") else {
        eprintln!("skipped: ../shared/bin/redis-server-7.4.1 is absent");
        return;
    };
    for aof in ["no", "yes"] {
        let (d1, d2) = (TempDir::new("r72-real"), TempDir::new("r72-ours"));
        let real = start_shared(&bin, d1.path(), &["--appendonly", aof]);
        let ours = Ours::start(d2.path(), &["--redis-version", "7.4", "--appendonly", aof]);
        assert_same(&run(real.port), &run(ours.port), &format!("7.4, appendonly {aof}"));
    }
}

/// As Valkey 8.0 (`--redis-version valkey-8.0`): the same session equals real Valkey
/// 8.0.1's, and so do HELLO's identity and INFO's version fields (`redis_version:7.2.4`,
/// `server_name`, `valkey_version`, `server_mode`).
#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn as_valkey_8_0() {
    with_shared_and_ours("valkey-server-8.0.1", &[], "valkey-8.0", |real, ours| {
        assert_same(&run(real), &run(ours), "valkey 8.0");
        let identity = |port: u16| {
            let mut c = Client::connect(port);
            let hello = c.call(&argv(&["HELLO", "3"]));
            let hello = String::from_utf8_lossy(&hello);
            // server and version, the first two pairs of the map.
            let head: Vec<&str> = hello.split("\r\n").skip(1).take(8).collect();
            let info = String::from_utf8_lossy(&c.call(&argv(&["INFO", "server"]))).into_owned();
            let fields = ["redis_version", "server_name", "valkey_version", "server_mode", "redis_mode"];
            let kept: Vec<String> = info
                .lines()
                .filter(|l| l.split(':').next().is_some_and(|k| fields.contains(&k)))
                .map(str::to_string)
                .collect();
            (head.join(" "), kept)
        };
        let ours_identity = identity(ours);
        assert!(ours_identity.1.iter().any(|l| l == "valkey_version:8.0.1"), "{ours_identity:?}");
        assert_eq!(ours_identity, identity(real));
    });
}

/// NO-TOUCH: reads leave OBJECT IDLETIME growing; TOUCH still touches.
#[test]
fn no_touch_leaves_the_lru_alone() {
    let dir = TempDir::new("r72-idle");
    let ours = Ours::start(dir.path(), &["--redis-version", "7.4"]);
    let mut c = Client::connect(ours.port);
    c.call(&argv(&["SET", "k", "v"]));
    c.call(&argv(&["DEBUG", "SLEEP", "2.1"]));
    c.call(&argv(&["CLIENT", "NO-TOUCH", "ON"]));
    c.call(&argv(&["GET", "k"]));
    let idle = c.call(&argv(&["OBJECT", "IDLETIME", "k"]));
    assert!(idle.starts_with(b":2") || idle.starts_with(b":3"), "{}", String::from_utf8_lossy(&idle));
    c.call(&argv(&["TOUCH", "k"]));
    assert_eq!(c.call(&argv(&["OBJECT", "IDLETIME", "k"])), b":0\r\n");
}
