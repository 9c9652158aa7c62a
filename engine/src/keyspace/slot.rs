//! A key with its value, TTL and access time: what a database stores per key.

use crate::value::{Sds, Value};

/// No TTL.
pub const NO_EXPIRE: i64 = i64::MIN;

/// A key with its value and metadata.
#[derive(Debug, Clone)]
pub struct Slot {
    pub key: Sds,
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
