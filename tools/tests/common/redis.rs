//! Start and drive a real redis-server (Debian's 7.0) for tests.
#![allow(dead_code)]

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub port: u16,
    _dir: TempDir,
}

pub struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli is installed (make deps)");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An empty server on a free loopback port.
pub fn start_server() -> Server {
    spawn(None)
}

/// A server that loads `rdb` at boot (copied into its fresh directory).
pub fn start_server_with(rdb: &Path) -> Server {
    spawn(Some(rdb))
}

fn spawn(rdb: Option<&Path>) -> Server {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("ferrokv-test-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    if let Some(rdb) = rdb {
        std::fs::copy(rdb, dir.join("dump.rdb")).expect("copy rdb");
    }
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--enable-debug-command", "yes", "--dbfilename", "dump.rdb", "--dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server is installed (make deps)");
    let start = Instant::now();
    while cli(port, &["PING"]) != "PONG" {
        assert!(start.elapsed() < Duration::from_secs(20), "redis-server did not start (loading {rdb:?})");
        std::thread::sleep(Duration::from_millis(50));
    }
    Server { child, port, _dir: TempDir(dir) }
}

pub fn pipe_into(port: u16, resp: &[u8]) {
    let mut child = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child.stdin.take().expect("stdin").write_all(resp).expect("write");
    let out = child.wait_with_output().expect("redis-cli --pipe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("errors: 0"), "redis-cli --pipe reported errors: {text}");
}

/// Send raw RESP to a server and read its replies (redis-cli --pipe), asserting no errors.
pub fn send_resp(port: u16, resp: &[u8]) {
    pipe_into(port, resp)
}
