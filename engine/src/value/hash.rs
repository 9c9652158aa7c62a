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

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// The field/value pair at position `i` of the iteration order.
    pub fn pair_at(&self, i: usize) -> Option<(&Sds, &Sds)> {
        match self {
            Hash::Listpack(v) => v.get(i).map(|(f, v)| (f, v)),
            Hash::Table(t) => t.get_index(i),
        }
    }

    /// Whether setting these fields and values would make Redis convert to a hashtable
    /// before setting anything (hashTypeTryConversion: any argument too long).
    pub fn args_too_long<'a>(&self, args: impl IntoIterator<Item = &'a [u8]>, limits: &Limits) -> bool {
        matches!(self, Hash::Listpack(_)) && args.into_iter().any(|a| a.len() > limits.hash_max_listpack_value)
    }

    /// One HSCAN step over a hashtable: visit up to `count` fields at positions below the
    /// cursor, walking downwards (0 starts at the top); returns the next cursor, 0 when
    /// done. Removals swap the last field into the hole, which was either visited already
    /// or lies below the cursor, so fields present throughout the scan are never missed.
    /// A listpack is visited whole (cursor 0), as Redis does.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&Sds, &Sds)) -> u64 {
        let t = match self {
            Hash::Listpack(v) => {
                v.iter().for_each(|(f, x)| visit(f, x));
                return 0;
            }
            Hash::Table(t) => t,
        };
        let len = t.len() as u64;
        let mut next = if cursor == 0 || cursor > len { len } else { cursor };
        let mut n = 0;
        while next > 0 && n < count.max(1) {
            next -= 1;
            if let Some((f, x)) = t.get_index(next as usize) {
                visit(f, x);
            }
            n += 1;
        }
        next
    }

    /// Switch to the hashtable encoding.
    pub fn convert(&mut self) {
        if let Hash::Listpack(v) = self {
            let t: Table = std::mem::take(v).into_iter().collect();
            *self = Hash::Table(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn converts_at_the_entry_limit_and_never_back() {
        let mut h = Hash::default();
        let max = limits().hash_max_listpack_entries;
        assert_eq!(max, 512, "Redis 7.0's default");
        for i in 0..max {
            assert!(h.insert(format!("f{i}").as_bytes(), b"v", &limits()));
        }
        assert_eq!(h.encoding(), "listpack");
        assert!(h.insert(b"one-more", b"v", &limits()));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), max + 1);
        for i in 0..max {
            assert!(h.remove(format!("f{i}").as_bytes()));
        }
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"one-more").map(|v| v.as_slice()), Some(&b"v"[..]));
    }

    #[test]
    fn converts_on_a_long_field_or_value() {
        let long = [b'x'; 65];
        let mut h = Hash::default();
        h.insert(b"a", &long[..64], &limits());
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"b", &long, &limits());
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::default();
        h.insert(&long, b"v", &limits());
        assert_eq!(h.encoding(), "hashtable");
        // Updating an existing field with a long value converts too.
        let mut h = Hash::default();
        h.insert(b"a", b"1", &limits());
        assert!(!h.insert(b"a", &long, &limits()));
        assert_eq!(h.encoding(), "hashtable");
        assert!(Hash::default().args_too_long([&long[..]], &limits()));
        assert!(!Hash::default().args_too_long([&long[..64]], &limits()));
    }

    #[test]
    fn listpack_keeps_insertion_order_and_updates_in_place() {
        let mut h = Hash::default();
        for f in ["c", "a", "b"] {
            h.insert(f.as_bytes(), b"1", &limits());
        }
        h.insert(b"a", b"2", &limits());
        h.remove(b"c");
        h.insert(b"c", b"3", &limits());
        let order: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        assert_eq!(
            order,
            [(b"a".to_vec(), b"2".to_vec()), (b"b".to_vec(), b"1".to_vec()), (b"c".to_vec(), b"3".to_vec())]
        );
    }

    #[test]
    fn scan_returns_every_field_present_throughout_despite_removals() {
        let mut h = Hash::default();
        for i in 0..1000 {
            h.insert(format!("f{i}").as_bytes(), b"v", &limits());
        }
        let mut seen = std::collections::HashSet::new();
        let (mut cursor, mut round) = (0, 0);
        loop {
            cursor = h.scan(cursor, 10, |f, _| {
                seen.insert(f.to_vec());
            });
            round += 1;
            h.remove(format!("f{}", round * 7).as_bytes());
            h.insert(format!("new{round}").as_bytes(), b"v", &limits());
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            if i % 7 != 0 || i / 7 > round {
                assert!(seen.contains(format!("f{i}").as_bytes()), "f{i} missed");
            }
        }
    }
}
