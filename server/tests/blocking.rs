//! Blocking commands: a blocked client on one connection, the writer on another; the
//! replies and the AOF are compared byte for byte with a real redis-server 7.0.

mod support;

use ferrokv_testkit::{cli, TempDir};
use support::{compare, send, wait_until, Conn, Ours, Step};
use Step::*;

fn sessions() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "blpop served by a push",
            vec![
                send(0, &[&["BLPOP", "a", "b", "0"]]),
                Blocked(1),
                send(1, &[&["RPUSH", "b", "x", "y"]]),
                Recv(1, 1),
                Recv(0, 1),
                send(0, &[&["BRPOP", "a", "b", "0"]]),
                Recv(0, 1),
                send(0, &[&["LLEN", "b"], &["EXISTS", "b"]]),
                Recv(0, 2),
            ],
        ),
        (
            "clients are served first blocked first",
            vec![
                send(0, &[&["BLPOP", "q", "0"]]),
                Blocked(1),
                send(1, &[&["BLPOP", "q", "0"]]),
                Blocked(2),
                send(2, &[&["BRPOP", "q", "0"]]),
                Blocked(3),
                send(3, &[&["RPUSH", "q", "1", "2"]]),
                Recv(3, 1),
                Recv(0, 1),
                Recv(1, 1),
                Blocked(1),
                send(3, &[&["LPUSH", "q", "3"], &["LLEN", "q"]]),
                Recv(3, 2),
                Recv(2, 1),
            ],
        ),
        (
            "data already there",
            vec![
                send(
                    0,
                    &[
                        &["RPUSH", "l", "1", "2", "3"],
                        &["BLPOP", "none", "l", "0"],
                        &["BRPOP", "l", "0"],
                        &["BLMPOP", "0", "2", "none", "l", "LEFT", "COUNT", "5"],
                        &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
                        &["BZPOPMIN", "z", "0"],
                        &["BZPOPMAX", "z", "0"],
                        &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "9"],
                        &["EXISTS", "l", "z"],
                    ],
                ),
                Recv(0, 9),
            ],
        ),
        (
            "blmove and brpoplpush",
            vec![
                send(0, &[&["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]]),
                Blocked(1),
                send(1, &[&["RPUSH", "src", "a", "b", "c"]]),
                Recv(1, 1),
                Recv(0, 1),
                send(0, &[&["BRPOPLPUSH", "src", "dst", "0"], &["BLMOVE", "src", "src", "LEFT", "RIGHT", "0"]]),
                Recv(0, 2),
                send(0, &[&["LRANGE", "dst", "0", "-1"], &["LRANGE", "src", "0", "-1"]]),
                Recv(0, 2),
                // Rotation of a list onto itself, served after the push.
                send(0, &[&["BLMOVE", "ring", "ring", "RIGHT", "LEFT", "0"]]),
                Blocked(1),
                send(1, &[&["RPUSH", "ring", "1", "2", "3"], &["LRANGE", "ring", "0", "-1"]]),
                Recv(1, 2),
                Recv(0, 1),
            ],
        ),
        (
            "a blmove feeds a blpop on its destination",
            vec![
                send(0, &[&["BLPOP", "target", "0"]]),
                Blocked(1),
                send(1, &[&["BLMOVE", "source", "target", "LEFT", "RIGHT", "0"]]),
                Blocked(2),
                send(2, &[&["RPUSH", "source", "item"]]),
                Recv(2, 1),
                Recv(1, 1),
                Recv(0, 1),
                send(2, &[&["EXISTS", "source", "target"]]),
                Recv(2, 1),
            ],
        ),
        (
            "wrong type at wake-up",
            vec![
                send(0, &[&["BLMOVE", "s", "d", "LEFT", "LEFT", "0"]]),
                Blocked(1),
                send(1, &[&["SET", "d", "string"], &["RPUSH", "s", "v"]]),
                Recv(1, 2),
                Recv(0, 1),
                send(1, &[&["LRANGE", "s", "0", "-1"], &["SET", "str", "x"], &["BLPOP", "nokey", "str", "0"]]),
                Recv(1, 3),
            ],
        ),
        (
            "zsets wake bzpop clients",
            vec![
                send(0, &[&["BZPOPMIN", "z1", "z2", "0"]]),
                Blocked(1),
                send(1, &[&["BZMPOP", "0", "1", "z2", "MAX", "COUNT", "2"]]),
                Blocked(2),
                send(2, &[&["ZADD", "z2", "1", "a", "2", "b", "3", "c"]]),
                Recv(2, 1),
                Recv(0, 1),
                Recv(1, 1),
                send(2, &[&["EXISTS", "z2"], &["HELLO", "3"]]),
                Recv(2, 2),
                send(0, &[&["HELLO", "3"], &["BZPOPMAX", "z3", "0"]]),
                Recv(0, 1),
                Blocked(1),
                send(2, &[&["ZADD", "z3", "1.5", "m"]]),
                Recv(2, 1),
                Recv(0, 1),
            ],
        ),
        (
            "rename move swapdb sort-store lmove zunionstore wake clients",
            vec![
                send(0, &[&["BLPOP", "renamed", "0"]]),
                Blocked(1),
                send(9, &[&["RPUSH", "orig", "1"], &["RENAME", "orig", "renamed"]]),
                Recv(9, 2),
                Recv(0, 1),
                send(1, &[&["SELECT", "3"], &["BLPOP", "moved", "0"]]),
                Recv(1, 1),
                Blocked(1),
                send(9, &[&["RPUSH", "moved", "1"], &["MOVE", "moved", "3"]]),
                Recv(9, 2),
                Recv(1, 1),
                send(2, &[&["SELECT", "5"], &["BRPOP", "swapped", "0"]]),
                Recv(2, 1),
                Blocked(1),
                send(9, &[&["SELECT", "4"], &["RPUSH", "swapped", "s"], &["SWAPDB", "4", "5"], &["SELECT", "0"]]),
                Recv(9, 4),
                Recv(2, 1),
                send(3, &[&["BLPOP", "sorted", "0"]]),
                Blocked(1),
                send(9, &[&["RPUSH", "nums", "3", "1", "2"], &["SORT", "nums", "STORE", "sorted"]]),
                Recv(9, 2),
                Recv(3, 1),
                send(4, &[&["BLPOP", "moved-to", "0"]]),
                Blocked(1),
                send(9, &[&["LMOVE", "nums", "moved-to", "LEFT", "RIGHT"]]),
                Recv(9, 1),
                Recv(4, 1),
                send(5, &[&["BZPOPMIN", "union", "0"]]),
                Blocked(1),
                send(9, &[&["ZADD", "za", "1", "a"], &["ZUNIONSTORE", "union", "1", "za"]]),
                Recv(9, 2),
                Recv(5, 1),
            ],
        ),
        (
            "push then delete in a transaction wakes nobody",
            vec![
                send(0, &[&["BLPOP", "l", "0"]]),
                Blocked(1),
                send(1, &[&["MULTI"], &["LPUSH", "l", "a"], &["DEL", "l"], &["SET", "l", "x"], &["EXEC"]]),
                Recv(1, 5),
                send(1, &[&["DEL", "l"], &["LPUSH", "l", "b"]]),
                Recv(1, 2),
                Recv(0, 1),
            ],
        ),
        (
            "a ready key that expired keeps its clients blocked",
            vec![
                send(2, &[&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]]),
                Recv(2, 1),
                send(0, &[&["BRPOP", "k", "0"]]),
                Blocked(1),
                send(1, &[&["MULTI"], &["RPUSH", "k", "hello"], &["PEXPIRE", "k", "100"], &["DEBUG", "SLEEP", "0.2"]]),
                send(1, &[&["EXEC"], &["EXISTS", "k"]]),
                Recv(1, 6),
                Blocked(1),
                send(1, &[&["RPUSH", "k", "again"], &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]]),
                Recv(1, 2),
                Recv(0, 1),
            ],
        ),
        (
            "transactions do not block",
            vec![
                send(
                    0,
                    &[
                        &["MULTI"],
                        &["BLPOP", "none", "0"],
                        &["BLMOVE", "none", "d", "LEFT", "LEFT", "0"],
                        &["BRPOPLPUSH", "none", "d", "0"],
                        &["BZPOPMIN", "none", "0"],
                        &["BLMPOP", "0", "1", "none", "LEFT"],
                        &["RPUSH", "l", "v"],
                        &["BLPOP", "l", "0"],
                        &["EXEC"],
                    ],
                ),
                Recv(0, 9),
            ],
        ),
        (
            "timeouts",
            vec![
                send(0, &[&["BLPOP", "t", "0.05"], &["BLMOVE", "t", "d", "LEFT", "LEFT", "0.05"]]),
                send(0, &[&["BZMPOP", "0.05", "1", "t", "MIN"], &["PING"]]),
                Recv(0, 4),
                Blocked(0),
            ],
        ),
        (
            "argument errors",
            vec![
                send(
                    0,
                    &[
                        &["BLPOP", "l", "-1"],
                        &["BLPOP", "l", "abc"],
                        &["BRPOP", "l"],
                        &["BLMOVE", "a", "b", "UP", "LEFT", "0"],
                        &["BLMOVE", "a", "b", "LEFT", "LEFT", "-0.5"],
                        &["BLMPOP", "0", "0", "l", "LEFT"],
                        &["BLMPOP", "0", "x", "l", "LEFT"],
                        &["BLMPOP", "0", "2", "l", "LEFT"],
                        &["BLMPOP", "0", "1", "l", "LEFT", "COUNT", "0"],
                        &["BLMPOP", "0", "1", "l", "MIDDLE"],
                        &["BZMPOP", "0", "1", "z", "LEFT"],
                        &["BZMPOP", "-1", "1", "z", "MIN"],
                        &["LMPOP", "1", "l", "LEFT", "COUNT", "1", "COUNT", "2"],
                        &["ZMPOP", "1", "z", "MIN"],
                    ],
                ),
                Recv(0, 14),
            ],
        ),
    ]
}

#[test]
fn blocking_matches_redis_byte_for_byte() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("blocking-bytes");
    let ours = Ours::start(dir.path(), &[]);
    let failures = compare(redis.port, ours.port, &sessions());
    assert!(failures.is_empty(), "{} sessions differ:\n{}", failures.len(), failures.join("\n"));
}

const AOF_ARGS: &[&str] = &["--appendonly", "yes", "--aof-timestamp-enabled", "no", "--appendfsync", "always"];

fn aof_session() -> Vec<Step> {
    vec![
        send(0, &[&["BLPOP", "l", "0"]]),
        Blocked(1),
        send(1, &[&["RPUSH", "l", "a", "b"]]),
        Recv(1, 1),
        Recv(0, 1),
        send(0, &[&["BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"]]),
        Blocked(1),
        send(1, &[&["LPUSH", "src", "x", "y"]]),
        Recv(1, 1),
        Recv(0, 1),
        send(0, &[&["BRPOPLPUSH", "src", "dst", "0"], &["BLMOVE", "l", "dst", "left", "Right", "0"]]),
        Recv(0, 2),
        send(0, &[&["BRPOPLPUSH", "e", "dst", "0"]]),
        Blocked(1),
        send(1, &[&["RPUSH", "e", "1"]]),
        Recv(1, 1),
        Recv(0, 1),
        send(0, &[&["BZPOPMIN", "z", "0"]]),
        Blocked(1),
        send(1, &[&["ZADD", "z", "1", "a", "2", "b", "3", "c"]]),
        Recv(1, 1),
        Recv(0, 1),
        send(0, &[&["BZPOPMAX", "z", "0"], &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "10"]]),
        Recv(0, 2),
        send(0, &[&["BLMPOP", "0", "1", "m", "RIGHT", "COUNT", "5"]]),
        Blocked(1),
        send(1, &[&["RPUSH", "m", "1", "2", "3"]]),
        Recv(1, 1),
        Recv(0, 1),
        send(0, &[&["RPUSH", "m", "7", "8"], &["BLMPOP", "0", "1", "m", "LEFT", "COUNT", "5"]]),
        send(0, &[&["LMPOP", "1", "dst", "LEFT", "COUNT", "2"]]),
        send(0, &[&["MULTI"], &["BLPOP", "dst", "0"], &["BLPOP", "none", "0"], &["EXEC"]]),
        Recv(0, 7),
    ]
}

#[test]
fn served_pops_reach_the_aof_as_redis_writes_them() {
    let redis = ferrokv_testkit::Server::start_with(None, AOF_ARGS);
    let dir = TempDir::new("blocking-aof");
    let ours = Ours::start(dir.path(), AOF_ARGS);
    let failures = compare(redis.port, ours.port, &[("aof", aof_session())]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let incr = |d: &std::path::Path| std::fs::read(d.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
    let want = incr(redis.dir.path());
    let got = incr(dir.path());
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
}

#[test]
fn client_unblock_and_disconnects() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("blocking-unblock");
    let ours = Ours::start(dir.path(), &[]);
    let mut transcripts = Vec::new();
    for port in [redis.port, ours.port] {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let blocked_clients = |n: usize| {
            let want = format!("blocked_clients:{n}\r");
            wait_until(|| cli(port, &["INFO", "clients"]).contains(&want));
        };
        let mut waiter = Conn::connect(port);
        let mut other = Conn::connect(port);
        let id = String::from_utf8(waiter.call(&["CLIENT", "ID"])).unwrap();
        let id = id.trim_start_matches(':').trim().to_string();
        for how in [None, Some("TIMEOUT"), Some("ERROR")] {
            waiter.send(&["BLPOP", "never", "0"]);
            blocked_clients(1);
            let list = String::from_utf8(other.call(&["CLIENT", "LIST", "ID", &id])).unwrap();
            out.push(format!("flags=b: {}", list.contains(" flags=b ")).into_bytes());
            let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
            args.extend(how);
            out.push(other.call(&args));
            out.push(waiter.read());
        }
        out.push(other.call(&["CLIENT", "UNBLOCK", &id]));
        out.push(other.call(&["CLIENT", "UNBLOCK", &id, "MAYBE"]));
        out.push(other.call(&["CLIENT", "UNBLOCK", "abc"]));
        // A blocked client that goes away is no longer served.
        let mut gone = Conn::connect(port);
        gone.send(&["BLPOP", "k", "0"]);
        blocked_clients(1);
        drop(gone);
        blocked_clients(0);
        out.push(other.call(&["RPUSH", "k", "v"]));
        out.push(other.call(&["LLEN", "k"]));
        transcripts.push(out);
    }
    assert_eq!(transcripts[1], transcripts[0]);
}

#[test]
fn brpoplpush_queue_with_the_redis_crate() {
    let dir = TempDir::new("blocking-crate");
    let ours = Ours::start(dir.path(), &[]);
    let url = format!("redis://127.0.0.1:{}/", ours.port);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut worker = client.get_connection().unwrap();
    let port = ours.port;
    let producer = std::thread::spawn(move || {
        wait_until(|| cli(port, &["INFO", "clients"]).contains("blocked_clients:1\r"));
        let mut c = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
        redis::cmd("LPUSH").arg("jobs").arg("job-1").exec(&mut c).unwrap();
    });
    let job: Option<String> =
        redis::cmd("BRPOPLPUSH").arg("jobs").arg("processing").arg(30).query(&mut worker).unwrap();
    producer.join().unwrap();
    assert_eq!(job.as_deref(), Some("job-1"));
    let processing: Vec<String> = redis::cmd("LRANGE").arg("processing").arg(0).arg(-1).query(&mut worker).unwrap();
    assert_eq!(processing, vec!["job-1".to_string()]);
    let none: Option<(String, String)> = redis::cmd("BLPOP").arg("jobs").arg(0.05).query(&mut worker).unwrap();
    assert_eq!(none, None);
}

/// The slow log takes a command that blocked when it is served, not when it blocks (Redis's
/// updateStatsOnUnblock), on real Redis 7.0 and here alike.
#[test]
fn the_slow_log_takes_a_blocked_command_when_it_is_served() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("blocking-slowlog");
    let ours = Ours::start(dir.path(), &[]);
    // As the client sent it: upper case.
    let blpop: &[u8] = b"$5\r\nBLPOP\r\n$2\r\nsl\r\n$1\r\n0\r\n";
    let has = |reply: &[u8], what: &[u8]| reply.windows(what.len()).any(|w| w == what);
    for (server, port) in [("redis", redis.port), ("ours", ours.port)] {
        let mut c = ferrokv_testkit::Client::connect(port);
        c.call_str(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        c.call_str(&["SLOWLOG", "RESET"]);
        let mut blocked = Conn::connect(port);
        blocked.send(&["BLPOP", "sl", "0"]);
        wait_until(|| has(&c.call_str(&["CLIENT", "LIST"]), b"cmd=blpop"));
        assert!(!has(&c.call_str(&["SLOWLOG", "GET", "-1"]), blpop), "{server}: logged while blocked");
        c.call_str(&["RPUSH", "sl", "x"]);
        wait_until(|| has(&c.call_str(&["SLOWLOG", "GET", "-1"]), blpop));
        assert_eq!(blocked.read(), b"*2\r\n$2\r\nsl\r\n$1\r\nx\r\n".to_vec(), "{server}");
        c.call_str(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    }
}
