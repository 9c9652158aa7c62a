//! XREAD / XREADGROUP with BLOCK: a blocked reader on one connection, writers on others;
//! replies, keyspace events, INFO counters and the AOF are compared with a real
//! redis-server 7.0. IDs are explicit so both servers produce the same bytes.

mod support;

use ferrokv_testkit::{cli, TempDir};
use support::{compare, info_counts, mask, send, wait_until, Conn, Ours, Step};
use Step::*;

fn sessions() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "xread waits for new entries",
            vec![
                send(9, &[&["XADD", "s2", "1-1", "old", "v"]]),
                Recv(9, 1),
                send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "s1", "s2", "s3", "$", "$", "$"]]),
                Blocked(1),
                send(9, &[&["XADD", "s2", "2-1", "new", "v"]]),
                Recv(9, 1),
                Recv(0, 1),
                // Old data is served at once.
                send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "s1", "s2", "$", "0-0"]]),
                Recv(0, 1),
                // A key that does not exist yet: `$` is 0-0.
                send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "s1", "s3", "$", "$"]]),
                Blocked(1),
                send(9, &[&["XADD", "s3", "5-1", "x", "y"]]),
                Recv(9, 1),
                Recv(0, 1),
                // COUNT is honoured when served later.
                send(0, &[&["XREAD", "COUNT", "2", "BLOCK", "0", "STREAMS", "s4", "$"]]),
                Blocked(1),
                send(
                    9,
                    &[
                        &["MULTI"],
                        &["XADD", "s4", "1-1", "a", "1"],
                        &["XADD", "s4", "1-2", "a", "2"],
                        &["XADD", "s4", "1-3", "a", "3"],
                        &["EXEC"],
                    ],
                ),
                Recv(9, 5),
                Recv(0, 1),
                // The same key twice waits for the first ID.
                send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "s4", "s4", "$", "9-9"]]),
                Blocked(1),
                send(9, &[&["XADD", "s4", "2-1", "b", "1"]]),
                Recv(9, 1),
                Recv(0, 1),
                // An explicit ID above the stream's last one.
                send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "s5", "1-18446744073709551615"]]),
                Blocked(1),
                send(
                    9,
                    &[
                        &["XADD", "s5", "1-1", "c", "1"],
                        &["XADD", "s5", "1-18446744073709551615", "c", "2"],
                        &["XADD", "s5", "2-1", "c", "3"],
                    ],
                ),
                Recv(9, 3),
                Recv(0, 1),
            ],
        ),
        (
            "readers are served first blocked first",
            vec![
                send(9, &[&["XGROUP", "CREATE", "q", "g", "$", "MKSTREAM"]]),
                Recv(9, 1),
                send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "q", "$"]]),
                Blocked(1),
                send(1, &[&["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "q", ">"]]),
                Blocked(2),
                send(2, &[&["XREADGROUP", "GROUP", "g", "c2", "BLOCK", "0", "STREAMS", "q", ">"]]),
                Blocked(3),
                send(3, &[&["XREAD", "BLOCK", "0", "STREAMS", "q", "$"]]),
                Blocked(4),
                send(9, &[&["XADD", "q", "1-1", "a", "1"]]),
                Recv(9, 1),
                Recv(0, 1),
                Recv(1, 1),
                Recv(3, 1),
                // c1 took the entry: c2 waits for the next one.
                Blocked(1),
                send(9, &[&["XADD", "q", "2-1", "a", "2"], &["XPENDING", "q", "g"]]),
                Recv(9, 2),
                Recv(2, 1),
                send(9, &[&["XPENDING", "q", "g"], &["XINFO", "GROUPS", "q"]]),
                Recv(9, 2),
            ],
        ),
        (
            "a deleted or retyped key keeps xread waiting",
            vec![
                send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]]),
                Blocked(1),
                send(9, &[&["MULTI"], &["XADD", "s", "1-1", "old", "v"], &["DEL", "s"], &["EXEC"]]),
                Recv(9, 4),
                send(
                    9,
                    &[&["MULTI"], &["XADD", "s", "1-1", "old", "v"], &["DEL", "s"], &["LPUSH", "s", "x"], &["EXEC"]],
                ),
                Recv(9, 5),
                send(9, &[&["DEL", "s"], &["SET", "s", "str"]]),
                Recv(9, 2),
                Blocked(1),
                send(9, &[&["DEL", "s"], &["XADD", "s", "7-1", "new", "v"]]),
                Recv(9, 2),
                Recv(0, 1),
            ],
        ),
        (
            "xreadgroup learns its key or group is gone",
            vec![
                send(9, &[&["XADD", "k", "1-1", "f", "v"], &["XGROUP", "CREATE", "k", "grp", "$"]]),
                Recv(9, 2),
                send(0, &[&["XREADGROUP", "GROUP", "grp", "alice", "BLOCK", "0", "STREAMS", "k", ">"]]),
                Blocked(1),
                send(9, &[&["DEL", "k"]]),
                Recv(9, 1),
                Recv(0, 1),
                send(9, &[&["XADD", "k", "1-1", "f", "v"], &["XGROUP", "CREATE", "k", "grp", "$"]]),
                Recv(9, 2),
                send(0, &[&["XREADGROUP", "GROUP", "grp", "alice", "BLOCK", "0", "STREAMS", "k", ">"]]),
                Blocked(1),
                send(9, &[&["SET", "k", "string"]]),
                Recv(9, 1),
                Recv(0, 1),
                send(9, &[&["DEL", "k"], &["XADD", "k", "1-1", "f", "v"], &["XGROUP", "CREATE", "k", "grp", "$"]]),
                Recv(9, 3),
                send(0, &[&["XREADGROUP", "GROUP", "grp", "alice", "BLOCK", "0", "STREAMS", "k", ">"]]),
                Blocked(1),
                send(9, &[&["MULTI"], &["DEL", "k"], &["SADD", "k", "e"], &["EXEC"]]),
                Recv(9, 4),
                Recv(0, 1),
                send(9, &[&["DEL", "k"], &["XGROUP", "CREATE", "k", "grp", "$", "MKSTREAM"]]),
                Recv(9, 2),
                send(0, &[&["XREADGROUP", "GROUP", "grp", "alice", "BLOCK", "0", "STREAMS", "k", ">"]]),
                Blocked(1),
                send(9, &[&["XGROUP", "DESTROY", "k", "grp"]]),
                Recv(9, 1),
                Recv(0, 1),
                send(9, &[&["XGROUP", "CREATE", "k", "grp", "$"]]),
                Recv(9, 1),
                send(0, &[&["XREADGROUP", "GROUP", "grp", "alice", "BLOCK", "0", "STREAMS", "k", ">"]]),
                Blocked(1),
                send(9, &[&["FLUSHALL"]]),
                Recv(9, 1),
                Recv(0, 1),
                // SWAPDB with no stream on the other side.
                send(9, &[&["XGROUP", "CREATE", "k", "grp", "$", "MKSTREAM"]]),
                Recv(9, 1),
                send(0, &[&["XREADGROUP", "GROUP", "grp", "alice", "BLOCK", "0", "STREAMS", "k", ">"]]),
                Blocked(1),
                send(9, &[&["SWAPDB", "0", "1"]]),
                Recv(9, 1),
                Recv(0, 1),
            ],
        ),
        (
            "an expired stream unblocks xreadgroup, not xread",
            vec![
                send(2, &[&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]]),
                Recv(2, 1),
                send(9, &[&["XGROUP", "CREATE", "e", "g", "$", "MKSTREAM"]]),
                Recv(9, 1),
                send(0, &[&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "e", ">"]]),
                Blocked(1),
                send(1, &[&["XREAD", "BLOCK", "0", "STREAMS", "e", "$"]]),
                Blocked(2),
                send(9, &[&["MULTI"], &["XDEL", "e", "1-1"], &["PEXPIRE", "e", "100"], &["DEBUG", "SLEEP", "0.2"]]),
                send(9, &[&["EXEC"], &["EXISTS", "e"]]),
                Recv(9, 6),
                Recv(0, 1),
                Blocked(1),
                send(9, &[&["XADD", "e", "1-1", "f", "v"], &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]]),
                Recv(9, 2),
                Recv(1, 1),
                // Active expiry deletes the stream: the group reader learns it.
                send(9, &[&["XGROUP", "CREATE", "a", "g", "$", "MKSTREAM"]]),
                Recv(9, 1),
                send(0, &[&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "a", ">"]]),
                Blocked(1),
                send(9, &[&["PEXPIRE", "a", "50"]]),
                Recv(9, 1),
                Recv(0, 1),
            ],
        ),
        (
            "rename brings data or a stream without the group",
            vec![
                send(9, &[&["XGROUP", "CREATE", "m", "grp", "$", "MKSTREAM"]]),
                Recv(9, 1),
                send(0, &[&["XREADGROUP", "GROUP", "grp", "alice", "BLOCK", "0", "STREAMS", "m", ">"]]),
                Blocked(1),
                send(
                    9,
                    &[
                        &["XGROUP", "CREATE", "m2", "grp", "$", "MKSTREAM"],
                        &["XADD", "m2", "100", "f", "v"],
                        &["RENAME", "m2", "m"],
                    ],
                ),
                Recv(9, 3),
                Recv(0, 1),
                send(0, &[&["XREADGROUP", "GROUP", "grp", "alice", "BLOCK", "0", "STREAMS", "m", ">"]]),
                Blocked(1),
                send(9, &[&["XADD", "m3", "200", "f", "v"], &["RENAME", "m3", "m"]]),
                Recv(9, 2),
                Recv(0, 1),
            ],
        ),
        (
            "timeouts transactions and history ids",
            vec![
                send(9, &[&["XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"]]),
                Recv(9, 1),
                send(
                    0,
                    &[
                        &["XREAD", "BLOCK", "50", "STREAMS", "t", "$"],
                        &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "50", "STREAMS", "t", ">"],
                        &["XREAD", "COUNT", "3", "BLOCK", "30", "STREAMS", "none", "t", "$", "0"],
                        &["PING"],
                    ],
                ),
                Recv(0, 4),
                send(
                    0,
                    &[
                        &["MULTI"],
                        &["XREAD", "BLOCK", "0", "STREAMS", "t", "$"],
                        &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "t", ">"],
                        &["EXEC"],
                    ],
                ),
                Recv(0, 4),
                // IDs other than `>` read the history: never a wait.
                send(
                    0,
                    &[
                        &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "t", "0"],
                        &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "t", "t", ">", "0"],
                        &["XINFO", "GROUPS", "t"],
                    ],
                ),
                Recv(0, 3),
                send(0, &[&["HELLO", "3"], &["XREAD", "BLOCK", "20", "STREAMS", "t", "$"]]),
                Recv(0, 2),
                send(0, &[&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "20", "STREAMS", "t", ">"]]),
                Recv(0, 1),
            ],
        ),
        (
            "argument errors",
            vec![
                send(
                    0,
                    &[
                        &["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"],
                        &["XREAD", "BLOCK", "abc", "STREAMS", "s", "$"],
                        &["XREAD", "BLOCK", "1.5", "STREAMS", "s", "$"],
                        &["XREAD", "BLOCK", "0", "STREAMS", "s"],
                        &["XREAD", "BLOCK", "0", "STREAMS", "s", ">"],
                        &["XREAD", "BLOCK", "0", "STREAMS", "s", "zz"],
                        &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", "$"],
                        &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"],
                        &["SET", "str", "x"],
                        &["XREAD", "BLOCK", "0", "STREAMS", "str", "$"],
                        &["XREAD", "BLOCK", "0", "BLOCK"],
                    ],
                ),
                Recv(0, 11),
            ],
        ),
        (
            "noack and resp3 wake-ups",
            vec![
                send(9, &[&["XGROUP", "CREATE", "n", "g", "$", "MKSTREAM"]]),
                Recv(9, 1),
                send(
                    0,
                    &[
                        &["HELLO", "3"],
                        &["XREADGROUP", "GROUP", "g", "newc", "NOACK", "BLOCK", "0", "STREAMS", "x", "n", "$", ">"],
                    ],
                ),
                Recv(0, 2),
                send(0, &[&["XREADGROUP", "GROUP", "g", "newc", "NOACK", "BLOCK", "0", "STREAMS", "n", ">"]]),
                Blocked(1),
                send(9, &[&["XADD", "n", "1-1", "a", "1"], &["XADD", "n", "1-2", "a", "2"]]),
                Recv(9, 2),
                Recv(0, 1),
                send(1, &[&["HELLO", "3"], &["XREAD", "BLOCK", "0", "STREAMS", "n", "$"]]),
                Recv(1, 1),
                Blocked(1),
                send(9, &[&["XADD", "n", "2-1", "b", "1"]]),
                Recv(9, 1),
                Recv(1, 1),
                send(9, &[&["XPENDING", "n", "g"], &["XINFO", "GROUPS", "n"]]),
                Recv(9, 2),
            ],
        ),
        (
            "a blocked xread gets at most 1000 entries",
            vec![
                send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "big", "$"]]),
                Blocked(1),
                send(9, &[&["EVAL", "for i=1,1005 do redis.call('XADD', KEYS[1], i..'-1', 'f', i) end", "1", "big"]]),
                Recv(9, 1),
                Recv(0, 1),
            ],
        ),
        (
            "scripts may not block",
            vec![
                send(
                    0,
                    &[
                        &["DEL", "s"],
                        &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"],
                        &["EVAL", "return redis.pcall('xread','STREAMS','s','$')", "1", "s"],
                        &["EVAL", "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')", "1", "s"],
                        &["EVAL", "return redis.call('XREAD','BLOCK',0,'STREAMS','s','$')", "1", "s"],
                        &["EVAL", "return redis.pcall('xreadgroup','group','g','c','STREAMS','s','>')", "1", "s"],
                        &[
                            "EVAL",
                            "return redis.pcall('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')",
                            "1",
                            "s",
                        ],
                        &["EVAL", "return redis.pcall('xread','BLOCK','x','STREAMS','s','$')", "1", "s"],
                        &["EVAL", "return redis.pcall('xread','COUNT','x','BLOCK','0','STREAMS','s','$')", "1", "s"],
                        &[
                            "FUNCTION",
                            "LOAD",
                            "#!lua name=xblocklib\nredis.register_function('xb', function(keys, args) return \
                             redis.call('xread','BLOCK','0','STREAMS',keys[1],'$') end)",
                        ],
                        &["FCALL", "xb", "1", "s"],
                        &["FUNCTION", "DELETE", "xblocklib"],
                    ],
                ),
                Recv(0, 12),
            ],
        ),
        (
            "keyspace events of a served xreadgroup",
            vec![
                send(8, &[&["CONFIG", "SET", "notify-keyspace-events", "KEA"]]),
                Recv(8, 1),
                send(9, &[&["XGROUP", "CREATE", "ev", "g", "$", "MKSTREAM"]]),
                Recv(9, 1),
                send(1, &[&["PSUBSCRIBE", "__key*__:*"]]),
                Recv(1, 1),
                send(0, &[&["XREADGROUP", "GROUP", "g", "newbie", "BLOCK", "0", "STREAMS", "ev", ">"]]),
                Blocked(1),
                send(9, &[&["XADD", "ev", "1-1", "a", "b"]]),
                Recv(9, 1),
                Recv(0, 1),
                send(9, &[&["PUBLISH", "__keyspace@0__:marker", "end"]]),
                Recv(9, 1),
                RecvUntil(1, "marker"),
                send(8, &[&["CONFIG", "SET", "notify-keyspace-events", ""]]),
                Recv(8, 1),
            ],
        ),
    ]
}

#[test]
fn stream_blocking_matches_redis_byte_for_byte() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("xblock-bytes");
    let ours = Ours::start(dir.path(), &[]);
    let mut failures = Vec::new();
    for session in sessions() {
        // Named on stderr: a session that hangs shows where.
        eprintln!("session: {}", session.0);
        failures.extend(compare(redis.port, ours.port, std::slice::from_ref(&session)));
    }
    assert!(failures.is_empty(), "{} sessions differ:\n{}", failures.len(), failures.join("\n"));
}

const AOF_ARGS: &[&str] = &["--appendonly", "yes", "--aof-timestamp-enabled", "no", "--appendfsync", "always"];

fn aof_session() -> Vec<Step> {
    vec![
        send(1, &[&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]]),
        Recv(1, 1),
        send(0, &[&["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">"]]),
        Blocked(1),
        send(1, &[&["XADD", "s", "1-1", "a", "1"]]),
        Recv(1, 1),
        Recv(0, 1),
        // Two entries at once: two XCLAIMs in one MULTI/EXEC.
        send(0, &[&["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">"]]),
        Blocked(1),
        send(1, &[&["MULTI"], &["XADD", "s", "2-1", "a", "2"], &["XADD", "s", "2-2", "a", "3"], &["EXEC"]]),
        Recv(1, 4),
        Recv(0, 1),
        // NOACK with a new consumer: XGROUP CREATECONSUMER and SETID.
        send(0, &[&["XREADGROUP", "GROUP", "g", "bob", "NOACK", "BLOCK", "0", "STREAMS", "s", ">"]]),
        Blocked(1),
        send(1, &[&["XADD", "s", "3-1", "a", "4"]]),
        Recv(1, 1),
        Recv(0, 1),
        // XREAD writes nothing.
        send(0, &[&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]]),
        Blocked(1),
        send(1, &[&["XADD", "s", "4-1", "a", "5"]]),
        Recv(1, 1),
        Recv(0, 1),
        // Served at once, in another database.
        send(0, &[&["SELECT", "2"], &["XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"], &["XADD", "s", "1-1", "x", "y"]]),
        send(0, &[&["XREADGROUP", "GROUP", "g", "carol", "BLOCK", "0", "STREAMS", "s", ">"]]),
        Recv(0, 4),
    ]
}

#[test]
fn served_xreadgroup_reaches_the_aof_as_redis_writes_it() {
    let redis = ferrokv_testkit::Server::start_with(None, AOF_ARGS);
    let dir = TempDir::new("xblock-aof");
    let ours = Ours::start(dir.path(), AOF_ARGS);
    let failures = compare(redis.port, ours.port, &[("aof", aof_session())]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // XCLAIM carries the delivery time in ms: the same length, other digits.
    let incr = |d: &std::path::Path| {
        let aof = std::fs::read(d.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
        String::from_utf8_lossy(&mask(&aof, b"$4\r\nTIME\r\n$13\r\n")).into_owned()
    };
    let want = incr(redis.dir.path());
    let got = incr(dir.path());
    assert!(want.contains("XCLAIM"), "{want}");
    assert_eq!(got, want);
}

#[test]
fn client_unblock_client_list_and_info() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("xblock-unblock");
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
        out.push(other.call(&["XGROUP", "CREATE", "u", "g", "$", "MKSTREAM"]));
        out.push(other.call(&["CONFIG", "RESETSTAT"]));
        let id = String::from_utf8(waiter.call(&["CLIENT", "ID"])).unwrap();
        let id = id.trim_start_matches(':').trim().to_string();
        let reads: [&[&str]; 2] = [
            &["XREAD", "BLOCK", "0", "STREAMS", "u", "$"],
            &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "u", ">"],
        ];
        for read in reads {
            for how in [None, Some("TIMEOUT"), Some("ERROR")] {
                waiter.send(read);
                blocked_clients(1);
                let list = String::from_utf8(other.call(&["CLIENT", "LIST", "ID", &id])).unwrap();
                out.push(format!("flags=b: {}", list.contains(" flags=b ")).into_bytes());
                let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
                args.extend(how);
                out.push(other.call(&args));
                out.push(waiter.read());
            }
        }
        // XGROUP DESTROY answers the blocked reader with NOGROUP, counted as its failure.
        waiter.send(reads[1]);
        blocked_clients(1);
        out.push(other.call(&["XGROUP", "DESTROY", "u", "g"]));
        out.push(waiter.read());
        for field in
            ["errorstat_NOGROUP", "errorstat_UNBLOCKED", "cmdstat_xreadgroup", "cmdstat_xread", "total_error_replies"]
        {
            out.push(format!("{field}:{}", info_counts(port, field)).into_bytes());
        }
        // A blocked reader that goes away is no longer served.
        let mut gone = Conn::connect(port);
        gone.send(&["XREAD", "BLOCK", "0", "STREAMS", "u", "$"]);
        blocked_clients(1);
        drop(gone);
        blocked_clients(0);
        out.push(other.call(&["XADD", "u", "1-1", "f", "v"]));
        transcripts.push(out.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect::<Vec<_>>());
    }
    assert_eq!(transcripts[1], transcripts[0]);
}

#[test]
fn xreadgroup_worker_with_the_redis_crate() {
    let dir = TempDir::new("xblock-crate");
    let ours = Ours::start(dir.path(), &[]);
    let url = format!("redis://127.0.0.1:{}/", ours.port);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut worker = client.get_connection().unwrap();
    redis::cmd("XGROUP").arg("CREATE").arg("jobs").arg("workers").arg("$").arg("MKSTREAM").exec(&mut worker).unwrap();
    let port = ours.port;
    let producer = std::thread::spawn(move || {
        wait_until(|| cli(port, &["INFO", "clients"]).contains("blocked_clients:1\r"));
        let mut c = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
        redis::cmd("XADD").arg("jobs").arg("*").arg("job").arg("1").exec(&mut c).unwrap();
    });
    type Read = Vec<(String, Vec<(String, Vec<(String, String)>)>)>;
    let got: Read = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("workers")
        .arg("w1")
        .arg("BLOCK")
        .arg(30_000)
        .arg("STREAMS")
        .arg("jobs")
        .arg(">")
        .query(&mut worker)
        .unwrap();
    producer.join().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "jobs");
    assert_eq!(got[0].1[0].1, vec![("job".to_string(), "1".to_string())]);
    let pending: (i64, String, String, Vec<(String, String)>) =
        redis::cmd("XPENDING").arg("jobs").arg("workers").query(&mut worker).unwrap();
    assert_eq!(pending.0, 1);
    let none: Option<Read> =
        redis::cmd("XREAD").arg("BLOCK").arg(50).arg("STREAMS").arg("jobs").arg("$").query(&mut worker).unwrap();
    assert_eq!(none, None);
}
