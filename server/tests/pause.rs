//! CLIENT PAUSE / UNPAUSE next to a real redis-server 7.0 (#15): under WRITE a write waits
//! (its client counted in blocked_clients, flag `b`) while reads answer; keys do not expire
//! during the pause but reads see them gone; UNPAUSE runs what waited, in order.

mod support;
use support::Ours;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ferrokv_testkit::{cli, encode_command, TempDir};

fn send(s: &mut TcpStream, args: &[&str]) {
    let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    s.write_all(&encode_command(&argv)).unwrap();
}

/// What arrives within `wait` (empty when nothing does).
fn arrived(s: &mut TcpStream, wait: Duration) -> String {
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < wait {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn info(port: u16, field: &str) -> String {
    cli(port, &["INFO", "everything"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// The session on one server: what each step showed.
fn session(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    cli(port, &["FLUSHALL"]);
    cli(port, &["SET", "soon", "v", "PX", "50"]);
    out.push(cli(port, &["CLIENT", "PAUSE", "60000", "WRITE"]));
    let mut w = TcpStream::connect(("127.0.0.1", port)).unwrap();
    send(&mut w, &["SET", "k", "1"]);
    send(&mut w, &["INCR", "k"]);
    out.push(arrived(&mut w, Duration::from_millis(300)));
    out.push(info(port, "blocked_clients"));
    let list = cli(port, &["CLIENT", "LIST"]);
    out.push(list.lines().filter(|l| l.contains("cmd=set")).map(|l| l.contains(" flags=b ").to_string()).collect());
    out.push(cli(port, &["GET", "k"]));
    // The key's time is up: reads see it gone, nothing deletes it.
    std::thread::sleep(Duration::from_millis(200));
    out.push(cli(port, &["GET", "soon"]));
    out.push(info(port, "expired_keys"));
    out.push(cli(port, &["DBSIZE"]));
    out.push(cli(port, &["CLIENT", "PAUSE", "x"]));
    out.push(cli(port, &["CLIENT", "PAUSE", "10", "SOME"]));
    out.push(cli(port, &["CLIENT", "PAUSE", "-1"]));
    out.push(cli(port, &["CLIENT", "UNPAUSE"]));
    out.push(arrived(&mut w, Duration::from_millis(300)));
    out.push(cli(port, &["GET", "soon"]));
    out.push(info(port, "expired_keys"));
    out.push(info(port, "blocked_clients"));
    // ALL holds reads too; its time running out ends it.
    out.push(cli(port, &["CLIENT", "PAUSE", "300", "ALL"]));
    let mut r = TcpStream::connect(("127.0.0.1", port)).unwrap();
    send(&mut r, &["GET", "k"]);
    out.push(arrived(&mut r, Duration::from_millis(100)));
    out.push(arrived(&mut r, Duration::from_millis(600)));
    out
}

#[test]
fn pause_as_redis() {
    let redis = ferrokv_testkit::Server::start();
    let dir = TempDir::new("pause");
    let ours = Ours::start(dir.path(), &[]);
    let want = session(redis.port);
    let got = session(ours.port);
    assert_eq!(got, want, "ours, then Redis 7.0");
}
