//! The policy and the state kept between eviction rounds: the pool of the best
//! candidates (Redis's evict.c EVPOOL), the random policies' cursor, the time over.

use std::time::{Duration, Instant};

/// Candidates kept between evictions (Redis's EVPOOL_SIZE).
const POOL_SIZE: usize = 16;

/// `maxmemory-policy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Policy {
    #[default]
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    pub fn parse(name: &str) -> Option<Policy> {
        Some(match name.to_ascii_lowercase().as_str() {
            "noeviction" => Policy::NoEviction,
            "allkeys-lru" => Policy::AllKeysLru,
            "allkeys-lfu" => Policy::AllKeysLfu,
            "allkeys-random" => Policy::AllKeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => return None,
        })
    }

    /// Any key may go (else only keys with a TTL).
    pub(super) fn all_keys(self) -> bool {
        matches!(self, Policy::AllKeysLru | Policy::AllKeysLfu | Policy::AllKeysRandom)
    }

    pub(super) fn random(self) -> bool {
        matches!(self, Policy::AllKeysRandom | Policy::VolatileRandom)
    }
}

/// What an eviction round achieved (Redis's EVICT_OK / EVICT_RUNNING / EVICT_FAIL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Under the limit (or no limit, or not the time to evict).
    Ok,
    /// Still over, out of time: the timer goes on. Commands are not refused meanwhile.
    Running,
    /// Still over and nothing (more) may be evicted: denyoom commands are refused.
    Fail,
}

/// A candidate in the eviction pool: the higher `score`, the better to evict.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) score: u64,
    pub(super) db: usize,
    pub(super) key: Vec<u8>,
}

/// Eviction state kept between commands.
#[derive(Debug, Default)]
pub struct Eviction {
    /// The best candidates seen so far, ascending by score.
    pub(super) pool: Vec<Candidate>,
    /// The random policies' next database.
    pub(super) next_db: usize,
    pub(super) rng: fastrand::Rng,
    /// Memory was over the limit (and nothing could be evicted) when the running
    /// top-level command started: a script's first denyoom write is refused.
    pub pre_command_oom: bool,
    /// The running script declared `allow-oom`.
    pub script_allow_oom: bool,
    /// The last round ran out of time with memory still over: the timer goes on.
    pub pending: bool,
    /// Since when memory has been over the limit (INFO current_eviction_exceeded_time).
    pub(super) exceeded_since: Option<Instant>,
    /// Highest used memory seen (INFO used_memory_peak).
    pub peak: u64,
    /// Bytes of evicted keys a running snapshot still holds (its copy of them): not
    /// counted against the limit, as a forked child's copies are not in Redis.
    pub(super) held_by_snapshot: u64,
}

impl Eviction {
    /// Milliseconds memory has been over the limit so far, if it is.
    pub fn exceeded_ms(&self) -> u64 {
        self.exceeded_since.map_or(0, |t| t.elapsed().as_millis() as u64)
    }
}

/// Time one eviction round may take (Redis's evictionTimeLimitUs): linear up to 500 µs
/// at tenacity 10, then 15 % more per step, unlimited at 100.
pub(super) fn time_limit(tenacity: u32) -> Option<Duration> {
    match tenacity {
        0..=10 => Some(Duration::from_micros(50 * u64::from(tenacity))),
        11..=99 => Some(Duration::from_micros((500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64)),
        _ => None,
    }
}

/// Put a sampled key into the pool, kept ascending by score and at most POOL_SIZE long:
/// when full, a key scoring below every candidate is dropped, else the lowest goes.
pub(super) fn insert_candidate(pool: &mut Vec<Candidate>, score: u64, db: usize, key: &[u8]) {
    if pool.iter().any(|c| c.db == db && c.key == key) {
        return;
    }
    let at = pool.partition_point(|c| c.score < score);
    if pool.len() >= POOL_SIZE {
        if at == 0 {
            return;
        }
        pool.remove(0);
        pool.insert(at - 1, Candidate { score, db, key: key.to_vec() });
    } else {
        pool.insert(at, Candidate { score, db, key: key.to_vec() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_the_best_sixteen_in_order() {
        let mut pool = Vec::new();
        for i in 0..40u64 {
            let score = (i * 7919) % 101;
            insert_candidate(&mut pool, score, 0, format!("k{i}").as_bytes());
        }
        assert_eq!(pool.len(), POOL_SIZE);
        assert!(pool.windows(2).all(|w| w[0].score <= w[1].score));
        let mut all: Vec<u64> = (0..40u64).map(|i| (i * 7919) % 101).collect();
        all.sort_unstable();
        let best: Vec<u64> = all[all.len() - POOL_SIZE..].to_vec();
        assert_eq!(pool.iter().map(|c| c.score).collect::<Vec<_>>(), best);
        // The same key twice takes one place.
        let before = pool.len();
        let top = pool[POOL_SIZE - 1].clone();
        insert_candidate(&mut pool, top.score + 1, top.db, &top.key);
        assert_eq!(pool.len(), before);
    }

    #[test]
    fn tenacity_budget_is_redis_s() {
        assert_eq!(time_limit(0), Some(Duration::ZERO));
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(11), Some(Duration::from_micros(575)));
        assert_eq!(time_limit(100), None);
    }
}
