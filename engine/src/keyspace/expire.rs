//! The active expiry cycle, as Redis runs it from its timer: per database, sample keys
//! with a TTL, delete the expired ones, and go on while the sample was more than 25 %
//! expired; stop when the time budget is spent and resume at the next database.

use std::time::{Duration, Instant};

use super::{Keyspace, Slot};

/// Keys sampled per round.
pub const SAMPLE: usize = 20;
/// Repeat the database while more than this share of a sample had expired.
pub const STALE_PERCENT: usize = 25;

#[derive(Debug, Clone)]
pub struct ExpireCycle {
    /// Next database to visit.
    pub next_db: usize,
    /// Wall-clock budget of one cycle (Redis: 25 % of a 1/hz tick).
    pub budget: Duration,
    rng: fastrand::Rng,
}

/// What one cycle did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CycleReport {
    pub sampled: usize,
    pub expired: usize,
    pub out_of_time: bool,
    pub elapsed: Duration,
}

impl ExpireCycle {
    /// A cycle for a server ticking `hz` times a second.
    pub fn new(hz: u32) -> ExpireCycle {
        let tick_us = 1_000_000 / u64::from(hz.clamp(1, 500));
        ExpireCycle { next_db: 0, budget: Duration::from_micros(tick_us * 25 / 100), rng: fastrand::Rng::new() }
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = fastrand::Rng::with_seed(seed);
        self
    }

    /// Run one cycle at unix time `now_ms`. `on_expired(db, slot, expiry)` receives each
    /// key removed, in order, so the caller can propagate its DEL and count it.
    pub fn run(&mut self, ks: &mut Keyspace, now_ms: i64, mut on_expired: impl FnMut(usize, Slot, i64)) -> CycleReport {
        let start = Instant::now();
        let mut rep = CycleReport::default();
        let ndb = ks.dbs.len();
        for _ in 0..ndb {
            let dbi = self.next_db % ndb;
            self.next_db = (dbi + 1) % ndb;
            loop {
                let db = &mut ks.dbs[dbi];
                let n = db.volatile_len();
                if n == 0 {
                    break;
                }
                let take = SAMPLE.min(n);
                let mut expired = 0;
                for _ in 0..take {
                    let n = db.volatile_len();
                    if n == 0 {
                        break;
                    }
                    let (pos, at) = db.volatile_at(self.rng.usize(..n));
                    rep.sampled += 1;
                    if at < now_ms {
                        let slot = db.remove_at(pos);
                        expired += 1;
                        rep.expired += 1;
                        on_expired(dbi, slot, at);
                    }
                }
                if start.elapsed() >= self.budget {
                    rep.out_of_time = true;
                    rep.elapsed = start.elapsed();
                    return rep;
                }
                if expired * 100 <= take * STALE_PERCENT {
                    break;
                }
            }
        }
        rep.elapsed = start.elapsed();
        rep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Str, Value};

    fn filled(n: usize, ttl_from: i64) -> Keyspace {
        let mut ks = Keyspace::new(16);
        for i in 0..n {
            let db = &mut ks.dbs[i % 3];
            let p = db.add(format!("k{i}").as_bytes(), Value::Str(Str::Int(i as i64)), 0);
            db.set_expire_at(p, ttl_from + (i as i64 % 100));
        }
        ks
    }

    #[test]
    fn cycles_remove_most_expired_keys_within_budget() {
        let mut ks = filled(10_000, 1_000);
        let mut cycle = ExpireCycle::new(10).with_seed(7);
        let mut removed = 0;
        for _ in 0..200 {
            let rep = cycle.run(&mut ks, 10_000, |_, _, at| assert!(at < 10_000));
            removed += rep.expired;
            // Time is checked after each sample of 20 keys, so the overshoot is one sample.
            assert!(rep.elapsed <= cycle.budget + Duration::from_millis(5), "{:?}", rep.elapsed);
        }
        assert!(removed * 100 >= 10_000 * 75, "only {removed} removed");
        assert_eq!(ks.len(), 10_000 - removed);
    }

    #[test]
    fn nothing_expires_before_its_time() {
        let mut ks = filled(1000, 50_000);
        let mut cycle = ExpireCycle::new(10);
        let rep = cycle.run(&mut ks, 10_000, |_, _, _| panic!("nothing is due"));
        assert_eq!((rep.expired, ks.len()), (0, 1000));
    }
}
