//! Start and drive a real redis-server (Debian's 7.0) for tests; see ferrokv-testkit.
#![allow(dead_code, unused_imports)]

use std::path::Path;

pub use ferrokv_testkit::{cli, free_port, pipe_into, Server};

/// An empty server on a free loopback port.
pub fn start_server() -> Server {
    Server::start()
}

/// A server that loads `rdb` at boot (copied into its fresh directory).
pub fn start_server_with(rdb: &Path) -> Server {
    Server::start_with(Some(rdb), &[])
}

/// Send raw RESP to a server (redis-cli --pipe), asserting no errors.
pub fn send_resp(port: u16, resp: &[u8]) {
    pipe_into(port, resp)
}

/// A command as RESP.
pub fn resp(args: &[String]) -> Vec<u8> {
    ferrokv_testkit::encode_command(&args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>())
}

/// Commands as RESP, from string slices.
pub fn resp_all(commands: &[Vec<String>]) -> Vec<u8> {
    commands.iter().flat_map(|c| resp(c)).collect()
}

/// Every key of the server at `port` (of its database 0) with its DEBUG DIGEST-VALUE and
/// whether it has a TTL (1) or not (-1).
pub fn key_states(port: u16) -> std::collections::BTreeMap<String, (String, i64)> {
    key_states_in(port, 0)
}

/// [`key_states`] of database `db`.
pub fn key_states_in(port: u16, db: u64) -> std::collections::BTreeMap<String, (String, i64)> {
    let mut c = ferrokv_testkit::Client::connect(port);
    if db != 0 {
        c.call_str(&["SELECT", &db.to_string()]);
    }
    let keys = ferrokv_testkit::cli(port, &["-n", &db.to_string(), "--scan"]);
    let mut out = std::collections::BTreeMap::new();
    for k in keys.lines().filter(|l| !l.is_empty()) {
        let digest = String::from_utf8_lossy(&c.call_str(&["DEBUG", "DIGEST-VALUE", k])).into_owned();
        let reply = String::from_utf8_lossy(&c.call_str(&["TTL", k])).into_owned();
        let ttl: i64 = reply.trim_start_matches(':').trim().parse().unwrap_or_else(|_| panic!("TTL {k}: {reply:?}"));
        out.insert(k.to_string(), (digest, ttl.min(1)));
    }
    out
}

/// `aoftool capture SOURCE [extra] DIR --duration SECS --json`, its output piped.
pub fn spawn_capture(source: &str, extra: &[String], dir: &Path, secs: u64) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_aoftool"))
        .args(["capture", source])
        .args(extra)
        .arg(dir)
        .args(["--duration", &secs.to_string(), "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("aoftool")
}
