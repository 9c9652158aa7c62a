//! What blocked clients wait for, and the index of who waits on which key.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use ferrokv::format::rdb::StreamId;
use ferrokv::Reply;

/// What a blocked client runs once a key is ready.
#[derive(Debug, Clone)]
pub enum Op {
    /// BLPOP/BRPOP (`count` None) and BLMPOP (`count` Some).
    Pop { left: bool, count: Option<i64> },
    /// BLMOVE, or BRPOPLPUSH (`rpoplpush`).
    Move { dst: Vec<u8>, from_left: bool, to_left: bool, rpoplpush: bool },
    /// BZPOPMIN/BZPOPMAX (`count` None) and BZMPOP (`count` Some).
    ZPop { max: bool, count: Option<i64> },
    /// XREAD / XREADGROUP with BLOCK (crate::stream_wait).
    Stream(Box<StreamRead>),
    /// WAIT: until `replicas` replicas acknowledged the stream up to `offset`
    /// (crate::replication).
    Wait { offset: u64, replicas: usize },
    /// WAITAOF: until `replicas` replicas fsynced their AOF past `offset` (`local`: ours is;
    /// `need_local`: a local copy was asked that appendfsync no never makes).
    WaitAof { offset: u64, local: bool, need_local: bool, replicas: usize },
    /// A synchronous FLUSHALL / FLUSHDB of Redis 7.4: until the lazyfree thread finished
    /// freeing the keys (its job `job`).
    Flush { job: u64 },
    /// SHUTDOWN waiting for replicas (crate::shutdown): answered only when it fails.
    Shutdown,
}

impl Op {
    /// Whether the key's deletion ends the wait (XREADGROUP: its group goes with the key).
    pub(crate) fn unblocks_on_deletion(&self) -> bool {
        matches!(self, Op::Stream(read) if read.group.is_some())
    }

    pub(crate) fn wants_zset(&self) -> bool {
        matches!(self, Op::ZPop { .. })
    }

    /// The reply when the wait ends without data (timeout, or a refused block).
    pub fn timeout_reply(&self, blocked: bool) -> Reply {
        match self {
            // Redis 7.0 answers a timed-out BLMOVE with a null array, a refused one
            // (inside MULTI) with a null bulk.
            Op::Move { .. } if !blocked => Reply::Nil,
            _ => Reply::NilArray,
        }
    }
}

#[derive(Debug)]
pub struct Blocked {
    pub op: Op,
    pub db: usize,
    pub keys: Vec<Vec<u8>>,
    pub deadline: Option<Instant>,
    /// The command as the client sent it, and the microseconds its first run took: the
    /// slow log's entry when it is served (set by dispatch.rs's call).
    pub argv: Vec<Vec<u8>>,
    pub micros: u64,
}

#[derive(Debug, Default)]
pub struct Blocking {
    /// (database, key) → blocked client ids, first blocked first.
    by_key: HashMap<(usize, Vec<u8>), VecDeque<u64>>,
    deadlines: BTreeSet<(Instant, u64)>,
    /// Keys written since the last serving round that clients wait on.
    ready: Vec<(usize, Vec<u8>)>,
    /// Clients blocked now (INFO blocked_clients).
    pub count: usize,
    /// Clients whose blocking FLUSHALL / FLUSHDB waits for the lazyfree thread, with its job.
    pub flushes: Vec<(u64, u64)>,
}

impl Blocking {
    /// Client `id` waits on `keys` of `db` (each once) until `deadline`: the keys, without
    /// repeats, in their order.
    pub fn add(&mut self, id: u64, db: usize, keys: Vec<Vec<u8>>, deadline: Option<Instant>) -> Vec<Vec<u8>> {
        let mut uniq: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
        for k in keys {
            if !uniq.contains(&k) {
                self.by_key.entry((db, k.clone())).or_default().push_back(id);
                uniq.push(k);
            }
        }
        if let Some(t) = deadline {
            self.deadlines.insert((t, id));
        }
        self.count += 1;
        uniq
    }

    /// Client `id` no longer waits as `b` said.
    pub fn remove(&mut self, id: u64, b: &Blocked) {
        for k in &b.keys {
            let entry = (b.db, k.clone());
            if let Some(q) = self.by_key.get_mut(&entry) {
                q.retain(|&i| i != id);
                if q.is_empty() {
                    self.by_key.remove(&entry);
                }
            }
        }
        if let Some(t) = b.deadline {
            self.deadlines.remove(&(t, id));
        }
        self.count = self.count.saturating_sub(1);
    }

    /// A client whose deadline is at or before `now`, taken off the deadline list.
    pub fn pop_expired(&mut self, now: Instant) -> Option<u64> {
        let &(t, id) = self.deadlines.first()?;
        if t > now {
            return None;
        }
        self.deadlines.remove(&(t, id));
        Some(id)
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The keys that became ready since the last call.
    pub fn take_ready(&mut self) -> Vec<(usize, Vec<u8>)> {
        std::mem::take(&mut self.ready)
    }

    /// Note the written keys some client waits on.
    pub fn note_modified(&mut self, modified: &[(usize, ferrokv::value::Sds)]) {
        if self.by_key.is_empty() {
            return;
        }
        for (db, key) in modified {
            let k = (*db, key.to_vec());
            if self.by_key.contains_key(&k) && !self.ready.contains(&k) {
                self.ready.push(k);
            }
        }
    }

    /// Every waited-on key of `dbs` is a candidate (SWAPDB).
    pub fn all_ready(&mut self) {
        let keys: Vec<_> = self.by_key.keys().cloned().collect();
        for k in keys {
            if !self.ready.contains(&k) {
                self.ready.push(k);
            }
        }
    }

    /// The next deadline, if any client waits with a timeout.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(t, _)| *t)
    }

    pub fn is_active(&self) -> bool {
        self.count > 0
    }

    /// The ids blocked on `key` of `db`, first blocked first.
    pub fn queue(&self, db: usize, key: &[u8]) -> Option<&VecDeque<u64>> {
        self.by_key.get(&(db, key.to_vec()))
    }

    /// The clients blocked on `key` of `db`, first blocked first.
    pub fn waiters(&self, db: usize, key: &[u8]) -> Vec<u64> {
        self.by_key.get(&(db, key.to_vec())).map(|q| q.iter().copied().collect()).unwrap_or_default()
    }

    /// Blocked clients with a timeout (INFO clients_in_timeout_table).
    /// The keys clients wait on (INFO total_blocking_keys), with who waits on each.
    pub fn keys(&self) -> impl Iterator<Item = &VecDeque<u64>> {
        self.by_key.values()
    }

    pub fn with_timeout(&self) -> usize {
        self.deadlines.len()
    }
}

/// What a client blocked in XREAD / XREADGROUP waits for.
#[derive(Debug, Clone)]
pub struct StreamRead {
    /// XREADGROUP's group and consumer.
    pub group: Option<(Vec<u8>, Vec<u8>)>,
    pub noack: bool,
    /// Entries served at most (never 0: Redis's default 1000 when COUNT was not given).
    pub count: usize,
    /// Per waited key (in `Blocked::keys` order): XREAD's "after this ID"; None for `>`.
    pub after: Vec<Option<StreamId>>,
    /// Per waited key: XREAD's `+` (Redis 7.4), served the stream's last entry as it is
    /// then, as Redis runs `+` again when the key is ready.
    pub last_entry: Vec<bool>,
}

/// Redis's XREAD_BLOCKED_DEFAULT_COUNT.
pub const BLOCKED_DEFAULT_COUNT: usize = 1000;
