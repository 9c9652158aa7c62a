//! Lists. Redis 7.0 keeps every list in a quicklist (a linked list of listpacks), so
//! OBJECT ENCODING always answers "quicklist"; the node layout matters only to the RDB
//! encoder, which rebuilds nodes at the target's `list-max-listpack-size`.

use std::collections::VecDeque;

use super::{sds, Sds};

/// Which end of a list an operation works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The head (LPUSH, LPOP, LEFT).
    Left,
    /// The tail (RPUSH, RPOP, RIGHT).
    Right,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct List {
    pub items: VecDeque<Sds>,
}

impl List {
    pub fn from_items(items: impl IntoIterator<Item = Sds>) -> List {
        List { items: items.into_iter().collect() }
    }

    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Sds> {
        self.items.iter()
    }

    pub fn push(&mut self, end: End, item: &[u8]) {
        match end {
            End::Left => self.items.push_front(sds(item)),
            End::Right => self.items.push_back(sds(item)),
        }
    }

    pub fn pop(&mut self, end: End) -> Option<Sds> {
        match end {
            End::Left => self.items.pop_front(),
            End::Right => self.items.pop_back(),
        }
    }

    /// The position a Redis index (negative counts from the tail) names, if in range.
    pub fn position(&self, index: i64) -> Option<usize> {
        let len = self.items.len() as i64;
        let i = if index < 0 { len.checked_add(index)? } else { index };
        (0..len).contains(&i).then_some(i as usize)
    }

    pub fn get(&self, index: i64) -> Option<&Sds> {
        self.position(index).and_then(|p| self.items.get(p))
    }

    /// Replace the element at a Redis index; false when out of range.
    pub fn set(&mut self, index: i64, item: &[u8]) -> bool {
        match self.position(index) {
            Some(p) => {
                self.items[p] = sds(item);
                true
            }
            None => false,
        }
    }

    /// The inclusive range `start..=stop` of Redis indexes, clamped as LRANGE does; None
    /// when it is empty.
    pub fn clamp_range(&self, start: i64, stop: i64) -> Option<(usize, usize)> {
        let len = self.items.len() as i64;
        let start = if start < 0 { len.saturating_add(start).max(0) } else { start };
        let stop = if stop < 0 { len.saturating_add(stop) } else { stop };
        if start > stop || start >= len {
            return None;
        }
        Some((start as usize, stop.min(len - 1) as usize))
    }

    /// Elements `from..=to` (positions).
    pub fn range(&self, from: usize, to: usize) -> impl DoubleEndedIterator<Item = &Sds> {
        self.items.range(from..=to)
    }

    /// Keep only positions `from..=to` (None: keep nothing); the number of elements removed.
    pub fn trim(&mut self, keep: Option<(usize, usize)>) -> usize {
        let before = self.items.len();
        match keep {
            Some((from, to)) => {
                self.items.truncate(to + 1);
                self.items.drain(..from);
            }
            None => self.items.clear(),
        }
        before - self.items.len()
    }

    /// Insert `item` next to the first element equal to `pivot`; false when there is none.
    pub fn insert_by_pivot(&mut self, pivot: &[u8], item: &[u8], after: bool) -> bool {
        match self.items.iter().position(|e| e.as_slice() == pivot) {
            Some(p) => {
                self.items.insert(if after { p + 1 } else { p }, sds(item));
                true
            }
            None => false,
        }
    }

    /// Remove up to `limit` (0: all) elements equal to `item`, scanning from the tail when
    /// `from_tail`; the number removed.
    pub fn remove_matching(&mut self, item: &[u8], limit: usize, from_tail: bool) -> usize {
        let limit = if limit == 0 { usize::MAX } else { limit };
        // Matches at positions >= `first` are the ones removed.
        let mut first = 0;
        if from_tail {
            let mut seen = 0;
            first = self.items.len();
            for (i, e) in self.items.iter().enumerate().rev() {
                if seen == limit {
                    break;
                }
                if e.as_slice() == item {
                    seen += 1;
                    first = i;
                }
            }
        }
        let mut removed = 0;
        let mut pos = 0;
        self.items.retain(|e| {
            let drop = pos >= first && removed < limit && e.as_slice() == item;
            pos += 1;
            removed += usize::from(drop);
            !drop
        });
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> List {
        List::from_items(items.iter().map(|s| sds(s.as_bytes())))
    }

    fn strs(l: &List) -> Vec<String> {
        l.iter().map(|e| String::from_utf8_lossy(e).into_owned()).collect()
    }

    #[test]
    fn remove_from_either_end() {
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.remove_matching(b"a", 2, true), 2);
        assert_eq!(strs(&l), ["a", "b", "c"]);
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.remove_matching(b"a", 2, false), 2);
        assert_eq!(strs(&l), ["b", "c", "a"]);
        assert_eq!(l.remove_matching(b"zz", 0, false), 0);
    }

    #[test]
    fn ranges_clamp_like_redis() {
        let l = list(&["a", "b", "c"]);
        assert_eq!(l.clamp_range(0, -1), Some((0, 2)));
        assert_eq!(l.clamp_range(-100, 100), Some((0, 2)));
        assert_eq!(l.clamp_range(2, 1), None);
        assert_eq!(l.clamp_range(i64::MIN, i64::MAX), Some((0, 2)));
        assert_eq!(l.clamp_range(5, 10), None);
        assert_eq!(l.position(i64::MIN), None);
        assert_eq!(l.position(-3), Some(0));
    }
}
