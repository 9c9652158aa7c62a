//! A key with its value and access time: what a database stores per key. A TTL is kept
//! apart, in the database's table of keys with one, so a key without costs nothing for it.

use crate::value::{CompactBytes, Value};

/// A key's bytes: up to 22 inline (most keys: `user:1234567:profile` is 20), longer ones in
/// one heap block of their exact length.
pub type Key = CompactBytes;

/// No TTL.
pub const NO_EXPIRE: i64 = i64::MIN;

/// [`Slot::ttl`] of a key without a TTL.
pub(super) const NO_TTL: u32 = u32::MAX;

/// A key with its value and metadata: 56 bytes.
#[derive(Debug, Clone)]
pub struct Slot {
    pub key: Key,
    pub value: Value,
    /// LRU clock (seconds, 24 bits) of the last access.
    pub lru: u32,
    /// Position of the key's TTL in `Db::volatile`, or [`NO_TTL`].
    pub(super) ttl: u32,
}

impl Slot {
    pub fn has_ttl(&self) -> bool {
        self.ttl != NO_TTL
    }

    /// The key's absolute expiry (unix ms), read from its database's TTL table.
    pub(super) fn expire_in(&self, volatile: &[Ttl]) -> Option<i64> {
        volatile.get(self.ttl as usize).map(|t| t.at)
    }
}

/// A key's TTL: its absolute expiry in unix ms and the key's slot position.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ttl {
    pub(super) at: i64,
    pub(super) pos: u32,
}

/// A database's keys and their TTLs, as a snapshot reads them.
#[derive(Clone, Copy)]
pub(super) struct Keys<'a> {
    slots: &'a [Slot],
    volatile: &'a [Ttl],
}

impl<'a> Keys<'a> {
    pub(super) fn new(slots: &'a [Slot], volatile: &'a [Ttl]) -> Keys<'a> {
        Keys { slots, volatile }
    }

    /// The key at `pos` with its expiry.
    pub(super) fn at(&self, pos: usize) -> Option<(&Slot, Option<i64>)> {
        let s = self.slots.get(pos)?;
        Some((s, s.expire_in(self.volatile)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_56_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 56);
    }
}
