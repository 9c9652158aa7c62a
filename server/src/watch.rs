//! WATCH: which clients watch which keys, and flagging their transactions when a key
//! they watch is written, expires, is flushed or swapped.

use crate::client::Client;
use crate::server::Server;

impl Server {
    /// Flag the clients watching keys the last commands changed.
    pub fn touch_modified(&mut self, current: &mut Client) {
        self.touch_swapped(current);
        if !self.engine.effects().ready.is_empty() {
            let ready = std::mem::take(&mut self.engine.effects_mut().ready);
            self.blocking.note_modified(&ready);
        }
        if self.engine.effects().modified.is_empty() && self.engine.effects().flushes.is_empty() {
            return;
        }
        let modified = std::mem::take(&mut self.engine.effects_mut().modified);
        let flushes = std::mem::take(&mut self.engine.effects_mut().flushes);
        if !current.master {
            self.note_local_ttls(&modified);
        }
        self.blocking.note_modified(&modified);
        self.tracking_written(Some(current), &modified, &flushes);
        for (db, key) in modified {
            self.touch_key(Some(current), db, &key);
        }
    }

    /// Keys the server changed on its own (active expiry, eviction, a lazy expiry while it
    /// serves blocked clients): flag their watchers, and wake the readers of a deleted stream.
    pub(crate) fn touch_modified_here(&mut self) {
        if self.engine.effects().modified.is_empty() && self.engine.effects().flushes.is_empty() {
            return;
        }
        let modified = std::mem::take(&mut self.engine.effects_mut().modified);
        let flushes = std::mem::take(&mut self.engine.effects_mut().flushes);
        self.blocking.note_modified(&modified);
        self.tracking_written(None, &modified, &flushes);
        for (db, key) in modified {
            self.touch_key(None, db, &key);
        }
    }

    /// Flag the transactions watching `key` of `db` (Redis's touchWatchedKey). A watcher
    /// that found the key already expired is not flagged when the key is gone now (it did
    /// not change, logically). One that is there again was written after its expired copy
    /// was deleted: Redis sees the deletion (no change) then the write (a change), the
    /// batch here only the result, and flags it as Redis ends up doing.
    pub(crate) fn touch_key(&mut self, mut current: Option<&mut Client>, db: usize, key: &[u8]) {
        let Some(ids) = self.watched.get(&(db, key.to_vec())).cloned() else { return };
        let gone = self.engine.keyspace().dbs.get(db).is_none_or(|d| d.get(key).is_none());
        for id in ids {
            let c = match &mut current {
                Some(c) if c.id == id => &mut **c,
                _ => match self.clients.get_mut(&id) {
                    Some(c) => c.as_mut(),
                    None => continue,
                },
            };
            if c.watch_dirty {
                // Redis unwatches a flagged client's keys: it is no longer in the list.
                continue;
            }
            if let Some(w) = c.watched.iter_mut().find(|w| w.0 == db && w.1 == key) {
                if w.2 && gone {
                    w.2 = false;
                    continue;
                }
            }
            c.watch_dirty = true;
        }
    }

    /// After SWAPDB x y, Redis's touchAllWatchedKeysInDb for each side: the watchers of a
    /// key of x see x's old keys emptied (now in y) and replaced by y's (now in x). A key
    /// that was expired when watched and is gone or still expired is no change; a missing
    /// key replaced by an expired one becomes one watched as expired.
    pub(crate) fn touch_swapped(&mut self, current: &mut Client) {
        if self.engine.effects().swapped_dbs.is_empty() {
            return;
        }
        let swapped = std::mem::take(&mut self.engine.effects_mut().swapped_dbs);
        for (x, y) in swapped {
            for (watch_db, emptied) in [(x, y), (y, x)] {
                let keys: Vec<Vec<u8>> =
                    self.watched.keys().filter(|(d, _)| *d == watch_db).map(|(_, k)| k.clone()).collect();
                for key in keys {
                    let exists = |db: usize| self.engine.keyspace().dbs.get(db).is_some_and(|d| d.get(&key).is_some());
                    let (in_emptied, in_replaced) = (exists(emptied), exists(watch_db));
                    if !in_emptied && !in_replaced {
                        continue;
                    }
                    let replaced_expired = in_replaced && self.key_is_expired(watch_db, &key);
                    let ids = self.watched.get(&(watch_db, key.clone())).cloned().unwrap_or_default();
                    for id in ids {
                        let c = if id == current.id {
                            &mut *current
                        } else {
                            match self.clients.get_mut(&id) {
                                Some(c) => c.as_mut(),
                                None => continue,
                            }
                        };
                        if let Some(w) = c.watched.iter_mut().find(|w| w.0 == watch_db && w.1 == key) {
                            if w.2 {
                                if !in_replaced {
                                    w.2 = false;
                                    continue;
                                }
                                if replaced_expired {
                                    continue;
                                }
                            } else if !in_emptied && replaced_expired {
                                w.2 = true;
                                continue;
                            }
                        }
                        c.watch_dirty = true;
                    }
                }
                if x == y {
                    break;
                }
            }
        }
    }

    /// Flag every client watching a key: the whole dataset was replaced.
    pub fn touch_every_watcher(&mut self) {
        let ids: Vec<u64> = self.watched.values().flatten().copied().collect();
        for id in ids {
            if let Some(c) = self.clients.get_mut(&id) {
                c.watch_dirty = true;
            }
        }
    }

    /// Flag every client watching a key of `db` (or of every database) that exists.
    pub fn touch_all_watched(&mut self, current: &mut Client) {
        let ids: Vec<u64> = self.watched.values().flatten().copied().collect();
        for id in ids {
            if id == current.id {
                current.watch_dirty = true;
            } else if let Some(other) = self.clients.get_mut(&id) {
                other.watch_dirty = true;
            }
        }
    }

    pub fn watch_key(&mut self, c: &mut Client, key: &[u8]) {
        let db = c.session.db;
        if c.watched.iter().any(|(d, k, _)| *d == db && k == key) {
            return;
        }
        let expired = self.key_is_expired(db, key);
        c.watched.push((db, key.to_vec(), expired));
        self.watched.entry((db, key.to_vec())).or_default().push(c.id);
        self.engine.effects_mut().track_modified = true;
    }

    pub fn unwatch_all(&mut self, c: &mut Client) {
        for (db, key, _) in c.watched.drain(..) {
            let k = (db, key);
            if let Some(ids) = self.watched.get_mut(&k) {
                ids.retain(|&i| i != c.id);
                if ids.is_empty() {
                    self.watched.remove(&k);
                }
            }
        }
        c.watch_dirty = false;
        self.sync_modified_tracking();
    }

    /// Whether the engine lists the keys commands write: while a client watches keys, is
    /// blocked on some, or tracks what it reads.
    pub(crate) fn sync_modified_tracking(&mut self) {
        // A replica notes the TTLs its own clients set (it expires those keys itself).
        let wanted = !self.watched.is_empty()
            || self.blocking.is_active()
            || self.tracking.wants_writes()
            || self.link.is_some();
        self.engine.effects_mut().track_modified = wanted;
    }
}
