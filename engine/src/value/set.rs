//! Sets: "intset" (sorted integers), "listpack" (insertion order, Redis 7.2+, off when
//! `set-max-listpack-entries` is 0 as in Redis 7.0) and "hashtable".

use std::borrow::Cow;

use super::indexed::{Indexed, Keyed};
use super::packed::Packed;
use super::{sds, CompactBytes, Limits, Sds};
use crate::format::blob::{fmt_i64, parse_canonical_i64};

/// Members a "hashtable" set keeps packed, without an index.
const PACKED_TABLE_MAX: usize = 64;

/// A "hashtable" set's members in the order SMEMBERS gives them; a removal moves the last
/// member into the hole, so positions serve SSCAN and SRANDMEMBER. Up to
/// [`PACKED_TABLE_MAX`] members sit packed in one buffer and are found by a walk, as a
/// listpack's are: most such sets are small ones Redis 7.0 keeps as a hashtable because a
/// member is not an integer, and an index slot and 24 bytes per member cost more than the
/// members themselves. Past that, an index.
#[derive(Clone)]
pub struct Table(Store);

#[derive(Clone)]
enum Store {
    Packed(Members),
    Indexed(Box<Indexed<CompactBytes>>),
}

impl Keyed for CompactBytes {
    fn key(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(String::from_utf8_lossy)).finish()
    }
}

impl Default for Table {
    fn default() -> Self {
        Table(Store::Packed(Members::default()))
    }
}

impl PartialEq for Table {
    /// Same members, in any order.
    fn eq(&self, other: &Table) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains(m))
    }
}

impl Table {
    pub fn with_capacity(n: usize) -> Table {
        if n > PACKED_TABLE_MAX {
            Table(Store::Indexed(Box::new(Indexed::with_capacity(n))))
        } else {
            Table::default()
        }
    }

    fn from_members<'a>(members: impl Iterator<Item = &'a [u8]>, n: usize) -> Table {
        let mut t = Table::with_capacity(n);
        for m in members {
            t.insert(m);
        }
        t
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Store::Packed(p) => p.len(),
            Store::Indexed(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.0 {
            Store::Packed(p) => p.contains(m),
            Store::Indexed(t) => t.get(m).is_some(),
        }
    }

    /// Add a member; true when it is new.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        match &mut self.0 {
            Store::Packed(p) if p.contains(m) => false,
            Store::Packed(p) if p.len() < PACKED_TABLE_MAX => {
                p.push(m);
                true
            }
            Store::Packed(p) => {
                let mut t = Indexed::with_capacity(p.len() + 1);
                for e in p.iter() {
                    t.insert(CompactBytes::new(e));
                }
                t.insert(CompactBytes::new(m));
                self.0 = Store::Indexed(Box::new(t));
                true
            }
            Store::Indexed(t) => t.insert(CompactBytes::new(m)).is_none(),
        }
    }

    /// Remove a member, moving the last one into its place; true when it was there.
    pub fn swap_remove(&mut self, m: &[u8]) -> bool {
        match &mut self.0 {
            Store::Packed(p) => p.swap_remove(m),
            Store::Indexed(t) => t.swap_remove(m).is_some(),
        }
    }

    pub fn get_index(&self, i: usize) -> Option<&[u8]> {
        match &self.0 {
            Store::Packed(p) => p.get(i),
            Store::Indexed(t) => t.items().get(i).map(|e| e.as_slice()),
        }
    }

    pub fn iter(&self) -> TableIter<'_> {
        TableIter(match &self.0 {
            Store::Packed(p) => Walk::Packed(p.0.data()),
            Store::Indexed(t) => Walk::Indexed(t.items().iter()),
        })
    }

    fn shrink_to_fit(&mut self) {
        match &mut self.0 {
            Store::Packed(p) => p.0.fit(),
            Store::Indexed(t) => t.fit(),
        }
    }
}

/// A [`Table`]'s members in order.
pub struct TableIter<'a>(Walk<'a>);

enum Walk<'a> {
    Packed(super::packed::Data<'a>),
    Indexed(std::slice::Iter<'a, CompactBytes>),
}

impl<'a> Iterator for TableIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match &mut self.0 {
            Walk::Packed(e) => e.next(),
            Walk::Indexed(i) => i.next().map(|e| e.as_slice()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Set {
    Intset(Ints),
    Listpack(Members),
    Table(Table),
}

/// An intset's members, sorted, each as wide as the widest needs (2, 4 or 8 bytes), as
/// Redis's intset keeps them: set members that are small numbers take 2 bytes, not 8. Like
/// Redis's, it widens when a wider member comes and never narrows.
#[derive(Debug, Clone)]
pub enum Ints {
    W16(Vec<i16>),
    W32(Vec<i32>),
    W64(Vec<i64>),
}

impl Default for Ints {
    fn default() -> Self {
        Ints::W16(Vec::new())
    }
}

impl PartialEq for Ints {
    /// By members: a widened set equals a narrow one holding the same.
    fn eq(&self, other: &Ints) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

/// Where `x` is or would go in `v`; a value too wide for `T` goes before or after all.
fn search<T: Copy + Ord + TryFrom<i64>>(v: &[T], x: i64) -> Result<usize, usize> {
    match T::try_from(x) {
        Ok(x) => v.binary_search(&x),
        Err(_) => Err(if x < 0 { 0 } else { v.len() }),
    }
}

impl Ints {
    pub fn len(&self) -> usize {
        match self {
            Ints::W16(v) => v.len(),
            Ints::W32(v) => v.len(),
            Ints::W64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes a member takes.
    pub fn width(&self) -> usize {
        match self {
            Ints::W16(_) => 2,
            Ints::W32(_) => 4,
            Ints::W64(_) => 8,
        }
    }

    pub fn get(&self, i: usize) -> Option<i64> {
        match self {
            Ints::W16(v) => v.get(i).map(|&x| i64::from(x)),
            Ints::W32(v) => v.get(i).map(|&x| i64::from(x)),
            Ints::W64(v) => v.get(i).copied(),
        }
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    fn search(&self, x: i64) -> Result<usize, usize> {
        match self {
            Ints::W16(v) => search(v, x),
            Ints::W32(v) => search(v, x),
            Ints::W64(v) => search(v, x),
        }
    }

    fn contains(&self, x: i64) -> bool {
        self.search(x).is_ok()
    }

    /// Add `x`; false when it was there. Widens every member first if `x` needs it.
    fn insert(&mut self, x: i64) -> bool {
        let Err(at) = self.search(x) else { return false };
        let fits = match self {
            Ints::W16(_) => i16::try_from(x).is_ok(),
            Ints::W32(_) => i32::try_from(x).is_ok(),
            Ints::W64(_) => true,
        };
        if !fits {
            let all: Vec<i64> = self.iter().collect();
            *self = if i32::try_from(x).is_ok() {
                Ints::W32(all.iter().filter_map(|&y| i32::try_from(y).ok()).collect())
            } else {
                Ints::W64(all)
            };
        }
        match self {
            Ints::W16(v) => v.insert(at, x as i16),
            Ints::W32(v) => v.insert(at, x as i32),
            Ints::W64(v) => v.insert(at, x),
        }
        true
    }

    fn remove(&mut self, x: i64) -> bool {
        let Ok(at) = self.search(x) else { return false };
        match self {
            Ints::W16(v) => drop(v.remove(at)),
            Ints::W32(v) => drop(v.remove(at)),
            Ints::W64(v) => drop(v.remove(at)),
        }
        true
    }

    fn shrink_to_fit(&mut self) {
        match self {
            Ints::W16(v) => super::fit(v),
            Ints::W32(v) => super::fit(v),
            Ints::W64(v) => super::fit(v),
        }
    }
}

/// A small set's members one after another in one buffer, in insertion order: a member
/// costs its bytes and two or so, where an `Sds` each took 24 bytes and a heap block past 16.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Members(Packed);

impl Members {
    fn len(&self) -> usize {
        self.0.count as usize
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.0.data()
    }

    fn contains(&self, m: &[u8]) -> bool {
        self.iter().any(|e| e == m)
    }

    fn push(&mut self, m: &[u8]) {
        self.0.push_back(m);
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        self.0.remove_matching(m, 0, 1) == 1
    }

    /// Remove `m`, moving the last member into its place.
    fn swap_remove(&mut self, m: &[u8]) -> bool {
        let Some((_, start)) = self.0.entries().find(|(data, _)| &self.0.buf[data.clone()] == m) else {
            return false;
        };
        let end = self.0.entry(start).1;
        self.0.swap_remove_span(start..end, 1);
        true
    }

    fn get(&self, i: usize) -> Option<&[u8]> {
        (i < self.len()).then(|| self.0.data_at(self.0.offset_of(i)))
    }
}

impl Default for Set {
    fn default() -> Self {
        Set::Intset(Ints::default())
    }
}

impl Set {
    /// The empty set Redis creates for a first member `first`, expecting about `size_hint`
    /// members (setTypeCreate).
    pub fn create(first: &[u8], size_hint: usize, limits: &Limits) -> Set {
        if parse_canonical_i64(first).is_some() && size_hint <= limits.set_max_intset_entries {
            Set::Intset(Ints::default())
        } else if size_hint <= limits.set_max_listpack_entries {
            Set::Listpack(Members::default())
        } else {
            Set::Table(Table::with_capacity(size_hint))
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
            Set::Intset(v) => parse_canonical_i64(m).is_some_and(|i| v.contains(i)),
            Set::Listpack(v) => v.contains(m),
            Set::Table(t) => t.contains(m),
        }
    }

    /// Members in SMEMBERS order.
    pub fn members(&self) -> Vec<Vec<u8>> {
        match self {
            Set::Intset(v) => v.iter().map(|i| fmt_i64(i, &mut [0u8; 20]).to_vec()).collect(),
            Set::Listpack(v) => v.iter().map(|e| e.to_vec()).collect(),
            Set::Table(t) => t.iter().map(<[u8]>::to_vec).collect(),
        }
    }

    /// Add a member; true when it is new. Converts as Redis 7.2's setTypeAdd does.
    pub fn insert(&mut self, m: &[u8], limits: &Limits) -> bool {
        match self {
            Set::Intset(v) => {
                if let Some(i) = parse_canonical_i64(m) {
                    if !v.insert(i) {
                        return false;
                    }
                    if v.len() > limits.set_max_intset_entries {
                        self.convert_to_table();
                    }
                    return true;
                }
                let longest = v.iter().map(|i| fmt_i64(i, &mut [0u8; 20]).len()).max().unwrap_or(0);
                if v.len() < limits.set_max_listpack_entries
                    && m.len() <= limits.set_max_listpack_value
                    && longest <= limits.set_max_listpack_value
                {
                    let mut items = Members::default();
                    for i in v.iter() {
                        items.push(fmt_i64(i, &mut [0u8; 20]));
                    }
                    *self = Set::Listpack(items);
                } else {
                    self.convert_to_table();
                }
                self.insert(m, limits)
            }
            Set::Listpack(v) => {
                if v.contains(m) {
                    return false;
                }
                if v.len() < limits.set_max_listpack_entries && m.len() <= limits.set_max_listpack_value {
                    v.push(m);
                    return true;
                }
                self.convert_to_table();
                self.insert(m, limits)
            }
            Set::Table(t) => t.insert(m),
        }
    }

    /// Remove a member; true when it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Intset(v) => parse_canonical_i64(m).is_some_and(|i| v.remove(i)),
            Set::Listpack(v) => v.remove(m),
            Set::Table(t) => t.swap_remove(m),
        }
    }

    /// Members in SMEMBERS order, integers formatted on the way.
    pub fn iter(&self) -> impl Iterator<Item = Cow<'_, [u8]>> + '_ {
        let ints = match self {
            Set::Intset(v) => Some(v.iter().map(|i| Cow::Owned(fmt_i64(i, &mut [0u8; 20]).to_vec()))),
            _ => None,
        };
        let strs = match self {
            Set::Listpack(v) => Some(v.iter().map(Cow::Borrowed)),
            _ => None,
        };
        let table = match self {
            Set::Table(t) => Some(t.iter().map(Cow::Borrowed)),
            _ => None,
        };
        ints.into_iter().flatten().chain(strs.into_iter().flatten()).chain(table.into_iter().flatten())
    }

    /// The member at position `i` (in SMEMBERS order).
    pub fn get_index(&self, i: usize) -> Option<Cow<'_, [u8]>> {
        match self {
            Set::Intset(v) => v.get(i).map(|n| Cow::Owned(fmt_i64(n, &mut [0u8; 20]).to_vec())),
            Set::Listpack(v) => v.get(i).map(Cow::Borrowed),
            Set::Table(t) => t.get_index(i).map(Cow::Borrowed),
        }
    }

    /// A uniformly random member (the set must not be empty).
    pub fn random_member(&self, rng: &mut fastrand::Rng) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        self.get_index(rng.usize(..self.len())).map(Cow::into_owned)
    }

    /// One SSCAN step over a hashtable: visit up to `count` positions below the cursor and
    /// return the next cursor (0 when done). As in keyspace::Db::scan, removals swap the
    /// last member into the hole, so walking downwards never misses a member present for
    /// the whole scan. Small encodings are visited whole.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(Cow<'_, [u8]>)) -> u64 {
        let Set::Table(t) = self else {
            self.iter().for_each(visit);
            return 0;
        };
        let len = t.len() as u64;
        let mut next = if cursor == 0 || cursor > len { len } else { cursor };
        let mut n = 0;
        while next > 0 && n < count.max(1) {
            next -= 1;
            if let Some(m) = t.get_index(next as usize) {
                visit(Cow::Borrowed(m));
            }
            n += 1;
        }
        next
    }

    /// Give back spare capacity (a set built whole: loaded, restored).
    pub fn shrink_to_fit(&mut self) {
        match self {
            Set::Intset(v) => v.shrink_to_fit(),
            Set::Listpack(v) => v.0.fit(),
            Set::Table(t) => t.shrink_to_fit(),
        }
    }

    pub fn convert_to_table(&mut self) {
        let t = match self {
            Set::Table(_) => return,
            Set::Intset(v) => {
                let members: Vec<Sds> = v.iter().map(|i| sds(fmt_i64(i, &mut [0u8; 20]))).collect();
                Table::from_members(members.iter().map(|m| m.as_slice()), members.len())
            }
            Set::Listpack(v) => Table::from_members(v.iter(), v.len()),
        };
        *self = Set::Table(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(listpack: usize) -> Limits {
        Limits {
            set_max_intset_entries: 4,
            set_max_listpack_entries: listpack,
            set_max_listpack_value: 8,
            ..Limits::default()
        }
    }

    fn members(s: &Set) -> Vec<Vec<u8>> {
        s.iter().map(|m| m.into_owned()).collect()
    }

    #[test]
    fn redis_7_0_intset_then_hashtable() {
        let l = limits(0);
        let mut s = Set::create(b"3", 1, &l);
        for m in [&b"3"[..], b"1", b"2", b"1"] {
            s.insert(m, &l);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(members(&s), vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]);
        s.insert(b"4", &l);
        assert_eq!(s.encoding(), "intset");
        s.insert(b"5", &l);
        assert_eq!(s.encoding(), "hashtable");
        let mut t = Set::create(b"1", 1, &l);
        t.insert(b"1", &l);
        t.insert(b"x", &l);
        assert_eq!(t.encoding(), "hashtable");
        assert!(t.contains(b"1") && t.contains(b"x"));
        assert_eq!(Set::create(b"x", 1, &l).encoding(), "hashtable");
        // "01" is not an integer's canonical form.
        let mut u = Set::create(b"01", 1, &l);
        u.insert(b"01", &l);
        assert_eq!(u.encoding(), "hashtable");
    }

    proptest::proptest! {
        /// Ints against a sorted set of i64, across the widths; widening never narrows back.
        #[test]
        fn ints_match_a_btreeset(ops in proptest::collection::vec((proptest::bool::ANY, 0u8..4, proptest::num::i64::ANY), 0..200)) {
            let mut ints = Ints::default();
            let mut model = std::collections::BTreeSet::new();
            let mut widest = 2;
            for (add, width, x) in ops {
                let x = match width {
                    0 => x % 100,
                    1 => x % 40_000,
                    2 => x % 3_000_000_000,
                    _ => x,
                };
                if add {
                    proptest::prop_assert_eq!(ints.insert(x), model.insert(x));
                } else {
                    proptest::prop_assert_eq!(ints.remove(x), model.remove(&x));
                }
                proptest::prop_assert!(ints.width() >= widest);
                widest = ints.width();
                proptest::prop_assert!(ints.iter().eq(model.iter().copied()));
                let need = model.iter().map(|&y| if i16::try_from(y).is_ok() { 2 } else if i32::try_from(y).is_ok() { 4 } else { 8 }).max().unwrap_or(2);
                proptest::prop_assert!(ints.width() >= need);
            }
        }
    }

    #[test]
    fn ints_take_the_narrowest_width_redis_would() {
        let mut v = Ints::default();
        v.insert(-32768);
        v.insert(32767);
        assert_eq!(v.width(), 2);
        v.insert(32768);
        assert_eq!(v.width(), 4);
        v.insert(i64::from(i32::MIN) - 1);
        assert_eq!(v.width(), 8);
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![i64::from(i32::MIN) - 1, -32768, 32767, 32768]);
        v.remove(i64::from(i32::MIN) - 1);
        assert_eq!(v.width(), 8, "an intset never narrows");
        let mut narrow = Ints::default();
        for x in [32768, 32767, -32768] {
            narrow.insert(x);
        }
        assert_eq!(v, narrow, "equal by members whatever their width");
    }

    #[test]
    fn redis_7_2_listpack() {
        let l = limits(3);
        let mut s = Set::create(b"1", 1, &l);
        s.insert(b"1", &l);
        s.insert(b"a", &l);
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(members(&s), vec![b"1".to_vec(), b"a".to_vec()]);
        s.insert(b"b", &l);
        assert_eq!(s.encoding(), "listpack");
        assert!(s.remove(b"a"));
        assert_eq!(members(&s), vec![b"1".to_vec(), b"b".to_vec()]);
        s.insert(b"c", &l);
        s.insert(b"d", &l);
        assert_eq!(s.encoding(), "hashtable");
        let mut long = Set::create(b"x", 1, &l);
        long.insert(b"x", &l);
        long.insert(b"123456789", &l);
        assert_eq!(long.encoding(), "hashtable");
        assert_eq!(Set::create(b"x", 10, &l).encoding(), "hashtable");
    }

    #[test]
    fn table_matches_a_vector_with_swap_remove() {
        // Members from 50 names keep the table packed; from 500 it takes an index.
        for names in [50, 500] {
            let mut rng = fastrand::Rng::with_seed(5);
            let mut t = Table::default();
            let mut model: Vec<Vec<u8>> = Vec::new();
            for step in 0..20000 {
                let m = format!("member:{}", rng.u32(..names)).into_bytes();
                let at = model.iter().position(|x| *x == m);
                if rng.u8(..3) == 0 {
                    assert_eq!(t.swap_remove(&m), at.is_some());
                    if let Some(i) = at {
                        model.swap_remove(i);
                    }
                } else {
                    assert_eq!(t.insert(&m), at.is_none());
                    if at.is_none() {
                        model.push(m);
                    }
                }
                assert_eq!(t.len(), model.len());
                if step % 97 == 0 {
                    assert!(t.iter().eq(model.iter().map(Vec::as_slice)));
                    for (i, m) in model.iter().enumerate() {
                        assert!(t.contains(m));
                        assert_eq!(t.get_index(i), Some(m.as_slice()));
                    }
                }
            }
            assert_eq!(matches!(t.0, Store::Packed(_)), names as usize <= PACKED_TABLE_MAX);
        }
    }

    #[test]
    fn scan_never_misses_members_present_throughout() {
        let l = limits(0);
        let mut s = Set::create(b"m0", 1, &l);
        for i in 0..200 {
            s.insert(format!("m{i}").as_bytes(), &l);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = s.scan(cursor, 7, |m| {
                seen.insert(m.into_owned());
            });
            round += 1;
            s.remove(format!("m{}", round * 5).as_bytes());
            s.insert(format!("new{round}").as_bytes(), &l);
            if cursor == 0 {
                break;
            }
        }
        for i in 0..200 {
            if i % 5 != 0 || i / 5 > round {
                assert!(seen.contains(format!("m{i}").as_bytes()), "m{i} missed");
            }
        }
        let mut rng = fastrand::Rng::with_seed(1);
        assert!(s.random_member(&mut rng).is_some_and(|m| s.contains(&m)));
    }
}
