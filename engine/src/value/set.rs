//! Sets: "intset" (sorted integers), "listpack" (insertion order, Redis 7.2+, off when
//! `set-max-listpack-entries` is 0 as in Redis 7.0) and "hashtable".

use indexmap::IndexSet;

use super::{sds, Limits, Sds};
use crate::format::blob::{fmt_i64, parse_canonical_i64};

pub type Table = IndexSet<Sds, foldhash::fast::RandomState>;

#[derive(Debug, Clone, PartialEq)]
pub enum Set {
    Intset(Vec<i64>),
    Listpack(Vec<Sds>),
    Table(Table),
}

impl Default for Set {
    fn default() -> Self {
        Set::Intset(Vec::new())
    }
}

impl Set {
    /// The empty set Redis creates for a first member `first`, expecting about `size_hint`
    /// members (setTypeCreate).
    pub fn create(first: &[u8], size_hint: usize, limits: &Limits) -> Set {
        if parse_canonical_i64(first).is_some() && size_hint <= limits.set_max_intset_entries {
            Set::Intset(Vec::new())
        } else if size_hint <= limits.set_max_listpack_entries {
            Set::Listpack(Vec::new())
        } else {
            Set::Table(Table::with_capacity_and_hasher(size_hint, Default::default()))
        }
    }

    /// The empty set for a known list of members (loading, SINTERSTORE and the like).
    pub fn for_members<'a>(mut members: impl Iterator<Item = &'a [u8]>, n: usize, limits: &Limits) -> Set {
        match members.next() {
            Some(first) => Set::create(first, n, limits),
            None => Set::default(),
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Intset(_) => "intset",
            Set::Listpack(_) => "listpack",
            Set::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Set::Intset(v) => v.len(),
            Set::Listpack(v) => v.len(),
            Set::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Intset(v) => parse_canonical_i64(m).is_some_and(|i| v.binary_search(&i).is_ok()),
            Set::Listpack(v) => v.iter().any(|e| e.as_slice() == m),
            Set::Table(t) => t.contains(m),
        }
    }

    /// Members in SMEMBERS order.
    pub fn members(&self) -> Vec<Vec<u8>> {
        match self {
            Set::Intset(v) => v.iter().map(|i| fmt_i64(*i, &mut [0u8; 20]).to_vec()).collect(),
            Set::Listpack(v) => v.iter().map(|e| e.to_vec()).collect(),
            Set::Table(t) => t.iter().map(|e| e.to_vec()).collect(),
        }
    }

    /// Add a member; true when it is new. Converts as Redis 7.2's setTypeAdd does.
    pub fn insert(&mut self, m: &[u8], limits: &Limits) -> bool {
        match self {
            Set::Intset(v) => {
                if let Some(i) = parse_canonical_i64(m) {
                    return match v.binary_search(&i) {
                        Ok(_) => false,
                        Err(at) => {
                            v.insert(at, i);
                            if v.len() > limits.set_max_intset_entries {
                                self.convert_to_table();
                            }
                            true
                        }
                    };
                }
                let longest = v.iter().map(|i| fmt_i64(*i, &mut [0u8; 20]).len()).max().unwrap_or(0);
                if v.len() < limits.set_max_listpack_entries
                    && m.len() <= limits.set_max_listpack_value
                    && longest <= limits.set_max_listpack_value
                {
                    let items = v.iter().map(|i| sds(fmt_i64(*i, &mut [0u8; 20]))).collect();
                    *self = Set::Listpack(items);
                } else {
                    self.convert_to_table();
                }
                self.insert(m, limits)
            }
            Set::Listpack(v) => {
                if v.iter().any(|e| e.as_slice() == m) {
                    return false;
                }
                if v.len() < limits.set_max_listpack_entries && m.len() <= limits.set_max_listpack_value {
                    v.push(sds(m));
                    return true;
                }
                self.convert_to_table();
                self.insert(m, limits)
            }
            Set::Table(t) => t.insert(sds(m)),
        }
    }

    /// Remove a member; true when it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Intset(v) => match parse_canonical_i64(m).map(|i| v.binary_search(&i)) {
                Some(Ok(at)) => {
                    v.remove(at);
                    true
                }
                _ => false,
            },
            Set::Listpack(v) => match v.iter().position(|e| e.as_slice() == m) {
                Some(at) => {
                    v.remove(at);
                    true
                }
                None => false,
            },
            Set::Table(t) => t.swap_remove(m),
        }
    }

    pub fn convert_to_table(&mut self) {
        let t: Table = match self {
            Set::Table(_) => return,
            Set::Intset(v) => v.iter().map(|i| sds(fmt_i64(*i, &mut [0u8; 20]))).collect(),
            Set::Listpack(v) => std::mem::take(v).into_iter().collect(),
        };
        *self = Set::Table(t);
    }
}
