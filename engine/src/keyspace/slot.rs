//! A key with its value and access time: what a database stores per key. A TTL is kept
//! apart, in the database's table of keys with one, so a key without costs nothing for it.

use crate::value::{sds, Sds, Value};

/// No TTL.
pub const NO_EXPIRE: i64 = i64::MIN;

/// [`Slot::ttl`] of a key without a TTL.
pub(super) const NO_TTL: u32 = u32::MAX;

/// A key with its value and metadata: 64 bytes.
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

/// Bytes a key keeps inline.
const INLINE: usize = 22;

/// A key's bytes, 24 bytes in the slot: up to 22 inline (most keys: `user:1234567:profile`
/// is 20), longer ones in one heap block of their exact length. An `Sds` keeps 16 inline,
/// so a typical key took a heap block of its own beside the slot.
#[derive(Clone)]
pub enum Key {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Key {
    pub fn new(b: &[u8]) -> Key {
        if b.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..b.len()].copy_from_slice(b);
            Key::Inline { len: b.len() as u8, bytes }
        } else {
            Key::Heap(b.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Heap(b) => b,
        }
    }

    pub fn to_sds(&self) -> Sds {
        sds(self.as_slice())
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Key {}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_64_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 64);
    }

    #[test]
    fn keys_inline_up_to_22_bytes() {
        assert_eq!(std::mem::size_of::<Key>(), 24);
        for n in [0, 1, 21, 22, 23, 300] {
            let b: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let k = Key::new(&b);
            assert_eq!(k.as_slice(), &b[..]);
            assert_eq!(matches!(k, Key::Inline { .. }), n <= INLINE, "{n}");
        }
    }
}
