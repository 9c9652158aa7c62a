//! Sorted sets: a "listpack" of (member, score) kept in (score, member) order while small,
//! a "skiplist" (here a dict plus an ordered tree) beyond `zset-max-listpack-*`.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use super::{sds, Limits, Sds};

/// A score with the total order zsets use (never NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkipList {
    pub dict: HashMap<Sds, f64, foldhash::fast::RandomState>,
    pub tree: BTreeSet<(Score, Sds)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Zset {
    /// Sorted by (score, member).
    Listpack(Vec<(Sds, f64)>),
    Skiplist(SkipList),
}

impl Default for Zset {
    fn default() -> Self {
        Zset::Listpack(Vec::new())
    }
}

impl Zset {
    pub fn encoding(&self) -> &'static str {
        match self {
            Zset::Listpack(_) => "listpack",
            Zset::Skiplist(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Zset::Listpack(v) => v.len(),
            Zset::Skiplist(s) => s.dict.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (member, score) in ascending (score, member) order.
    pub fn iter(&self) -> Box<dyn DoubleEndedIterator<Item = (&Sds, f64)> + '_> {
        match self {
            Zset::Listpack(v) => Box::new(v.iter().map(|(m, s)| (m, *s))),
            Zset::Skiplist(s) => Box::new(s.tree.iter().map(|(sc, m)| (m, sc.0))),
        }
    }

    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Zset::Listpack(v) => v.iter().find(|(e, _)| e.as_slice() == m).map(|(_, s)| *s),
            Zset::Skiplist(s) => s.dict.get(m).copied(),
        }
    }

    /// Add or update a member; true when it is new.
    pub fn insert(&mut self, m: &[u8], score: f64, limits: &Limits) -> bool {
        if let Zset::Listpack(v) = self {
            if m.len() > limits.zset_max_listpack_value {
                self.convert_to_skiplist();
            } else {
                let existed = match v.iter().position(|(e, _)| e.as_slice() == m) {
                    Some(at) => {
                        v.remove(at);
                        true
                    }
                    None => false,
                };
                let at = v.partition_point(|(e, s)| (Score(*s), e.as_slice()) < (Score(score), m));
                v.insert(at, (sds(m), score));
                if v.len() > limits.zset_max_listpack_entries {
                    self.convert_to_skiplist();
                }
                return !existed;
            }
        }
        match self {
            Zset::Skiplist(s) => {
                let old = s.dict.insert(sds(m), score);
                if let Some(old) = old {
                    s.tree.remove(&(Score(old), sds(m)));
                }
                s.tree.insert((Score(score), sds(m)));
                old.is_none()
            }
            Zset::Listpack(_) => unreachable!("converted above"),
        }
    }

    /// Remove a member; true when it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Zset::Listpack(v) => match v.iter().position(|(e, _)| e.as_slice() == m) {
                Some(at) => {
                    v.remove(at);
                    true
                }
                None => false,
            },
            Zset::Skiplist(s) => match s.dict.remove(m) {
                Some(old) => {
                    s.tree.remove(&(Score(old), sds(m)));
                    true
                }
                None => false,
            },
        }
    }

    pub fn convert_to_skiplist(&mut self) {
        if let Zset::Listpack(v) = self {
            let mut s = SkipList::default();
            for (m, sc) in std::mem::take(v) {
                s.dict.insert(m.clone(), sc);
                s.tree.insert((Score(sc), m));
            }
            *self = Zset::Skiplist(s);
        }
    }
}
