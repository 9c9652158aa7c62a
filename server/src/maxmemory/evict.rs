//! Evicting keys by `maxmemory-policy` while used memory is over `maxmemory`.

use std::time::Instant;

use ferrokv::keyspace::{idle_secs, lfu};

use super::pool::{insert_candidate, time_limit, Outcome, Policy};
use crate::client::Client;
use crate::server::Server;

/// A key's place in its database's slot array.
const SLOT_BYTES: usize = std::mem::size_of::<ferrokv::keyspace::Slot>();

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
        if self.engine.effects().from_script {
            return Outcome::Ok;
        }
        // A pause keeps the dataset as it is (Redis's isSafeToPerformEvictions).
        if self.pause.any() && self.pause.is_on(std::time::Instant::now()) {
            return Outcome::Ok;
        }
        if max == 0 {
            self.eviction.pending = false;
            self.note_exceeded(false);
            return Outcome::Ok;
        }
        if self.jobs.snapshot.is_none() && self.jobs.bgsave.is_none() && self.jobs.bgrewrite.is_none() {
            self.eviction.held_by_snapshot = 0;
        }
        let used = used_memory(self)
            .saturating_sub(self.eviction.held_by_snapshot)
            .saturating_sub(self.replica_buffer_excess() as u64);
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
            if self.engine.keyspace_mut().dbs[db].shrink_if_sparse() {
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
        let ndb = self.engine.keyspace().dbs.len();
        if policy.random() {
            for _ in 0..ndb {
                self.eviction.next_db = (self.eviction.next_db + 1) % ndb;
                let db = &self.engine.keyspace().dbs[self.eviction.next_db];
                let n = if all { db.len() } else { db.volatile_len() };
                if n == 0 {
                    continue;
                }
                let i = self.eviction.rng.usize(..n);
                let pos = if all { i } else { db.volatile_at(i).0 };
                return Some((self.eviction.next_db, db.slot(pos).key.to_vec()));
            }
            return None;
        }
        loop {
            let mut total = 0;
            for db in 0..ndb {
                let d = &self.engine.keyspace().dbs[db];
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
                let d = &self.engine.keyspace().dbs[c.db];
                let there = d.find(&c.key).is_some_and(|p| all || d.slot(p).has_ttl());
                if there {
                    return Some((c.db, c.key));
                }
            }
        }
    }

    /// Sample keys of `db` into the pool (Redis's evictionPoolPopulate).
    fn populate_pool(&mut self, policy: Policy, db: usize) {
        let all = policy.all_keys();
        let now = self.engine.now_ms();
        let lru_now = ((now / 1000) as u32) & ferrokv::keyspace::LRU_MAX;
        let decay = self.engine.config().lfu_decay_time;
        let d = &self.engine.keyspace().dbs[db];
        let n = if all { d.len() } else { d.volatile_len() };
        let ev = &mut self.eviction;
        // As dictGetSomeKeys, never more samples than keys.
        for _ in 0..(self.cfg.maxmemory_samples as usize).min(n) {
            let i = ev.rng.usize(..n);
            let (pos, expire) = if all {
                (i, d.expire_at(i))
            } else {
                let (pos, at) = d.volatile_at(i);
                (pos, Some(at))
            };
            let slot = d.slot(pos);
            let score = match policy {
                Policy::AllKeysLfu | Policy::VolatileLfu => 255 - u64::from(lfu::counter(slot.lru, now, decay)),
                // The nearest expiry is the best candidate.
                Policy::VolatileTtl => u64::MAX - expire.unwrap_or(i64::MIN).max(0) as u64,
                _ => idle_secs(lru_now, slot.lru) * 1000,
            };
            insert_candidate(&mut ev.pool, score, db, &slot.key);
        }
    }

    /// Delete one key as eviction does; the bytes that freed: what the allocator got back,
    /// and the key's slot, now room the next insert takes instead of allocating (small
    /// keys and values live in the slot itself and free nothing else).
    fn evict_key(&mut self, db: usize, key: &[u8]) -> i64 {
        let Some(pos) = self.engine.keyspace().dbs[db].find(key) else {
            return 0;
        };
        // A running snapshot first takes its copy of the key (the write barrier): that copy
        // is the snapshot's until written, as a forked child's pages are not Redis's used
        // memory, so the count starts after it, and the copy is set aside.
        let copied = self.engine.keyspace().dbs[db].snapshot_pending(pos);
        self.engine.keyspace_mut().dbs[db].slot_mut(pos);
        let before = crate::alloc::used_memory() as i64;
        drop(self.engine.keyspace_mut().dbs[db].remove_at(pos));
        let freed = before - crate::alloc::used_memory() as i64 + SLOT_BYTES as i64;
        if copied {
            self.eviction.held_by_snapshot += freed.max(0) as u64;
        }
        self.stats.evicted_keys += 1;
        self.engine.note_evicted(db, key, self.cfg.lazyfree_lazy_eviction);
        freed
    }

    /// Still over the limit after a round counted evicted keys' slots as freed: give the
    /// room of the removed keys back where it is more than an eighth of a database's keys
    /// (keeping a sixteenth), so the allocator's count comes down too.
    fn give_back_spare_slots(&mut self, max: u64) {
        if crate::alloc::used_memory() <= max {
            return;
        }
        for db in &mut self.engine.keyspace_mut().dbs {
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
                // Before the command's reply, as Redis flushes them after its evictions.
                self.tracking_send_pending(c);
            }
            None => {
                self.deliver_events(None);
                self.touch_modified_here();
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
    let Some(d) = s.engine.keyspace_mut().dbs.get_mut(db) else {
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
        crate::log::log(&format!(
            "WARNING: the new maxmemory value set via CONFIG SET ({limit}) is smaller than the current memory \
             usage ({used}). This will result in key eviction and/or the inability to accept new write commands \
             depending on the maxmemory-policy."
        ));
    }
    s.eviction.pending = true;
}
