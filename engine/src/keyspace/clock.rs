//! Time, injected: the wall clock in the server, a virtual clock in tests and replay.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Default)]
pub enum Clock {
    #[default]
    System,
    /// Unix milliseconds set by its owner; clones share the same time.
    Virtual(Arc<AtomicI64>),
}

impl Clock {
    pub fn virtual_at(ms: i64) -> Clock {
        Clock::Virtual(Arc::new(AtomicI64::new(ms)))
    }

    /// Unix time in milliseconds.
    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::System => SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0),
            Clock::Virtual(t) => t.load(Ordering::Relaxed),
        }
    }

    /// Move a virtual clock to `ms` (no effect on the system clock).
    pub fn set_ms(&self, ms: i64) {
        if let Clock::Virtual(t) = self {
            t.store(ms, Ordering::Relaxed);
        }
    }

    /// Move a virtual clock forward by `ms`.
    pub fn advance_ms(&self, ms: i64) {
        if let Clock::Virtual(t) = self {
            t.fetch_add(ms, Ordering::Relaxed);
        }
    }

    /// Redis's LRU clock: seconds, 24 bits.
    pub fn lru(&self) -> u32 {
        ((self.now_ms() / 1000) as u32) & LRU_MAX
    }
}

pub const LRU_MAX: u32 = (1 << 24) - 1;

/// Seconds since `lru` as OBJECT IDLETIME counts them.
pub fn idle_secs(lru_now: u32, lru: u32) -> u64 {
    if lru_now >= lru {
        u64::from(lru_now - lru)
    } else {
        u64::from(LRU_MAX - lru + lru_now)
    }
}
