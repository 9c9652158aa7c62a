//! MIGRATE's connections to target servers, kept for 10 idle seconds (Redis's migrate
//! socket cache); the command is cmd/migrate.rs.

use std::collections::HashMap;
use std::io::BufReader;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Connections to targets, by `host:port`.
#[derive(Default)]
pub struct MigrateSockets {
    open: HashMap<String, MigrateTarget>,
}

/// One target's connection.
pub struct MigrateTarget {
    pub(crate) conn: BufReader<TcpStream>,
    /// The database selected on the target (None: unknown, SELECT is sent).
    pub(crate) db: Option<i64>,
    last_use: Instant,
}

/// Redis keeps at most 64, and closes one idle for more than 10 seconds.
const MAX_CACHED: usize = 64;
const IDLE_CLOSE: Duration = Duration::from_secs(10);

impl MigrateSockets {
    /// How many are open (INFO migrate_cached_sockets).
    pub(crate) fn count(&self) -> usize {
        self.open.len()
    }

    /// The timer: close the connections idle too long.
    pub fn close_idle(&mut self) {
        self.open.retain(|_, c| c.last_use.elapsed() <= IDLE_CLOSE);
    }

    /// The connection to `host:port`, made when there is none. Err(true): the connection
    /// was refused, which Redis only learns when it writes (its connect waits for the
    /// socket to be writable); Err(false): no connection within the timeout.
    pub(crate) fn get(&mut self, host: &str, port: &str, timeout: Duration) -> Result<&mut MigrateTarget, bool> {
        let name = format!("{host}:{port}");
        if !self.open.contains_key(&name) {
            if self.open.len() >= MAX_CACHED {
                let victim = self.open.keys().next().cloned();
                if let Some(v) = victim {
                    self.open.remove(&v);
                }
            }
            let sock = connect(host, port, timeout)?;
            self.open
                .insert(name.clone(), MigrateTarget { conn: BufReader::new(sock), db: None, last_use: Instant::now() });
        }
        let c = self.open.get_mut(&name).ok_or(false)?;
        c.last_use = Instant::now();
        Ok(c)
    }

    /// The open connection to `host:port`, if any.
    pub(crate) fn get_cached(&mut self, host: &str, port: &str) -> Option<&mut MigrateTarget> {
        self.open.get_mut(&format!("{host}:{port}"))
    }

    pub(crate) fn close(&mut self, host: &str, port: &str) {
        self.open.remove(&format!("{host}:{port}"));
    }
}

fn connect(host: &str, port: &str, timeout: Duration) -> Result<TcpStream, bool> {
    let port: u16 = port.parse().map_err(|_| false)?;
    let addr = (host, port).to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or(false)?;
    let sock =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)?;
    let _ = sock.set_nodelay(true);
    Ok(sock)
}
