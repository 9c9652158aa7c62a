//! MONITOR against a real redis-server 7.0 (#15): a monitoring client on each server, the
//! same session from another client, the lines compared after their time stamp and client
//! port (which differ) are masked: which commands show (not administrative ones, not
//! commands queued in MULTI; EVAL and FCALL before their script's commands, shown as
//! `[db lua]`), in which order, on which db, quoted how, secrets `(redacted)`.

mod support;
use support::Ours;

use ferrokv_testkit::{Client, Server as Redis, TempDir};

const SESSION: &[&[&str]] = &[
    &["SET", "foo", "bar"],
    &["GET", "foo"],
    &["SELECT", "2"],
    &["SET", "k\u{1}\n", "v \"q\" \\"],
    &["SELECT", "0"],
    &["MULTI"],
    &["SET", "foo", "baz"],
    &["EXEC"],
    &["MULTI"],
    &["NOSUCHCMD"],
    &["EXEC"],
    &["EVAL", "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])", "1", "foo", "x"],
    &[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('f', function(k) return redis.call('incr', k[1]) end)",
    ],
    &["FCALL", "f", "1", "counter"],
    &["AUTH", "nobody"],
    &["AUTH", "someone", "secret"],
    &["HELLO", "2", "AUTH", "someone", "secret"],
    &["CONFIG", "SET", "maxmemory-samples", "5"],
    &["CLIENT", "LIST"],
    &["CLIENT", "SETNAME", "me"],
    &["BLPOP", "nolist", "0.01"],
    &["PING"],
    &["ECHO", "end of session"],
];

/// What `port`'s monitor saw of SESSION, time and client port masked.
fn seen(port: u16) -> Vec<String> {
    let mut m = Client::connect(port);
    assert_eq!(m.call_str(&["MONITOR"]), b"+OK\r\n");
    let mut c = Client::connect(port);
    for args in SESSION {
        c.call_str(args);
    }
    let mut lines = Vec::new();
    loop {
        let raw = String::from_utf8_lossy(&m.read()).into_owned();
        let masked = match raw.split_once(" [") {
            Some((_, rest)) => match rest.split_once(']') {
                Some((who, args)) => {
                    let (db, client) = who.split_once(' ').unwrap_or((who, ""));
                    let client = if client == "lua" { "lua" } else { "client" };
                    format!("[{db} {client}]{args}")
                }
                None => raw.clone(),
            },
            None => raw.clone(),
        };
        let done = masked.contains("end of session");
        lines.push(masked);
        if done {
            return lines;
        }
    }
}

#[test]
fn monitor_shows_what_redis_shows() {
    let redis = Redis::start();
    let dir = TempDir::new("monitor");
    let ours = Ours::start(dir.path(), &[]);
    let theirs = seen(redis.port);
    assert!(theirs.len() > 15, "{theirs:#?}");
    assert!(theirs.iter().any(|l| l.contains("[0 lua] \"incr\" \"counter\"")), "{theirs:#?}");
    assert_eq!(seen(ours.port), theirs);
    // The monitoring client is a replica: no keyspace for it, CLIENT LIST flags O.
    for port in [redis.port, ours.port] {
        let mut m = Client::connect(port);
        m.call_str(&["MONITOR"]);
        assert_eq!(m.call_str(&["GET", "foo"]), b"-ERR Replica can't interact with the keyspace\r\n");
    }
}
