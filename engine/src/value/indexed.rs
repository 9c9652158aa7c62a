//! Items in a vector with an index of their positions by key: a big hashtable set's
//! members, a big hash's pairs, a skiplist zset's members and scores. Positions are the order SMEMBERS and HGETALL give and
//! what SSCAN, HSCAN, ZSCAN and the random picks walk; a removal moves the last item into the
//! hole. Unlike an IndexMap the index keeps no hash per item and 32-bit positions (past
//! 2^32 items a value would take hundreds of GB); hashes are recomputed from keys when
//! it grows.

use std::hash::BuildHasher;

use hashbrown::HashTable;

/// An item found by its key's bytes.
pub(super) trait Keyed {
    fn key(&self) -> &[u8];
}

#[derive(Clone, Default)]
pub(super) struct Indexed<T> {
    items: Vec<T>,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

impl<T: Keyed> Indexed<T> {
    pub(super) fn with_capacity(n: usize) -> Indexed<T> {
        Indexed { items: Vec::with_capacity(n), index: HashTable::with_capacity(n), hasher: Default::default() }
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn items(&self) -> &[T] {
        &self.items
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<&T> {
        let items = &self.items;
        let h = self.hasher.hash_one(key);
        self.index.find(h, |&i| items[i as usize].key() == key).map(|&i| &items[i as usize])
    }

    /// Add `item`, or replace the one with its key in place (which is returned).
    pub(super) fn insert(&mut self, item: T) -> Option<T> {
        let (items, hasher) = (&mut self.items, &self.hasher);
        let h = hasher.hash_one(item.key());
        if let Some(&i) = self.index.find(h, |&i| items[i as usize].key() == item.key()) {
            return Some(std::mem::replace(&mut items[i as usize], item));
        }
        self.index.insert_unique(h, items.len() as u32, |&i| hasher.hash_one(items[i as usize].key()));
        items.push(item);
        None
    }

    /// Remove the item of `key` and return it, moving the last one into its place.
    pub(super) fn swap_remove(&mut self, key: &[u8]) -> Option<T> {
        let items = &self.items;
        let h = self.hasher.hash_one(key);
        let (hole, _) = self.index.find_entry(h, |&i| items[i as usize].key() == key).ok()?.remove();
        let last = self.items.len() - 1;
        let removed = self.items.swap_remove(hole as usize);
        if let Some(moved) = self.items.get(hole as usize) {
            let h = self.hasher.hash_one(moved.key());
            if let Some(slot) = self.index.find_mut(h, |&i| i as usize == last) {
                *slot = hole;
            }
        }
        Some(removed)
    }

    /// Give back spare capacity (a value built whole).
    pub(super) fn fit(&mut self) {
        super::fit(&mut self.items);
        let (items, hasher) = (&self.items, &self.hasher);
        self.index.shrink_to_fit(|&i| hasher.hash_one(items[i as usize].key()));
    }
}
