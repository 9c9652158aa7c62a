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
        if self.engine.effects().modified.is_empty() {
            return;
        }
        let modified = std::mem::take(&mut self.engine.effects_mut().modified);
        self.blocking.note_modified(&modified);
        for (db, key) in modified {
            if let Some(ids) = self.watched.get(&(db, key.to_vec())) {
                for id in ids {
                    if *id == current.id {
                        current.watch_dirty = true;
                    } else if let Some(other) = self.clients.get_mut(id) {
                        other.watch_dirty = true;
                    }
                }
            }
        }
    }

    /// After SWAPDB, flag the clients watching a key of either database that exists in
    /// one of them (it appeared, vanished or changed), as Redis does.
    pub(crate) fn touch_swapped(&mut self, current: &mut Client) {
        if self.engine.effects().swapped_dbs.is_empty() {
            return;
        }
        let swapped = std::mem::take(&mut self.engine.effects_mut().swapped_dbs);
        let exists =
            |s: &Server, db: usize, key: &[u8]| s.engine.keyspace().dbs.get(db).is_some_and(|d| d.get(key).is_some());
        let mut touched = Vec::new();
        for (x, y) in swapped {
            for ((db, key), ids) in &self.watched {
                if (*db == x || *db == y) && (exists(self, x, key) || exists(self, y, key)) {
                    touched.extend(ids.iter().copied());
                }
            }
        }
        for id in touched {
            if id == current.id {
                current.watch_dirty = true;
            } else if let Some(other) = self.clients.get_mut(&id) {
                other.watch_dirty = true;
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
        self.engine.effects_mut().track_modified = !self.watched.is_empty() || self.blocking.is_active();
    }
}
