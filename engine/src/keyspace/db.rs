//! One database: the main dict and, beside it, the index of keys with a TTL.
//!
//! Entries live in a dense `Vec` (one allocation for all, no per-key node) and a
//! `HashTable<u32>` finds them by key. Removal swaps the last entry into the hole, so a
//! SCAN cursor walks positions downwards: an entry moved by a removal goes from an
//! already-visited position to an unvisited one, never the other way, and every key
//! present for the whole scan is returned at least once, as SCAN promises.

use std::collections::BTreeSet;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::barrier::DbSnapshot;
use super::slot::{Key, Keys, Slot, Ttl, NO_TTL};
use crate::value::{sds, Sds, Value};

pub struct Db {
    index: HashTable<u32>,
    slots: Vec<Slot>,
    /// The keys with a TTL (the "expires dict"): each one's expiry and slot position.
    volatile: Vec<Ttl>,
    hasher: foldhash::fast::RandomState,
    /// A background snapshot copying this database: every mutation first copies the
    /// key's old value when the snapshot still needs it (the write barrier).
    pub(super) snap: Option<Box<DbSnapshot>>,
    /// Hashes with field TTLs, by the time each is registered under (Redis's `hexpires`;
    /// see [`crate::value::Hash::registered`]): what the active cycle visits.
    hexpires: BTreeSet<(u64, Sds)>,
}

impl Default for Db {
    fn default() -> Self {
        Db {
            index: HashTable::new(),
            slots: Vec::new(),
            volatile: Vec::new(),
            hasher: Default::default(),
            snap: None,
            hexpires: BTreeSet::new(),
        }
    }
}

impl Clone for Db {
    /// The data only: a copy takes no part in a running snapshot.
    fn clone(&self) -> Self {
        Db {
            index: self.index.clone(),
            slots: self.slots.clone(),
            volatile: self.volatile.clone(),
            hasher: self.hasher.clone(),
            snap: None,
            hexpires: self.hexpires.clone(),
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("keys", &self.slots.len()).field("volatile", &self.volatile.len()).finish()
    }
}

impl Db {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Keys with a TTL.
    pub fn volatile_len(&self) -> usize {
        self.volatile.len()
    }

    /// Position of `key`, whatever its TTL says.
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        let h = self.hash(key);
        self.index.find(h, |&i| self.slots[i as usize].key.as_slice() == key).map(|&i| i as usize)
    }

    pub fn slot(&self, pos: usize) -> &Slot {
        &self.slots[pos]
    }

    /// The absolute expiry (unix ms) of `slot`, a key of this database.
    pub fn expire_of(&self, slot: &Slot) -> Option<i64> {
        slot.expire_in(&self.volatile)
    }

    /// The absolute expiry (unix ms) of the key at `pos`.
    pub fn expire_at(&self, pos: usize) -> Option<i64> {
        self.expire_of(&self.slots[pos])
    }

    /// The key `key` with its expiry.
    pub fn get_with_expire(&self, key: &[u8]) -> Option<(&Slot, Option<i64>)> {
        self.get(key).map(|s| (s, self.expire_of(s)))
    }

    /// Every key with its expiry, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (&Slot, Option<i64>)> {
        self.iter_range(0..self.slots.len())
    }

    /// The keys at positions `range` with their expiries.
    pub fn iter_range(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = (&Slot, Option<i64>)> {
        self.slots[range].iter().map(|s| (s, self.expire_of(s)))
    }

    pub fn slot_mut(&mut self, pos: usize) -> &mut Slot {
        self.before_write(pos);
        &mut self.slots[pos]
    }

    /// The running snapshot's state beside the keys it copies from.
    pub(super) fn snapshot_parts(&mut self) -> (Option<&mut DbSnapshot>, Keys<'_>) {
        (self.snap.as_deref_mut(), Keys::new(&self.slots, &self.volatile))
    }

    /// The write barrier: a running snapshot copies the key at `pos` before it changes.
    #[inline]
    fn before_write(&mut self, pos: usize) {
        if let Some(snap) = self.snap.as_deref_mut() {
            let keys = Keys::new(&self.slots, &self.volatile);
            snap.copy_if_pending(pos, keys);
        }
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    pub fn get(&self, key: &[u8]) -> Option<&Slot> {
        self.find(key).map(|p| &self.slots[p])
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Slot> {
        let pos = self.find(key)?;
        self.before_write(pos);
        Some(&mut self.slots[pos])
    }

    /// Add a key that is not there; returns its position.
    pub fn add(&mut self, key: &[u8], value: Value, lru: u32) -> usize {
        let pos = self.slots.len();
        let h = self.hash(key);
        let slots = &self.slots;
        let hasher = &self.hasher;
        self.index.insert_unique(h, pos as u32, |&i| hasher.hash_one(slots[i as usize].key.as_slice()));
        self.index_hash_ttls(key, &value, true);
        self.slots.push(Slot { key: Key::new(key), value, lru, ttl: NO_TTL });
        pos
    }

    /// Add `key` unless it is already there (one hash lookup); its position, or None.
    pub fn add_new(&mut self, key: &[u8], value: Value, lru: u32) -> Option<usize> {
        let pos = self.slots.len();
        let h = self.hash(key);
        let slots = &self.slots;
        let hasher = &self.hasher;
        match self.index.entry(
            h,
            |&i| slots[i as usize].key.as_slice() == key,
            |&i| hasher.hash_one(slots[i as usize].key.as_slice()),
        ) {
            hashbrown::hash_table::Entry::Occupied(_) => return None,
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(pos as u32);
            }
        }
        self.index_hash_ttls(key, &value, true);
        self.slots.push(Slot { key: Key::new(key), value, lru, ttl: NO_TTL });
        Some(pos)
    }

    /// Store `value` under `key`: replace the value of an existing key (dropping its TTL
    /// unless `keep_ttl`), or add the key. Returns its position.
    pub fn set(&mut self, key: &[u8], value: Value, keep_ttl: bool, lru: u32) -> usize {
        match self.find(key) {
            Some(pos) => {
                self.set_at(pos, value, keep_ttl, lru);
                pos
            }
            None => self.add(key, value, lru),
        }
    }

    /// Replace the value of the key at `pos` (dropping its TTL unless `keep_ttl`).
    pub fn set_at(&mut self, pos: usize, value: Value, keep_ttl: bool, lru: u32) {
        self.before_write(pos);
        let old = std::mem::replace(&mut self.slots[pos].value, value);
        // The key is copied only when a hash registered for field expiry comes or goes.
        let registered = |v: &Value| match v {
            Value::Hash(h) => h.registered(),
            _ => None,
        };
        let slot = &self.slots[pos];
        if let Some(when) = registered(&old) {
            self.hexpires.remove(&(when, slot.key.to_sds()));
        }
        if let Some(when) = registered(&slot.value) {
            self.hexpires.insert((when, slot.key.to_sds()));
        }
        self.slots[pos].lru = lru;
        if !keep_ttl {
            self.clear_expire_at(pos);
        }
    }

    /// Remove a key; returns its slot.
    pub fn remove(&mut self, key: &[u8]) -> Option<Slot> {
        let pos = self.find(key)?;
        Some(self.remove_at(pos))
    }

    /// Remove the key at `pos` (with its TTL); the last entry moves into its place.
    pub fn remove_at(&mut self, pos: usize) -> Slot {
        self.before_write(pos);
        self.clear_expire_at(pos);
        let h = self.hash(&self.slots[pos].key);
        if let Ok(e) = self.index.find_entry(h, |&i| i as usize == pos) {
            e.remove();
        }
        let last = self.slots.len() - 1;
        if pos != last {
            let hl = self.hash(&self.slots[last].key);
            if let Some(i) = self.index.find_mut(hl, |&i| i as usize == last) {
                *i = pos as u32;
            }
            if let Some(t) = self.volatile.get_mut(self.slots[last].ttl as usize) {
                t.pos = pos as u32;
            }
        }
        if let Some(snap) = self.snap.as_deref_mut() {
            snap.moved(last, pos);
        }
        let slot = self.slots.swap_remove(pos);
        self.index_hash_ttls(&slot.key, &slot.value, false);
        slot
    }

    /// Keep [`Db::hexpires`] in step with a value coming (`added`) or going.
    fn index_hash_ttls(&mut self, key: &[u8], value: &Value, added: bool) {
        if let Value::Hash(h) = value {
            if let Some(when) = h.registered() {
                if added {
                    self.hexpires.insert((when, sds(key)));
                } else {
                    self.hexpires.remove(&(when, sds(key)));
                }
            }
        }
    }

    /// Register the hash at `pos` under `when` for field expiry (None: unregister).
    pub fn set_hash_registered(&mut self, pos: usize, when: Option<u64>) {
        self.before_write(pos);
        let key = self.slots[pos].key.to_sds();
        if let Value::Hash(h) = &mut self.slots[pos].value {
            if let Some(old) = h.registered() {
                self.hexpires.remove(&(old, key.clone()));
            }
            h.set_registered(when);
            if let Some(new) = when {
                self.hexpires.insert((new, key));
            }
        }
    }

    /// Hashes registered for field expiry (INFO's `subexpiry`).
    pub fn hash_ttl_len(&self) -> usize {
        self.hexpires.len()
    }

    /// The hashes registered at or before `now`, earliest first, up to `max`.
    pub fn hashes_due(&self, now: i64, max: usize) -> Vec<Sds> {
        let Ok(now) = u64::try_from(now) else { return Vec::new() };
        self.hexpires.iter().take_while(|(when, _)| *when <= now).take(max).map(|(_, k)| k.clone()).collect()
    }

    /// Drop a registration whose key no longer holds a hash registered under it.
    pub fn unregister_stale(&mut self, key: &[u8]) {
        let live = match self.get(key).map(|s| &s.value) {
            Some(Value::Hash(h)) => h.registered(),
            _ => None,
        };
        self.hexpires.retain(|(when, k)| k.as_slice() != key || Some(*when) == live);
    }

    /// Set the absolute expiry of the key at `pos`.
    pub fn set_expire_at(&mut self, pos: usize, when: i64) {
        self.before_write(pos);
        let s = &mut self.slots[pos];
        match self.volatile.get_mut(s.ttl as usize) {
            Some(t) => t.at = when,
            None => {
                s.ttl = self.volatile.len() as u32;
                self.volatile.push(Ttl { at: when, pos: pos as u32 });
            }
        }
    }

    /// Drop the TTL of the key at `pos`; true when it had one.
    pub fn clear_expire_at(&mut self, pos: usize) -> bool {
        if !self.slots[pos].has_ttl() {
            return false;
        }
        self.before_write(pos);
        let vp = self.slots[pos].ttl as usize;
        self.slots[pos].ttl = NO_TTL;
        self.volatile.swap_remove(vp);
        if let Some(moved) = self.volatile.get(vp) {
            self.slots[moved.pos as usize].ttl = vp as u32;
        }
        true
    }

    /// The `i`-th key with a TTL (for sampling): its position and expiry.
    pub fn volatile_at(&self, i: usize) -> (usize, i64) {
        let t = self.volatile[i];
        (t.pos as usize, t.at)
    }

    /// A random key position, if any.
    pub fn random_pos(&self, rng: &mut fastrand::Rng) -> Option<usize> {
        (!self.slots.is_empty()).then(|| rng.usize(..self.slots.len()))
    }

    /// One SCAN step: visit up to `count` positions below the cursor; returns the next
    /// cursor (0 when done). Cursor 0 starts at the top.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&Slot)) -> u64 {
        let len = self.slots.len() as u64;
        let mut next = if cursor == 0 || cursor > len { len } else { cursor };
        let mut n = 0;
        while next > 0 && n < count.max(1) {
            next -= 1;
            visit(&self.slots[next as usize]);
            n += 1;
        }
        next
    }

    pub fn clear(&mut self) {
        drop(self.take_keys());
    }

    /// Empty the database, handing back its keys for freeing elsewhere (FLUSHALL ASYNC);
    /// empty when a running snapshot took them.
    pub fn take_keys(&mut self) -> Vec<Slot> {
        let snap = self.snap.take();
        let old = std::mem::replace(self, Db { hasher: self.hasher.clone(), ..Db::default() });
        match snap {
            Some(mut snap) => {
                // The keys the snapshot still needs move to it whole (no value is copied).
                snap.take_pending(old.slots, &old.volatile);
                self.snap = Some(snap);
                Vec::new()
            }
            None => old.slots,
        }
    }

    /// Whether a running snapshot still has to copy the key at `pos` (a change to it
    /// copies it first).
    pub fn snapshot_pending(&self, pos: usize) -> bool {
        self.snap.as_deref().is_some_and(|s| s.is_pending(pos))
    }

    /// Give back the room of keys long gone: when fewer than a tenth of the slot array's
    /// capacity is used (Redis resizes a dict under 10 % full), shrink it and the index
    /// to twice the keys. True when it shrank.
    pub fn shrink_if_sparse(&mut self) -> bool {
        let cap = self.slots.capacity();
        let len = self.slots.len();
        if cap <= 64 || len * 10 >= cap {
            return false;
        }
        let want = (len * 2).max(16);
        self.slots.shrink_to(want);
        self.volatile.shrink_to(self.volatile.len() * 2);
        let slots = &self.slots;
        let hasher = &self.hasher;
        self.index.shrink_to(want, |&i| hasher.hash_one(slots[i as usize].key.as_slice()));
        true
    }

    /// Keep room for only `keep` more keys when more than twice that is spare (the room
    /// of removed keys, which would otherwise be held until inserts reuse it). True when
    /// it shrank.
    pub fn shrink_spare(&mut self, keep: usize) -> bool {
        if self.spare_slots() <= 2 * keep {
            return false;
        }
        let want = self.slots.len() + keep;
        self.slots.shrink_to(want);
        let slots = &self.slots;
        let hasher = &self.hasher;
        self.index.shrink_to(want, |&i| hasher.hash_one(slots[i as usize].key.as_slice()));
        true
    }

    /// Keys that fit before the slot array next reallocates.
    pub fn spare_slots(&self) -> usize {
        self.slots.capacity() - self.slots.len()
    }

    /// Make room for exactly `n` more keys in the slot array, where doubling it would
    /// cost too much (near maxmemory, as Redis holds back a dict expansion there).
    pub fn grow_slots_exact(&mut self, n: usize) {
        self.slots.reserve_exact(n);
    }

    /// Reserve room for `n` more keys with a TTL (RESIZEDB on load).
    pub fn reserve_volatile(&mut self, n: usize) {
        self.volatile.reserve(n);
    }

    /// Reserve room for `n` more keys (RESIZEDB on load).
    pub fn reserve(&mut self, n: usize) {
        self.slots.reserve(n);
        let slots = &self.slots;
        let hasher = &self.hasher;
        self.index.reserve(n, |&i| hasher.hash_one(slots[i as usize].key.as_slice()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Str;

    fn v(s: &str) -> Value {
        Value::Str(Str::try_encode(s.as_bytes()))
    }

    #[test]
    fn add_remove_keeps_index_and_volatile_consistent() {
        let mut db = Db::default();
        for i in 0..100 {
            let p = db.add(format!("k{i}").as_bytes(), v("x"), 0);
            if i % 3 == 0 {
                db.set_expire_at(p, 1000 + i);
            }
        }
        assert_eq!(db.volatile_len(), 34);
        for i in (0..100).step_by(2) {
            assert!(db.remove(format!("k{i}").as_bytes()).is_some());
        }
        assert_eq!(db.len(), 50);
        for i in 0..100 {
            let s = db.get_with_expire(format!("k{i}").as_bytes());
            assert_eq!(s.is_some(), i % 2 == 1, "k{i}");
            if let Some((s, expire)) = s {
                assert_eq!(expire, (i % 3 == 0).then_some(1000 + i));
                assert_eq!(s.has_ttl(), expire.is_some());
            }
        }
        let with_ttl = (0..100).filter(|i| i % 2 == 1 && i % 3 == 0).count();
        assert_eq!(db.volatile_len(), with_ttl);
        for j in 0..db.volatile_len() {
            let (pos, at) = db.volatile_at(j);
            assert_eq!(db.expire_at(pos), Some(at));
        }
    }

    #[test]
    fn shrinking_a_sparse_database_keeps_every_key() {
        let mut db = Db::default();
        for i in 0..1000 {
            let p = db.add(format!("k{i}").as_bytes(), v("x"), 0);
            if i % 2 == 0 {
                db.set_expire_at(p, 1000 + i);
            }
        }
        assert!(!db.shrink_if_sparse());
        for i in 0..950 {
            db.remove(format!("k{i}").as_bytes());
        }
        assert!(db.shrink_if_sparse());
        assert!(db.slots.capacity() < 200);
        assert!(!db.shrink_if_sparse());
        for i in 950..1000 {
            let (_, expire) = db.get_with_expire(format!("k{i}").as_bytes()).expect("kept");
            assert_eq!(expire, (i % 2 == 0).then_some(1000 + i));
        }
        assert_eq!(db.volatile_len(), 25);
        db.grow_slots_exact(1000);
        assert!(db.spare_slots() >= 1000);
        assert!(db.shrink_spare(16));
        assert!(db.spare_slots() < 64);
        assert!(!db.shrink_spare(16));
        assert_eq!((950..1000).filter(|i| db.get(format!("k{i}").as_bytes()).is_some()).count(), 50);
    }

    #[test]
    fn scan_returns_every_key_present_throughout_despite_removals() {
        let mut db = Db::default();
        for i in 0..1000 {
            db.add(format!("k{i}").as_bytes(), v("x"), 0);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = db.scan(cursor, 10, |s| {
                seen.insert(s.key.to_vec());
            });
            // Remove keys divisible by 7 as the scan goes; add new ones too.
            round += 1;
            let _ = db.remove(format!("k{}", round * 7).as_bytes());
            db.add(format!("new{round}").as_bytes(), v("y"), 0);
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            if i % 7 != 0 || i / 7 > round {
                assert!(seen.contains(format!("k{i}").as_bytes()), "k{i} missed");
            }
        }
    }
}
