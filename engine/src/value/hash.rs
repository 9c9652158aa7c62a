//! Hashes: a "listpack" (field/value pairs in insertion order) while small, a "hashtable"
//! once a count or a length passes `hash-max-listpack-entries` / `-value`. Redis never
//! converts back.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::{sds, varint, Limits, Sds};

/// One field and its value in a single allocation: the field's length (varint), the
/// field, the value.
#[derive(Clone)]
pub struct Pair(Box<[u8]>);

impl Pair {
    pub fn new(field: &[u8], value: &[u8]) -> Pair {
        let head = varint::len(field.len());
        let mut b = vec![0u8; head + field.len() + value.len()];
        varint::write(&mut b, field.len());
        b[head..head + field.len()].copy_from_slice(field);
        b[head + field.len()..].copy_from_slice(value);
        Pair(b.into_boxed_slice())
    }

    pub fn field(&self) -> &[u8] {
        self.parts().0
    }

    pub fn value(&self) -> &[u8] {
        self.parts().1
    }

    pub fn parts(&self) -> (&[u8], &[u8]) {
        let (n, head) = varint::read(&self.0);
        (&self.0[head..head + n], &self.0[head + n..])
    }
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (field, value) = self.parts();
        write!(f, "{:?} => {:?}", String::from_utf8_lossy(field), String::from_utf8_lossy(value))
    }
}

/// A hashtable: the pairs in a vector (positions serve HSCAN and HRANDFIELD; a removal
/// moves the last pair into the hole) and an index of positions by field. Unlike an
/// IndexMap, the index stores no hash per pair and 32-bit positions (a hash would need
/// hundreds of GB to pass 2^32 fields); hashes are recomputed from fields when it grows.
#[derive(Clone, Default)]
pub struct Table {
    pairs: Vec<Pair>,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

impl Table {
    pub fn with_capacity(n: usize) -> Table {
        Table { pairs: Vec::with_capacity(n), index: HashTable::with_capacity(n), hasher: Default::default() }
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    fn position(&self, field: &[u8]) -> Option<usize> {
        let pairs = &self.pairs;
        let h = self.hasher.hash_one(field);
        self.index.find(h, |&i| pairs[i as usize].field() == field).map(|&i| i as usize)
    }

    pub fn get(&self, field: &[u8]) -> Option<&Pair> {
        self.position(field).map(|i| &self.pairs[i])
    }

    /// Add the pair, or replace the one with its field in place; true when it is new.
    pub fn insert(&mut self, pair: Pair) -> bool {
        if let Some(i) = self.position(pair.field()) {
            self.pairs[i] = pair;
            return false;
        }
        let (pairs, hasher) = (&self.pairs, &self.hasher);
        let h = hasher.hash_one(pair.field());
        self.index.insert_unique(h, pairs.len() as u32, |&i| hasher.hash_one(pairs[i as usize].field()));
        self.pairs.push(pair);
        true
    }

    /// Remove the pair of `field`, moving the last pair into its place; true when found.
    pub fn swap_remove(&mut self, field: &[u8]) -> bool {
        let pairs = &self.pairs;
        let h = self.hasher.hash_one(field);
        let Ok(entry) = self.index.find_entry(h, |&i| pairs[i as usize].field() == field) else {
            return false;
        };
        let (hole, _) = entry.remove();
        let last = self.pairs.len() - 1;
        self.pairs.swap_remove(hole as usize);
        if let Some(moved) = self.pairs.get(hole as usize) {
            let h = self.hasher.hash_one(moved.field());
            if let Some(slot) = self.index.find_mut(h, |&i| i as usize == last) {
                *slot = hole;
            }
        }
        true
    }

    pub fn get_index(&self, i: usize) -> Option<&Pair> {
        self.pairs.get(i)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Pair> {
        self.pairs.iter()
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        self.len() == other.len() && self.iter().all(|p| other.get(p.field()).is_some_and(|q| q.value() == p.value()))
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.pairs).finish()
    }
}

#[derive(Debug, Clone)]
pub enum Hash {
    Listpack(Vec<(Sds, Sds)>),
    Table(Table),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Vec::new())
    }
}

impl PartialEq for Hash {
    /// Same encoding, same pairs (a listpack's order counts, as it is observable).
    fn eq(&self, other: &Hash) -> bool {
        match (self, other) {
            (Hash::Listpack(a), Hash::Listpack(b)) => a == b,
            (Hash::Table(a), Hash::Table(b)) => a == b,
            _ => false,
        }
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

    /// An empty hash about to receive `n` distinct fields (a loader): a hashtable sized
    /// for them when `n` passes the listpack entry limit, else a listpack.
    pub fn with_capacity(n: usize, limits: &Limits) -> Hash {
        if n > limits.hash_max_listpack_entries {
            Hash::Table(Table::with_capacity(n))
        } else {
            Hash::Listpack(Vec::with_capacity(n))
        }
    }

    /// Field/value pairs in the order HGETALL returns them.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&[u8], &[u8])> + '_> {
        match self {
            Hash::Listpack(v) => Box::new(v.iter().map(|(f, v)| (f.as_slice(), v.as_slice()))),
            Hash::Table(t) => Box::new(t.iter().map(Pair::parts)),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Listpack(v) => v.iter().find(|(f, _)| f.as_slice() == field).map(|(_, v)| v.as_slice()),
            Hash::Table(t) => t.get(field).map(Pair::value),
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
            Hash::Table(t) => t.insert(Pair::new(field, value)),
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
            Hash::Table(t) => t.swap_remove(field),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// The field/value pair at position `i` of the iteration order.
    pub fn pair_at(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            Hash::Listpack(v) => v.get(i).map(|(f, v)| (f.as_slice(), v.as_slice())),
            Hash::Table(t) => t.get_index(i).map(Pair::parts),
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
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&[u8], &[u8])) -> u64 {
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
            if let Some(p) = t.get_index(next as usize) {
                let (f, x) = p.parts();
                visit(f, x);
            }
            n += 1;
        }
        next
    }

    /// Switch to the hashtable encoding.
    pub fn convert(&mut self) {
        if let Hash::Listpack(v) = self {
            let mut t = Table::with_capacity(v.len());
            for (f, x) in v.iter() {
                t.insert(Pair::new(f, x));
            }
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
        assert_eq!(h.get(b"one-more"), Some(&b"v"[..]));
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

    #[test]
    fn table_pairs_update_in_place_and_keep_positions() {
        let long = vec![b'f'; 300];
        let n = limits().hash_max_listpack_entries + 100;
        let mut h = Hash::with_capacity(n, &limits());
        assert_eq!(h.encoding(), "hashtable");
        for i in 0..n {
            assert!(h.insert(format!("f{i}").as_bytes(), format!("v{i}").as_bytes(), &limits()));
        }
        assert!(h.insert(&long, b"", &limits()));
        assert!(h.insert(b"", &long, &limits()));
        assert_eq!(h.get(&long), Some(&b""[..]));
        assert_eq!(h.get(b""), Some(&long[..]));
        assert!(!h.insert(b"f7", b"a much longer value than before", &limits()));
        assert_eq!(h.pair_at(7), Some((&b"f7"[..], &b"a much longer value than before"[..])));
        assert_eq!(h.get(b"f8"), Some(&b"v8"[..]));
        assert!(h.get(format!("f{n}").as_bytes()).is_none());
        let mut copy = h.clone();
        assert_eq!(copy, h);
        copy.insert(b"f1", b"other", &limits());
        assert_ne!(copy, h);
        assert!(h.remove(&long));
        assert!(!h.remove(&long));
        assert_eq!(h.len(), n + 1);
    }

    #[test]
    fn table_matches_a_plain_map() {
        let mut rng = fastrand::Rng::with_seed(3);
        let mut t = Table::default();
        let mut model = std::collections::HashMap::new();
        for step in 0..20000 {
            let field = format!("f{}", rng.u32(..500)).into_bytes();
            if rng.u8(..3) == 0 {
                assert_eq!(t.swap_remove(&field), model.remove(&field).is_some());
            } else {
                let value = vec![b'v'; rng.usize(..200)];
                assert_eq!(t.insert(Pair::new(&field, &value)), model.insert(field, value).is_none());
            }
            assert_eq!(t.len(), model.len());
            if step % 97 == 0 {
                for (i, p) in t.iter().enumerate() {
                    assert_eq!(model.get(p.field()).map(Vec::as_slice), Some(p.value()));
                    assert_eq!(t.position(p.field()), Some(i));
                }
            }
        }
    }
}
