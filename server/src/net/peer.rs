//! Where a connection comes from or arrives at: a TCP address, or the path of the unix
//! socket (`unixsocket`), which Redis writes `path:0`.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    Unix(Arc<str>),
}

impl Peer {
    /// From this machine: the loopback interface or the unix socket (protected mode and
    /// the `local` setting of enable-debug-command and the like let these in).
    pub fn is_local(&self) -> bool {
        match self {
            Peer::Tcp(a) => a.ip().is_loopback(),
            Peer::Unix(_) => true,
        }
    }

    /// The address without the port: the IP, or the socket's path.
    pub fn host(&self) -> String {
        match self {
            Peer::Tcp(a) => a.ip().to_string(),
            Peer::Unix(path) => path.to_string(),
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Tcp(a) => write!(f, "{a}"),
            Peer::Unix(path) => write!(f, "{path}:0"),
        }
    }
}
