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
