//! A full resync served in the background, as Redis's BGSAVE for replication: replicas
//! asking for one wait (Redis's wait_bgsave state, a newline a second keeping their
//! link alive) until a sync starts; the loop then copies the keyspace a slice at a time
//! (the snapshot walker, as BGSAVE), a thread encodes the RDB and hands it over in
//! chunks, and the loop passes each chunk on as the replicas' sockets take it.
//!
//! With `repl-diskless-sync yes` and replicas that said `REPLCONF capa eof`, the sync
//! waits `repl-diskless-sync-delay` seconds (or for `repl-diskless-sync-max-replicas`)
//! so that replicas arriving together share it, and the RDB goes out as it is made,
//! between `$EOF:<mark>` and the mark. Otherwise (Redis writes the file to disk first)
//! it starts at once and the RDB is sent as one `$len` bulk when whole. The stream that
//! follows the snapshot waits in the replication buffer until a replica's RDB is sent.

use std::io::{self, Read, Write};
use std::sync::mpsc::{sync_channel, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use super::master::replica_name;
use super::state::{Bulk, Running, Target, Transfer, Waiting};
use crate::log::log;
use crate::server::Server;

/// Bytes the encoder hands over at a time.
const CHUNK: usize = 64 << 10;
/// Chunks made and not yet taken by the loop (bounds the encoder's lead).
const CHUNKS_IN_FLIGHT: usize = 16;
/// A replica's unsent output below which the loop gives it the next chunk.
const SOCKET_ROOM: usize = 1 << 20;

/// The encoder's output, a chunk at a time, to the loop.
struct ChunkWriter {
    tx: SyncSender<Vec<u8>>,
    buf: Vec<u8>,
}

impl ChunkWriter {
    fn send(&mut self) -> io::Result<()> {
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx.send(chunk).map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the replicas went away"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.send()?;
        }
        Ok(())
    }
}

impl Server {
    /// Whether the loop should look again soon: a sync runs and no streamed replica's
    /// socket is full (a full one wakes the loop when it drains).
    pub fn full_sync_wants_turns(&self) -> bool {
        let room = |id: u64| self.clients.get(&id).is_some_and(|c| c.pending_out() < SOCKET_ROOM);
        if self.replicas.syncs.bulks.iter().any(|b| room(b.id)) {
            return true;
        }
        let Some(run) = &self.replicas.syncs.running else { return false };
        run.disk || run.targets.iter().all(|t| room(t.id))
    }

    fn diskless_sync(&self) -> bool {
        self.cfg.get("repl-diskless-sync").as_deref() != Some("no")
    }

    fn config_number(&self, name: &str) -> u64 {
        self.cfg.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// A replica asked for a full resync: it waits for the next sync.
    pub(super) fn queue_full_sync(&mut self, id: u64, eof: bool, psync: bool) {
        let diskless = eof && self.diskless_sync();
        if diskless && self.config_number("repl-diskless-sync-delay") > 0 {
            log("Delay next BGSAVE for diskless SYNC");
        }
        // Started by the loop: the asking client is not among the clients while its
        // command runs.
        self.replicas.syncs.wait(id, diskless, psync);
    }

    /// Every loop turn: start a sync that is due, pass a running one's chunks on, and
    /// finish it when whole.
    pub fn pump_full_sync(&mut self) {
        self.pump_bulks();
        let Some(mut run) = self.replicas.syncs.running.take() else {
            self.start_full_sync_when_due();
            return;
        };
        run.targets.retain(|t| self.clients.contains_key(&t.id));
        // With save points a disk target's save is worth finishing for itself, as Redis
        // keeps its child then.
        let worth_finishing = run.disk && !self.cfg.engine.save.is_empty();
        if run.targets.is_empty() && !worth_finishing {
            log(if run.disk {
                "Background saving terminated by signal 10"
            } else {
                "Diskless rdb transfer, last replica dropped, killing fork child."
            });
            self.abort_full_sync_walker();
            return;
        }
        for t in &mut run.targets {
            let pending = self.clients.get(&t.id).map_or(0, |c| c.pending_out());
            if pending < t.pending || pending == 0 {
                t.progress_at = Instant::now();
            }
            t.pending = pending;
        }
        while !run.drained {
            // A streamed RDB goes at the pace of the slowest replica, as Redis's pipe.
            if !run.disk && run.targets.iter().any(|t| t.pending >= SOCKET_ROOM) {
                break;
            }
            match run.chunks.try_recv() {
                Ok(chunk) => {
                    for t in &mut run.targets {
                        t.pending += chunk.len();
                        self.queue_to_replica(t.id, &chunk);
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => run.drained = true,
            }
        }
        if !run.drained || !run.encoder.is_finished() {
            self.replicas.syncs.running = Some(run);
            return;
        }
        let outcome = run.encoder.join().unwrap_or_else(|_| Err(io::Error::other("the encoder thread panicked")));
        match outcome {
            Ok(()) if run.disk => {
                self.background_save_done(run.dirty_at_start);
                for t in &run.targets {
                    self.send_dump_file(t.id);
                }
            }
            Ok(()) => {
                log(&format!(
                    "Diskless rdb transfer, done reading from pipe, {} replicas still up.",
                    run.targets.len()
                ));
                self.full_sync_sent(&run.targets, &run.mark);
            }
            Err(e) => {
                if run.disk {
                    self.background_save_failed(&e);
                } else {
                    log(&format!("Background transfer error: {e}"));
                }
                for t in &run.targets {
                    self.close_replica_asap(t.id);
                }
            }
        }
    }

    /// Send replica `id` the dump file just saved: `$len`, then the file as its socket
    /// takes it (pump_bulks).
    fn send_dump_file(&mut self, id: u64) {
        let path = self.engine.config().dir.join(&self.engine.config().dbfilename);
        let opened = std::fs::File::open(&path).and_then(|f| f.metadata().map(|m| (f, m.len())));
        let (file, len) = match opened {
            Ok(f) => f,
            Err(e) => {
                log(&format!("SYNC failed. Can't open/stat DB after BGSAVE: {e}"));
                self.close_replica_asap(id);
                return;
            }
        };
        self.queue_to_replica(id, format!("${len}\r\n").as_bytes());
        if let Some(r) = self.replicas.attached.iter_mut().find(|r| r.id == id) {
            r.transfer = Transfer::Bulk;
        }
        self.replicas.syncs.bulks.push(Bulk { id, file, left: len });
    }

    /// The dump file to each replica being sent it, a piece at a time while its socket
    /// has room; once all of it is queued the stream follows.
    fn pump_bulks(&mut self) {
        let mut i = 0;
        while i < self.replicas.syncs.bulks.len() {
            let b = &mut self.replicas.syncs.bulks[i];
            let Some(c) = self.clients.get_mut(&b.id) else {
                self.replicas.syncs.bulks.swap_remove(i);
                continue;
            };
            if b.left > 0 && c.pending_out() < SOCKET_ROOM {
                let want = b.left.min((4 * CHUNK) as u64);
                let start = c.out.len();
                let read = Read::by_ref(&mut b.file).take(want).read_to_end(&mut c.out);
                match read {
                    Ok(n) if n > 0 => b.left -= n as u64,
                    _ => {
                        c.out.truncate(start);
                        log("SYNC failed. Can't read the DB file to send it to the replica");
                        let id = b.id;
                        self.replicas.syncs.bulks.swap_remove(i);
                        self.close_replica_asap(id);
                        continue;
                    }
                }
                c.defer_write(&mut self.deferred_writes);
            }
            if b.left > 0 {
                i += 1;
                continue;
            }
            let id = b.id;
            self.replicas.syncs.bulks.swap_remove(i);
            let name = self.clients.get(&id).map(|c| replica_name(c)).unwrap_or_default();
            if let Some(r) = self.replicas.attached.iter_mut().find(|r| r.id == id) {
                // The stream held in the replication buffer follows the file.
                r.rdb_sent(false);
            }
            log(&format!("Synchronization with replica {name} succeeded"));
        }
    }

    /// The streamed RDB was made whole: end it for each replica; the stream held in the
    /// replication buffer follows after the replica's first ACK.
    fn full_sync_sent(&mut self, targets: &[Target], mark: &str) {
        log("Background RDB transfer terminated with success");
        for &Target { id, .. } in targets {
            let Some(c) = self.clients.get(&id) else { continue };
            let name = replica_name(c);
            self.queue_to_replica(id, mark.as_bytes());
            log(&format!(
                "Streamed RDB transfer with replica {name} succeeded (socket). Waiting for REPLCONF ACK from replica to enable streaming"
            ));
            if let Some(r) = self.replicas.attached.iter_mut().find(|r| r.id == id) {
                r.rdb_sent(true);
            }
            log(&format!("Synchronization with replica {name} succeeded"));
        }
    }

    pub(super) fn queue_to_replica(&mut self, id: u64, bytes: &[u8]) {
        let Some(c) = self.clients.get_mut(&id) else { return };
        c.out.extend_from_slice(bytes);
        c.defer_write(&mut self.deferred_writes);
    }

    pub(super) fn close_replica_asap(&mut self, id: u64) {
        if let Some(c) = self.clients.get_mut(&id) {
            c.close_asap = true;
            self.pending.push_back(id);
        }
    }

    /// From the cron: keep waiting replicas' links alive and start a sync when due.
    pub fn full_sync_cron(&mut self) {
        let syncs = &mut self.replicas.syncs;
        if syncs.waiting.is_empty() && syncs.running.is_none() {
            return;
        }
        if syncs.last_newline.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            syncs.last_newline = Some(Instant::now());
            // Redis's keepalive for replicas waiting for the RDB to start, or (disk
            // target) to be whole; a streamed RDB cannot take one.
            let mut ids: Vec<u64> = syncs.waiting.iter().map(|w| w.id).collect();
            if let Some(r) = syncs.running.as_ref().filter(|r| r.disk) {
                ids.extend(r.targets.iter().map(|t| t.id));
            }
            for id in ids {
                self.queue_to_replica(id, b"\n");
            }
        }
        self.drop_stalled_sync_replicas();
        self.start_full_sync_when_due();
    }

    /// A replica that took none of its RDB for repl-timeout seconds is dropped, so the
    /// others' transfer goes on.
    fn drop_stalled_sync_replicas(&mut self) {
        let timeout = Duration::from_secs(self.config_number("repl-timeout").max(1));
        let Some(run) = &self.replicas.syncs.running else { return };
        let stalled: Vec<u64> =
            run.targets.iter().filter(|t| t.pending > 0 && t.progress_at.elapsed() > timeout).map(|t| t.id).collect();
        for id in stalled {
            if let Some(c) = self.clients.get(&id) {
                log(&format!("Disconnecting timedout replica (full sync): {}", replica_name(c)));
            }
            self.close_replica_asap(id);
            self.replicas.syncs.forget(id);
        }
    }

    fn start_full_sync_when_due(&mut self) {
        let waiting = &self.replicas.syncs.waiting;
        if waiting.is_empty() || self.replicas.syncs.is_running() || self.jobs.running() || self.jobs.snapshot.is_some()
        {
            return;
        }
        // A replica that takes the RDB only whole starts a sync at once (Redis's disk
        // target); diskless ones wait for company.
        let any_disk = waiting.iter().any(|w| !w.eof);
        let delay = Duration::from_secs(self.config_number("repl-diskless-sync-delay"));
        let max = self.config_number("repl-diskless-sync-max-replicas") as usize;
        let waited = waiting.first().is_some_and(|w| w.since.elapsed() >= delay);
        if any_disk || waited || (max > 0 && waiting.len() >= max) {
            self.start_full_sync();
        }
    }

    /// Start the sync for every waiting replica: `+FULLRESYNC`, then the RDB as it is made.
    fn start_full_sync(&mut self) {
        let waiting = std::mem::take(&mut self.replicas.syncs.waiting);
        let waiting: Vec<Waiting> = waiting.into_iter().filter(|w| self.clients.contains_key(&w.id)).collect();
        if waiting.is_empty() {
            return;
        }
        // Everything propagated so far is in the snapshot; what follows is held.
        self.feed_replicas();
        let Some(aux) = self.repl_aux() else {
            for w in &waiting {
                self.close_replica_asap(w.id);
            }
            return;
        };
        let cfg = ferrokv::persist::snapshot::config_for(self.engine.config(), self.engine.keyspace());
        let now = self.engine.now_ms();
        let (walker, rx) = match self.engine.keyspace_mut().begin_snapshot() {
            Ok(started) => started,
            Err(e) => {
                log(&format!("Can't start the snapshot for the replicas: {e}"));
                self.replicas.syncs.waiting = waiting;
                return;
            }
        };
        self.snapshot_started(walker);
        let mark = super::new_replid();
        let diskless = waiting.iter().all(|w| w.eof);
        log(&format!("Starting BGSAVE for SYNC with target: {}", if diskless { "replicas sockets" } else { "disk" }));
        // Redis names its fork child here; the work runs on this process's threads.
        let pid = std::process::id();
        if diskless {
            log(&format!("Background RDB transfer started by pid {pid}"));
        } else {
            log(&format!("Background saving started by pid {pid}"));
        }
        let replid = self.replicas.history.replid().to_string();
        for w in &waiting {
            if w.psync {
                self.queue_to_replica(w.id, format!("+FULLRESYNC {replid} {}\r\n", aux.offset).as_bytes());
            }
            if diskless {
                self.queue_to_replica(w.id, format!("$EOF:{mark}\r\n").as_bytes());
            }
            if let Some(r) = self.replicas.attached.iter_mut().find(|r| r.id == w.id) {
                r.transfer = Transfer::Sending;
                r.next = aux.offset + 1;
            }
        }
        let (tx, chunks) = sync_channel(CHUNKS_IN_FLIGHT);
        let encoder = std::thread::spawn(move || {
            use ferrokv::persist::snapshot::{write_atomically, write_replication_rdb, Source};
            let src = Source::Stream { rx, key_delay_us: cfg.rdb_key_save_delay };
            if !diskless {
                // Redis's disk target: a save of the dump file, sent from it when done. Its
                // own temp name: an aborted one may still be ending when a BGSAVE starts.
                drop(tx);
                let path = cfg.dir.join(&cfg.dbfilename);
                let tmp = cfg.dir.join(format!("temp-replicas-{}.rdb", std::process::id()));
                return write_atomically(&tmp, &path, |w| write_replication_rdb(w, src, &cfg, now, &aux))
                    .map_err(|e| io::Error::other(e.to_string()));
            }
            let out = ChunkWriter { tx, buf: Vec::with_capacity(CHUNK) };
            let mut out = write_replication_rdb(out, src, &cfg, now, &aux)?;
            out.flush()
        });
        self.replicas.syncs.running = Some(Running {
            chunks,
            encoder,
            targets: waiting.iter().map(|w| Target { id: w.id, pending: 0, progress_at: Instant::now() }).collect(),
            mark,
            disk: !diskless,
            dirty_at_start: self.engine.stats().dirty,
            drained: false,
        });
    }

    /// Drop the running sync (its replicas are gone, or the keyspace is about to be
    /// replaced): the walker stops copying and the encoder ends on its closed channels.
    /// False when none was running.
    pub fn abort_full_sync(&mut self) -> bool {
        let Some(run) = self.replicas.syncs.running.take() else { return false };
        for t in &run.targets {
            self.close_replica_asap(t.id);
        }
        self.abort_full_sync_walker();
        true
    }

    fn abort_full_sync_walker(&mut self) {
        if let Some(mut walker) = self.jobs.snapshot.take() {
            walker.abort(self.engine.keyspace_mut());
        }
    }
}
