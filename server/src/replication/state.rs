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
    /// The replication IDs and the backlog partial resyncs are served from.
    pub history: super::backlog::History,
    /// The stream offset while a master keeps no backlog (nothing is counted then).
    pub(super) resting_offset: u64,
    /// A coordinated FAILOVER under way.
    pub failover: Option<Failover>,
}

/// FAILOVER: writes are paused until the target (or any replica) has acknowledged the
/// whole stream; then this server becomes its replica and asks it to take over.
#[derive(Debug)]
pub struct Failover {
    /// The replica named with TO, or the first one found caught up.
    pub target: Option<(String, u16)>,
    /// TIMEOUT: when waiting ends (in a handover with FORCE, in an abort without).
    pub deadline: Option<Instant>,
    pub force: bool,
    /// The handover started: we follow the target and sent it PSYNC ... FAILOVER.
    pub in_progress: bool,
}

impl Failover {
    /// INFO replication's master_failover_state.
    pub fn state_name(f: Option<&Failover>) -> &'static str {
        match f {
            None => "no-failover",
            Some(f) if f.in_progress => "failover-in-progress",
            Some(_) => "waiting-for-sync",
        }
    }
}

#[derive(Debug)]
pub(super) struct Attached {
    pub(super) id: u64,
    pub(super) addr: String,
    pub(super) port: u16,
    pub(super) ack: u64,
    /// The offset its AOF fsynced (REPLCONF ACK ... FACK, Redis 7.2+).
    pub(super) fack: u64,
    /// When it last acknowledged (or attached).
    pub(super) ack_at: Instant,
}

impl Replicas {
    pub fn len(&self) -> usize {
        self.attached.len()
    }

    /// The acknowledged offset of the replica listening at `host:port`.
    pub fn ack_of(&self, host: &str, port: u16) -> Option<u64> {
        self.attached.iter().find(|r| r.addr == host && r.port == port).map(|r| r.ack)
    }

    /// The first replica that acknowledged the stream up to `offset`.
    pub fn caught_up(&self, offset: u64) -> Option<(String, u16)> {
        self.attached.iter().find(|r| r.ack == offset).map(|r| (r.addr.clone(), r.port))
    }

    pub fn is_empty(&self) -> bool {
        self.attached.is_empty()
    }

    /// Replicas that acknowledged the stream up to `offset`.
    pub fn acked(&self, offset: u64) -> usize {
        self.attached.iter().filter(|r| r.ack >= offset).count()
    }

    /// Replicas that acknowledged within the last `lag` seconds (min-replicas-max-lag).
    pub fn good(&self, lag: u64) -> usize {
        self.attached.iter().filter(|r| r.ack_at.elapsed().as_secs() <= lag).count()
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
                let lag = r.ack_at.elapsed().as_secs();
                (format!("slave{i}"), format!("ip={},port={},state=online,offset={},lag={lag}", r.addr, r.port, r.ack))
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
    /// Whether the data follows the stream up to `offset` (a finished sync, or a master
    /// turned replica): the next handshake asks to continue from there (PSYNC replid
    /// offset+1) before it asks for a full resync.
    pub(super) can_continue: bool,
    /// The database the master's stream last selected (kept across a dropped link, as
    /// the stream goes on without a new SELECT after a partial resync).
    pub(super) db: usize,
    /// Bytes of the stream read and run but not yet applied: inside a MULTI, whose
    /// commands count only once its EXEC ran.
    pub(super) unapplied: Vec<u8>,
    /// Keys a writable replica's own clients gave a TTL: the master never sends their
    /// DEL, so this server expires them (Redis's slaveKeysWithExpire).
    pub(super) local_ttls: std::collections::HashSet<(usize, Vec<u8>)>,
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

/// What the handshake thread hands over: the connection, the bytes of the stream
/// already read, and what the master answered.
#[derive(Debug)]
pub(super) struct Synced {
    pub(super) sock: std::net::TcpStream,
    /// The TLS session over `sock` (tls-replication), handshake done.
    pub(super) tls: Option<Box<rustls::ClientConnection>>,
    pub(super) rest: Vec<u8>,
    pub(super) how: SyncKind,
}

#[derive(Debug)]
pub(super) enum SyncKind {
    /// +FULLRESYNC replid offset: the snapshot is in `rdb`; the stream it follows had
    /// `stream_db` selected (its `repl-stream-db` field).
    Full { replid: String, offset: u64, rdb: PathBuf, stream_db: usize },
    /// +CONTINUE [replid]: the stream goes on from our offset, under `replid` when the
    /// master names one.
    Continue { replid: Option<String> },
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
