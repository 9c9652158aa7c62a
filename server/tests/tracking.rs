//! Client-side caching (CLIENT TRACKING, CACHING, GETREDIR, TRACKINGINFO): a tracking
//! connection and a writer, the bytes each receives compared with a real redis-server 7.0
//! (#15): invalidation pushes in RESP3, after the reply that caused them, BCAST prefixes,
//! OPTIN/OPTOUT, NOLOOP, flushes, and Redis's errors; and RESP2 redirection to a client
//! subscribed to `__redis__:invalidate`.

mod support;

use ferrokv_testkit::TempDir;
use support::{compare, send, Conn, Ours, Step};
use Step::*;

fn sessions() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "default mode",
            vec![
                send(0, &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON"], &["SET", "a", "1"], &["GET", "a"]]),
                send(0, &[&["MGET", "b", "c"], &["CLIENT", "TRACKINGINFO"], &["CLIENT", "GETREDIR"]]),
                Recv(0, 7),
                send(1, &[&["SET", "a", "2"], &["SET", "b", "1"], &["SET", "zz", "1"], &["DEL", "c"]]),
                Recv(1, 4),
                Recv(0, 2),
                // Read again: tracked again, invalidated again.
                send(0, &[&["GET", "a"]]),
                Recv(0, 1),
                send(1, &[&["INCR", "a"]]),
                Recv(1, 1),
                Recv(0, 1),
                send(0, &[&["CLIENT", "TRACKING", "OFF"], &["CLIENT", "TRACKINGINFO"], &["CLIENT", "GETREDIR"]]),
                Recv(0, 3),
            ],
        ),
        (
            "own writes come after the reply, and not with NOLOOP",
            vec![
                send(0, &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON"], &["GET", "k"], &["SET", "k", "v"]]),
                Recv(0, 5),
                send(0, &[&["GET", "k"], &["MULTI"], &["SET", "k", "w"], &["GET", "k"], &["EXEC"]]),
                Recv(0, 6),
                send(0, &[&["CLIENT", "TRACKING", "ON", "NOLOOP"], &["GET", "k"], &["SET", "k", "x"], &["PING"]]),
                Recv(0, 4),
                send(1, &[&["SET", "k", "y"]]),
                Recv(1, 1),
                send(0, &[&["PING", "after"]]),
                Recv(0, 1),
            ],
        ),
        (
            "bcast prefixes",
            vec![
                send(0, &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a:", "PREFIX", "b:"]]),
                send(0, &[&["CLIENT", "TRACKINGINFO"]]),
                Recv(0, 3),
                send(1, &[&["MSET", "a:1", "x", "b:2", "y", "c:3", "z"]]),
                Recv(1, 1),
                Recv(0, 2),
                send(1, &[&["MULTI"], &["INCR", "a:2"], &["INCR", "a:1"], &["INCR", "c:1"], &["EXEC"]]),
                Recv(1, 5),
                Recv(0, 1),
            ],
        ),
        (
            "optin and optout",
            vec![
                send(0, &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON", "OPTIN"], &["GET", "x"]]),
                send(0, &[&["CLIENT", "CACHING", "YES"], &["GET", "y"], &["CLIENT", "CACHING", "NO"]]),
                Recv(0, 6),
                send(1, &[&["SET", "x", "1"], &["SET", "y", "1"]]),
                Recv(1, 2),
                Recv(0, 1),
                send(0, &[&["CLIENT", "TRACKING", "OFF"], &["CLIENT", "TRACKING", "ON", "OPTOUT"], &["GET", "x"]]),
                send(0, &[&["CLIENT", "CACHING", "NO"], &["GET", "y"], &["CLIENT", "TRACKINGINFO"]]),
                Recv(0, 6),
                send(1, &[&["SET", "x", "2"], &["SET", "y", "2"]]),
                Recv(1, 2),
                Recv(0, 1),
            ],
        ),
        (
            "flushes invalidate everything",
            vec![
                send(0, &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON"], &["GET", "a"]]),
                Recv(0, 3),
                send(1, &[&["FLUSHALL"]]),
                Recv(1, 1),
                Recv(0, 1),
                send(0, &[&["GET", "a"], &["FLUSHDB"], &["PING"]]),
                Recv(0, 4),
            ],
        ),
        (
            "errors",
            vec![
                send(
                    0,
                    &[&["CLIENT", "TRACKING", "ON", "PREFIX", "x"], &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"]],
                ),
                send(0, &[&["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"], &["CLIENT", "CACHING", "YES"]]),
                send(0, &[&["CLIENT", "TRACKING", "ON", "REDIRECT", "99999"], &["CLIENT", "TRACKING", "MAYBE"]]),
                send(0, &[&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a"]]),
                send(0, &[&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab"]]),
                send(0, &[&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "abc"], &["CLIENT", "TRACKING", "ON"]]),
                send(0, &[&["CLIENT", "TRACKING", "ON", "BCAST", "NOSUCH"], &["CLIENT", "CACHING", "MAYBE"]]),
                send(0, &[&["CLIENT", "TRACKING", "ON", "REDIRECT", "x"], &["CLIENT", "TRACKING"]]),
                Recv(0, 13),
                send(0, &[&["CLIENT", "TRACKING", "OFF"], &["CLIENT", "TRACKING", "ON", "OPTIN"]]),
                send(0, &[&["CLIENT", "TRACKING", "ON", "OPTOUT"], &["CLIENT", "CACHING", "NO"]]),
                Recv(0, 4),
            ],
        ),
    ]
}

#[test]
fn tracking_matches_redis() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("tracking");
    let ours = Ours::start(dir.path(), &[]);
    let failures = compare(redis.port, ours.port, &sessions());
    assert!(failures.is_empty(), "{} sessions differ:\n{}", failures.len(), failures.join("\n"));
}

/// RESP2: the invalidations go to the redirect client as `__redis__:invalidate` messages;
/// when it is gone, CLIENT TRACKINGINFO says `broken_redirect` and CLIENT LIST shows `R`.
#[test]
fn resp2_redirect_as_redis() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("tracking-redir");
    let ours = Ours::start(dir.path(), &[]);
    let mut seen = Vec::new();
    for port in [redis.port, ours.port] {
        let mut sub = Conn::connect(port);
        let id = String::from_utf8_lossy(&sub.call(&["CLIENT", "ID"])).trim_start_matches(':').trim().to_string();
        let mut out = vec![sub.call(&["SUBSCRIBE", "__redis__:invalidate"])];
        let mut c = Conn::connect(port);
        let mut w = Conn::connect(port);
        out.push(c.call(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id]));
        out.push(c.call(&["GET", "k"]));
        out.push(w.call(&["SET", "k", "1"]));
        out.push(sub.read());
        out.push(c.call(&["GET", "k"]));
        out.push(w.call(&["FLUSHALL"]));
        out.push(sub.read());
        let getredir = c.call(&["CLIENT", "GETREDIR"]);
        assert_eq!(getredir, format!(":{id}\r\n").into_bytes());
        drop(sub);
        std::thread::sleep(std::time::Duration::from_millis(100));
        out.push(c.call(&["GET", "k"]));
        out.push(w.call(&["SET", "k", "2"]));
        out.push(c.call(&["CLIENT", "TRACKINGINFO"]));
        let list = String::from_utf8_lossy(&c.call(&["CLIENT", "INFO"])).into_owned();
        let flags = list.split(' ').find(|f| f.starts_with("flags=")).unwrap_or("").to_string();
        out.push(flags.into_bytes());
        // The redirect id itself differs between the servers.
        let masked: Vec<String> =
            out.iter().map(|x| String::from_utf8_lossy(x).replace(&format!(":{id}\r\n"), ":<id>\r\n")).collect();
        seen.push(masked);
    }
    assert_eq!(seen[0], seen[1], "redis, then ours");
}
