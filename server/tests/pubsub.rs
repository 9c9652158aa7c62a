//! Pub/sub and keyspace notifications: subscriber and publisher on separate connections,
//! the bytes each receives compared with a real redis-server 7.0.

mod support;

use std::time::Duration;

use ferrokv_testkit::{cli, TempDir};
use support::{compare, send, Ours, Step};
use Step::*;

fn pubsub_sessions() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "subscribe publish unsubscribe",
            vec![
                send(0, &[&["SUBSCRIBE", "news", "sport"], &["SUBSCRIBE", "news"]]),
                Recv(0, 3),
                send(
                    1,
                    &[&["PUBLISH", "news", "hello"], &["PUBLISH", "nobody", "x"], &["PUBSUB", "NUMSUB", "news", "x"]],
                ),
                Recv(1, 3),
                Recv(0, 1),
                send(0, &[&["UNSUBSCRIBE", "sport"], &["UNSUBSCRIBE", "nope"], &["UNSUBSCRIBE"], &["UNSUBSCRIBE"]]),
                Recv(0, 4),
                send(0, &[&["PING"], &["GET", "k"]]),
                Recv(0, 2),
            ],
        ),
        (
            "patterns",
            vec![
                send(0, &[&["PSUBSCRIBE", "n*", "h?llo", "[ab]x"], &["SUBSCRIBE", "news"]]),
                Recv(0, 4),
                send(1, &[&["PUBLISH", "news", "m1"], &["PUBLISH", "hello", "m2"], &["PUBLISH", "bx", "m3"]]),
                send(1, &[&["PUBSUB", "NUMPAT"], &["PUBSUB", "CHANNELS"], &["PUBSUB", "CHANNELS", "x*"]]),
                Recv(1, 6),
                Recv(0, 4),
                send(0, &[&["PUNSUBSCRIBE", "h?llo"], &["PUNSUBSCRIBE", "zz"], &["UNSUBSCRIBE"]]),
                Recv(0, 3),
                send(0, &[&["PUNSUBSCRIBE", "n*"], &["PUNSUBSCRIBE", "[ab]x"], &["PUNSUBSCRIBE"], &["PING", "back"]]),
                Recv(0, 4),
            ],
        ),
        (
            "subscribed mode refuses commands",
            vec![
                send(0, &[&["SUBSCRIBE", "c"], &["PING"], &["PING", "hi"], &["SET", "k", "v"], &["CLIENT", "LIST"]]),
                send(0, &[&["OBJECT", "ENCODING", "k"], &["PUBSUB", "NUMPAT"], &["MULTI"], &["QUIT"]]),
                Recv(0, 9),
            ],
        ),
        (
            "reset leaves subscribed mode",
            vec![
                send(0, &[&["SUBSCRIBE", "c"], &["PSUBSCRIBE", "p*"], &["RESET"], &["PING"]]),
                Recv(0, 4),
                send(1, &[&["PUBSUB", "NUMSUB", "c"], &["PUBSUB", "NUMPAT"], &["PUBLISH", "c", "x"]]),
                Recv(1, 3),
            ],
        ),
        (
            "resp3 pushes",
            vec![
                send(0, &[&["HELLO", "3"]]),
                Recv(0, 1),
                send(0, &[&["SUBSCRIBE", "c"], &["PSUBSCRIBE", "c*"], &["PING"], &["SET", "k", "v"]]),
                Recv(0, 4),
                send(0, &[&["PUBLISH", "c", "to-self"]]),
                Recv(0, 3),
                send(1, &[&["PUBLISH", "c", "other"]]),
                Recv(1, 1),
                Recv(0, 2),
                send(0, &[&["UNSUBSCRIBE"], &["PUNSUBSCRIBE"], &["UNSUBSCRIBE"]]),
                Recv(0, 3),
            ],
        ),
        (
            "subscribe inside multi",
            vec![send(0, &[&["MULTI"], &["SUBSCRIBE", "a", "b"], &["PING"], &["EXEC"], &["PING"]]), Recv(0, 5)],
        ),
        (
            "client reply off still gets messages",
            vec![
                send(0, &[&["CLIENT", "REPLY", "OFF"], &["SUBSCRIBE", "c"]]),
                Recv(0, 1),
                send(1, &[&["PUBLISH", "c", "m"]]),
                Recv(1, 1),
                Recv(0, 1),
            ],
        ),
        (
            "sharded channels",
            vec![
                send(0, &[&["SSUBSCRIBE", "s1"], &["SUBSCRIBE", "c"], &["SSUBSCRIBE", "s1"], &["PING"], &["GET", "x"]]),
                Recv(0, 5),
                send(
                    1,
                    &[
                        &["SPUBLISH", "s1", "m"],
                        &["PUBLISH", "s1", "no"],
                        &["SPUBLISH", "c", "no"],
                        &["PUBSUB", "SHARDCHANNELS"],
                        &["PUBSUB", "SHARDNUMSUB", "s1", "zz"],
                        &["SPUBLISH", "s1"],
                    ],
                ),
                Recv(1, 6),
                Recv(0, 1),
                send(0, &[&["SUNSUBSCRIBE", "s1"], &["SUNSUBSCRIBE"], &["UNSUBSCRIBE"], &["PING"]]),
                Recv(0, 4),
            ],
        ),
        (
            "pubsub errors and help",
            vec![
                send(
                    0,
                    &[
                        &["PUBSUB"],
                        &["PUBSUB", "NUMPAT", "x"],
                        &["PUBSUB", "NOPE"],
                        &["PUBSUB", "CHANNELS", "a", "b"],
                        &["PUBSUB", "HELP"],
                        &["PUBLISH", "c"],
                        &["SUBSCRIBE"],
                        &["PSUBSCRIBE"],
                    ],
                ),
                Recv(0, 8),
            ],
        ),
    ]
}

#[test]
fn pubsub_matches_redis_byte_for_byte() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("pubsub-bytes");
    let ours = Ours::start(dir.path(), &[]);
    let failures = compare(redis.port, ours.port, &pubsub_sessions());
    assert!(failures.is_empty(), "{} sessions differ:\n{}", failures.len(), failures.join("\n"));
}

fn notification_sessions() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "flags",
            vec![
                send(
                    0,
                    &[
                        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
                        &["CONFIG", "GET", "notify-keyspace-events"],
                        &["CONFIG", "SET", "notify-keyspace-events", "Ex$lg"],
                        &["CONFIG", "GET", "notify-keyspace-events"],
                        &["CONFIG", "SET", "notify-keyspace-events", "nKm"],
                        &["CONFIG", "GET", "notify-keyspace-events"],
                        &["CONFIG", "SET", "notify-keyspace-events", "Kq"],
                        &["CONFIG", "SET", "notify-keyspace-events", ""],
                        &["CONFIG", "GET", "notify-keyspace-events"],
                    ],
                ),
                Recv(0, 9),
            ],
        ),
        (
            "set del expire and friends",
            vec![
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", "KEA"]]),
                Recv(1, 1),
                send(0, &[&["PSUBSCRIBE", "__key*__:*"], &["SUBSCRIBE", "end"]]),
                Recv(0, 2),
                send(
                    1,
                    &[
                        &["SET", "foo", "bar"],
                        &["EXPIRE", "foo", "100"],
                        &["PERSIST", "foo"],
                        &["DEL", "foo", "nokey"],
                        &["RPUSH", "l", "a", "b"],
                        &["LPOP", "l"],
                        &["RENAME", "l", "l2"],
                        &["INCRBY", "n", "2"],
                        &["SADD", "s", "x"],
                        &["HSET", "h", "f", "v"],
                        &["ZADD", "z", "1", "m"],
                        &["ZPOPMIN", "z"],
                    ],
                ),
                Recv(1, 12),
                send(1, &[&["PUBLISH", "end", "one"]]),
                Recv(1, 1),
                RecvUntil(0, "one"),
                send(1, &[&["MULTI"], &["SET", "a", "1"], &["DEL", "a"], &["EXEC"], &["PUBLISH", "end", "two"]]),
                Recv(1, 5),
                RecvUntil(0, "two"),
                send(1, &[&["SELECT", "2"], &["SET", "in2", "v"], &["FLUSHALL"], &["PUBLISH", "end", "three"]]),
                Recv(1, 4),
                RecvUntil(0, "three"),
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", ""]]),
                Recv(1, 1),
            ],
        ),
        (
            "new keys and masks",
            vec![
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", "En$"]]),
                Recv(1, 1),
                send(0, &[&["PSUBSCRIBE", "*"]]),
                Recv(0, 1),
                send(
                    1,
                    &[
                        &["SET", "k", "1"],
                        &["SET", "k", "2"],
                        &["LPUSH", "l", "x"],
                        &["APPEND", "k", "3"],
                        &["PUBLISH", "end", "marker"],
                    ],
                ),
                Recv(1, 5),
                RecvUntil(0, "marker"),
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", ""]]),
                Recv(1, 1),
            ],
        ),
        (
            "key misses",
            vec![
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", "KEm"]]),
                Recv(1, 1),
                send(0, &[&["PSUBSCRIBE", "*"]]),
                Recv(0, 1),
                send(
                    1,
                    &[
                        &["SET", "k", "v"],
                        &["GET", "nokey"],
                        &["GET", "k"],
                        &["EXISTS", "e1"],
                        &["TYPE", "t1"],
                        &["TTL", "ttl1"],
                        &["LRANGE", "l1", "0", "-1"],
                        &["MGET", "m1", "k"],
                        &["LPOP", "writes-do-not-count"],
                        &["OBJECT", "ENCODING", "nor-object"],
                        &["PUBLISH", "end", "marker"],
                    ],
                ),
                Recv(1, 11),
                RecvUntil(0, "marker"),
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", ""]]),
                Recv(1, 1),
            ],
        ),
        (
            "expired lazily",
            vec![
                send(1, &[&["DEBUG", "SET-ACTIVE-EXPIRE", "0"], &["CONFIG", "SET", "notify-keyspace-events", "Ex"]]),
                Recv(1, 2),
                send(0, &[&["SUBSCRIBE", "__keyevent@9__:expired"]]),
                Recv(0, 1),
                send(1, &[&["SELECT", "9"], &["SET", "gone", "v", "PX", "1"], &["SET", "stays", "v"]]),
                Recv(1, 3),
                Step::Pause(50),
                send(1, &[&["GET", "gone"], &["GET", "stays"], &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]]),
                Recv(1, 3),
                Recv(0, 1),
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", ""]]),
                Recv(1, 1),
            ],
        ),
        (
            "expired by the active cycle",
            vec![
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", "KEx"]]),
                Recv(1, 1),
                send(0, &[&["PSUBSCRIBE", "*"]]),
                Recv(0, 1),
                send(1, &[&["SET", "soon", "v", "PX", "20"]]),
                Recv(1, 1),
                // Nobody reads the key: the timer's expire cycle deletes it.
                Recv(0, 2),
                send(1, &[&["CONFIG", "SET", "notify-keyspace-events", ""]]),
                Recv(1, 1),
            ],
        ),
    ]
}

#[test]
fn keyspace_notifications_match_redis() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("pubsub-notify");
    let ours = Ours::start(dir.path(), &[]);
    let failures = compare(redis.port, ours.port, &notification_sessions());
    assert!(failures.is_empty(), "{} sessions differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_redis_crate_receives_messages() {
    let dir = TempDir::new("pubsub-crate");
    let ours = Ours::start(dir.path(), &[]);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", ours.port)).unwrap();
    let mut sub = client.get_connection().unwrap();
    let mut publisher = client.get_connection().unwrap();
    let mut ps = sub.as_pubsub();
    ps.subscribe("orders").unwrap();
    ps.psubscribe("ord*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let n: i64 = redis::cmd("PUBLISH").arg("orders").arg("42").query(&mut publisher).unwrap();
    assert_eq!(n, 2);
    let m = ps.get_message().unwrap();
    assert_eq!((m.get_channel_name(), m.get_payload::<String>().unwrap()), ("orders", "42".to_string()));
    let m = ps.get_message().unwrap();
    assert_eq!(m.get_pattern::<String>().unwrap(), "ord*");
    let info: String = redis::cmd("INFO").arg("stats").query(&mut publisher).unwrap();
    assert!(info.contains("pubsub_channels:1\r\npubsub_patterns:1\r\n"), "{info}");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut publisher).unwrap();
    assert!(list.lines().any(|l| l.contains(" flags=P ") && l.contains(" sub=1 psub=1 ")), "{list}");
}

#[test]
fn a_subscriber_over_the_pubsub_hard_limit_is_closed() {
    let dir = TempDir::new("pubsub-obuf");
    let ours = Ours::start(dir.path(), &[]);
    assert_eq!(cli(ours.port, &["CONFIG", "SET", "client-output-buffer-limit", "pubsub 256kb 0 0"]), "OK");
    assert_eq!(
        cli(ours.port, &["CONFIG", "GET", "client-output-buffer-limit"]),
        "client-output-buffer-limit\nnormal 0 0 0 slave 268435456 67108864 60 pubsub 262144 0 0"
    );
    // A subscriber that never reads.
    let mut sub = ferrokv_testkit::Client::connect(ours.port);
    sub.call_str(&["SUBSCRIBE", "flood"]);
    let mut publisher = ferrokv_testkit::Client::connect(ours.port);
    let payload = vec![b'x'; 64 * 1024];
    let argv = vec![b"PUBLISH".to_vec(), b"flood".to_vec(), payload];
    // The socket buffers absorb some megabytes first; then the limit closes the client.
    let mut closed = false;
    for _ in 0..2000 {
        if publisher.call(&argv) == b":0\r\n" {
            closed = true;
            break;
        }
    }
    assert!(closed, "the subscriber was not disconnected");
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(log.contains("scheduled to be closed ASAP for overcoming of output buffer limits."), "{log}");
}

#[test]
fn a_subscriber_over_the_soft_limit_for_too_long_is_closed() {
    let dir = TempDir::new("pubsub-soft");
    let ours = Ours::start(dir.path(), &["--client-output-buffer-limit", "pubsub 0 64kb 1"]);
    let mut sub = ferrokv_testkit::Client::connect(ours.port);
    sub.call_str(&["SUBSCRIBE", "slow"]);
    let mut publisher = ferrokv_testkit::Client::connect(ours.port);
    let argv = vec![b"PUBLISH".to_vec(), b"slow".to_vec(), vec![b'y'; 32 * 1024]];
    let start = std::time::Instant::now();
    // Keep publishing: once the socket buffers are full the subscriber stays over the
    // soft limit, and is closed when that lasted more than a second.
    while publisher.call(&argv) != b":0\r\n" {
        assert!(start.elapsed() < Duration::from_secs(60), "the subscriber was not disconnected");
        std::thread::sleep(Duration::from_millis(5));
    }
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(log.contains("for overcoming of output buffer limits."), "{log}");
}
