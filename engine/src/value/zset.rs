//! Sorted sets: a "listpack" of (member, score) kept in (score, member) order while small,
//! a "skiplist" beyond `zset-max-listpack-*`. Our skiplist is a dict (member → score) plus
//! an order-statistic B-tree of (score, member) (the `indexset` crate), so that rank
//! lookups and seeks by rank are O(log n) as in Redis's spans-carrying skiplist.
//!
//! Everything positional is expressed in ranks (0-based, ascending): a range by score or
//! by lex is first turned into a rank interval with [`Zset::partition_point`], then read
//! with [`Zset::range`].

use std::cmp::Ordering;

use super::indexed::{Indexed, Keyed};
use super::packed::{Packed, PairIter};
use super::{sds, CompactBytes, Limits, Sds};

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

/// Node size of the order-statistic tree: small enough that a just-converted zset does
/// not reserve much, big enough for cheap iteration.
const TREE_NODE: usize = 256;

type Tree = indexset::BTreeSet<(Score, Sds)>;

#[derive(Clone)]
pub struct SkipList {
    /// Member → score, by position so ZSCAN can walk positions as SSCAN does.
    dict: Indexed<Scored>,
    tree: Tree,
}

/// A member and its score, as the dict keeps them.
#[derive(Clone)]
struct Scored {
    member: CompactBytes,
    score: f64,
}

impl Keyed for Scored {
    fn key(&self) -> &[u8] {
        &self.member
    }
}

impl Default for SkipList {
    fn default() -> Self {
        SkipList::with_capacity(0)
    }
}

impl PartialEq for SkipList {
    /// The dict determines the tree; the tree's node layout is not content.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .dict
                .items()
                .iter()
                .all(|e| other.score(&e.member).is_some_and(|s| s.to_bits() == e.score.to_bits()))
    }
}

impl std::fmt::Debug for SkipList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tree.iter().map(|(sc, m)| (String::from_utf8_lossy(m), sc.0))).finish()
    }
}

impl SkipList {
    /// Build from distinct members (a loaded zset): the tree is filled in ascending order,
    /// so each element lands at the end of a node. An RDB lists a skiplist from its highest
    /// score down; inserted as read, each would go to the front of a node and move the
    /// others (about 10 % of loading the bench RDB; the ascending tree's nodes are less
    /// full, about 5 % more memory there). None when a member repeats.
    pub fn from_distinct<M: AsRef<[u8]>>(items: &[(M, f64)]) -> Option<SkipList> {
        let mut s = SkipList::with_capacity(items.len());
        for (m, sc) in items {
            if s.dict.insert(Scored { member: CompactBytes::new(m.as_ref()), score: *sc }).is_some() {
                return None;
            }
        }
        let descending = items.windows(2).all(|w| (Score(w[0].1), w[0].0.as_ref()) >= (Score(w[1].1), w[1].0.as_ref()));
        if descending {
            for (m, sc) in items.iter().rev() {
                s.tree.insert((Score(*sc), sds(m.as_ref())));
            }
        } else {
            let mut sorted: Vec<_> = items.iter().map(|(m, sc)| (Score(*sc), sds(m.as_ref()))).collect();
            sorted.sort_unstable();
            for e in sorted {
                s.tree.insert(e);
            }
        }
        Some(s)
    }

    fn with_capacity(n: usize) -> SkipList {
        SkipList { dict: Indexed::with_capacity(n), tree: Tree::with_maximum_node_size(TREE_NODE) }
    }

    fn len(&self) -> usize {
        self.dict.len()
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        self.dict.get(m).map(|e| e.score)
    }

    /// The member and score at position `i` of the dict.
    fn at(&self, i: usize) -> Option<(&[u8], f64)> {
        self.dict.items().get(i).map(|e| (e.member.as_slice(), e.score))
    }

    fn insert(&mut self, m: &[u8], score: f64) -> bool {
        let old = self.dict.insert(Scored { member: CompactBytes::new(m), score }).map(|e| e.score);
        if let Some(old) = old {
            if Score(old) == Score(score) && old.to_bits() == score.to_bits() {
                return false;
            }
            self.tree.remove(&(Score(old), sds(m)));
        }
        self.tree.insert((Score(score), sds(m)));
        old.is_none()
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.dict.swap_remove(m) {
            Some(old) => {
                self.tree.remove(&(Score(old.score), sds(m)));
                true
            }
            None => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Zset {
    /// Sorted by (score, member).
    Listpack(Pairs),
    Skiplist(Box<SkipList>),
}

impl Default for Zset {
    fn default() -> Self {
        Zset::Listpack(Pairs::default())
    }
}

/// A small zset's (member, score) pairs in (score, member) order, packed as two entries
/// each: the member, then the score's eight bytes (the f64's bits, little-endian). About
/// 12 bytes beside the member where a `(Sds, f64)` took 32.
#[derive(Debug, Clone, Default)]
pub struct Pairs(Packed);

impl PartialEq for Pairs {
    /// By value: a `-0` score equals `0`, as the scores compare.
    fn eq(&self, other: &Pairs) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

fn score_of(bytes: &[u8]) -> f64 {
    f64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]))
}

impl Pairs {
    fn len(&self) -> usize {
        self.0.pair_count()
    }

    /// Pairs already distinct and in (score, member) order.
    fn from_sorted<'a>(items: impl IntoIterator<Item = (&'a [u8], f64)>) -> Pairs {
        let mut p = Packed::default();
        for (m, sc) in items {
            p.push_back(m);
            p.push_back(&sc.to_le_bytes());
        }
        p.fit();
        Pairs(p)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.0.pairs(0, self.len()).map(|(m, sc)| (m, score_of(sc)))
    }
}

/// (member, score) in ascending order, from either encoding.
pub enum RangeIter<'a> {
    Listpack(PairIter<'a>),
    Skiplist(indexset::Range<'a, (Score, Sds)>),
    Empty,
}

impl<'a> Iterator for RangeIter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            RangeIter::Listpack(i) => i.next().map(|(m, sc)| (m, score_of(sc))),
            RangeIter::Skiplist(i) => i.next().map(|(s, m)| (m.as_slice(), s.0)),
            RangeIter::Empty => None,
        }
    }
}

impl DoubleEndedIterator for RangeIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            RangeIter::Listpack(i) => i.next_back().map(|(m, sc)| (m, score_of(sc))),
            RangeIter::Skiplist(i) => i.next_back().map(|(s, m)| (m.as_slice(), s.0)),
            RangeIter::Empty => None,
        }
    }
}

impl Zset {
    /// The empty zset ZADD creates for `members` members, the one it measures being
    /// `measured` bytes long (the first; Valkey 8.0 the longest): createZsetListpackObject
    /// or createZsetObject.
    pub fn create(measured: usize, members: usize, limits: &Limits) -> Zset {
        let too_many = limits.zset_created_by_size && members > limits.zset_max_listpack_entries;
        if limits.zset_max_listpack_entries == 0 || measured > limits.zset_max_listpack_value || too_many {
            Zset::Skiplist(Box::default())
        } else {
            Zset::default()
        }
    }

    /// The empty zset for a store of `expected` members (ZRANGESTORE's choice).
    pub fn for_store(expected: usize, limits: &Limits) -> Zset {
        if expected > limits.zset_max_listpack_entries {
            Zset::Skiplist(Box::default())
        } else {
            Zset::default()
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Zset::Listpack(_) => "listpack",
            Zset::Skiplist(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Zset::Listpack(p) => p.len(),
            Zset::Skiplist(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (member, score) in ascending (score, member) order.
    pub fn iter(&self) -> RangeIter<'_> {
        self.range(0, self.len())
    }

    /// Ranks `start..end` (clamped to the length), ascending; reverse it for descending.
    pub fn range(&self, start: usize, end: usize) -> RangeIter<'_> {
        let end = end.min(self.len());
        if start >= end {
            return RangeIter::Empty;
        }
        match self {
            Zset::Listpack(p) => RangeIter::Listpack(p.0.pairs(start, end)),
            Zset::Skiplist(s) => RangeIter::Skiplist(s.tree.range_idx(start..=end - 1)),
        }
    }

    /// The entry at rank `i` (ascending).
    pub fn get_by_rank(&self, i: usize) -> Option<(&[u8], f64)> {
        match self {
            Zset::Listpack(p) => p.0.pair_at(i).map(|(m, sc)| (m, score_of(sc))),
            Zset::Skiplist(s) => s.tree.get_index(i).map(|(sc, m)| (m.as_slice(), sc.0)),
        }
    }

    /// The first rank whose entry does not satisfy `before`; `before` must hold for a prefix
    /// of the order and fail for the rest (as a range's lower side does).
    pub fn partition_point(&self, before: impl Fn(&[u8], f64) -> bool) -> usize {
        match self {
            Zset::Listpack(p) => p.iter().take_while(|&(m, s)| before(m, s)).count(),
            Zset::Skiplist(_) => {
                let (mut lo, mut hi) = (0, self.len());
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    match self.get_by_rank(mid) {
                        Some((m, s)) if before(m, s) => lo = mid + 1,
                        _ => hi = mid,
                    }
                }
                lo
            }
        }
    }

    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Zset::Listpack(p) => p.0.find_pair(m).map(|(_, sc)| score_of(p.0.data_at(sc.start))),
            Zset::Skiplist(s) => s.score(m),
        }
    }

    /// The ascending rank of a member.
    pub fn rank(&self, m: &[u8]) -> Option<usize> {
        match self {
            Zset::Listpack(p) => p.iter().position(|(e, _)| e == m),
            Zset::Skiplist(s) => {
                let score = s.score(m)?;
                Some(s.tree.rank(&(Score(score), sds(m))))
            }
        }
    }

    /// ZADD's pairs into an empty listpack zset all at once (sorted, not inserted one by
    /// one with a scan each): the same members and scores as adding them in order, where a
    /// repeated member keeps its last score. Returns (added, updated), or `None`, leaving
    /// the zset as it is, when it is not an empty listpack or the result would not be one.
    pub fn fill_empty_listpack(&mut self, pairs: &[(&[u8], f64)], limits: &Limits) -> Option<(u64, u64)> {
        let Zset::Listpack(p) = self else { return None };
        if p.len() > 0 || pairs.iter().any(|(m, _)| m.len() > limits.zset_max_listpack_value) {
            return None;
        }
        // By member, then argument order: each member's run ends with its final score.
        let mut order: Vec<usize> = (0..pairs.len()).collect();
        order.sort_unstable_by(|&a, &b| pairs[a].0.cmp(pairs[b].0).then(a.cmp(&b)));
        let mut members: Vec<(&[u8], f64)> = Vec::new();
        let mut updated = 0;
        for run in order.chunk_by(|&a, &b| pairs[a].0 == pairs[b].0) {
            let (m, mut score) = pairs[run[0]];
            for &k in &run[1..] {
                #[allow(clippy::float_cmp)]
                if pairs[k].1 != score {
                    score = pairs[k].1;
                    updated += 1;
                }
            }
            members.push((m, listpack_score(score, limits)));
        }
        if members.len() > limits.zset_max_listpack_entries {
            return None;
        }
        members.sort_unstable_by(|(a, x), (b, y)| (Score(*x), a).cmp(&(Score(*y), b)));
        let added = members.len() as u64;
        *p = Pairs::from_sorted(members);
        Some((added, updated))
    }

    /// A listpack of a file's (member, score) pairs, kept as they are (a `-0` score too),
    /// when they are distinct and in (score, member) order; None otherwise.
    pub fn from_sorted_listpack<M: AsRef<[u8]>>(items: &[(M, f64)]) -> Option<Zset> {
        let sorted = items.windows(2).all(|w| (Score(w[0].1), w[0].0.as_ref()) < (Score(w[1].1), w[1].0.as_ref()));
        // Sorted with a strict order: no member twice in a row; a member twice elsewhere
        // (with two scores) is checked against the others.
        let mut seen = std::collections::HashSet::with_capacity(items.len());
        if !sorted || !items.iter().all(|(m, _)| seen.insert(m.as_ref())) {
            return None;
        }
        Some(Zset::Listpack(Pairs::from_sorted(items.iter().map(|(m, s)| (m.as_ref(), *s)))))
    }

    /// Add or update a member; true when it is new. Converts to a skiplist past the limits.
    pub fn insert(&mut self, m: &[u8], score: f64, limits: &Limits) -> bool {
        if let Zset::Listpack(p) = self {
            let old = p.0.find_pair(m);
            if m.len() > limits.zset_max_listpack_value && old.is_none() {
                self.convert_to_skiplist();
            } else {
                let existed = match old {
                    Some((span, _)) => {
                        p.0.remove_span(span, 2);
                        true
                    }
                    None => false,
                };
                let score = listpack_score(score, limits);
                let mut it = p.0.pairs(0, p.len());
                let at = loop {
                    let start = it.front();
                    match it.next() {
                        Some((e, s)) if (Score(score_of(s)), e) < (Score(score), m) => {}
                        _ => break start,
                    }
                };
                p.0.insert_all(at, &[m, &score.to_le_bytes()]);
                if p.len() > limits.zset_max_listpack_entries {
                    self.convert_to_skiplist();
                }
                return !existed;
            }
        }
        match self {
            Zset::Skiplist(s) => s.insert(m, score),
            Zset::Listpack(_) => false,
        }
    }

    /// Remove a member; true when it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Zset::Listpack(p) => match p.0.find_pair(m) {
                Some((span, _)) => {
                    p.0.remove_span(span, 2);
                    true
                }
                None => false,
            },
            Zset::Skiplist(s) => s.remove(m),
        }
    }

    /// Remove ranks `start..end`; returns how many went.
    pub fn remove_range(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if start >= end {
            return 0;
        }
        match self {
            Zset::Listpack(p) => {
                let span = p.0.offset_of(2 * start)..p.0.offset_of(2 * end);
                p.0.remove_span(span, 2 * (end - start));
            }
            Zset::Skiplist(_) => {
                let gone: Vec<Sds> = self.range(start, end).map(|(m, _)| sds(m)).collect();
                if let Zset::Skiplist(s) = self {
                    for m in &gone {
                        s.remove(m);
                    }
                }
            }
        }
        end - start
    }

    /// One ZSCAN step: like Set::scan, over the dict's positions (small encodings whole).
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&[u8], f64)) -> u64 {
        let Zset::Skiplist(s) = self else {
            self.iter().for_each(|(m, sc)| visit(m, sc));
            return 0;
        };
        let len = s.len() as u64;
        let mut next = if cursor == 0 || cursor > len { len } else { cursor };
        let mut n = 0;
        while next > 0 && n < count.max(1) {
            next -= 1;
            if let Some((m, sc)) = s.at(next as usize) {
                visit(m, sc);
            }
            n += 1;
        }
        next
    }

    pub fn convert_to_skiplist(&mut self) {
        if let Zset::Listpack(p) = self {
            let mut s = Box::new(SkipList::with_capacity(p.len()));
            for (m, sc) in p.iter() {
                s.dict.insert(Scored { member: CompactBytes::new(m), score: sc });
                s.tree.insert((Score(sc), sds(m)));
            }
            *self = Zset::Skiplist(s);
        }
    }

    /// Back to a listpack when small enough (zsetConvertToListpackIfNeeded, after stores).
    pub fn shrink_if_small(&mut self, limits: &Limits) {
        if let Zset::Skiplist(s) = self {
            let longest = s.dict.items().iter().map(|e| e.member.len()).max().unwrap_or(0);
            if s.len() <= limits.zset_max_listpack_entries && longest <= limits.zset_max_listpack_value {
                let items = s.tree.iter().map(|(sc, m)| (m.as_slice(), listpack_score(sc.0, limits)));
                *self = Zset::Listpack(Pairs::from_sorted(items));
            }
        }
    }
}

/// A score as a listpack keeps it: Redis 7 stores an integral score as an integer, so -0
/// reads back as 0; Redis 6.2's ziplist keeps the text "-0".
fn listpack_score(score: f64, limits: &Limits) -> f64 {
    if score == 0.0 && !limits.zset_listpack_keeps_negative_zero {
        0.0
    } else {
        score
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn built_from_distinct_members_as_by_inserts() {
        let descending: Vec<(Vec<u8>, f64)> =
            (0..1000).rev().map(|i| (format!("m{i}").into_bytes(), i as f64)).collect();
        let mut shuffled = descending.clone();
        fastrand::Rng::with_seed(7).shuffle(&mut shuffled);
        shuffled.push((b"neg".to_vec(), -0.0));
        for items in [&descending, &shuffled] {
            let built = SkipList::from_distinct(items).expect("distinct");
            let mut one_by_one = SkipList::default();
            for (m, sc) in items.iter() {
                one_by_one.insert(m, *sc);
            }
            assert_eq!(built.tree.iter().collect::<Vec<_>>(), one_by_one.tree.iter().collect::<Vec<_>>());
            assert_eq!(built, one_by_one);
        }
        let twice = [(b"a".to_vec(), 1.0), (b"a".to_vec(), 2.0)];
        assert!(SkipList::from_distinct(&twice).is_none());
    }

    fn limits(entries: usize) -> Limits {
        Limits { zset_max_listpack_entries: entries, zset_max_listpack_value: 8, ..Limits::default() }
    }

    #[test]
    fn converts_at_thresholds() {
        let l = limits(3);
        let mut z = Zset::create(1, 1, &l);
        for (i, m) in [b"a", b"b", b"c"].iter().enumerate() {
            assert!(z.insert(*m, i as f64, &l));
        }
        assert_eq!(z.encoding(), "listpack");
        assert!(!z.insert(b"a", 5.0, &l));
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"d", 0.5, &l);
        assert_eq!(z.encoding(), "skiplist");
        let order: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(order, vec![b"d".to_vec(), b"b".to_vec(), b"c".to_vec(), b"a".to_vec()]);
        assert_eq!(z.rank(b"a"), Some(3));
        z.remove(b"a");
        z.shrink_if_small(&l);
        assert_eq!(z.encoding(), "listpack");

        let mut long = Zset::create(9, 1, &l);
        assert_eq!(long.encoding(), "skiplist");
        long.insert(b"123456789", 1.0, &l);
        let mut small = Zset::default();
        small.insert(b"x", 1.0, &l);
        small.insert(b"123456789", 1.0, &l);
        assert_eq!(small.encoding(), "skiplist");
        assert_eq!(Zset::for_store(4, &l).encoding(), "skiplist");
        assert_eq!(Zset::for_store(3, &l).encoding(), "listpack");
    }

    #[test]
    fn negative_zero_is_no_update() {
        let l = limits(0);
        let mut z = Zset::create(1, 1, &l);
        z.insert(b"a", 0.0, &l);
        z.insert(b"a", -0.0, &l);
        assert_eq!(z.len(), 1);
        assert_eq!(z.iter().count(), 1);
    }

    proptest! {
        /// The skiplist answers ranks, seeks and ranges as the plain sorted vector does.
        #[test]
        fn skiplist_matches_listpack(ops in proptest::collection::vec((0u8..40, -5i8..5, any::<bool>()), 1..400),
                                     cut in -6i8..6) {
            let big = Limits { zset_max_listpack_entries: usize::MAX, ..Limits::default() };
            let mut lp = Zset::default();
            let mut sk = Zset::Skiplist(Box::default());
            for (m, s, add) in ops {
                let m = format!("m{m}");
                if add {
                    prop_assert_eq!(lp.insert(m.as_bytes(), f64::from(s), &big), sk.insert(m.as_bytes(), f64::from(s), &big));
                } else {
                    prop_assert_eq!(lp.remove(m.as_bytes()), sk.remove(m.as_bytes()));
                }
            }
            prop_assert_eq!(lp.len(), sk.len());
            let a: Vec<_> = lp.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            let b: Vec<_> = sk.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            prop_assert_eq!(&a, &b);
            for (i, (m, _)) in a.iter().enumerate() {
                prop_assert_eq!(sk.rank(m), Some(i));
                prop_assert_eq!(sk.get_by_rank(i).map(|(m, _)| m.to_vec()), Some(m.to_vec()));
            }
            let cut = f64::from(cut);
            prop_assert_eq!(lp.partition_point(|_, s| s < cut), sk.partition_point(|_, s| s < cut));
            let n = a.len();
            let rev: Vec<_> = sk.range(n / 3, n).rev().map(|(m, _)| m.to_vec()).collect();
            let want: Vec<_> = a[(n / 3).min(n)..].iter().rev().map(|(m, _)| m.to_vec()).collect();
            prop_assert_eq!(rev, want);
            let removed = sk.remove_range(1, 4);
            lp.remove_range(1, 4);
            prop_assert_eq!(removed, n.min(4).saturating_sub(1));
            let a: Vec<_> = lp.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            let b: Vec<_> = sk.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            prop_assert_eq!(a, b);
        }
    }
}
