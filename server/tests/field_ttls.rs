//! Hash field TTLs (Redis 7.4) in ferrokv-server started as `--redis-version 7.4`.
//!
//! Always: the commands are unknown when the server stands in for Redis 7.0 (as real
//! 7.0 answers), and field TTLs survive what Redis keeps them through (restart from the
//! RDB and from the AOF, BGREWRITEAOF with either base, DEBUG RELOAD) while the active
//! cycle removes due fields and logs their HDELs.
//!
//! Against a real redis-server 7.4.1 (../shared/bin; `make compat`): the same sessions on
//! both, every reply byte equal; the AOF each writes equal byte for byte but for the clock;
//! BGREWRITEAOF's RESP base equal key by key; each loads the other's RDB with the same
//! DEBUG DIGEST.

use std::path::Path;
use std::time::Duration;

mod support;
use support::{shared_bin, start_shared, Ours};

use ferrokv_testkit::{cli, Client, Server as Redis, TempDir};

/// Far-future times (2100-01-01) keep replies the same on both servers.
const T: &str = "4102444800000";

fn argv(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace().map(|w| w.replace("{T}", T).into_bytes()).collect()
}

/// Lines of commands; `SLEEP ms` waits on both sides.
const REPLIES: &str = "
flushall
hset h a 1 b 2 c 3 d 4
object encoding h
hexpireat h 4102444800 FIELDS 1 c
hgetall h
hpexpireat h {T} FIELDS 1 a
hpexpireat h 4102444799000 FIELDS 1 d
hgetall h
object encoding h
hincrby h a 5
hset h a 9
hgetall h
hpexpireat h {T} FIELDS 2 a b
hset h zz 1
hgetall h
httl h FIELDS 3 a zz nope
hpexpiretime h FIELDS 3 a zz nope
hexpiretime h FIELDS 3 a zz nope
hpersist h FIELDS 3 a zz nope
hgetall h
hexpire nokey 10 FIELDS 2 a b
hexpire h -1 FIELDS 1 a
hexpire h 70368744177 FIELDS 1 a
hexpireat h 70368744177 FIELDS 1 a
hpexpireat h 70368744177664 FIELDS 1 a
hexpire h 10 NX FIELDS 2 a b
hexpire h 10 FOO 1 a
hexpire h 10 FIELDS 0 a
hexpire h 10 FIELDS 2 a
httl h FIELDS 0 a
httl h FOO 1 a
set s x
hexpire s 10 FIELDS 1 a
httl s FIELDS 1 a
hset h0 x1 y1 x2 y2
hexpireat h0 1 FIELDS 3 x1 x2 nofield
exists h0
hset h1 f1 v1 f2 v2 f3 v3 f4 v4 f5 v5
hpexpireat h1 {T} FIELDS 1 f4
hpexpireat h1 4102444900000 NX FIELDS 3 f1 f4 zz
hpexpireat h1 4102445000000 GT FIELDS 3 f1 f5 f4
hpexpireat h1 4102444000000 LT FIELDS 3 f1 f5 f4
hpexpiretime h1 FIELDS 5 f1 f2 f3 f4 f5
hgetall h1
hset p a 1
hexpire p 100 FIELDS 1 zz
object encoding p
hset big a 1
hpexpireat big {T} FIELDS 1 a
hset big v xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
object encoding big
hpexpiretime big FIELDS 2 a v
hpexpireat h1 {T} FIELDS 2 f2 f2
hpersist h1 FIELDS 2 f2 f2
hexpireat h1 1 FIELDS 2 f3 f3
hgetall h1
debug digest-value h1 big
dump h1
debug set-active-expire 0
hset k a 1 b 2 c 3
hpexpire k 50 FIELDS 2 a b
hset m a 1 b 2 c 3
hpexpire m 50 FIELDS 3 a b c
hset n f1 1 f2 2 f3 3
hpexpire n 50 FIELDS 1 f1
hset q a 1 b 2
hpexpire q 50 FIELDS 2 a b
hset r a 1 b 2 c 3
hpexpire r 50 FIELDS 2 a b
hset t x 1.5 y 2
hpexpire t 50 FIELDS 1 x
hset u a 1
hpexpire u 50 FIELDS 1 a
SLEEP 150
hlen k
hgetall k
hscan k 0
hget k a
hlen k
hmget m a b c zz
exists m
hexists n f1
hstrlen n f2
hincrby n f1 5
hgetall n
hsetnx q a new
hgetall q
hrandfield r 5
hincrbyfloat t x 1
hset u a 9
hgetall u
httl u FIELDS 1 a
flushall
debug set-active-expire 1
hset a f1 1 f2 2 f3 3
hpexpire a 100 FIELDS 2 f1 f2
hset b g1 1 g2 2
hpexpire b 100 FIELDS 2 g1 g2
SLEEP 500
hgetall a
exists b
info keyspace
hset last a 1 b 2
hpexpireat last {T} FIELDS 1 a
";

/// Run `script` on each port; the replies of each line.
fn run(port: u16, script: &str) -> Vec<(String, Vec<u8>)> {
    let mut c = Client::connect(port);
    let mut out = Vec::new();
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(ms) = line.strip_prefix("SLEEP ") {
            std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
            continue;
        }
        out.push((line.to_string(), c.call(&argv(line))));
    }
    out
}

/// The commands of a RESP file, each as its arguments.
fn commands(data: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let line = |i: &mut usize| -> usize {
        let end = *i + data[*i..].windows(2).position(|w| w == b"\r\n").unwrap();
        let n = std::str::from_utf8(&data[*i + 1..end]).unwrap().parse().unwrap();
        *i = end + 2;
        n
    };
    while i < data.len() {
        let argc = line(&mut i);
        let mut args = Vec::new();
        for _ in 0..argc {
            let n = line(&mut i);
            args.push(data[i..i + n].to_vec());
            i += n + 2;
        }
        out.push(args);
    }
    out
}

/// Times within a day of now read as `T`: what the clock puts into a log.
fn mask_now(data: &[u8]) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let text = String::from_utf8_lossy(data);
    text.split("\r\n")
        .map(|w| match w.parse::<i64>() {
            Ok(t) if (t - now).abs() < 86_400_000 => "T".to_string(),
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

fn aof_dir_file(dir: &Path, suffix: &str) -> Vec<u8> {
    let d = dir.join("appendonlydir");
    let mut names: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    let p = names.into_iter().rev().find(|p| p.to_string_lossy().ends_with(suffix)).expect(suffix);
    std::fs::read(p).unwrap()
}

#[test]
fn the_commands_are_unknown_to_a_redis_7_0() {
    let dir = TempDir::new("field-ttls-70");
    let ours = Ours::start(dir.path(), &[]);
    let redis = Redis::start();
    for line in ["hexpire h 10 FIELDS 1 a", "httl h FIELDS 1 a", "hpersist h FIELDS 1 a"] {
        let want = Client::connect(redis.port).call(&argv(line));
        assert_eq!(
            String::from_utf8_lossy(&Client::connect(ours.port).call(&argv(line))),
            String::from_utf8_lossy(&want)
        );
    }
    assert_eq!(ours.info("redis_version"), "7.0.15");
}

#[test]
fn field_ttls_survive_restarts_rewrites_and_reloads() {
    let dir = TempDir::new("field-ttls-keep");
    let args = ["--redis-version", "7.4", "--appendonly", "yes", "--appendfsync", "always"];
    let ttls = |port: u16| cli(port, &["HPEXPIRETIME", "s", "FIELDS", "3", "a", "b", "c"]);
    let digest;
    {
        let ours = Ours::start(dir.path(), &args);
        assert_eq!(ours.info("redis_version"), "7.4.1");
        ours.cli(&["HSET", "s", "a", "1", "b", "2", "c", "3"]);
        ours.cli(&["HPEXPIREAT", "s", T, "FIELDS", "1", "a"]);
        ours.cli(&["HPEXPIREAT", "s", "4102444800123", "FIELDS", "1", "c"]);
        let big: Vec<String> = (0..600).map(|i| format!("f{i}")).collect();
        let mut hset = vec!["HSET".to_string(), "big".into()];
        big.iter().for_each(|f| hset.extend([f.clone(), "v".into()]));
        ours.cli(&hset.iter().map(String::as_str).collect::<Vec<_>>());
        ours.cli(&["HPEXPIREAT", "big", T, "FIELDS", "2", "f1", "f2"]);
        assert_eq!(ours.cli(&["OBJECT", "ENCODING", "s"]).trim(), "listpackex");
        assert_eq!(ours.cli(&["OBJECT", "ENCODING", "big"]).trim(), "hashtable");
        digest = ours.cli(&["DEBUG", "DIGEST"]);
        assert_eq!(ttls(ours.port), "4102444800000\n-1\n4102444800123");
        ours.kill9();
    }
    // From the AOF (kill -9), then BGREWRITEAOF with each base kind, then DEBUG RELOAD.
    let ours = Ours::start(dir.path(), &args);
    assert_eq!(ours.cli(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(ttls(ours.port), "4102444800000\n-1\n4102444800123");
    for preamble in ["no", "yes"] {
        ours.cli(&["CONFIG", "SET", "aof-use-rdb-preamble", preamble]);
        ours.cli(&["BGREWRITEAOF"]);
        std::thread::sleep(Duration::from_millis(500));
        ours.cli(&["DEBUG", "LOADAOF"]);
        assert_eq!(ours.cli(&["DEBUG", "DIGEST"]), digest, "preamble {preamble}");
    }
    ours.cli(&["DEBUG", "RELOAD"]);
    assert_eq!(ours.cli(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(ours.cli(&["OBJECT", "ENCODING", "s"]).trim(), "listpackex");
    assert_eq!(ours.cli(&["HPEXPIRETIME", "big", "FIELDS", "2", "f1", "f3"]), "4102444800000\n-1");
    // The active cycle removes due fields and logs each HDEL.
    ours.cli(&["HPEXPIRE", "s", "50", "FIELDS", "2", "a", "b"]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(ours.cli(&["HGETALL", "s"]), "c\n3");
    assert_eq!(ours.info("expired_subkeys"), "2");
    let incr = String::from_utf8_lossy(&aof_dir_file(dir.path(), ".incr.aof")).into_owned();
    assert!(incr.contains("$4\r\nHDEL\r\n$1\r\ns\r\n$1\r\na\r\n"), "{incr}");
    assert!(incr.contains("$4\r\nHDEL\r\n$1\r\ns\r\n$1\r\nb\r\n"), "{incr}");
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn replies_logs_and_files_match_redis_7_4() {
    let Some(bin) = shared_bin("redis-server-7.4.1") else {
        eprintln!("skipped: ../shared/bin/redis-server-7.4.1 is absent");
        return;
    };
    let (rdir, odir) = (TempDir::new("field-ttls-real"), TempDir::new("field-ttls-ours"));
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let real = start_shared(&bin, rdir.path(), &aof);
    let ours = Ours::start(odir.path(), &[&aof[..], &["--redis-version", "7.4"]].concat());
    // Both sessions run side by side, so their clocks agree on what is due.
    let (want, got) = std::thread::scope(|s| {
        let w = s.spawn(|| run(real.port, REPLIES));
        let g = s.spawn(|| run(ours.port, REPLIES));
        (w.join().unwrap(), g.join().unwrap())
    });
    for ((line, w), (_, g)) in want.iter().zip(&got) {
        assert_eq!(String::from_utf8_lossy(g), String::from_utf8_lossy(w), "{line}");
    }
    // The AOFs: equal but for times taken from the clock.
    let (w, g) = (aof_dir_file(rdir.path(), ".incr.aof"), aof_dir_file(odir.path(), ".incr.aof"));
    assert_eq!(mask_now(&g), mask_now(&w));
    // BGREWRITEAOF with a RESP base: the same commands for each key (keys come in dict
    // order).
    for port in [real.port, ours.port] {
        cli(port, &["CONFIG", "SET", "aof-use-rdb-preamble", "no"]);
        cli(port, &["BGREWRITEAOF"]);
    }
    std::thread::sleep(Duration::from_millis(800));
    let by_key = |data: &[u8]| {
        let mut m = std::collections::BTreeMap::<Vec<u8>, Vec<Vec<Vec<u8>>>>::new();
        for c in commands(data) {
            if c.len() > 1 && !c[0].eq_ignore_ascii_case(b"select") {
                m.entry(c[1].clone()).or_default().push(c);
            }
        }
        m
    };
    let (w, g) = (aof_dir_file(rdir.path(), ".base.aof"), aof_dir_file(odir.path(), ".base.aof"));
    assert_eq!(by_key(&g), by_key(&w));
    // Each loads the other's RDB with the same digest.
    let digest = cli(real.port, &["DEBUG", "DIGEST"]);
    assert_eq!(cli(ours.port, &["DEBUG", "DIGEST"]), digest);
    for port in [real.port, ours.port] {
        cli(port, &["SAVE"]);
    }
    let (to_real, to_ours) = (TempDir::new("field-ttls-to-real"), TempDir::new("field-ttls-to-ours"));
    std::fs::copy(odir.path().join("dump.rdb"), to_real.path().join("dump.rdb")).unwrap();
    std::fs::copy(rdir.path().join("dump.rdb"), to_ours.path().join("dump.rdb")).unwrap();
    let real2 = start_shared(&bin, to_real.path(), &[]);
    let ours2 = Ours::start(to_ours.path(), &["--redis-version", "7.4"]);
    assert_eq!(cli(real2.port, &["DEBUG", "DIGEST"]), digest);
    assert_eq!(cli(ours2.port, &["DEBUG", "DIGEST"]), digest);
    for port in [real2.port, ours2.port] {
        assert_eq!(cli(port, &["HPEXPIRETIME", "last", "FIELDS", "2", "a", "b"]), format!("{T}\n-1"));
    }
}
