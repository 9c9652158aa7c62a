//! The write barrier of a running snapshot: per database, which keys the snapshot still
//! needs (one bit per slot position) and the copies made before a write changed them.

use std::time::Instant;

use super::slot::{Keys, Slot, Ttl, NO_EXPIRE};
use crate::value::{Sds, Value};

/// Keys per chunk sent to the writer.
pub(super) const CHUNK_KEYS: usize = 1024;

/// One key as it was when the snapshot started.
#[derive(Debug, Clone)]
pub struct SnapRecord {
    pub key: Sds,
    pub value: Value,
    /// Absolute expiry in unix ms, or [`NO_EXPIRE`].
    pub expire: i64,
}

impl SnapRecord {
    pub fn expire_ms(&self) -> Option<i64> {
        (self.expire != NO_EXPIRE).then_some(self.expire)
    }

    pub(super) fn of(slot: &Slot, expire: Option<i64>) -> SnapRecord {
        SnapRecord { key: slot.key.to_sds(), value: slot.value.clone(), expire: expire.unwrap_or(NO_EXPIRE) }
    }

    pub(super) fn moved(slot: Slot, expire: Option<i64>) -> SnapRecord {
        SnapRecord { key: slot.key.to_sds(), value: slot.value, expire: expire.unwrap_or(NO_EXPIRE) }
    }
}

/// A database's part of a running snapshot (lives in the [`Db`]).
#[derive(Debug)]
pub(crate) struct DbSnapshot {
    /// The database's index when the snapshot started (SWAPDB moves this state along).
    pub(super) origin: usize,
    /// Bit `i` set: the key at slot position `i` still has to be copied.
    pub(super) pending: Vec<u64>,
    /// The walk copies positions below this one, downwards.
    pub(super) cursor: usize,
    /// Copies not yet sent (the barrier's, and the walk's current chunk).
    pub(super) out: Vec<SnapRecord>,
    pub(super) keys: u64,
    pub(super) volatile: u64,
}

impl DbSnapshot {
    /// A snapshot of `n` keys, `volatile` of them with a TTL, of database `origin`.
    pub(super) fn new(origin: usize, n: usize, volatile: usize) -> DbSnapshot {
        let mut pending = vec![u64::MAX; n.div_ceil(64)];
        if !n.is_multiple_of(64) {
            if let Some(last) = pending.last_mut() {
                *last = (1u64 << (n % 64)) - 1;
            }
        }
        DbSnapshot { origin, pending, cursor: n, out: Vec::new(), keys: n as u64, volatile: volatile as u64 }
    }

    pub(crate) fn is_pending(&self, pos: usize) -> bool {
        self.pending.get(pos / 64).is_some_and(|w| w & (1 << (pos % 64)) != 0)
    }

    pub(super) fn clear(&mut self, pos: usize) {
        if let Some(w) = self.pending.get_mut(pos / 64) {
            *w &= !(1 << (pos % 64));
        }
    }

    /// The barrier: copy the key at `pos` if the snapshot still needs it.
    #[inline]
    pub(crate) fn copy_if_pending(&mut self, pos: usize, keys: Keys<'_>) {
        if self.is_pending(pos) {
            self.clear(pos);
            if let Some((slot, expire)) = keys.at(pos) {
                self.out.push(SnapRecord::of(slot, expire));
            }
        }
    }

    /// The slot at `from` moved to `to` (removal's swap): its bit moves with it.
    pub(crate) fn moved(&mut self, from: usize, to: usize) {
        let was = self.is_pending(from);
        self.clear(from);
        self.clear(to);
        if was {
            if let Some(w) = self.pending.get_mut(to / 64) {
                *w |= 1 << (to % 64);
            }
        }
    }

    /// The database is being emptied: keep the pending keys (moved, not copied).
    pub(crate) fn take_pending(&mut self, slots: Vec<Slot>, volatile: &[Ttl]) {
        for (pos, slot) in slots.into_iter().enumerate() {
            if self.is_pending(pos) {
                let expire = slot.expire_in(volatile);
                self.out.push(SnapRecord::moved(slot, expire));
            }
        }
        self.pending.clear();
        self.cursor = 0;
    }

    /// Walk down from the cursor copying pending keys until the chunk is full or `until`
    /// passes; true when the walk reached position 0.
    pub(super) fn walk(&mut self, keys: Keys<'_>, until: Instant) -> bool {
        let mut n = 0usize;
        while self.cursor > 0 && self.out.len() < CHUNK_KEYS {
            self.cursor -= 1;
            let pos = self.cursor;
            if self.is_pending(pos) {
                self.clear(pos);
                if let Some((slot, expire)) = keys.at(pos) {
                    self.out.push(SnapRecord::of(slot, expire));
                }
            }
            n += 1;
            if n.is_multiple_of(64) && Instant::now() >= until {
                break;
            }
        }
        self.cursor == 0
    }
}
