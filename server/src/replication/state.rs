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
    /// Full resyncs: the replicas waiting for one, and the one running.
    pub syncs: FullSyncs,
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
    pub(super) transfer: Transfer,
    /// The first offset of the stream not yet handed to it (to its output, or, while
    /// its RDB is sent, held for it in the replication buffer); not used while Waiting.
    pub(super) next: u64,
}

/// Where a replica's full resync stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transfer {
    /// Waiting for the next sync to start: the stream is not sent (the snapshot will
    /// hold it).
    Waiting,
    /// Its RDB is being sent: the stream since the snapshot waits in the replication
    /// buffer.
    Sending,
    /// Its RDB, saved to the dump file (Redis's disk target), is being sent from the file.
    Bulk,
    /// Its streamed RDB was sent: the stream waits for its first REPLCONF ACK, which
    /// says it loaded it (Redis's replica finds the end mark only at the end of a read,
    /// so nothing may follow the mark until then).
    AwaitingAck,
    /// Fed the stream.
    Online,
}

impl Attached {
    pub(super) fn online(&self) -> bool {
        matches!(self.transfer, Transfer::Online | Transfer::AwaitingAck)
    }

    /// Whether the replication buffer keeps stream bytes for it.
    pub(super) fn owed_stream(&self) -> bool {
        self.transfer != Transfer::Waiting
    }

    /// Its RDB was sent (`streamed`: with an end mark): the stream may follow now,
    /// unless it must wait for the replica's first ACK.
    pub(super) fn rdb_sent(&mut self, streamed: bool) {
        self.transfer = match self.transfer {
            Transfer::Sending if streamed => Transfer::AwaitingAck,
            Transfer::Sending | Transfer::Bulk | Transfer::AwaitingAck => Transfer::Online,
            t => t,
        };
    }
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
        self.attached.iter().find(|r| r.online() && r.ack == offset).map(|r| (r.addr.clone(), r.port))
    }

    pub fn is_empty(&self) -> bool {
        self.attached.is_empty()
    }

    /// Replicas that acknowledged the stream up to `offset`.
    pub fn acked(&self, offset: u64) -> usize {
        self.attached.iter().filter(|r| r.ack >= offset).count()
    }

    /// Online replicas that acknowledged within the last `lag` seconds
    /// (min-replicas-max-lag).
    pub fn good(&self, lag: u64) -> usize {
        self.attached.iter().filter(|r| r.online() && r.ack_at.elapsed().as_secs() <= lag).count()
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
                let state = r.state_name();
                (format!("slave{i}"), format!("ip={},port={},state={state},offset={},lag={lag}", r.addr, r.port, r.ack))
            })
            .collect()
    }

    pub fn count(&self) -> usize {
        self.attached.len()
    }

    /// Replicas that have not acknowledged the stream up to `offset` (a shutdown waits
    /// for them).
    pub fn lagging(&self, offset: u64) -> Vec<Lagging> {
        self.attached
            .iter()
            .filter(|r| r.ack != offset)
            .map(|r| Lagging {
                name: format!("{}:{}", r.addr, r.port),
                behind: offset.wrapping_sub(r.ack) as i64,
                lag: if r.online() { r.ack_at.elapsed().as_secs() } else { 0 },
                state: r.state_name(),
            })
            .collect()
    }

    /// Ask the replicas for their offsets at the next round (REPLCONF GETACK).
    pub fn request_acks(&mut self) {
        self.want_acks = true;
    }
}

/// A replica behind the master's offset, as Redis's shutdown logs it.
#[derive(Debug)]
pub struct Lagging {
    pub name: String,
    pub behind: i64,
    /// Seconds since its last acknowledgement (online replicas; 0 otherwise).
    pub lag: u64,
    pub state: &'static str,
}

impl Attached {
    /// Its state as INFO and the logs name it: Redis's replicas show wait_bgsave until
    /// their RDB is made (streamed ones until it is sent).
    fn state_name(&self) -> &'static str {
        match self.transfer {
            Transfer::Waiting | Transfer::Sending => "wait_bgsave",
            Transfer::Bulk => "send_bulk",
            Transfer::Online | Transfer::AwaitingAck => "online",
        }
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
    /// The handshake and the snapshot download run on a thread, which says how far it
    /// got in the [`SyncPhase`].
    Sync(Receiver<Result<Synced, String>>, SyncPhase),
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
    /// +FULLRESYNC replid offset: the snapshot loaded into `dataset`, from the file `rdb`
    /// it was downloaded to (None: loaded from the socket); the stream it follows had
    /// `stream_db` selected (its `repl-stream-db` field).
    Full {
        replid: String,
        offset: u64,
        dataset: Box<ferrokv::keyspace::Keyspace>,
        rdb: Option<PathBuf>,
        stream_db: usize,
    },
    /// +CONTINUE [replid]: the stream goes on from our offset, under `replid` when the
    /// master names one.
    Continue { replid: Option<String> },
}

/// How far the handshake thread got: connecting, then the handshake (until the master
/// answers PSYNC), then receiving the snapshot. ROLE and INFO read it.
/// It also holds a handle on the thread's connection while the thread works on it, so
/// that a replica told to stop following that master closes it at once (Redis's
/// cancelReplicationHandshake) instead of leaving the master sending to a thread nobody
/// will hear.
#[derive(Debug, Clone, Default)]
pub(super) struct SyncPhase(
    std::sync::Arc<std::sync::atomic::AtomicU8>,
    std::sync::Arc<std::sync::Mutex<Option<std::net::TcpStream>>>,
    /// When the thread last read from the master (unix ms), and whether the timer gave the
    /// link up for silence (Redis's repl_transfer_lastio against repl-timeout).
    std::sync::Arc<(std::sync::atomic::AtomicI64, std::sync::atomic::AtomicBool)>,
);

impl SyncPhase {
    pub(super) const CONNECTING: u8 = 0;
    pub(super) const HANDSHAKE: u8 = 1;
    /// Receiving the snapshot into a file (repl-diskless-load disabled): the data is
    /// served meanwhile (replica-serve-stale-data).
    pub(super) const TRANSFER: u8 = 2;
    /// Loading it from the socket as it comes, with repl-diskless-load swapdb (or
    /// on-empty-db over no keys): clients get -LOADING until it is in.
    pub(super) const TRANSFER_LOADING: u8 = 3;
    /// The same from the master whose history our data follows: async loading, the old
    /// data served until the new replaces it.
    pub(super) const TRANSFER_ASYNC: u8 = 4;
    /// Loading the snapshot downloaded to a file (repl-diskless-load disabled): clients
    /// get -LOADING, as from Redis loading it.
    pub(super) const LOADING_FILE: u8 = 5;
    /// The same, the old data flushed (by the main thread, when it saw LOADING_FILE).
    pub(super) const LOADING_FILE_FLUSHED: u8 = 6;

    pub(super) fn set(&self, phase: u8) {
        self.0.store(phase, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> u8 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The thread's connection, for `cancel`.
    pub(super) fn hold(&self, sock: &std::net::TcpStream) {
        if let (Ok(mut held), Ok(clone)) = (self.1.lock(), sock.try_clone()) {
            *held = Some(clone);
        }
    }

    /// The thread is done with its connection (it hands it over or drops it).
    pub(super) fn release(&self) {
        if let Ok(mut held) = self.1.lock() {
            held.take();
        }
    }

    /// The thread read from the master now.
    pub(super) fn note_io(&self) {
        self.2 .0.store(ferrokv::keyspace::Clock::System.now_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// From the timer: the master said nothing for longer than `timeout` while the thread
    /// waits for the handshake or the snapshot: its connection is closed (the thread then
    /// reports the timeout). True when it was.
    pub(super) fn timed_out_after(&self, timeout: std::time::Duration) -> bool {
        let reading = matches!(
            self.get(),
            Self::CONNECTING | Self::HANDSHAKE | Self::TRANSFER | Self::TRANSFER_LOADING | Self::TRANSFER_ASYNC
        );
        let last = self.2 .0.load(std::sync::atomic::Ordering::Relaxed);
        let silent = ferrokv::keyspace::Clock::System.now_ms().saturating_sub(last);
        if !reading || last == 0 || silent <= timeout.as_millis() as i64 {
            return false;
        }
        self.2 .1.store(true, std::sync::atomic::Ordering::Relaxed);
        self.cancel();
        true
    }

    /// Whether the timer gave the link up ([`SyncPhase::timed_out_after`]).
    pub(super) fn timed_out(&self) -> bool {
        self.2 .1.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Close the thread's connection: its reads and writes fail and it ends.
    pub(super) fn cancel(&self) {
        if let Some(sock) = self.1.lock().ok().and_then(|mut held| held.take()) {
            let _ = sock.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl MasterLink {
    /// This link is given up: a handshake or transfer under way is closed.
    pub(super) fn abandon(&self) {
        if let LinkState::Sync(_, phase) = &self.state {
            phase.cancel();
        }
    }

    pub fn is_up(&self) -> bool {
        matches!(self.state, LinkState::Up { .. })
    }

    fn phase(&self) -> Option<u8> {
        match &self.state {
            LinkState::Sync(_, phase) => Some(phase.get()),
            _ => None,
        }
    }

    /// Receiving the master's snapshot (INFO's master_sync_in_progress).
    pub fn is_syncing(&self) -> bool {
        self.phase().is_some_and(|p| p >= SyncPhase::TRANSFER)
    }

    /// Loading the master's snapshot where clients get -LOADING meanwhile.
    pub fn is_loading(&self) -> bool {
        matches!(
            self.phase(),
            Some(SyncPhase::TRANSFER_LOADING | SyncPhase::LOADING_FILE | SyncPhase::LOADING_FILE_FLUSHED)
        )
    }

    /// Loading it asynchronously (INFO's async_loading): the old data is served.
    pub fn is_async_loading(&self) -> bool {
        self.phase() == Some(SyncPhase::TRANSFER_ASYNC)
    }

    pub fn last_io_secs(&self) -> u64 {
        self.last_io.elapsed().as_secs()
    }
}

/// The full resyncs of a master: who waits for one, and the one running (driven by
/// fullsync.rs).
#[derive(Default)]
pub struct FullSyncs {
    /// Replicas waiting for the next sync, in arrival order.
    pub(super) waiting: Vec<Waiting>,
    pub(super) running: Option<Running>,
    /// Replicas being sent the dump file a disk-target sync saved.
    pub(super) bulks: Vec<Bulk>,
    /// When the waiting replicas last got their keepalive newline.
    pub(super) last_newline: Option<Instant>,
}

impl std::fmt::Debug for FullSyncs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullSyncs").field("waiting", &self.waiting.len()).field("running", &self.is_running()).finish()
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Waiting {
    pub(super) id: u64,
    /// Said `capa eof`: can read an RDB of unknown length.
    pub(super) eof: bool,
    /// Asked with PSYNC: answered `+FULLRESYNC` when the sync starts (SYNC is not).
    pub(super) psync: bool,
    pub(super) since: Instant,
}

/// A replica a running sync serves.
#[derive(Debug, Clone, Copy)]
pub(super) struct Target {
    pub(super) id: u64,
    /// Its unsent output at the last look, and when that last went down: a replica
    /// that takes nothing for repl-timeout seconds is dropped.
    pub(super) pending: usize,
    pub(super) progress_at: Instant,
}

pub(super) struct Running {
    pub(super) chunks: std::sync::mpsc::Receiver<Vec<u8>>,
    pub(super) encoder: std::thread::JoinHandle<std::io::Result<()>>,
    pub(super) targets: Vec<Target>,
    /// `$EOF:` replicas: the mark that ends their RDB.
    pub(super) mark: String,
    /// Redis's disk target: the RDB is saved to the dump file, then sent from it as one
    /// `$len` bulk to each replica (the others get it streamed as it is made).
    pub(super) disk: bool,
    /// INFO's changes since the last save when the snapshot was taken (a disk target's
    /// save counts as one).
    pub(super) dirty_at_start: u64,
    /// Every chunk was taken; the encoder's verdict is next.
    pub(super) drained: bool,
}

/// A replica being sent the dump file: what is left of it.
#[derive(Debug)]
pub(super) struct Bulk {
    pub(super) id: u64,
    pub(super) file: std::fs::File,
    pub(super) left: u64,
}

impl FullSyncs {
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    pub(super) fn wait(&mut self, id: u64, eof: bool, psync: bool) {
        self.waiting.push(Waiting { id, eof, psync, since: Instant::now() });
    }

    /// A replica went away: it is no longer waited for or fed.
    pub(super) fn forget(&mut self, id: u64) {
        self.waiting.retain(|w| w.id != id);
        self.bulks.retain(|b| b.id != id);
        if let Some(r) = &mut self.running {
            r.targets.retain(|t| t.id != id);
        }
    }
}
