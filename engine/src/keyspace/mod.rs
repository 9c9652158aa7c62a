//! The keyspace: N databases, each a main dict and an index of keys with a TTL, and the
//! expiry machinery (lazy checks live in the command layer's lookups; the active cycle is
//! [`ExpireCycle`]).

mod barrier;
mod clock;
mod db;
mod expire;
pub mod lazyfree;
pub mod lfu;
mod slot;
pub mod snapshot;

pub use barrier::SnapRecord;
pub use clock::{idle_secs, Clock, LRU_MAX};
pub use db::Db;
pub use expire::{CycleReport, ExpireCycle};
pub use slot::{Key, Slot, NO_EXPIRE};
pub use snapshot::{SnapAbort, SnapChunk, SnapFeed, SnapshotWalker, Step};

/// All databases, and the function libraries (data too: saved, loaded and rewritten with
/// the keys, kept by FLUSHALL).
#[derive(Debug, Clone)]
pub struct Keyspace {
    pub dbs: Vec<Db>,
    pub functions: crate::functions::Libraries,
}

impl Keyspace {
    pub fn new(databases: usize) -> Keyspace {
        Keyspace { dbs: (0..databases.max(1)).map(|_| Db::default()).collect(), functions: Default::default() }
    }

    pub fn db(&self, i: usize) -> &Db {
        &self.dbs[i]
    }

    pub fn db_mut(&mut self, i: usize) -> &mut Db {
        &mut self.dbs[i]
    }

    /// Keys in all databases.
    pub fn len(&self) -> usize {
        self.dbs.iter().map(Db::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.dbs.iter().all(Db::is_empty)
    }

    pub fn flush_all(&mut self) {
        for d in &mut self.dbs {
            d.clear();
        }
    }
}
