//! ferrokv-server driven by redis-cli, the `redis` client crate and raw sockets; raw
//! sessions are compared byte for byte with a real redis-server 7.0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{mask_ids, raw_session, raw_session_quiet_after, resp, Ours};

use ferrokv_testkit::{cli, TempDir};

/// Sessions whose replies must equal real Redis 7.0's, byte for byte.
fn sessions() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("ping echo", resp(&[&["PING"], &["PING", "hi"], &["PING", "a", "b"], &["ECHO", "x"], &["ECHO"]])),
        ("unknown command", resp(&[&["NOSUCH", "a", "b"], &["get"]])),
        (
            "multi exec",
            resp(&[&["MULTI"], &["SET", "a", "1"], &["INCR", "a"], &["PING"], &["MULTI"], &["WATCH", "x"], &["EXEC"]]),
        ),
        ("execabort", resp(&[&["MULTI"], &["NOSUCH"], &["SET", "a"], &["EXEC"], &["GET", "a"]])),
        ("no-multi commands", resp(&[&["MULTI"], &["SAVE"], &["SHUTDOWN"], &["PING"], &["EXEC"]])),
        ("exec errors", resp(&[&["EXEC"], &["DISCARD"], &["UNWATCH"], &["WATCH"], &["MULTI"], &["DISCARD"]])),
        ("exec runtime error", resp(&[&["SET", "s", "x"], &["MULTI"], &["INCR", "s"], &["SET", "t", "1"], &["EXEC"]])),
        (
            "select in multi",
            resp(&[&["MULTI"], &["SELECT", "1"], &["SET", "k", "1"], &["EXEC"], &["DBSIZE"], &["SELECT", "99"]]),
        ),
        ("inline", b"PING\r\necho \"a\\x41b\"\r\nset 'k v' \"x y\"\r\nget 'k v'\r\n\r\nPING\n".to_vec()),
        ("inline unbalanced", b"PING\r\nset \"a\"b c\r\nPING\r\n".to_vec()),
        ("expected dollar", b"*2\r\n$3\r\nget\r\n:3\r\n".to_vec()),
        ("negative counts", b"*-5\r\n*0\r\nPING\r\n*abc\r\n".to_vec()),
        ("invalid multibulk", b"*3000000000\r\n".to_vec()),
        ("invalid bulk", b"*1\r\n$-3\r\n".to_vec()),
        ("bulk too long", b"*1\r\n$600000000\r\n".to_vec()),
        (
            "hello",
            resp(&[
                &["HELLO", "4"],
                &["HELLO", "x"],
                &["HELLO", "3", "SETNAME", "a b"],
                &["HELLO", "2", "AUTH", "a", "b"],
                &["HELLO", "3", "FOO"],
                &["AUTH", "x"],
                &["AUTH", "default", "x"],
                &["AUTH", "a", "b", "c"],
            ]),
        ),
        (
            "resp3",
            resp(&[
                &["HSET", "h", "f", "v"],
                &["SADD", "s", "m"],
                &["ZADD", "z", "1.5", "m"],
                &["HELLO", "3", "SETNAME", "n"],
                &["HGETALL", "h"],
                &["SMEMBERS", "s"],
                &["ZSCORE", "z", "m"],
                &["GET", "nosuch"],
                &["CONFIG", "GET", "hz"],
                &["MULTI"],
                &["PING"],
                &["EXEC"],
                &["HELLO", "2"],
            ]),
        ),
        ("quit", resp(&[&["QUIT"], &["PING"]])),
        ("reset", resp(&[&["MULTI"], &["SELECT", "2"], &["RESET"], &["EXEC"], &["CLIENT", "GETNAME"]])),
        (
            "client",
            resp(&[
                &["CLIENT", "SETNAME", "a b"],
                &["CLIENT", "GETNAME"],
                &["CLIENT", "SETNAME", "nm"],
                &["CLIENT", "GETNAME"],
                &["CLIENT", "NOSUCH"],
                &["CLIENT", "SETNAME"],
                &["CLIENT", "KILL", "1.2.3.4:5"],
                &["CLIENT", "KILL", "ID", "999999"],
            ]),
        ),
        (
            "config",
            resp(&[
                &["CONFIG", "SET", "foo", "1"],
                &["CONFIG", "SET", "hz", "abc"],
                &["CONFIG", "SET", "appendfsync", "x"],
                &["CONFIG", "SET", "maxclients", "0"],
                &["CONFIG", "SET", "save", "1 2 3"],
                &["CONFIG", "SET", "databases", "3"],
                &["CONFIG", "SET", "dir", "/tmp"],
                &["CONFIG", "SET", "hz", "5", "hz", "6"],
                &["CONFIG", "SET", "hz"],
                &["CONFIG", "SET", "timeout", "-1"],
                &["CONFIG", "SET", "lazyfree-lazy-expire", "maybe"],
                &["CONFIG", "SET", "proto-max-bulk-len", "10"],
                &["CONFIG", "SET", "hz", "20", "timeout", "0"],
                &["CONFIG", "GET", "hz"],
                &["CONFIG", "GET", "set-max-intset-entries"],
                &["CONFIG", "GET", "nosuch*"],
                &["CONFIG", "SET", "hz", "10"],
                &["CONFIG", "GET"],
                &["CONFIG"],
                &["CONFIG", "FOO"],
                &["CONFIG", "RESETSTAT"],
            ]),
        ),
        (
            "command getkeys",
            resp(&[
                &["COMMAND", "GETKEYS", "SET", "a", "b"],
                &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
                &["COMMAND", "GETKEYS", "PING"],
                &["COMMAND", "GETKEYS", "NOSUCH"],
                &["COMMAND", "GETKEYS", "GET"],
                &["COMMAND", "INFO", "nosuch"],
                &["COMMAND", "FOO"],
            ]),
        ),
        ("wait", resp(&[&["WAIT", "0", "0"], &["WAIT", "1", "-1"], &["WAIT", "x", "0"], &["WAIT", "1"]])),
        (
            "debug",
            resp(&[
                &["SET", "k", "v"],
                &["RPUSH", "l", "a", "b"],
                &["DEBUG", "DIGEST-VALUE", "k", "l", "nosuch"],
                &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
                &["DEBUG", "SLEEP", "0"],
                &["DEBUG", "OBJECT", "nosuch"],
            ]),
        ),
        ("bgsave args", resp(&[&["BGSAVE", "foo"], &["LASTSAVE", "x"], &["SHUTDOWN", "foo"]])),
    ]
}

#[test]
fn replies_match_redis_byte_for_byte() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("server-bytes");
    let ours = Ours::start(dir.path(), &[]);
    let mut failures = Vec::new();
    for (name, input) in sessions() {
        // Each session starts from an empty dataset.
        cli(redis.port, &["FLUSHALL"]);
        ours.cli(&["FLUSHALL"]);
        let want = mask_ids(&raw_session(redis.port, &input));
        let got = mask_ids(&raw_session(ours.port, &input));
        if want != got {
            failures.push(format!(
                "{name}:\n  redis: {:?}\n  ours:  {:?}",
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert!(failures.is_empty(), "{} sessions differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn watch_conflicts_with_the_redis_crate() {
    let dir = TempDir::new("server-watch");
    let ours = Ours::start(dir.path(), &[]);
    let mut a = ours.redis();
    let mut b = ours.redis();
    // Another client touches the watched key: EXEC returns nil.
    redis::cmd("SET").arg("k").arg("1").exec(&mut a).unwrap();
    redis::cmd("WATCH").arg("k").exec(&mut a).unwrap();
    redis::cmd("SET").arg("k").arg("2").exec(&mut b).unwrap();
    redis::cmd("MULTI").exec(&mut a).unwrap();
    redis::cmd("SET").arg("k").arg("3").exec(&mut a).unwrap();
    let r: Option<Vec<String>> = redis::cmd("EXEC").query(&mut a).unwrap();
    assert_eq!(r, None);
    let v: String = redis::cmd("GET").arg("k").query(&mut a).unwrap();
    assert_eq!(v, "2");
    // Untouched: EXEC runs.
    redis::cmd("WATCH").arg("k").exec(&mut a).unwrap();
    redis::cmd("MULTI").exec(&mut a).unwrap();
    redis::cmd("INCR").arg("k").exec(&mut a).unwrap();
    let r: Option<Vec<i64>> = redis::cmd("EXEC").query(&mut a).unwrap();
    assert_eq!(r, Some(vec![3]));
    // A watched key that expires before EXEC fails it.
    redis::cmd("SET").arg("e").arg("v").arg("PX").arg("100").exec(&mut a).unwrap();
    redis::cmd("WATCH").arg("e").exec(&mut a).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    redis::cmd("MULTI").exec(&mut a).unwrap();
    redis::cmd("PING").exec(&mut a).unwrap();
    let r: Option<Vec<String>> = redis::cmd("EXEC").query(&mut a).unwrap();
    assert_eq!(r, None);
    // FLUSHALL by another client touches every watched key.
    redis::cmd("SET").arg("f").arg("1").exec(&mut a).unwrap();
    redis::cmd("WATCH").arg("f").exec(&mut a).unwrap();
    redis::cmd("FLUSHALL").exec(&mut b).unwrap();
    redis::cmd("MULTI").exec(&mut a).unwrap();
    redis::cmd("PING").exec(&mut a).unwrap();
    let r: Option<Vec<String>> = redis::cmd("EXEC").query(&mut a).unwrap();
    assert_eq!(r, None);
    // DISCARD and UNWATCH forget the watch.
    redis::cmd("SET").arg("d").arg("1").exec(&mut a).unwrap();
    redis::cmd("WATCH").arg("d").exec(&mut a).unwrap();
    redis::cmd("UNWATCH").exec(&mut a).unwrap();
    redis::cmd("SET").arg("d").arg("2").exec(&mut b).unwrap();
    redis::cmd("MULTI").exec(&mut a).unwrap();
    redis::cmd("GET").arg("d").exec(&mut a).unwrap();
    let r: Option<Vec<String>> = redis::cmd("EXEC").query(&mut a).unwrap();
    assert_eq!(r, Some(vec!["2".to_string()]));
}

#[test]
fn pipe_of_100k_commands() {
    let dir = TempDir::new("server-pipe");
    let ours = Ours::start(dir.path(), &[]);
    let mut input = Vec::new();
    for i in 0..100_000 {
        let argv = vec![b"SET".to_vec(), format!("key:{i}").into_bytes(), format!("value:{i}").into_bytes()];
        input.extend(ferrokv_testkit::encode_command(&argv));
    }
    let mut child = Command::new("redis-cli")
        .args(["-p", &ours.port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("errors: 0, replies: 100000"), "{text}");
    assert_eq!(ours.cli(&["DBSIZE"]), "100000");
    assert_eq!(ours.cli(&["GET", "key:99999"]), "value:99999");
    // One read holding many commands, and replies much larger than the socket buffer
    // (write backpressure): every reply arrives, in order.
    ours.cli(&["RPUSH", "big", &"x".repeat(1000)]);
    let mut many = Vec::new();
    for _ in 0..2000 {
        many.extend(resp(&[&["LRANGE", "big", "0", "-1"], &["PING"]]));
    }
    let mut s = TcpStream::connect(("127.0.0.1", ours.port)).unwrap();
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&many).unwrap())
    };
    let mut reply_bytes = Vec::new();
    let per = b"*1\r\n$1000\r\n".len() + 1002 + b"+PONG\r\n".len();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    while reply_bytes.len() < per * 2000 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        reply_bytes.extend_from_slice(&buf[..n]);
    }
    writer.join().unwrap();
    assert_eq!(reply_bytes.len(), per * 2000);
    assert!(reply_bytes.ends_with(b"+PONG\r\n"));
}

#[test]
fn auth_maxclients_and_timeout() {
    let dir = TempDir::new("server-auth");
    let ours = Ours::start(dir.path(), &["--requirepass", "secret", "--maxclients", "2", "--timeout", "1"]);
    let out =
        raw_session(ours.port, &resp(&[&["GET", "k"], &["AUTH", "bad"], &["AUTH", "secret"], &["SET", "k", "v"]]));
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-NOAUTH Authentication required.\r\n\
         -WRONGPASS invalid username-password pair or user is disabled.\r\n+OK\r\n+OK\r\n"
    );
    let out =
        raw_session(ours.port, &resp(&[&["HELLO", "3"], &["HELLO", "2", "AUTH", "default", "secret"], &["PING"]]));
    assert!(out.starts_with(b"-NOAUTH HELLO must be called with the client already authenticated"), "{out:?}");
    assert!(out.ends_with(b"+PONG\r\n"));
    // Unauthenticated clients may not send big requests.
    let out = raw_session(ours.port, b"*20\r\n");
    assert_eq!(out, b"-ERR Protocol error: unauthenticated multibulk length\r\n<closed>");
    // maxclients 2: the third connection is refused.
    let _c1 = TcpStream::connect(("127.0.0.1", ours.port)).unwrap();
    let _c2 = TcpStream::connect(("127.0.0.1", ours.port)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // The refusal ends with the server closing the connection: wait for it, however
    // loaded the machine (300 ms of quiet once ended this early under make test).
    let out = raw_session_quiet_after(ours.port, b"", Duration::from_secs(10));
    assert_eq!(out, b"-ERR max number of clients reached\r\n<closed>");
    drop((_c1, _c2));
    // An idle client is closed after `timeout` seconds.
    std::thread::sleep(Duration::from_millis(200));
    let mut idle = TcpStream::connect(("127.0.0.1", ours.port)).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 16];
    assert_eq!(idle.read(&mut buf).unwrap_or(0), 0);
    assert!(start.elapsed() >= Duration::from_millis(900));
}

#[test]
fn server_commands() {
    let dir = TempDir::new("server-admin");
    let ours = Ours::start(dir.path(), &[]);
    let mut c = ours.redis();
    redis::cmd("SET").arg("k").arg("v").exec(&mut c).unwrap();
    let info: String = redis::cmd("INFO").query(&mut c).unwrap();
    for needle in
        ["# Server\r\nredis_version:7.0.15", "# Clients", "# Memory", "# Persistence", "# Stats", "db0:keys=1"]
    {
        assert!(info.contains(needle), "INFO lacks {needle}");
    }
    assert!(!info.contains("# Commandstats"));
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut c).unwrap();
    assert!(info.contains("cmdstat_set:calls=1,"), "{info}");
    let info: String = redis::cmd("INFO").arg("all").query(&mut c).unwrap();
    assert!(info.contains("# Commandstats") && info.contains("# Keyspace"));
    let n: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    assert!(n > 150);
    let t: Vec<String> = redis::cmd("TIME").query(&mut c).unwrap();
    assert_eq!(t.len(), 2);
    let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    assert_eq!(digest.len(), 40);
    let obj: String = redis::cmd("DEBUG").arg("OBJECT").arg("k").query(&mut c).unwrap();
    assert!(obj.contains("encoding:embstr"), "{obj}");
    // BGSAVE writes dump.rdb from a thread; LASTSAVE moves.
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    let start = Instant::now();
    while !dir.path().join("dump.rdb").exists() {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    let r: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert!(r.starts_with("Background append only file rewriting"), "{r}");
    // DEBUG RELOAD keeps the data and the digest.
    redis::cmd("RPUSH").arg("l").arg("a").arg("b").exec(&mut c).unwrap();
    let before: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    redis::cmd("DEBUG").arg("RELOAD").exec(&mut c).unwrap();
    let after: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    assert_eq!(before, after);
    // CLIENT LIST / INFO / ID / KILL.
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    assert!(list.contains(&format!("id={id} ")), "{list}");
    let mut other = ours.redis();
    let other_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut other).unwrap();
    let killed: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(other_id).query(&mut c).unwrap();
    assert_eq!(killed, 1);
    assert!(redis::cmd("PING").query::<String>(&mut other).is_err());
    // Active expiry runs on the hz timer.
    redis::cmd("SET").arg("gone").arg("v").arg("PX").arg("50").exec(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info.contains("expired_keys:1"), "{info}");
    // SHUTDOWN NOSAVE ends the process.
    assert_eq!(ours.cli(&["SHUTDOWN", "NOSAVE"]), "");
    assert!(ours.wait_exit().success());
}

#[test]
fn persistence_across_restarts() {
    let dir = TempDir::new("server-persist");
    // SAVE, then a restart loads dump.rdb.
    let ours = Ours::start(dir.path(), &[]);
    ours.cli(&["SET", "a", "1"]);
    ours.cli(&["RPUSH", "l", "x", "y"]);
    assert_eq!(ours.cli(&["SAVE"]), "OK");
    let digest = ours.cli(&["DEBUG", "DIGEST"]);
    ours.kill9();
    let ours = Ours::start(dir.path(), &[]);
    assert_eq!(ours.cli(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(ours.cli(&["LRANGE", "l", "0", "-1"]), "x\ny");
    ours.kill9();
    // appendonly yes, kill -9, restart: every acknowledged write is back.
    let dir = TempDir::new("server-aof");
    let ours = Ours::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = ours.redis();
    for i in 0..200 {
        redis::cmd("INCR").arg("counter").exec(&mut c).unwrap();
        redis::cmd("SADD").arg("s").arg(i).exec(&mut c).unwrap();
    }
    redis::cmd("MULTI").exec(&mut c).unwrap();
    redis::cmd("SET").arg("m1").arg("a").exec(&mut c).unwrap();
    redis::cmd("SET").arg("m2").arg("b").exec(&mut c).unwrap();
    redis::cmd("EXEC").exec(&mut c).unwrap();
    let digest = ours.cli(&["DEBUG", "DIGEST"]);
    ours.kill9();
    let ours = Ours::start(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(ours.cli(&["GET", "counter"]), "200");
    assert_eq!(ours.cli(&["DEBUG", "DIGEST"]), digest);
    // SIGTERM with save points configured saves dump.rdb before exiting.
    let dir = TempDir::new("server-sigterm");
    let ours = Ours::start(dir.path(), &["--save", "3600 1"]);
    ours.cli(&["SET", "k", "v"]);
    Command::new("kill").args(["-TERM", &ours.pid().to_string()]).status().unwrap();
    assert!(ours.wait_exit().success());
    assert!(dir.path().join("dump.rdb").exists());
    let ours = Ours::start(dir.path(), &[]);
    assert_eq!(ours.cli(&["GET", "k"]), "v");
}

/// A client that sends a million commands before it reads a reply (Redis's own suite does,
/// in unit/maxmemory) gets them all: the server reads on while the client's socket is
/// full, as Redis does. Before, it stopped reading until the client read, and both waited
/// for ever. With a real redis-server the same way.
#[test]
fn a_client_that_writes_everything_before_reading_is_answered() {
    let run = |port: u16| -> usize {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let cmd = b"*4\r\n$8\r\nSETRANGE\r\n$5\r\nkey:0\r\n$1\r\n0\r\n$10\r\nAAAAAAAAAA\r\n";
        let n = 1_000_000;
        s.set_write_timeout(Some(Duration::from_secs(60))).expect("timeout");
        s.write_all(&cmd.repeat(n)).expect("send");
        let want = b":10\r\n".len() * n;
        s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        let mut got = 0;
        let mut buf = vec![0u8; 1 << 20];
        while got < want {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => got += k,
            }
        }
        got
    };
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("write-then-read");
    let ours = Ours::start(dir.path(), &[]);
    assert_eq!(run(ours.port), run(redis.port));
    assert_eq!(run(ours.port), 5_000_000);
}
