//! Hashes: a "listpack" (field/value pairs in insertion order) while small, a "hashtable"
//! once a count or a length passes `hash-max-listpack-entries` / `-value`. Redis never
//! converts back.

use indexmap::IndexMap;

use super::{sds, Limits, Sds};

pub type Table = IndexMap<Sds, Sds, foldhash::fast::RandomState>;

#[derive(Debug, Clone, PartialEq)]
pub enum Hash {
    Listpack(Vec<(Sds, Sds)>),
    Table(Table),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Vec::new())
    }
}

impl Hash {
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(v) => v.len(),
            Hash::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Field/value pairs in the order HGETALL returns them.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&Sds, &Sds)> + '_> {
        match self {
            Hash::Listpack(v) => Box::new(v.iter().map(|(f, v)| (f, v))),
            Hash::Table(t) => Box::new(t.iter()),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&Sds> {
        match self {
            Hash::Listpack(v) => v.iter().find(|(f, _)| f.as_slice() == field).map(|(_, v)| v),
            Hash::Table(t) => t.get(field),
        }
    }

    /// Set a field; true when it is new. Converts to a hashtable when a limit is passed.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        if let Hash::Listpack(v) = self {
            if field.len() > limits.hash_max_listpack_value || value.len() > limits.hash_max_listpack_value {
                self.convert();
            } else if let Some(slot) = v.iter_mut().find(|(f, _)| f.as_slice() == field) {
                slot.1 = sds(value);
                return false;
            } else {
                v.push((sds(field), sds(value)));
                if v.len() > limits.hash_max_listpack_entries {
                    self.convert();
                }
                return true;
            }
        }
        match self {
            Hash::Table(t) => t.insert(sds(field), sds(value)).is_none(),
            Hash::Listpack(_) => unreachable!("converted above"),
        }
    }

    /// Remove a field; true when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(v) => match v.iter().position(|(f, _)| f.as_slice() == field) {
                Some(i) => {
                    v.remove(i);
                    true
                }
                None => false,
            },
            Hash::Table(t) => t.swap_remove(field).is_some(),
        }
    }

    /// Switch to the hashtable encoding.
    pub fn convert(&mut self) {
        if let Hash::Listpack(v) = self {
            let t: Table = std::mem::take(v).into_iter().collect();
            *self = Hash::Table(t);
        }
    }
}
