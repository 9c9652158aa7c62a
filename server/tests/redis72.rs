//! What Redis 7.2 added that clients see, with `--redis-version 7.4`: CLIENT SETINFO,
//! CLIENT NO-TOUCH, WAITAOF, ZRANK/ZREVRANK WITHSCORE, CLIENT INFO's `watch=` and
//! `lib-name=`/`lib-ver=`. Against a
//! real redis-server 7.4.1 (../shared/bin; `make compat`) every reply is the same; under
//! the default 7.0 they are unknown, as in Redis 7.0 (always).

mod support;
use support::{shared_bin, start_shared, Ours};

use ferrokv_testkit::{Client, Server as Redis, TempDir};

fn argv(a: &[&str]) -> Vec<Vec<u8>> {
    a.iter().map(|x| x.as_bytes().to_vec()).collect()
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
    &["CLIENT", "CAPA", "redirect"],
    &["CLIENT", "CAPA", "other", "REDIRECT"],
    &["CLIENT", "CAPA"],
];

fn run(port: u16) -> Vec<Vec<u8>> {
    let mut c = Client::connect(port);
    let mut out: Vec<Vec<u8>> = SESSION.iter().map(|cmd| c.call(&argv(cmd))).collect();
    out.push(client_info_shape(&c.call(&argv(&["CLIENT", "INFO"]))).join(" ").into_bytes());
    c.call(&argv(&["CLIENT", "NO-TOUCH", "on"]));
    out.push(client_info_shape(&c.call(&argv(&["CLIENT", "INFO"]))).join(" ").into_bytes());
    out
}

#[test]
fn unknown_as_redis_7_0() {
    let redis = Redis::start();
    let dir = TempDir::new("r72-70");
    let ours = Ours::start(dir.path(), &[]);
    assert_eq!(run(ours.port), run(redis.port));
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
        let (theirs, mine) = (run(real.port), run(ours.port));
        for (i, (t, m)) in theirs.iter().zip(&mine).enumerate() {
            let what = SESSION.get(i).map(|c| c.join(" ")).unwrap_or_else(|| "CLIENT INFO".into());
            assert_eq!(String::from_utf8_lossy(m), String::from_utf8_lossy(t), "appendonly {aof}: {what}");
        }
    }
}

/// As Valkey 8.0 (`--redis-version valkey-8.0`): the same session equals real Valkey
/// 8.0.1's, and so do HELLO's identity and INFO's version fields (`redis_version:7.2.4`,
/// `server_name`, `valkey_version`, `server_mode`).
#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn as_valkey_8_0() {
    let Some(bin) = shared_bin("valkey-server-8.0.1") else {
        eprintln!("skipped: ../shared/bin/valkey-server-8.0.1 is absent");
        return;
    };
    let (d1, d2) = (TempDir::new("vk8-real"), TempDir::new("vk8-ours"));
    let real = start_shared(&bin, d1.path(), &[]);
    let ours = Ours::start(d2.path(), &["--redis-version", "valkey-8.0"]);
    let (theirs, mine) = (run(real.port), run(ours.port));
    for (i, (t, m)) in theirs.iter().zip(&mine).enumerate() {
        let what = SESSION.get(i).map(|c| c.join(" ")).unwrap_or_else(|| "CLIENT INFO".into());
        assert_eq!(String::from_utf8_lossy(m), String::from_utf8_lossy(t), "{what}");
    }
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
    let ours_identity = identity(ours.port);
    assert!(ours_identity.1.iter().any(|l| l == "valkey_version:8.0.1"), "{ours_identity:?}");
    assert_eq!(ours_identity, identity(real.port));
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
