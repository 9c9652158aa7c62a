//! What a command runs against: the keyspace, the selected database, the time, and the
//! record of its effects (propagation, notifications, modified keys).

use super::{notify, Argv, Reply};
use crate::config::Config;
use crate::keyspace::{Keyspace, Slot};
use crate::value::{Sds, Value};

/// How lookups treat keys whose TTL has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpireMode {
    /// Delete them and propagate DEL/UNLINK (a master).
    #[default]
    Master,
    /// Never expired (loading an AOF: the log carries the DELs).
    Loading,
    /// Reads see an expired key as missing but it is kept; writes see it as it is (a
    /// paused server: nothing deletes keys).
    Replica,
    /// A replica's own clients: reads see an expired key as missing but it is kept (the
    /// master's DEL removes it); writes delete it first, as Redis lets a writable
    /// replica's writes do.
    Writable,
}

/// Counters INFO reports.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub expired_keys: u64,
    /// Hash fields removed because their TTL passed (Redis 7.4's `expired_subkeys`).
    pub expired_subkeys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// Changes since the last save.
    pub dirty: u64,
    pub commands: u64,
    /// Compact values RESTORE checked entry by entry under sanitize-dump-payload (Redis's
    /// `dump_payload_sanitizations`).
    pub dump_payload_sanitizations: u64,
}

/// A keyspace event (for notifications and blocked clients).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub class: u32,
    pub name: &'static str,
    pub db: usize,
    pub key: Vec<u8>,
}

/// Effects gathered while commands run; drained by the caller.
#[derive(Debug, Default)]
pub struct Effects {
    /// Commands to propagate, with the database each runs in.
    pub propagate: Vec<(usize, Argv)>,
    /// Positions in `propagate` of commands for the replicas only, not the AOF (PUBLISH,
    /// a script's `redis.set_repl(redis.REPL_REPLICA)`).
    pub replicas_only: Vec<usize>,
    /// Positions in `propagate` of commands for the AOF only (`redis.REPL_AOF`).
    pub aof_only: Vec<usize>,
    /// Keyspace events, when `track_events` is on.
    pub events: Vec<Event>,
    pub track_events: bool,
    /// Keys written (for WATCH), when `track_modified` is on.
    pub modified: Vec<(usize, Sds)>,
    pub track_modified: bool,
    /// The stretches of `modified` a FLUSHALL or FLUSHDB emptied, one per command (client
    /// tracking invalidates a flush as a whole), when `track_modified` is on.
    pub flushes: Vec<std::ops::Range<usize>>,
    /// Databases SWAPDB exchanged (for WATCH: the watcher checks its own keys), when
    /// `track_modified` is on.
    pub swapped_dbs: Vec<(usize, usize)>,
    /// Nothing reads the propagation of the running command (no AOF): writes skip
    /// building it. Set by [`crate::Engine::execute`] around one command.
    pub propagation_off: bool,
    /// Keys made ready for blocked clients without being modified (XGROUP DESTROY, as
    /// Redis's signalKeyAsReady), when `track_modified` is on.
    pub ready: Vec<(usize, Sds)>,
    /// The commands run for a Lua script (SORT then orders a set's output, as Redis).
    pub from_script: bool,
    /// A synchronous FLUSHALL / FLUSHDB frees the keys on the lazyfree thread, its client
    /// waiting for the thread (Redis 7.4's blocking flush). Set by the server around one
    /// command.
    pub flush_in_background: bool,
    /// Lines for the server's log at verbose level (why a RESTORE payload was refused, as
    /// Redis logs it).
    pub log: Vec<String>,
}

pub struct Ctx<'a> {
    pub ks: &'a mut Keyspace,
    pub cfg: &'a Config,
    /// Selected database.
    pub db: usize,
    /// The time of this command, unix ms.
    pub now: i64,
    /// LRU clock for touched keys.
    pub lru: u32,
    pub mode: ExpireMode,
    pub rng: &'a mut fastrand::Rng,
    pub stats: &'a mut Stats,
    pub fx: &'a mut Effects,
    /// Changes made by the running command.
    pub dirty: u64,
    rewrite: Option<Argv>,
    suppress: bool,
    /// Lookups leave the keys' LRU/LFU alone (CLIENT NO-TOUCH, Redis 7.2).
    pub no_touch: bool,
    /// The session's [`crate::engine::Session::reply_limit`].
    pub reply_limit: u64,
}

/// Most repeated random picks (SRANDMEMBER, HRANDFIELD, ZRANDMEMBER with a negative
/// count) one reply holds for a client without an output limit: Redis builds any count,
/// but a reply past this could not be built in memory.
const MAX_RANDOM_PICKS: u64 = 1 << 24;

impl<'a> Ctx<'a> {
    /// How many of `count` repeated random picks to build. Redis stops picking once its
    /// output limit has flagged the client to close; here the picks stop once the reply is
    /// surely past the limit (a pick is at least 6 bytes: `$0\r\n\r\n`), and the server
    /// closes the client on that reply. Err past [`MAX_RANDOM_PICKS`] without a limit.
    pub fn random_picks(&self, count: u64) -> Result<usize, Reply> {
        let cap = if self.reply_limit > 0 { self.reply_limit / 6 + 1 } else { u64::MAX };
        let n = count.min(cap);
        if n > MAX_RANDOM_PICKS {
            return Err(Reply::err("ERR value is out of range"));
        }
        Ok(n as usize)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ks: &'a mut Keyspace,
        cfg: &'a Config,
        db: usize,
        now: i64,
        mode: ExpireMode,
        rng: &'a mut fastrand::Rng,
        stats: &'a mut Stats,
        fx: &'a mut Effects,
    ) -> Ctx<'a> {
        let lru =
            if cfg.lfu { crate::keyspace::lfu::init(now) } else { ((now / 1000) as u32) & crate::keyspace::LRU_MAX };
        Ctx {
            ks,
            cfg,
            db,
            now,
            lru,
            mode,
            rng,
            stats,
            fx,
            dirty: 0,
            rewrite: None,
            suppress: false,
            no_touch: false,
            reply_limit: 0,
        }
    }

    pub(super) fn begin_command(&mut self) {
        self.dirty = 0;
        self.rewrite = None;
        self.suppress = false;
        self.stats.commands += 1;
    }

    pub(super) fn end_command(&mut self, argv: &[Vec<u8>]) {
        self.stats.dirty += self.dirty;
        if self.dirty > 0 && !self.suppress && !self.fx.propagation_off {
            let argv = self.rewrite.take().unwrap_or_else(|| argv.to_vec());
            self.fx.propagate.push((self.db, argv));
        }
    }

    // ------------------------------------------------------------ propagation

    /// Propagate this command as `argv` instead of as called.
    pub fn rewrite(&mut self, argv: Argv) {
        self.rewrite = Some(argv);
    }

    /// Do not propagate the command itself (it propagated its effects explicitly).
    pub fn suppress_propagation(&mut self) {
        self.suppress = true;
    }

    /// Propagate an extra command, now (before the command itself).
    pub fn propagate(&mut self, argv: Argv) {
        self.fx.propagate.push((self.db, argv));
    }

    /// Propagate an extra command in database `db`.
    pub fn propagate_in(&mut self, db: usize, argv: Argv) {
        self.fx.propagate.push((db, argv));
    }

    // ------------------------------------------------------------ notifications

    /// Fire a keyspace event for `key` in the selected database.
    pub fn notify(&mut self, class: u32, name: &'static str, key: &[u8]) {
        let db = self.db;
        self.notify_in(db, class, name, key);
    }

    pub fn notify_in(&mut self, db: usize, class: u32, name: &'static str, key: &[u8]) {
        if self.fx.track_events {
            self.fx.events.push(Event { class, name, db, key: key.to_vec() });
        }
    }

    /// Record that `key` changed (WATCH).
    pub fn signal_modified(&mut self, key: &[u8]) {
        let db = self.db;
        self.signal_modified_in(db, key);
    }

    pub fn signal_modified_in(&mut self, db: usize, key: &[u8]) {
        if self.fx.track_modified {
            self.fx.modified.push((db, crate::value::sds(key)));
        }
    }

    /// Wake the clients blocked on `key` without touching WATCH (signalKeyAsReady).
    pub fn signal_ready(&mut self, key: &[u8]) {
        if self.fx.track_modified {
            self.fx.ready.push((self.db, crate::value::sds(key)));
        }
    }

    // ------------------------------------------------------------ expiry

    /// Whether `key` in `db` is logically expired now (false while loading).
    pub fn is_expired_in(&self, db: usize, key: &[u8]) -> bool {
        if self.mode == ExpireMode::Loading {
            return false;
        }
        match self.ks.dbs[db].get(key) {
            Some(s) => self.ks.dbs[db].expire_of(s).is_some_and(|t| self.now > t),
            None => false,
        }
    }

    /// Redis's expireIfNeeded: true when `key` is expired (and, on a master, now deleted,
    /// with its DEL/UNLINK propagated and an `expired` event fired).
    pub fn expire_if_needed_in(&mut self, db: usize, key: &[u8]) -> bool {
        if !self.is_expired_in(db, key) {
            return false;
        }
        if matches!(self.mode, ExpireMode::Replica | ExpireMode::Writable) {
            return true;
        }
        if let Some(pos) = self.ks.dbs[db].find(key) {
            self.delete_expired_at(db, pos, key);
        }
        true
    }

    /// Delete the expired key at `pos` (its value freed as lazyfree-lazy-expire says) and
    /// do the bookkeeping.
    fn delete_expired_at(&mut self, db: usize, pos: usize, key: &[u8]) {
        let slot = self.ks.dbs[db].remove_at(pos);
        crate::keyspace::lazyfree::free_expired(slot.value, self.cfg);
        self.expired_deleted(db, key);
    }

    pub fn expire_if_needed(&mut self, key: &[u8]) -> bool {
        let db = self.db;
        self.expire_if_needed_in(db, key)
    }

    /// Bookkeeping after an expired key was deleted (lazily or by the active cycle).
    pub fn expired_deleted(&mut self, db: usize, key: &[u8]) {
        self.stats.expired_keys += 1;
        self.notify_in(db, notify::EXPIRED, "expired", key);
        self.signal_modified_in(db, key);
        let cmd: &[u8] = if self.cfg.lazyfree_lazy_expire { b"UNLINK" } else { b"DEL" };
        self.propagate_in(db, vec![cmd.to_vec(), key.to_vec()]);
    }

    // ------------------------------------------------------------ lookups

    /// Look a key up for reading: expire it if due, count a hit or miss, touch its LRU.
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<&mut Value> {
        let db = self.db;
        self.lookup_read_in(db, key)
    }

    pub fn lookup_read_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Value> {
        match self.find_live(db, key, false) {
            Some(pos) => {
                self.stats.keyspace_hits += 1;
                let s = self.ks.dbs[db].slot_mut(pos);
                if !self.no_touch {
                    s.lru = touched(s.lru, self.lru, self.now, self.cfg, self.rng);
                }
                Some(&mut s.value)
            }
            None => {
                self.stats.keyspace_misses += 1;
                if self.fx.track_events {
                    self.fx.events.push(Event { class: notify::KEY_MISS, name: "keymiss", db, key: key.to_vec() });
                }
                None
            }
        }
    }

    /// The position of `key` in `db` after the expiry check, with one hash probe: an
    /// expired key is deleted on a master (DEL/UNLINK propagated) and missing for it; on a
    /// replica it is missing for reads, and for writes kept as it is (paused) or deleted
    /// (a writable replica's clients); loading never expires.
    fn find_live(&mut self, db: usize, key: &[u8], write: bool) -> Option<usize> {
        let pos = self.ks.dbs[db].find(key)?;
        let expire = self.ks.dbs[db].expire_at(pos);
        if expire.is_none_or(|t| self.now <= t) || self.mode == ExpireMode::Loading {
            return Some(pos);
        }
        match self.mode {
            ExpireMode::Replica if write => Some(pos),
            ExpireMode::Replica | ExpireMode::Writable if !write => None,
            _ => {
                self.delete_expired_at(db, pos, key);
                None
            }
        }
    }

    /// Look a key up for writing: expire it if due, touch its LRU.
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<&mut Value> {
        let db = self.db;
        self.lookup_write_in(db, key)
    }

    pub fn lookup_write_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Value> {
        let pos = self.find_live(db, key, true)?;
        let s = self.ks.dbs[db].slot_mut(pos);
        if !self.no_touch {
            s.lru = touched(s.lru, self.lru, self.now, self.cfg, self.rng);
        }
        Some(&mut s.value)
    }

    /// Look a key up without touching LRU or stats (TYPE-like and OBJECT lookups still expire).
    /// A miss fires `keymiss`, as Redis's read lookups do.
    pub fn lookup_slot(&mut self, key: &[u8]) -> Option<&Slot> {
        let pos = self.lookup_pos(key)?;
        Some(self.ks.dbs[self.db].slot(pos))
    }

    /// [`Ctx::lookup_slot`], with the key's absolute expiry (unix ms).
    pub fn lookup_slot_with_expire(&mut self, key: &[u8]) -> Option<(&Slot, Option<i64>)> {
        let pos = self.lookup_pos(key)?;
        let db = &self.ks.dbs[self.db];
        Some((db.slot(pos), db.expire_at(pos)))
    }

    /// The live key's position in the current database; a miss fires `keymiss`.
    fn lookup_pos(&mut self, key: &[u8]) -> Option<usize> {
        let db = self.db;
        let pos = self.find_live(db, key, false);
        if pos.is_none() && self.fx.track_events {
            self.fx.events.push(Event { class: notify::KEY_MISS, name: "keymiss", db, key: key.to_vec() });
        }
        pos
    }

    /// [`Ctx::lookup_slot`] without the `keymiss` event (OBJECT).
    pub fn lookup_slot_quiet(&mut self, key: &[u8]) -> Option<&Slot> {
        let db = self.db;
        let pos = self.find_live(db, key, false)?;
        Some(self.ks.dbs[db].slot(pos))
    }

    /// Whether `key` exists (after the expiry check).
    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.lookup_slot(key).is_some()
    }

    // ------------------------------------------------------------ writes

    /// Add a key that does not exist (dbAdd).
    pub fn db_add(&mut self, key: &[u8], value: Value) {
        let db = self.db;
        let lru = self.lru;
        self.ks.dbs[db].add(key, value, lru);
        self.signal_modified(key);
        self.notify(notify::NEW, "new", key);
    }

    /// Store a value, replacing any (setKey): the TTL is dropped unless `keep_ttl`.
    pub fn db_set(&mut self, key: &[u8], value: Value, keep_ttl: bool) {
        let db = self.db;
        self.db_set_in(db, key, value, keep_ttl);
    }

    pub fn db_set_in(&mut self, db: usize, key: &[u8], value: Value, keep_ttl: bool) {
        // setKey looks the key up for writing first: an expired one is deleted (and its
        // DEL propagated) before the new value goes in.
        let lru = self.lru;
        match self.find_live(db, key, true) {
            Some(pos) => self.ks.dbs[db].set_at(pos, value, keep_ttl, lru),
            None => {
                self.ks.dbs[db].add(key, value, lru);
                self.notify_in(db, notify::NEW, "new", key);
            }
        }
        self.signal_modified_in(db, key);
    }

    /// Delete a key (no expiry check: callers look it up first); true when it was there.
    pub fn db_delete(&mut self, key: &[u8]) -> bool {
        let db = self.db;
        self.db_delete_in(db, key)
    }

    pub fn db_delete_in(&mut self, db: usize, key: &[u8]) -> bool {
        self.db_delete_with(db, key, false)
    }

    /// Delete `key`, its value freed on the lazyfree thread when it is big (UNLINK, and the
    /// deletions lazyfree-lazy-* settings make lazy).
    pub fn db_delete_lazy(&mut self, key: &[u8]) -> bool {
        let db = self.db;
        self.db_delete_with(db, key, true)
    }

    fn db_delete_with(&mut self, db: usize, key: &[u8], lazy: bool) -> bool {
        let Some(slot) = self.ks.dbs[db].remove(key) else { return false };
        if lazy {
            crate::keyspace::lazyfree::free_value(slot.value);
        }
        self.signal_modified_in(db, key);
        true
    }

    /// Get the value at `key` for writing, creating it with `make` when missing.
    pub fn lookup_write_or_insert(&mut self, key: &[u8], make: impl FnOnce() -> Value) -> &mut Value {
        let db = self.db;
        let lru = self.lru;
        let pos = match self.find_live(db, key, true) {
            Some(p) => p,
            None => {
                let p = self.ks.dbs[db].add(key, make(), lru);
                self.notify_in(db, notify::NEW, "new", key);
                p
            }
        };
        let s = self.ks.dbs[db].slot_mut(pos);
        if !self.no_touch {
            s.lru = touched(s.lru, lru, self.now, self.cfg, self.rng);
        }
        &mut s.value
    }

    /// Delete `key` if its collection is now empty, firing the `del` event; true if deleted.
    pub fn delete_if_empty(&mut self, key: &[u8]) -> bool {
        let db = self.db;
        let empty = self.ks.dbs[db].get(key).is_some_and(|s| s.value.is_empty() && !matches!(s.value, Value::Str(_)));
        if empty {
            self.db_delete(key);
            self.notify(notify::GENERIC, "del", key);
        }
        empty
    }

    /// The absolute expiry of `key`, if it has one.
    pub fn expire_of(&self, key: &[u8]) -> Option<i64> {
        self.ks.dbs[self.db].get_with_expire(key).and_then(|(_, t)| t)
    }

    /// Set the absolute expiry of an existing key.
    pub fn set_expire(&mut self, key: &[u8], when: i64) {
        let db = self.db;
        if let Some(p) = self.ks.dbs[db].find(key) {
            self.ks.dbs[db].set_expire_at(p, when);
        }
    }

    /// Drop the TTL of `key`; true when it had one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        let db = self.db;
        match self.ks.dbs[db].find(key) {
            Some(p) => self.ks.dbs[db].clear_expire_at(p),
            None => false,
        }
    }
}

/// A key's `lru` field after an access: the LRU clock, or the LFU update under an LFU
/// maxmemory-policy.
fn touched(field: u32, lru_now: u32, now_ms: i64, cfg: &Config, rng: &mut fastrand::Rng) -> u32 {
    if cfg.lfu {
        crate::keyspace::lfu::touch(field, now_ms, cfg, rng)
    } else {
        lru_now
    }
}
