//! Secure defaults and hostile clients, against a real redis-server 7.0 started the same
//! way: DEBUG and MODULE off by default; an inline request without end; a query buffer
//! past its limit; memory given back when a client that sent a huge unfinished argument
//! goes (Redis's RSS falls back, so must ours).

use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{raw_session, resp};

use ferrokv_testkit::{cli, spawn_on_free_port, TempDir};

/// A server with nothing but a port and a directory: its own defaults.
struct Bare {
    child: Child,
    port: u16,
}

impl Bare {
    fn start(bin: &str, dir: &TempDir) -> Bare {
        let spawn = |port: u16| {
            Command::new(bin)
                .args(["--port", &port.to_string(), "--save", ""])
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .spawn()
                .expect("start the server")
        };
        let (child, port) = spawn_on_free_port(bin, spawn, Duration::from_secs(30));
        Bare { child, port }
    }

    fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Bare {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pair() -> (Bare, Bare, TempDir, TempDir) {
    let (a, b) = (TempDir::new("hostile-ours"), TempDir::new("hostile-redis"));
    let ours = Bare::start(env!("CARGO_BIN_EXE_ferrokv-server"), &a);
    let redis = Bare::start("redis-server", &b);
    (ours, redis, a, b)
}

#[test]
fn debug_and_module_are_off_by_default_as_in_redis() {
    let (ours, redis, _a, _b) = pair();
    for cmd in [
        vec!["DEBUG", "SLEEP", "0"],
        vec!["DEBUG", "RELOAD"],
        vec!["MODULE", "LIST"],
        vec!["MODULE", "LOAD", "/nonexistent.so"],
        vec!["CONFIG", "GET", "enable-debug-command"],
        vec!["CONFIG", "GET", "enable-module-command"],
        vec!["CONFIG", "SET", "enable-debug-command", "yes"],
    ] {
        let input = resp(&[&cmd]);
        assert_eq!(
            String::from_utf8_lossy(&raw_session(ours.port, &input)),
            String::from_utf8_lossy(&raw_session(redis.port, &input)),
            "{cmd:?}"
        );
    }
}

#[test]
fn hostile_input_is_refused_as_redis_refuses_it() {
    let (ours, redis, _a, _b) = pair();
    // An inline request that never ends.
    let inline = vec![b'a'; 1 << 20];
    assert_eq!(raw_session(ours.port, &inline), raw_session(redis.port, &inline));
    // A query buffer past client-query-buffer-limit: the connection is closed.
    let mut big = b"*2\r\n$3\r\nSET\r\n$10000000\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'x', 2 << 20));
    for s in [&ours, &redis] {
        assert_eq!(cli(s.port, &["CONFIG", "SET", "client-query-buffer-limit", "1mb"]), "OK");
    }
    for s in [&ours, &redis] {
        let mut conn = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        let _ = conn.write_all(&big);
        conn.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let mut buf = [0u8; 64];
        // Closed without a reply: end of stream or a reset, not a timeout.
        match std::io::Read::read(&mut conn, &mut buf) {
            Ok(n) => assert_eq!(n, 0, "port {}: a reply {:?}", s.port, &buf[..n]),
            Err(e) => {
                assert!(e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut, "{e}")
            }
        }
    }
}

/// 300 MB of an argument announced as 400 MB, then the client goes: RSS falls back (Redis
/// measured here: back to about 12 MB); and an argument announced but not sent costs
/// nothing.
#[test]
fn memory_comes_back_when_a_huge_unfinished_argument_goes() {
    let dir = TempDir::new("hostile-rss");
    let ours = Bare::start(env!("CARGO_BIN_EXE_ferrokv-server"), &dir);
    let before = ours.rss_kb();
    let mut s = TcpStream::connect(("127.0.0.1", ours.port)).expect("connect");
    s.write_all(b"*2\r\n$3\r\nSET\r\n$400000000\r\n").expect("write");
    std::thread::sleep(Duration::from_millis(200));
    assert!(ours.rss_kb() < before + 64 * 1024, "an announced length alone took {} kB", ours.rss_kb() - before);
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..300 {
        s.write_all(&chunk).expect("write");
    }
    let start = Instant::now();
    while ours.rss_kb() < 250 * 1024 {
        assert!(start.elapsed() < Duration::from_secs(20), "the argument never arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(s);
    let start = Instant::now();
    while ours.rss_kb() > 64 * 1024 {
        assert!(start.elapsed() < Duration::from_secs(10), "RSS stays at {} kB", ours.rss_kb());
        std::thread::sleep(Duration::from_millis(20));
    }
}
