//! Point-in-time snapshots of a live keyspace without stopping it (BGSAVE, BGREWRITEAOF).
//!
//! Redis forks and lets the kernel copy pages on write. Here the owner thread copies keys
//! itself, a few at a time, and a write barrier keeps the copy consistent:
//!
//! - [`Keyspace::begin_snapshot`] marks every key present as *pending* (one bit per slot
//!   position, per database) and returns a [`SnapshotWalker`] and the receiving end of a
//!   bounded channel. Nothing is copied yet: the start costs one bit per key.
//! - [`SnapshotWalker::step`], called between commands, copies up to a time budget of
//!   pending keys (walking each database's slots downwards, as SCAN does) and sends them
//!   in chunks to the writer thread, database by database in index order.
//! - Before any change to a pending key (value, TTL, removal; see `Db::before_write`), the
//!   database copies its old value into the snapshot and clears the bit. A key added
//!   during the snapshot is never pending. Removal moves the last slot into the hole and
//!   its bit with it, so pending keys always sit below the walk's cursor.
//! - FLUSHDB/FLUSHALL hand the pending keys over whole (moved, not copied); SWAPDB moves a
//!   database's snapshot state with it, so keys are still written under their old index.
//!
//! Every key present at the start is thus sent exactly once, with its value at the start.
//! The hot path pays one `Option` test per mutation while no snapshot runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvError, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::barrier::{DbSnapshot, SnapRecord, CHUNK_KEYS};
use super::db::Db;
use super::Keyspace;

/// Chunks the channel holds before the walk waits for the writer (bounds the memory the
/// snapshot holds beyond the barrier's copies).
const CHANNEL_CHUNKS: usize = 64;

/// What the writer receives, in order: per database a `Db` then its `Keys`; `End` last.
/// A channel closed before `End` means the snapshot was abandoned.
#[derive(Debug)]
pub enum SnapChunk {
    /// The function libraries' code, first.
    Functions(Vec<Vec<u8>>),
    /// The next database: its index and its key and TTL counts at the start.
    Db {
        index: usize,
        keys: u64,
        volatile: u64,
    },
    Keys(Vec<SnapRecord>),
    End,
}

/// The writer's end of a snapshot: the chunks, and whether the walk was aborted (a
/// writer sleeping on rdb-key-save-delay looks between keys, as a killed child would stop).
#[derive(Debug)]
pub struct SnapFeed {
    rx: Receiver<SnapChunk>,
    aborted: Arc<AtomicBool>,
}

impl SnapFeed {
    pub fn recv(&self) -> Result<SnapChunk, RecvError> {
        self.rx.recv()
    }

    pub fn try_recv(&self) -> Result<SnapChunk, TryRecvError> {
        self.rx.try_recv()
    }

    /// [`SnapshotWalker::abort`] was called: the writer should stop now.
    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::Relaxed)
    }

    /// What stops this writer from the owner's thread.
    pub fn abort_handle(&self) -> SnapAbort {
        SnapAbort(Arc::clone(&self.aborted))
    }

    /// The flag itself, for a sleep to watch.
    pub fn abort_flag(&self) -> &AtomicBool {
        &self.aborted
    }
}

/// Stops a snapshot's writer from the owner's thread, also after the walk is over (the
/// writer may still be writing what it received).
#[derive(Debug, Clone)]
pub struct SnapAbort(Arc<AtomicBool>);

impl SnapAbort {
    pub fn abort(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// How a [`SnapshotWalker::step`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More to copy: call again soon.
    More,
    /// The writer has not taken the last chunks yet: call again later.
    Blocked,
    /// Everything was sent (or the writer went away): the walker is finished.
    Done,
}

/// Drives a snapshot from the keyspace's owner thread (see the module docs).
#[derive(Debug)]
pub struct SnapshotWalker {
    tx: Option<SyncSender<SnapChunk>>,
    /// Set by [`SnapshotWalker::abort`] (see [`SnapFeed`]).
    aborted: Arc<AtomicBool>,
    /// Origin indexes of the databases to send, ascending.
    order: Vec<usize>,
    at: usize,
    announced: bool,
    /// A chunk the channel had no room for.
    held: Option<SnapChunk>,
    /// Time spent in [`Keyspace::begin_snapshot`] (the fork-equivalent).
    pub start_usec: u64,
    /// Longest single step, and the sum of all steps.
    pub longest_step_usec: u64,
    pub total_usec: u64,
    pub steps: u64,
    /// Keys sent so far, and keys at the start.
    pub copied: u64,
    pub total: u64,
    /// How the last step ended.
    pub last_step: Step,
}

impl Keyspace {
    /// Start a snapshot of every database as it is now. Fails when one is running.
    pub fn begin_snapshot(&mut self) -> Result<(SnapshotWalker, SnapFeed), String> {
        let t = Instant::now();
        if self.dbs.iter().any(|d| d.snap.is_some()) {
            return Err("a snapshot is already in progress".into());
        }
        let mut order = Vec::new();
        for (i, db) in self.dbs.iter_mut().enumerate() {
            if !db.is_empty() {
                db.snap = Some(Box::new(DbSnapshot::new(i, db.len(), db.volatile_len())));
                order.push(i);
            }
        }
        let (tx, rx) = mpsc::sync_channel(CHANNEL_CHUNKS);
        // The channel is empty: the first message always fits.
        let _ = tx.try_send(SnapChunk::Functions(self.functions.codes()));
        let aborted = Arc::new(AtomicBool::new(false));
        let walker = SnapshotWalker {
            tx: Some(tx),
            aborted: Arc::clone(&aborted),
            order,
            at: 0,
            announced: false,
            held: None,
            start_usec: t.elapsed().as_micros() as u64,
            longest_step_usec: 0,
            total_usec: 0,
            steps: 0,
            copied: 0,
            total: self.len() as u64,
            last_step: Step::More,
        };
        Ok((walker, SnapFeed { rx, aborted }))
    }

    /// Copy the whole keyspace into a channel already holding every chunk (for callers
    /// that run the writer on their own thread afterwards).
    pub fn snapshot_now(&self) -> SnapFeed {
        let (tx, rx) = mpsc::channel();
        let _ = tx.send(SnapChunk::Functions(self.functions.codes()));
        for (i, db) in self.dbs.iter().enumerate() {
            if db.is_empty() {
                continue;
            }
            let _ = tx.send(SnapChunk::Db { index: i, keys: db.len() as u64, volatile: db.volatile_len() as u64 });
            let mut chunk = Vec::with_capacity(CHUNK_KEYS);
            for (s, t) in db.iter() {
                chunk.push(SnapRecord::of(s, t));
                if chunk.len() == CHUNK_KEYS {
                    let _ = tx.send(SnapChunk::Keys(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_KEYS))));
                }
            }
            if !chunk.is_empty() {
                let _ = tx.send(SnapChunk::Keys(chunk));
            }
        }
        let _ = tx.send(SnapChunk::End);
        SnapFeed { rx, aborted: Arc::new(AtomicBool::new(false)) }
    }
}

enum Sent {
    Ok,
    Full,
    Gone,
}

impl SnapshotWalker {
    fn send(&mut self, chunk: SnapChunk, block: bool) -> Sent {
        let Some(tx) = &self.tx else { return Sent::Gone };
        if block {
            return match tx.send(chunk) {
                Ok(()) => Sent::Ok,
                Err(_) => Sent::Gone,
            };
        }
        match tx.try_send(chunk) {
            Ok(()) => Sent::Ok,
            Err(TrySendError::Full(c)) => {
                self.held = Some(c);
                Sent::Full
            }
            Err(TrySendError::Disconnected(_)) => Sent::Gone,
        }
    }

    fn db_of(ks: &mut Keyspace, origin: usize) -> Option<&mut Db> {
        ks.dbs.iter_mut().find(|d| d.snap.as_ref().is_some_and(|s| s.origin == origin))
    }

    /// Copy and send for about `budget`; with `block`, wait for the writer instead of
    /// returning [`Step::Blocked`].
    pub fn step(&mut self, ks: &mut Keyspace, budget: Duration, block: bool) -> Step {
        let t = Instant::now();
        let r = self.step_inner(ks, t + budget, block);
        let us = t.elapsed().as_micros() as u64;
        self.steps += 1;
        self.total_usec += us;
        self.longest_step_usec = self.longest_step_usec.max(us);
        self.last_step = r;
        if r == Step::Done {
            self.tx = None;
        }
        r
    }

    fn step_inner(&mut self, ks: &mut Keyspace, until: Instant, block: bool) -> Step {
        if let Some(c) = self.held.take() {
            let end = matches!(c, SnapChunk::End);
            match self.send(c, block) {
                Sent::Ok if end => return Step::Done,
                Sent::Ok => {}
                Sent::Full => return Step::Blocked,
                Sent::Gone => return self.abandon(ks),
            }
        }
        loop {
            let Some(&origin) = self.order.get(self.at) else {
                return match self.send(SnapChunk::End, block) {
                    Sent::Ok => Step::Done,
                    Sent::Full => Step::Blocked,
                    Sent::Gone => self.abandon(ks),
                };
            };
            let Some(db) = Self::db_of(ks, origin) else {
                // The database was replaced wholesale (a reload): the snapshot is lost.
                return self.abandon(ks);
            };
            let (Some(snap), slots) = db.snapshot_parts() else { return self.abandon(ks) };
            if !self.announced {
                self.announced = true;
                let header = SnapChunk::Db { index: origin, keys: snap.keys, volatile: snap.volatile };
                match self.send(header, block) {
                    Sent::Ok => {}
                    Sent::Full => return Step::Blocked,
                    Sent::Gone => return self.abandon(ks),
                }
                // The send may have waited: look the database up again.
                continue;
            }
            let finished = snap.walk(slots, until);
            let out = std::mem::take(&mut snap.out);
            if finished {
                db.snap = None;
                self.at += 1;
                self.announced = false;
            }
            if !out.is_empty() {
                self.copied += out.len() as u64;
                match self.send(SnapChunk::Keys(out), block) {
                    Sent::Ok => {}
                    Sent::Full => return Step::Blocked,
                    Sent::Gone => return self.abandon(ks),
                }
            }
            if Instant::now() >= until {
                return Step::More;
            }
        }
    }

    /// The writer went away or the keyspace was replaced: drop every database's state.
    fn abandon(&mut self, ks: &mut Keyspace) -> Step {
        for db in &mut ks.dbs {
            db.snap = None;
        }
        self.tx = None;
        self.held = None;
        Step::Done
    }

    /// Run to the end now, waiting for the writer as needed.
    pub fn finish(&mut self, ks: &mut Keyspace) {
        while self.step(ks, Duration::from_secs(3600), true) != Step::Done {}
    }

    /// What stops the writer between keys, kept beyond the walk.
    pub fn abort_handle(&self) -> SnapAbort {
        SnapAbort(Arc::clone(&self.aborted))
    }

    /// Give up: the writer sees the channel close before `End` and fails.
    pub fn abort(&mut self, ks: &mut Keyspace) {
        self.aborted.store(true, Ordering::Relaxed);
        self.abandon(ks);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::keyspace::NO_EXPIRE;
    use crate::value::{Str, Value};

    fn v(s: &str) -> Value {
        Value::Str(Str::try_encode(s.as_bytes()))
    }

    type Dump = BTreeMap<(usize, Vec<u8>), (Value, i64)>;

    fn dump(ks: &Keyspace) -> Dump {
        let mut m = BTreeMap::new();
        for (i, db) in ks.dbs.iter().enumerate() {
            for (s, expire) in db.iter() {
                m.insert((i, s.key.to_vec()), (s.value.clone(), expire.unwrap_or(NO_EXPIRE)));
            }
        }
        m
    }

    fn drain(rx: &SnapFeed, got: &mut Dump, db: &mut usize, ended: &mut bool) {
        while let Ok(c) = rx.try_recv() {
            match c {
                SnapChunk::Db { index, .. } => *db = index,
                SnapChunk::Keys(rs) => {
                    for r in rs {
                        assert!(got.insert((*db, r.key.to_vec()), (r.value, r.expire)).is_none(), "sent twice");
                    }
                }
                SnapChunk::End => *ended = true,
                SnapChunk::Functions(_) => {}
            }
        }
    }

    /// Random writes, removals, TTLs, flushes and swaps while the walk goes: what arrives
    /// is exactly the keyspace at the start.
    #[test]
    fn snapshot_under_writes_equals_the_start() {
        for seed in 0..20u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut ks = Keyspace::new(4);
            for i in 0..3000 {
                let db = rng.usize(0..3);
                let p = ks.db_mut(db).add(format!("k{i}").as_bytes(), v(&format!("v{i}")), 0);
                if i % 5 == 0 {
                    ks.db_mut(db).set_expire_at(p, 1000 + i);
                }
            }
            let start = dump(&ks);
            let (mut walker, rx) = ks.begin_snapshot().unwrap();
            assert!(ks.begin_snapshot().is_err());
            let (mut got, mut db, mut ended) = (Dump::new(), 0, false);
            let mut n = 0;
            loop {
                for _ in 0..rng.usize(0..40) {
                    n += 1;
                    let d = rng.usize(0..4);
                    let key = format!("k{}", rng.usize(0..3500));
                    match rng.u8(0..100) {
                        0..=39 => {
                            ks.db_mut(d).set(key.as_bytes(), v(&format!("new{n}")), rng.bool(), 0);
                        }
                        40..=69 => {
                            ks.db_mut(d).remove(key.as_bytes());
                        }
                        70..=84 => {
                            if let Some(p) = ks.db(d).find(key.as_bytes()) {
                                ks.db_mut(d).set_expire_at(p, 5);
                            }
                        }
                        85..=95 => {
                            if let Some(s) = ks.db_mut(d).get_mut(key.as_bytes()) {
                                s.value = v("touched");
                            }
                        }
                        96..=97 => ks.dbs.swap(d, rng.usize(0..4)),
                        _ => ks.db_mut(d).clear(),
                    }
                }
                let step = walker.step(&mut ks, Duration::ZERO, false);
                drain(&rx, &mut got, &mut db, &mut ended);
                if step == Step::Done {
                    break;
                }
            }
            drain(&rx, &mut got, &mut db, &mut ended);
            assert!(ended, "seed {seed}");
            assert_eq!(got.len(), start.len(), "seed {seed}");
            assert!(got == start, "seed {seed}: the snapshot differs from the start");
            assert!(ks.dbs.iter().all(|d| d.snap.is_none()));
        }
    }

    #[test]
    fn a_writer_that_goes_away_ends_the_snapshot() {
        let mut ks = Keyspace::new(2);
        for i in 0..5000 {
            ks.db_mut(0).add(format!("k{i}").as_bytes(), v("x"), 0);
        }
        let (mut walker, rx) = ks.begin_snapshot().unwrap();
        drop(rx);
        assert_eq!(walker.step(&mut ks, Duration::ZERO, false), Step::Done);
        assert!(ks.dbs.iter().all(|d| d.snap.is_none()));
        assert!(ks.begin_snapshot().is_ok());
    }
}
