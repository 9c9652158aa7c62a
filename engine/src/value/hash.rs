//! Hashes: a "listpack" (field/value pairs in insertion order) while small, a "hashtable"
//! once a count or a length passes `hash-max-listpack-entries` / `-value`. Redis never
//! converts back.
//!
//! Redis 7.4's field TTLs: a small hash given one (or only asked to, by HEXPIRE) becomes a
//! "listpackex", triplets ordered by TTL; a hashtable keeps TTLs beside its pairs. A field
//! whose TTL passed stays until a command or the active cycle removes it (and propagates
//! HDEL), so most readers ask with the time. Each hash with TTLs also carries the time it
//! is registered under for the active cycle, which Redis does not always keep exact
//! ([`Hash::registered`]): it decides what a snapshot, a rewrite and HGETALL do.

use std::collections::{BTreeSet, HashMap};

use super::indexed::{Indexed, Keyed};
use super::packed::{Packed, PairIter};
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

/// Pairs a hashtable keeps packed, without an index.
const PACKED_TABLE_MAX: usize = 64;

/// A hashtable: its pairs in the order HGETALL gives them; a removal moves the last pair
/// into the hole, so positions serve HSCAN and HRANDFIELD. Up to [`PACKED_TABLE_MAX`]
/// pairs sit packed in one buffer and are found by a walk, as a listpack's are: most
/// hashtables are small hashes with a value longer than `hash-max-listpack-value`, where
/// a heap block, a pointer and an index slot per pair cost more than the pair's bytes.
#[derive(Clone, Default)]
pub struct Table {
    pairs: Pairs,
    /// Field TTLs, when the hash has (or had) any.
    ttls: Option<Box<TableTtls>>,
}

#[derive(Clone)]
enum Pairs {
    /// Two entries per pair.
    Packed(Packed),
    Indexed(Box<Indexed<Pair>>),
}

impl Default for Pairs {
    fn default() -> Self {
        Pairs::Packed(Packed::default())
    }
}

impl Keyed for Pair {
    fn key(&self) -> &[u8] {
        self.field()
    }
}

/// The TTLs of a hashtable's fields: by field, and in the order the active cycle expires
/// them (time, then the order they were set in).
#[derive(Clone, Default, Debug, PartialEq)]
struct TableTtls {
    of: HashMap<Sds, (u64, u64)>,
    order: BTreeSet<(u64, u64, Sds)>,
    next_seq: u64,
    registered: Option<u64>,
}

impl TableTtls {
    fn set(&mut self, field: &[u8], when: u64) {
        self.clear(field);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.of.insert(sds(field), (when, seq));
        self.order.insert((when, seq, sds(field)));
    }

    fn clear(&mut self, field: &[u8]) -> bool {
        match self.of.remove(field) {
            Some((when, seq)) => {
                self.order.remove(&(when, seq, sds(field)));
                true
            }
            None => false,
        }
    }

    fn get(&self, field: &[u8]) -> Option<u64> {
        self.of.get(field).map(|&(when, _)| when)
    }
}

impl Table {
    pub fn with_capacity(n: usize) -> Table {
        let pairs =
            if n > PACKED_TABLE_MAX { Pairs::Indexed(Box::new(Indexed::with_capacity(n))) } else { Pairs::default() };
        Table { pairs, ttls: None }
    }

    pub fn len(&self) -> usize {
        match &self.pairs {
            Pairs::Packed(p) => p.pair_count(),
            Pairs::Indexed(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.pairs {
            Pairs::Packed(p) => p.find_pair(field).map(|(_, v)| p.data_at(v.start)),
            Pairs::Indexed(t) => t.get(field).map(Pair::value),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Add the pair, or replace the value of its field in place; true when it is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        match &mut self.pairs {
            Pairs::Packed(p) => {
                if let Some((_, v)) = p.find_pair(field) {
                    p.put(v, value);
                    return false;
                }
                if p.pair_count() < PACKED_TABLE_MAX {
                    p.push_back(field);
                    p.push_back(value);
                    return true;
                }
                let mut t = Indexed::with_capacity(p.pair_count() + 1);
                for (f, v) in p.pairs(0, p.pair_count()) {
                    t.insert(Pair::new(f, v));
                }
                t.insert(Pair::new(field, value));
                self.pairs = Pairs::Indexed(Box::new(t));
                true
            }
            Pairs::Indexed(t) => t.insert(Pair::new(field, value)).is_none(),
        }
    }

    /// Remove the pair of `field` (and its TTL), moving the last pair into its place; true
    /// when found.
    pub fn swap_remove(&mut self, field: &[u8]) -> bool {
        let found = match &mut self.pairs {
            Pairs::Packed(p) => match p.find_pair(field) {
                Some((span, _)) => {
                    p.swap_remove_span(span, 2);
                    true
                }
                None => false,
            },
            Pairs::Indexed(t) => t.swap_remove(field).is_some(),
        };
        if found {
            if let Some(t) = self.ttls.as_deref_mut() {
                t.clear(field);
            }
        }
        found
    }

    /// The pair at position `i`.
    pub fn get_index(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match &self.pairs {
            Pairs::Packed(p) => p.pair_at(i),
            Pairs::Indexed(t) => t.items().get(i).map(Pair::parts),
        }
    }

    pub fn iter(&self) -> TableIter<'_> {
        TableIter(match &self.pairs {
            Pairs::Packed(p) => Walk::Packed(p.pairs(0, p.pair_count())),
            Pairs::Indexed(t) => Walk::Indexed(t.items().iter()),
        })
    }

    fn shrink_to_fit(&mut self) {
        match &mut self.pairs {
            Pairs::Packed(p) => p.fit(),
            Pairs::Indexed(t) => t.fit(),
        }
    }

    fn ttl(&self, field: &[u8]) -> Option<u64> {
        self.ttls.as_deref().and_then(|t| t.get(field))
    }
}

/// A [`Table`]'s pairs in order.
pub struct TableIter<'a>(Walk<'a>);

enum Walk<'a> {
    Packed(PairIter<'a>),
    Indexed(std::slice::Iter<'a, Pair>),
}

impl<'a> Iterator for TableIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Walk::Packed(p) => p.next(),
            Walk::Indexed(i) => i.next().map(Pair::parts),
        }
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        self.len() == other.len()
            && self.iter().all(|(f, v)| other.get(f) == Some(v))
            && self.iter().all(|(f, _)| self.ttl(f) == other.ttl(f))
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        f.debug_map().entries(self.iter().map(|(k, v)| (text(k), text(v)))).finish()?;
        if let Some(t) = &self.ttls {
            write!(f, " ttls {:?}", t.of)?;
        }
        Ok(())
    }
}

/// A "listpackex": (field, value, TTL) triplets, TTL 0 for none. Fields with a TTL come
/// first, by time; a field given a TTL goes before the first with no TTL or one as late
/// (so the latest set is first among equals), one losing its TTL goes to the end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListpackEx {
    entries: Vec<(Sds, Sds, u64)>,
    registered: Option<u64>,
}

impl ListpackEx {
    fn position(&self, field: &[u8]) -> Option<usize> {
        self.entries.iter().position(|(f, _, _)| f.as_slice() == field)
    }

    /// Place an entry by its TTL (0: at the end).
    fn place(&mut self, entry: (Sds, Sds, u64)) {
        let when = entry.2;
        let at = if when == 0 {
            self.entries.len()
        } else {
            self.entries.iter().position(|e| e.2 == 0 || e.2 >= when).unwrap_or(self.entries.len())
        };
        self.entries.insert(at, entry);
    }

    /// The field's entry moved to where `when` puts it.
    fn retime(&mut self, field: &[u8], when: u64) -> bool {
        let Some(i) = self.position(field) else { return false };
        let mut e = self.entries.remove(i);
        e.2 = when;
        self.place(e);
        true
    }
}

#[derive(Debug, Clone)]
pub enum Hash {
    Listpack(Fields),
    ListpackEx(Box<ListpackEx>),
    Table(Box<Table>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Fields::default())
    }
}

/// A small hash's field/value pairs in insertion order, packed as two entries each (about
/// 4 bytes beside the field and the value, where a `(Sds, Sds)` took 48 and, past 16
/// bytes, a heap block each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields(Packed);

impl Fields {
    fn len(&self) -> usize {
        self.0.pair_count()
    }

    pub fn iter(&self) -> PairIter<'_> {
        self.0.pairs(0, self.len())
    }

    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.0.find_pair(field).map(|(_, v)| self.0.data_at(v.start))
    }

    fn push(&mut self, field: &[u8], value: &[u8]) {
        self.0.push_back(field);
        self.0.push_back(value);
    }
}

impl PartialEq for Hash {
    /// Same encoding, same pairs and TTLs (a listpack's order counts, as it is observable).
    fn eq(&self, other: &Hash) -> bool {
        match (self, other) {
            (Hash::Listpack(a), Hash::Listpack(b)) => a == b,
            (Hash::ListpackEx(a), Hash::ListpackEx(b)) => a.entries == b.entries,
            (Hash::Table(a), Hash::Table(b)) => a == b,
            _ => false,
        }
    }
}

/// A field, its value and its TTL (absolute unix ms).
pub type FieldWithTtl<'a> = (&'a [u8], &'a [u8], Option<u64>);

/// What a field is at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldState<'a> {
    Missing,
    /// Its TTL has passed, but it is still stored.
    Expired,
    Live(&'a [u8]),
}

/// Whether a field with TTL `when` (0: none) reads as gone at `now` (Redis's lazy check:
/// strictly before now).
fn is_past(when: u64, now: i64) -> bool {
    when != 0 && (when as i64) < now
}

impl Hash {
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::ListpackEx(_) => "listpackex",
            Hash::Table(_) => "hashtable",
        }
    }

    /// Give back spare capacity (a hash built whole: loaded, restored).
    pub fn shrink_to_fit(&mut self) {
        match self {
            Hash::Listpack(p) => p.0.fit(),
            Hash::Table(t) => t.shrink_to_fit(),
            Hash::ListpackEx(_) => {}
        }
    }

    /// Fields stored, expired ones included (HLEN).
    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(p) => p.len(),
            Hash::ListpackEx(x) => x.entries.len(),
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
            Hash::Table(Box::new(Table::with_capacity(n)))
        } else {
            Hash::default()
        }
    }

    /// Field/value pairs in the order HGETALL returns them, expired fields included.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&[u8], &[u8])> + '_> {
        match self {
            Hash::Listpack(p) => Box::new(p.iter()),
            Hash::ListpackEx(x) => Box::new(x.entries.iter().map(|(f, v, _)| (f.as_slice(), v.as_slice()))),
            Hash::Table(t) => Box::new(t.iter()),
        }
    }

    /// Field, value and TTL (absolute unix ms), in order, expired fields included.
    pub fn iter_with_ttl(&self) -> Box<dyn Iterator<Item = FieldWithTtl<'_>> + '_> {
        match self {
            Hash::Listpack(p) => Box::new(p.iter().map(|(f, v)| (f, v, None))),
            Hash::ListpackEx(x) => {
                Box::new(x.entries.iter().map(|(f, v, t)| (f.as_slice(), v.as_slice(), (*t != 0).then_some(*t))))
            }
            Hash::Table(t) => Box::new(t.iter().map(move |(f, v)| (f, v, t.ttl(f)))),
        }
    }

    /// The pairs HGETALL, HKEYS and HVALS show at `now`: fields whose TTL passed are left
    /// out, when the hash is registered for expiry (Redis looks no further otherwise).
    pub fn iter_visible(&self, now: i64) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let skip = self.registered().is_some();
        self.iter_with_ttl().filter(move |(_, _, t)| !(skip && is_past(t.unwrap_or(0), now))).map(|(f, v, _)| (f, v))
    }

    /// The value, whatever the field's TTL says.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Listpack(p) => p.get(field),
            Hash::ListpackEx(x) => x.position(field).map(|i| x.entries[i].1.as_slice()),
            Hash::Table(t) => t.get(field),
        }
    }

    /// The field at `now`.
    pub fn lookup(&self, field: &[u8], now: i64) -> FieldState<'_> {
        match self.get(field) {
            None => FieldState::Missing,
            Some(_) if is_past(self.field_ttl(field).flatten().unwrap_or(0), now) => FieldState::Expired,
            Some(v) => FieldState::Live(v),
        }
    }

    /// The field's TTL: None when the field is missing, Some(None) when it has none.
    pub fn field_ttl(&self, field: &[u8]) -> Option<Option<u64>> {
        match self {
            Hash::Listpack(p) => p.get(field).map(|_| None),
            Hash::ListpackEx(x) => x.position(field).map(|i| Some(x.entries[i].2).filter(|&t| t != 0)),
            Hash::Table(t) => t.get(field).map(|_| t.ttl(field)),
        }
    }

    /// Set a field as HSET does: true when it is new; a TTL it had is dropped. Converts
    /// to a hashtable when a limit is passed.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        self.set_value(field, value, false, true, limits)
    }

    /// Set the value HINCRBY or HINCRBYFLOAT computed, keeping the field's TTL (and, as
    /// Redis 6.2, leaving a listpack a listpack whatever the lengths); true when it is new.
    pub fn insert_incremented(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        self.set_value(field, value, true, !limits.hash_ziplist_keeps_long, limits)
    }

    /// Add a field loaded from an RDB value of the compact type (ziplist/listpack) or not.
    pub fn insert_loaded(&mut self, field: &[u8], value: &[u8], compact: bool, limits: &Limits) -> bool {
        self.set_value(field, value, false, !(compact && limits.hash_ziplist_keeps_long), limits)
    }

    /// `check_lengths`: a field or value past the listpack limit converts the hash.
    fn set_value(&mut self, field: &[u8], value: &[u8], keep_ttl: bool, check_lengths: bool, limits: &Limits) -> bool {
        let too_long = check_lengths
            && (field.len() > limits.hash_max_listpack_value || value.len() > limits.hash_max_listpack_value);
        match self {
            Hash::Listpack(p) => {
                if too_long {
                    self.convert();
                } else if let Some((_, old)) = p.0.find_pair(field) {
                    p.0.put(old, value);
                    return false;
                } else {
                    p.push(field, value);
                    if p.len() > limits.hash_max_listpack_entries {
                        self.convert();
                    }
                    return true;
                }
            }
            Hash::ListpackEx(x) => {
                if too_long {
                    self.convert();
                } else if let Some(i) = x.position(field) {
                    if keep_ttl || x.entries[i].2 == 0 {
                        x.entries[i].1 = sds(value);
                    } else {
                        x.entries.remove(i);
                        x.entries.push((sds(field), sds(value), 0));
                    }
                    return false;
                } else {
                    x.entries.push((sds(field), sds(value), 0));
                    if x.entries.len() > limits.hash_max_listpack_entries {
                        self.convert();
                    }
                    return true;
                }
            }
            Hash::Table(_) => {}
        }
        match self {
            Hash::Table(t) => {
                if !keep_ttl {
                    if let Some(ttls) = t.ttls.as_deref_mut() {
                        ttls.clear(field);
                    }
                }
                t.insert(field, value)
            }
            _ => unreachable!("converted above"),
        }
    }

    /// Remove a field (and its TTL); true when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(p) => match p.0.find_pair(field) {
                Some((span, _)) => {
                    p.0.remove_span(span, 2);
                    true
                }
                None => false,
            },
            Hash::ListpackEx(x) => match x.position(field) {
                Some(i) => {
                    x.entries.remove(i);
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
            Hash::Listpack(p) => p.0.pair_at(i),
            Hash::ListpackEx(x) => x.entries.get(i).map(|(f, v, _)| (f.as_slice(), v.as_slice())),
            Hash::Table(t) => t.get_index(i),
        }
    }

    /// Whether setting these fields and values would make Redis convert to a hashtable
    /// before setting anything (hashTypeTryConversion: any argument too long).
    pub fn args_too_long<'a>(&self, args: impl IntoIterator<Item = &'a [u8]>, limits: &Limits) -> bool {
        !matches!(self, Hash::Table(_)) && args.into_iter().any(|a| a.len() > limits.hash_max_listpack_value)
    }

    /// One HSCAN step over a hashtable: visit up to `count` fields at positions below the
    /// cursor, walking downwards (0 starts at the top); returns the next cursor, 0 when
    /// done. Removals swap the last field into the hole, which was either visited already
    /// or lies below the cursor, so fields present throughout the scan are never missed.
    /// A listpack is visited whole (cursor 0), as Redis does. Fields whose TTL passed
    /// before `now` are not visited.
    pub fn scan(&self, cursor: u64, count: usize, now: i64, mut visit: impl FnMut(&[u8], &[u8])) -> u64 {
        let t = match self {
            Hash::Listpack(p) => {
                p.iter().for_each(|(f, x)| visit(f, x));
                return 0;
            }
            Hash::ListpackEx(x) => {
                x.entries.iter().filter(|e| !is_past(e.2, now)).for_each(|(f, x, _)| visit(f, x));
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
                if !is_past(t.ttl(f).unwrap_or(0), now) {
                    visit(f, x);
                }
            }
            n += 1;
        }
        next
    }

    /// Switch to the hashtable encoding (TTLs and the registered time go along).
    pub fn convert(&mut self) {
        let t = match self {
            Hash::Listpack(p) => {
                let mut t = Table::with_capacity(p.len());
                for (f, x) in p.iter() {
                    t.insert(f, x);
                }
                t
            }
            Hash::ListpackEx(x) => {
                let mut t = Table::with_capacity(x.entries.len());
                let mut ttls = TableTtls { registered: x.registered, ..Default::default() };
                for (f, v, when) in &x.entries {
                    t.insert(f, v);
                    if *when != 0 {
                        ttls.set(f, *when);
                    }
                }
                t.ttls = Some(Box::new(ttls));
                t
            }
            Hash::Table(_) => return,
        };
        *self = Hash::Table(Box::new(t));
    }

    // ------------------------------------------------------------ field TTLs

    /// Make a listpack a listpackex (Redis does on any HEXPIRE call); others stay.
    pub fn make_ttl_capable(&mut self) {
        if let Hash::Listpack(p) = self {
            let entries = p.iter().map(|(f, x)| (sds(f), sds(x), 0)).collect();
            *self = Hash::ListpackEx(Box::new(ListpackEx { entries, registered: None }));
        }
    }

    /// Give an existing field a TTL (absolute unix ms, non-zero); false when missing.
    pub fn set_field_ttl(&mut self, field: &[u8], when: u64) -> bool {
        self.make_ttl_capable();
        match self {
            Hash::ListpackEx(x) => x.retime(field, when),
            Hash::Table(t) => {
                if !t.contains(field) {
                    return false;
                }
                t.ttls.get_or_insert_with(Default::default).set(field, when);
                true
            }
            Hash::Listpack(_) => false,
        }
    }

    /// Drop a field's TTL; true when it had one.
    pub fn clear_field_ttl(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(_) => false,
            Hash::ListpackEx(x) => match x.position(field) {
                Some(i) if x.entries[i].2 != 0 => x.retime(field, 0),
                _ => false,
            },
            Hash::Table(t) => t.ttls.as_deref_mut().is_some_and(|ttls| ttls.clear(field)),
        }
    }

    /// The earliest field TTL.
    pub fn min_field_ttl(&self) -> Option<u64> {
        match self {
            Hash::Listpack(_) => None,
            Hash::ListpackEx(x) => x.entries.first().map(|e| e.2).filter(|&t| t != 0),
            Hash::Table(t) => t.ttls.as_deref().and_then(|ttls| ttls.order.first()).map(|e| e.0),
        }
    }

    /// Whether any field has a TTL.
    pub fn has_field_ttls(&self) -> bool {
        self.min_field_ttl().is_some()
    }

    /// The time this hash is registered under for the active cycle (Redis's per-database
    /// `hexpires`): set from the earliest TTL when one is given, but not moved when a TTL
    /// goes later or away, so it can be earlier than any TTL left. None: not registered.
    pub fn registered(&self) -> Option<u64> {
        match self {
            Hash::Listpack(_) => None,
            Hash::ListpackEx(x) => x.registered,
            Hash::Table(t) => t.ttls.as_deref().and_then(|ttls| ttls.registered),
        }
    }

    pub fn set_registered(&mut self, when: Option<u64>) {
        match self {
            Hash::Listpack(_) => {}
            Hash::ListpackEx(x) => x.registered = when,
            Hash::Table(t) => {
                if when.is_some() || t.ttls.is_some() {
                    t.ttls.get_or_insert_with(Default::default).registered = when;
                }
            }
        }
    }

    /// Remove, in expiry order, up to `max` fields whose TTL is at or before `now` (the
    /// active cycle's test); their names, in that order.
    pub fn remove_due(&mut self, now: i64, max: usize) -> Vec<Sds> {
        let mut out = Vec::new();
        match self {
            Hash::Listpack(_) => {}
            Hash::ListpackEx(x) => {
                let n = x.entries.iter().take(max).take_while(|e| e.2 != 0 && e.2 as i64 <= now).count();
                out.extend(x.entries.drain(..n).map(|e| e.0));
            }
            Hash::Table(t) => {
                let due: Vec<Sds> = match t.ttls.as_deref() {
                    Some(ttls) => {
                        ttls.order.iter().take(max).take_while(|e| e.0 as i64 <= now).map(|e| e.2.clone()).collect()
                    }
                    None => Vec::new(),
                };
                for f in due {
                    t.swap_remove(&f);
                    out.push(f);
                }
            }
        }
        out
    }

    /// Fields whose TTL has passed at `now` (read as gone).
    pub fn count_past(&self, now: i64) -> usize {
        self.iter_with_ttl().filter(|(_, _, t)| is_past(t.unwrap_or(0), now)).count()
    }

    /// A hash with TTLs built whole (a loader, RESTORE), registered under its earliest
    /// TTL: a listpackex while within the listpack limits, else a hashtable. `keep_order`:
    /// the entries are a listpackex's, kept as they are; otherwise each is placed by its
    /// TTL, as Redis adds them.
    pub fn from_entries_with_ttls(entries: Vec<(Sds, Sds, u64)>, keep_order: bool, limits: &Limits) -> Hash {
        let small = entries.len() <= limits.hash_max_listpack_entries
            && entries.iter().all(|(f, v, _)| {
                f.len() <= limits.hash_max_listpack_value && v.len() <= limits.hash_max_listpack_value
            });
        let mut h = if small {
            let mut x = ListpackEx::default();
            if keep_order {
                x.entries = entries;
            } else {
                entries.into_iter().for_each(|e| x.place(e));
            }
            Hash::ListpackEx(Box::new(x))
        } else {
            let mut t = Table::with_capacity(entries.len());
            let mut ttls = TableTtls::default();
            for (f, v, when) in entries {
                t.insert(&f, &v);
                if when != 0 {
                    ttls.set(&f, when);
                }
            }
            t.ttls = Some(Box::new(ttls));
            Hash::Table(Box::new(t))
        };
        let min = h.min_field_ttl();
        h.set_registered(min);
        h
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
            cursor = h.scan(cursor, 10, 0, |f, _| {
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

    fn order(h: &Hash) -> String {
        h.iter().map(|(f, _)| String::from_utf8_lossy(f).into_owned()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn a_listpackex_orders_fields_by_ttl_as_redis_7_4() {
        // The sequence real Redis 7.4.1 was seen to produce (HGETALL after each step).
        let l = limits();
        let mut h = Hash::default();
        for f in ["a", "b", "c", "d"] {
            h.insert(f.as_bytes(), b"1", &l);
        }
        h.set_field_ttl(b"c", 100);
        assert_eq!((order(&h), h.encoding()), ("c a b d".into(), "listpackex"));
        h.set_field_ttl(b"a", 100);
        assert_eq!(order(&h), "a c b d", "the latest set goes first among equal TTLs");
        h.set_field_ttl(b"d", 50);
        assert_eq!(order(&h), "d a c b");
        h.insert_incremented(b"a", b"6", &l);
        assert_eq!(order(&h), "d a c b", "HINCRBY changes a value in place");
        assert!(!h.insert(b"a", b"9", &l));
        assert_eq!(order(&h), "d c b a", "HSET drops the TTL and moves the field last");
        assert_eq!(h.field_ttl(b"a"), Some(None));
        h.set_field_ttl(b"a", 100);
        h.set_field_ttl(b"b", 100);
        assert_eq!(order(&h), "d b a c");
        h.insert(b"zz", b"1", &l);
        assert_eq!(order(&h), "d b a c zz");
        assert_eq!(h.min_field_ttl(), Some(50));
        assert_eq!(h.lookup(b"d", 50), FieldState::Live(b"1"), "a TTL equal to now has not passed");
        assert_eq!(h.lookup(b"d", 51), FieldState::Expired);
        assert_eq!(h.remove_due(100, 2).iter().map(|f| f.to_vec()).collect::<Vec<_>>(), [b"d".to_vec(), b"b".to_vec()]);
        assert_eq!(order(&h), "a c zz");
    }

    #[test]
    fn ttls_and_the_registration_survive_conversion() {
        let l = limits();
        let mut h = Hash::default();
        h.insert(b"a", b"1", &l);
        h.insert(b"b", b"2", &l);
        h.set_field_ttl(b"a", 500);
        h.set_registered(Some(500));
        h.insert(b"big", &[b'x'; 65], &l);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!((h.field_ttl(b"a"), h.field_ttl(b"b"), h.registered()), (Some(Some(500)), Some(None), Some(500)));
        h.set_field_ttl(b"b", 400);
        assert_eq!(h.min_field_ttl(), Some(400));
        assert!(h.clear_field_ttl(b"b"));
        assert_eq!(h.registered(), Some(500), "dropping a TTL leaves the registration");
        assert_eq!(h.count_past(501), 1);
        assert_eq!(h.iter_visible(501).count(), 2);
        assert_eq!(h.remove_due(501, 10).len(), 1);
        assert_eq!(h.min_field_ttl(), None);
    }

    #[test]
    fn table_matches_a_plain_map() {
        // Fields from 50 names keep the table packed; from 500 it takes an index. The model
        // is a vector with a swap-remove, as the table's order is.
        for names in [50, 500] {
            let mut rng = fastrand::Rng::with_seed(3);
            let mut t = Table::default();
            let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for step in 0..20000 {
                let field = format!("f{}", rng.u32(..names)).into_bytes();
                let at = model.iter().position(|(f, _)| *f == field);
                if rng.u8(..3) == 0 {
                    assert_eq!(t.swap_remove(&field), at.is_some());
                    if let Some(i) = at {
                        model.swap_remove(i);
                    }
                } else {
                    let value = vec![b'v'; rng.usize(..200)];
                    assert_eq!(t.insert(&field, &value), at.is_none());
                    match at {
                        Some(i) => model[i].1 = value,
                        None => model.push((field, value)),
                    }
                }
                assert_eq!(t.len(), model.len());
                if step % 97 == 0 {
                    assert!(t.iter().eq(model.iter().map(|(f, v)| (f.as_slice(), v.as_slice()))));
                    for (i, (f, v)) in model.iter().enumerate() {
                        assert_eq!(t.get(f), Some(v.as_slice()));
                        assert_eq!(t.get_index(i), Some((f.as_slice(), v.as_slice())));
                    }
                }
            }
            assert_eq!(matches!(t.pairs, Pairs::Packed(_)), names as usize <= PACKED_TABLE_MAX);
        }
    }
}
