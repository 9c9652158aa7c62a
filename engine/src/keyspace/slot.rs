//! A key with its value, TTL and access time: what a database stores per key.

use crate::value::{sds, Sds, Value};

/// No TTL.
pub const NO_EXPIRE: i64 = i64::MIN;

/// A key with its value and metadata.
#[derive(Debug, Clone)]
pub struct Slot {
    pub key: Key,
    pub value: Value,
    /// Absolute expiry in unix ms, or [`NO_EXPIRE`].
    pub expire: i64,
    /// LRU clock (seconds, 24 bits) of the last access.
    pub lru: u32,
    /// Position in `Db::volatile` when the key has a TTL.
    pub(super) vpos: u32,
}

impl Slot {
    pub fn expire_ms(&self) -> Option<i64> {
        (self.expire != NO_EXPIRE).then_some(self.expire)
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
