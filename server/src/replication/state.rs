//! Who replicates from whom: the attached replicas with their acknowledged offsets, and
//! this server's link to its master.

use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::time::Instant;

/// The clients attached as replicas, and what each acknowledged.
#[derive(Debug, Default)]
pub struct Replicas {
    pub(super) attached: Vec<Attached>,
    /// When the stream last carried a PING (every repl-ping-replica-period seconds).
    pub(super) last_ping: Option<Instant>,
    /// A WAIT asked for acknowledgements: the next round sends REPLCONF GETACK.
    pub(super) want_acks: bool,
}

#[derive(Debug)]
pub(super) struct Attached {
    pub(super) id: u64,
    pub(super) addr: String,
    pub(super) port: u16,
    pub(super) ack: u64,
    /// The offset its AOF fsynced (REPLCONF ACK ... FACK, Redis 7.2+).
    pub(super) fack: u64,
}

impl Replicas {
    pub fn len(&self) -> usize {
        self.attached.len()
    }

    pub fn is_empty(&self) -> bool {
        self.attached.is_empty()
    }

    /// Replicas that acknowledged the stream up to `offset`.
    pub fn acked(&self, offset: u64) -> usize {
        self.attached.iter().filter(|r| r.ack >= offset).count()
    }

    /// Replicas whose AOF fsynced the stream up to `offset`.
    pub fn fsynced(&self, offset: u64) -> usize {
        self.attached.iter().filter(|r| r.fack >= offset).count()
    }

    /// INFO replication's `slaveN:` lines.
    pub fn info_lines(&self) -> Vec<(String, String)> {
        self.attached
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (format!("slave{i}"), format!("ip={},port={},state=online,offset={},lag=0", r.addr, r.port, r.ack))
            })
            .collect()
    }
}

/// This server's master, when it is a replica.
#[derive(Debug)]
pub struct MasterLink {
    pub host: String,
    pub port: u16,
    pub(super) state: LinkState,
    /// The stream offset processed (Redis's slave_repl_offset and master_repl_offset).
    pub offset: u64,
    pub replid: String,
    pub(super) last_io: Instant,
    pub(super) last_ack: Instant,
}

#[derive(Debug)]
pub(super) enum LinkState {
    /// To connect at the next cron (after `retry_at`).
    Connect { retry_at: Instant },
    /// The handshake and the snapshot download run on a thread.
    Sync(Receiver<Result<Synced, String>>),
    /// Streaming: the master's connection is client `id`.
    Up { id: u64 },
}

/// What the handshake thread hands over: the connection after the snapshot, the bytes
/// of the stream already read, and where the snapshot was written.
#[derive(Debug)]
pub(super) struct Synced {
    pub(super) sock: std::net::TcpStream,
    /// The TLS session over `sock` (tls-replication), handshake done.
    pub(super) tls: Option<Box<rustls::ClientConnection>>,
    pub(super) rest: Vec<u8>,
    pub(super) replid: String,
    pub(super) offset: u64,
    pub(super) rdb: PathBuf,
}

impl MasterLink {
    pub fn is_up(&self) -> bool {
        matches!(self.state, LinkState::Up { .. })
    }

    pub fn is_syncing(&self) -> bool {
        matches!(self.state, LinkState::Sync(_))
    }

    pub fn last_io_secs(&self) -> u64 {
        self.last_io.elapsed().as_secs()
    }
}
