//! `maxmemory` as Redis 7.0 enforces it: eviction (the refusals are in admission.rs).
//!
//! Before each command (Redis's processCommand), while `used_memory` is above
//! `maxmemory`, keys are evicted by `maxmemory-policy`: the LRU, LFU and TTL policies
//! sample `maxmemory-samples` keys per database into a pool of the 16 best candidates
//! kept between calls (Redis's evict.c) and evict the best; the random policies take a
//! random key, database after database. Each evicted key propagates as DEL (UNLINK with
//! `lazyfree-lazy-eviction`), fires `evicted`, touches WATCH and counts in
//! `evicted_keys`. Eviction stops after `maxmemory-eviction-tenacity`'s time budget and
//! goes on from the timer. When memory stays above the limit (nothing left to evict, or
//! `noeviction`), commands flagged `denyoom`, and every command queued inside MULTI, are
//! refused with Redis's OOM error (server/src/admission.rs).
//!
//! Used memory is the allocator's count of bytes in use (server/src/alloc.rs), the figure
//! INFO reports as `used_memory`. Redis subtracts its replicas' output buffers and the AOF
//! buffer from it; this server has no replicas, and its AOF buffer is written out after
//! every command, so nothing is subtracted (`mem_not_counted_for_evict:0`).

use std::time::{Duration, Instant};

use ferrokv::command::{notify, Event};
use ferrokv::keyspace::{idle_secs, lfu, NO_EXPIRE};

use crate::client::Client;
use crate::server::Server;

/// A key's place in its database's slot array.
const SLOT_BYTES: usize = std::mem::size_of::<ferrokv::keyspace::Slot>();

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
    fn all_keys(self) -> bool {
        matches!(self, Policy::AllKeysLru | Policy::AllKeysLfu | Policy::AllKeysRandom)
    }

    fn random(self) -> bool {
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
struct Candidate {
    score: u64,
    db: usize,
    key: Vec<u8>,
}

/// Eviction state kept between commands.
#[derive(Debug, Default)]
pub struct Eviction {
    /// The best candidates seen so far, ascending by score.
    pool: Vec<Candidate>,
    /// The random policies' next database.
    next_db: usize,
    rng: fastrand::Rng,
    /// Memory was over the limit (and nothing could be evicted) when the running
    /// top-level command started: a script's first denyoom write is refused.
    pub pre_command_oom: bool,
    /// The running script declared `allow-oom`.
    pub script_allow_oom: bool,
    /// The last round ran out of time with memory still over: the timer goes on.
    pub pending: bool,
    /// Since when memory has been over the limit (INFO current_eviction_exceeded_time).
    exceeded_since: Option<Instant>,
    /// Highest used memory seen (INFO used_memory_peak).
    pub peak: u64,
    /// Bytes of evicted keys a running snapshot still holds (its copy of them): not
    /// counted against the limit, as a forked child's copies are not in Redis.
    held_by_snapshot: u64,
}

impl Eviction {
    /// Milliseconds memory has been over the limit so far, if it is.
    pub fn exceeded_ms(&self) -> u64 {
        self.exceeded_since.map_or(0, |t| t.elapsed().as_millis() as u64)
    }
}

/// Time one eviction round may take (Redis's evictionTimeLimitUs): linear up to 500 µs
/// at tenacity 10, then 15 % more per step, unlimited at 100.
fn time_limit(tenacity: u32) -> Option<Duration> {
    match tenacity {
        0..=10 => Some(Duration::from_micros(50 * u64::from(tenacity))),
        11..=99 => Some(Duration::from_micros((500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64)),
        _ => None,
    }
}

/// `used_memory`, and the peak it reached.
pub fn used_memory(s: &mut Server) -> u64 {
    let used = crate::alloc::used_memory();
    s.eviction.peak = s.eviction.peak.max(used);
    used
}

impl Server {
    /// Redis's performEvictions: evict keys by policy until used memory is under
    /// `maxmemory`, the policy forbids it, no key is left to evict, or the round's time
    /// is spent. `current` is the client whose command is about to run (it may watch or
    /// subscribe to what is evicted).
    pub fn perform_evictions(&mut self, current: Option<&mut Client>) -> Outcome {
        let max = self.cfg.maxmemory;
        // A script yielding past its time limit: its effects are one unit, not to be mixed
        // with DELs (Redis: no eviction inside a yielding command).
        if self.engine.fx.from_script {
            return Outcome::Ok;
        }
        if max == 0 {
            self.eviction.pending = false;
            self.note_exceeded(false);
            return Outcome::Ok;
        }
        if self.snapshot.is_none() && self.bgsave.is_none() && self.bgrewrite.is_none() {
            self.eviction.held_by_snapshot = 0;
        }
        let used = used_memory(self).saturating_sub(self.eviction.held_by_snapshot);
        if used <= max {
            self.eviction.pending = false;
            self.note_exceeded(false);
            return Outcome::Ok;
        }
        let policy = self.cfg.eviction_policy;
        if policy == Policy::NoEviction {
            self.eviction.pending = false;
            self.note_exceeded(true);
            return Outcome::Fail;
        }
        let to_free = (used - max) as i64;
        let limit = time_limit(self.cfg.maxmemory_eviction_tenacity);
        let start = Instant::now();
        let mut freed: i64 = 0;
        let mut evicted = 0u64;
        let mut outcome = Outcome::Ok;
        self.eviction.pending = false;
        while freed < to_free {
            let Some((db, key)) = self.pick_victim(policy) else {
                outcome = Outcome::Fail;
                break;
            };
            freed += self.evict_key(db, &key);
            evicted += 1;
            // A database emptied this far gives its tables' room back too.
            let before = crate::alloc::used_memory() as i64;
            if self.engine.ks.dbs[db].shrink_if_sparse() {
                freed += before - crate::alloc::used_memory() as i64;
            }
            if evicted.is_multiple_of(16) && limit.is_some_and(|l| start.elapsed() > l) {
                self.eviction.pending = true;
                outcome = Outcome::Running;
                break;
            }
        }
        if evicted > 0 {
            self.give_back_spare_slots(max);
            self.after_evictions(current);
        }
        self.note_exceeded(outcome != Outcome::Ok);
        outcome
    }

    /// Each turn of the event loop (Redis's eviction timer proc): go on with a round that
    /// ran out of time, or that CONFIG SET maxmemory asked for (the loop does not sleep
    /// while one is pending); note the peak of used memory.
    pub fn eviction_cron(&mut self) {
        if self.eviction.pending {
            self.perform_evictions(None);
        }
        used_memory(self);
    }

    fn note_exceeded(&mut self, over: bool) {
        match (over, self.eviction.exceeded_since) {
            (true, None) => self.eviction.exceeded_since = Some(Instant::now()),
            (false, Some(t)) => {
                self.stats.total_eviction_exceeded_ms += t.elapsed().as_millis() as u64;
                self.eviction.exceeded_since = None;
            }
            _ => {}
        }
    }

    /// The next key to evict: (database, key).
    fn pick_victim(&mut self, policy: Policy) -> Option<(usize, Vec<u8>)> {
        let all = policy.all_keys();
        let ndb = self.engine.ks.dbs.len();
        if policy.random() {
            for _ in 0..ndb {
                self.eviction.next_db = (self.eviction.next_db + 1) % ndb;
                let db = &self.engine.ks.dbs[self.eviction.next_db];
                let n = if all { db.len() } else { db.volatile_len() };
                if n == 0 {
                    continue;
                }
                let i = self.eviction.rng.usize(..n);
                let pos = if all { i } else { db.volatile_at(i) };
                return Some((self.eviction.next_db, db.slot(pos).key.to_vec()));
            }
            return None;
        }
        loop {
            let mut total = 0;
            for db in 0..ndb {
                let d = &self.engine.ks.dbs[db];
                let n = if all { d.len() } else { d.volatile_len() };
                if n > 0 {
                    self.populate_pool(policy, db);
                    total += n;
                }
            }
            if total == 0 {
                return None;
            }
            // Best first; a candidate deleted (or made persistent) since is skipped.
            while let Some(c) = self.eviction.pool.pop() {
                let d = &self.engine.ks.dbs[c.db];
                let there = d.find(&c.key).is_some_and(|p| all || d.slot(p).expire != NO_EXPIRE);
                if there {
                    return Some((c.db, c.key));
                }
            }
        }
    }

    /// Sample keys of `db` into the pool (Redis's evictionPoolPopulate).
    fn populate_pool(&mut self, policy: Policy, db: usize) {
        let all = policy.all_keys();
        let now = self.engine.clock.now_ms();
        let lru_now = ((now / 1000) as u32) & ferrokv::keyspace::LRU_MAX;
        let decay = self.engine.cfg.lfu_decay_time;
        let d = &self.engine.ks.dbs[db];
        let n = if all { d.len() } else { d.volatile_len() };
        let ev = &mut self.eviction;
        // As dictGetSomeKeys, never more samples than keys.
        for _ in 0..(self.cfg.maxmemory_samples as usize).min(n) {
            let i = ev.rng.usize(..n);
            let slot = d.slot(if all { i } else { d.volatile_at(i) });
            let score = match policy {
                Policy::AllKeysLfu | Policy::VolatileLfu => 255 - u64::from(lfu::counter(slot.lru, now, decay)),
                // The nearest expiry is the best candidate.
                Policy::VolatileTtl => u64::MAX - slot.expire.max(0) as u64,
                _ => idle_secs(lru_now, slot.lru) * 1000,
            };
            insert_candidate(&mut ev.pool, score, db, &slot.key);
        }
    }

    /// Delete one key as eviction does; the bytes that freed: what the allocator got back,
    /// and the key's slot, now room the next insert takes instead of allocating (small
    /// keys and values live in the slot itself and free nothing else).
    fn evict_key(&mut self, db: usize, key: &[u8]) -> i64 {
        let Some(pos) = self.engine.ks.dbs[db].find(key) else {
            return 0;
        };
        // A running snapshot first takes its copy of the key (the write barrier): that copy
        // is the snapshot's until written, as a forked child's pages are not Redis's used
        // memory, so the count starts after it, and the copy is set aside.
        let copied = self.engine.ks.dbs[db].snapshot_pending(pos);
        self.engine.ks.dbs[db].slot_mut(pos);
        let before = crate::alloc::used_memory() as i64;
        drop(self.engine.ks.dbs[db].remove_at(pos));
        let freed = before - crate::alloc::used_memory() as i64 + SLOT_BYTES as i64;
        if copied {
            self.eviction.held_by_snapshot += freed.max(0) as u64;
        }
        self.stats.evicted_keys += 1;
        let fx = &mut self.engine.fx;
        if fx.track_modified {
            fx.modified.push((db, ferrokv::value::sds(key)));
        }
        if fx.track_events {
            fx.events.push(Event { class: notify::EVICTED, name: "evicted", db, key: key.to_vec() });
        }
        let del: &[u8] = if self.cfg.lazyfree_lazy_eviction { b"UNLINK" } else { b"DEL" };
        fx.propagate.push((db, vec![del.to_vec(), key.to_vec()]));
        // Each DEL goes out alone, never inside a MULTI (Redis's propagate_no_multi).
        self.engine.flush();
        freed
    }

    /// Still over the limit after a round counted evicted keys' slots as freed: give the
    /// room of the removed keys back where it is more than an eighth of a database's keys
    /// (keeping a sixteenth), so the allocator's count comes down too.
    fn give_back_spare_slots(&mut self, max: u64) {
        if crate::alloc::used_memory() <= max {
            return;
        }
        for db in &mut self.engine.ks.dbs {
            if db.spare_slots() > (db.len() / 8).max(64) {
                db.shrink_spare((db.len() / 16).max(16));
            }
        }
    }

    /// Publish the `evicted` events and flag the clients watching evicted keys.
    fn after_evictions(&mut self, current: Option<&mut Client>) {
        match current {
            Some(c) => {
                self.deliver_events(Some(&mut *c));
                self.touch_modified(c);
            }
            None => {
                self.deliver_events(None);
                let modified = std::mem::take(&mut self.engine.fx.modified);
                for (db, key) in modified {
                    if let Some(ids) = self.watched.get(&(db, key.to_vec())) {
                        for id in ids.clone() {
                            if let Some(c) = self.clients.get_mut(&id) {
                                c.watch_dirty = true;
                            }
                        }
                    }
                }
            }
        }
    }
}

impl Server {
    /// processCommand's eviction: evict while over the limit; true when memory stays
    /// over it (denyoom commands are refused then).
    pub fn oom_before_command(&mut self, c: &mut Client) -> bool {
        let oom = self.perform_evictions(Some(&mut *c)) == Outcome::Fail;
        grow_within_limit(self, c.session.db);
        oom
    }
}

/// When the selected database's slot array is full and doubling it would take memory
/// past the limit, grow it by a sixteenth instead: a doubling is memory no eviction of
/// keys gives back (Redis likewise does not expand a dict past maxmemory).
fn grow_within_limit(s: &mut Server, db: usize) {
    let Some(d) = s.engine.ks.dbs.get_mut(db) else {
        return;
    };
    if d.spare_slots() > 0 {
        return;
    }
    let doubling = (d.len() * SLOT_BYTES) as u64;
    if crate::alloc::used_memory() + doubling > s.cfg.maxmemory {
        d.grow_slots_exact((d.len() / 16).max(64));
    }
}

/// Put a sampled key into the pool, kept ascending by score and at most POOL_SIZE long:
/// when full, a key scoring below every candidate is dropped, else the lowest goes.
fn insert_candidate(pool: &mut Vec<Candidate>, score: u64, db: usize, key: &[u8]) {
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

/// `used_memory` now and its peak, as INFO reports them.
pub fn used_and_peak(s: &Server) -> (u64, u64) {
    let used = crate::alloc::used_memory();
    (used, s.eviction.peak.max(used))
}

/// After CONFIG SET: a new limit starts an eviction round on the next timer tick (with
/// Redis's warning when it is already exceeded); a new policy empties the pool, whose
/// scores were the old policy's.
pub fn config_changed(s: &mut Server, old_limit: u64, old_policy: Policy) {
    if s.cfg.eviction_policy != old_policy {
        s.eviction.pool.clear();
    }
    let limit = s.cfg.maxmemory;
    if limit == 0 || limit == old_limit {
        return;
    }
    let used = crate::alloc::used_memory();
    if limit < used {
        crate::server::log(&format!(
            "WARNING: the new maxmemory value set via CONFIG SET ({limit}) is smaller than the current memory \
             usage ({used}). This will result in key eviction and/or the inability to accept new write commands \
             depending on the maxmemory-policy."
        ));
    }
    s.eviction.pending = true;
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
