//! Streams: entries ordered by ID, consumer groups with their pending entries lists.
//!
//! Redis keeps entries in listpack "nodes" of a radix tree. The engine keeps the entries
//! in a B-tree by ID and only a summary of each node (how many entries, tombstones,
//! bytes), because approximate trimming (`~`) removes whole nodes and XINFO reports them.

use std::collections::{BTreeMap, BTreeSet};

use super::{sds, varint, Limits, Sds};
use crate::format::blob::FlatWriter;
use crate::format::listpack::ListpackWriter;
use crate::format::logical::{canonical_stream_meta, StreamValue};
use crate::format::rdb::{Consumer as RdbConsumer, Group as RdbGroup, Idmp, PendingEntry, StreamId, StreamMeta};
use crate::format::Elem;

/// An entry's field/value pairs in one block of their exact size: the number of pairs,
/// then each field and value as its length and its bytes (lengths as varints). A vector of
/// `(Sds, Sds)` took 48 bytes a pair and a heap block past 16 bytes each, more than four
/// times what Redis's listpack nodes take.
#[derive(Clone, PartialEq, Eq)]
pub struct Fields(Box<[u8]>);

impl Fields {
    pub fn new<'a, I>(pairs: I) -> Fields
    where
        I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
        I::IntoIter: Clone,
    {
        let pairs = pairs.into_iter();
        let (count, size) = pairs.clone().fold((0, 0), |(n, size), (f, v)| {
            (n + 1, size + varint::len(f.len()) + f.len() + varint::len(v.len()) + v.len())
        });
        let mut buf = vec![0u8; varint::len(count) + size];
        let mut at = varint::write(&mut buf, count);
        for item in pairs.flat_map(|(f, v)| [f, v]) {
            at += varint::write(&mut buf[at..], item.len());
            buf[at..at + item.len()].copy_from_slice(item);
            at += item.len();
        }
        Fields(buf.into_boxed_slice())
    }

    /// Pairs.
    pub fn len(&self) -> usize {
        varint::read(&self.0).0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> FieldsIter<'_> {
        let (left, at) = varint::read(&self.0);
        FieldsIter { buf: &self.0, at, left }
    }
}

impl<'a> IntoIterator for &'a Fields {
    type Item = (&'a [u8], &'a [u8]);
    type IntoIter = FieldsIter<'a>;

    fn into_iter(self) -> FieldsIter<'a> {
        self.iter()
    }
}

impl std::fmt::Debug for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        f.debug_map().entries(self.iter().map(|(k, v)| (text(k), text(v)))).finish()
    }
}

/// The pairs of a [`Fields`], in order.
pub struct FieldsIter<'a> {
    buf: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> FieldsIter<'a> {
    fn item(&mut self) -> &'a [u8] {
        let (n, head) = varint::read(&self.buf[self.at..]);
        let start = self.at + head;
        self.at = start + n;
        &self.buf[start..start + n]
    }
}

impl<'a> Iterator for FieldsIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some((self.item(), self.item()))
    }
}

/// The smallest and largest IDs.
pub const MIN_ID: StreamId = StreamId { ms: 0, seq: 0 };
pub const MAX_ID: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

/// The ID after `id`, or None past the last one.
pub fn id_incr(id: StreamId) -> Option<StreamId> {
    if id.seq < u64::MAX {
        Some(StreamId { ms: id.ms, seq: id.seq + 1 })
    } else if id.ms < u64::MAX {
        Some(StreamId { ms: id.ms + 1, seq: 0 })
    } else {
        None
    }
}

/// The ID before `id`, or None before 0-0.
pub fn id_decr(id: StreamId) -> Option<StreamId> {
    if id.seq > 0 {
        Some(StreamId { ms: id.ms, seq: id.seq - 1 })
    } else if id.ms > 0 {
        Some(StreamId { ms: id.ms - 1, seq: u64::MAX })
    } else {
        None
    }
}

/// A summary of one Redis listpack node (keyed by its master ID, its first entry's ID).
#[derive(Debug, Clone, PartialEq)]
struct Node {
    /// The last ID appended to the node (deleted or not).
    last: StreamId,
    live: u64,
    deleted: u64,
    /// The listpack's size in bytes, as Redis would encode it.
    bytes: usize,
    /// The room Redis allocates up front for a node XADD starts (its lpNew(prealloc)):
    /// until the listpack outgrows it, that is what the node takes. 0 for a loaded node,
    /// allocated at its size.
    prealloc: usize,
    master_fields: Vec<Sds>,
}

/// Redis's STREAM_LISTPACK_MAX_PRE_ALLOCATE.
const NODE_PREALLOC_MAX: usize = 4096;

/// A pending entry: delivered to a consumer, not acknowledged yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Nack {
    pub delivery_time: i64,
    pub delivery_count: u64,
    /// The owner (None only for IDs a newer Redis holds in its NACK zone).
    pub consumer: Option<Sds>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    pub seen_time: i64,
    /// When it last got an entry (Redis 7.2+; -1 until it has, see [`Consumer::new`]).
    pub active_time: i64,
    pub pel: BTreeSet<StreamId>,
}

impl Consumer {
    /// A consumer created now. Redis 7.2 and later keep when a consumer last got an entry
    /// (`tracks_activity`: -1 until then); before, active-time is the seen time.
    pub fn new(now: i64, tracks_activity: bool) -> Consumer {
        Consumer { seen_time: now, active_time: if tracks_activity { -1 } else { now }, pel: BTreeSet::new() }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    /// -1 when unknown.
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Sds, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group { last_id, entries_read, pel: BTreeMap::new(), consumers: BTreeMap::new() }
    }

    /// Drop a pending entry from the group and its owner.
    pub fn remove_nack(&mut self, id: StreamId) -> Option<Nack> {
        let nack = self.pel.remove(&id)?;
        if let Some(c) = nack.consumer.as_ref().and_then(|n| self.consumers.get_mut(n)) {
            c.pel.remove(&id);
        }
        Some(nack)
    }

    /// Give a pending entry to `consumer` (which exists), delivered or claimed at `now`;
    /// Redis 7.2+ counts that as the consumer's activity (`tracks_activity`).
    pub fn deliver(&mut self, id: StreamId, consumer: &[u8], now: i64, tracks_activity: bool) {
        self.assign(id, consumer);
        if let Some(c) = self.consumers.get_mut(consumer).filter(|_| tracks_activity) {
            c.active_time = now;
        }
    }

    /// Give a pending entry to `consumer` (which exists).
    pub fn assign(&mut self, id: StreamId, consumer: &[u8]) {
        let Some(nack) = self.pel.get_mut(&id) else { return };
        if nack.consumer.as_deref() == Some(consumer) {
            return;
        }
        if let Some(old) = nack.consumer.take() {
            if let Some(c) = self.consumers.get_mut(&old) {
                c.pel.remove(&id);
            }
        }
        nack.consumer = Some(sds(consumer));
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    entries: BTreeMap<StreamId, Fields>,
    nodes: BTreeMap<StreamId, Node>,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Sds, Group>,
    /// Idempotent-producer state of a newer Redis, kept for saving.
    idmp: Option<Idmp<'static>>,
}

/// Bytes a listpack entry holding `b` takes.
fn lp_str(b: &[u8]) -> usize {
    <ListpackWriter as FlatWriter>::entry_size(b)
}

fn lp_int(v: i64) -> usize {
    lp_str(v.to_string().as_bytes())
}

impl Stream {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, id: StreamId) -> Option<&Fields> {
        self.entries.get(&id)
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.entries.contains_key(&id)
    }

    /// Entries with IDs in `start..=end`, forward.
    pub fn range(&self, start: StreamId, end: StreamId) -> impl DoubleEndedIterator<Item = (&StreamId, &Fields)> {
        let ok = start <= end;
        let (s, e) = if ok { (start, end) } else { (MIN_ID, MIN_ID) };
        self.entries.range(s..=e).filter(move |_| ok)
    }

    /// Every entry, by ID.
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = (&StreamId, &Fields)> {
        self.entries.iter()
    }

    pub fn first_entry(&self) -> Option<(&StreamId, &Fields)> {
        self.entries.first_key_value()
    }

    pub fn last_entry(&self) -> Option<(&StreamId, &Fields)> {
        self.entries.last_key_value()
    }

    /// Radix-tree keys (listpack nodes).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Radix-tree nodes of a rax holding the node keys (16-byte big-endian IDs).
    pub fn rax_nodes(&self) -> usize {
        rax_nodes_of(self.nodes.keys().copied())
    }

    /// The bytes each listpack node takes, as Redis allocates it: its size, or the room an
    /// XADD made for it up front while it is smaller (MEMORY USAGE counts the allocation).
    pub fn node_allocations(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.values().map(|n| n.bytes.max(n.prealloc))
    }

    /// Append an entry with `id` (greater than the last ID: the caller checked).
    pub fn append(&mut self, id: StreamId, fields: Fields, limits: &Limits) {
        let total: usize = fields.iter().map(|(f, v)| f.len() + v.len()).sum();
        let max_bytes = if limits.stream_node_max_bytes == 0 { usize::MAX } else { limits.stream_node_max_bytes };
        let tail = self.nodes.last_key_value().map(|(k, n)| (*k, n.bytes, n.live + n.deleted));
        let reuse = match tail {
            Some((_, bytes, count)) => {
                bytes + total < max_bytes
                    && (limits.stream_node_max_entries == 0 || count < limits.stream_node_max_entries as u64)
            }
            None => false,
        };
        let master = match (reuse, tail) {
            (true, Some((k, _, _))) => k,
            _ => {
                let master_fields: Vec<Sds> = fields.iter().map(|(f, _)| sds(f)).collect();
                let bytes = 7
                    + lp_int(0) * 2
                    + lp_int(master_fields.len() as i64)
                    + master_fields.iter().map(|f| lp_str(f)).sum::<usize>()
                    + lp_int(0);
                let prealloc = match limits.stream_node_max_bytes {
                    0 => NODE_PREALLOC_MAX,
                    max => max.min(NODE_PREALLOC_MAX),
                };
                self.nodes.insert(id, Node { last: id, live: 0, deleted: 0, bytes, prealloc, master_fields });
                id
            }
        };
        if let Some(node) = self.nodes.get_mut(&master) {
            let same = node.master_fields.len() == fields.len()
                && node.master_fields.iter().zip(fields.iter()).all(|(m, (f, _))| m.as_slice() == f);
            let mut b = lp_int(0)
                + lp_int(id.ms.wrapping_sub(master.ms) as i64)
                + lp_int(id.seq.wrapping_sub(master.seq) as i64);
            if same {
                b += fields.iter().map(|(_, v)| lp_str(v)).sum::<usize>() + lp_int(fields.len() as i64 + 3);
            } else {
                b += lp_int(fields.len() as i64)
                    + fields.iter().map(|(f, v)| lp_str(f) + lp_str(v)).sum::<usize>()
                    + lp_int(2 * fields.len() as i64 + 4);
            }
            node.bytes += b;
            node.live += 1;
            node.last = id;
        }
        self.entries.insert(id, fields);
        self.entries_added += 1;
        self.last_id = id;
        if self.entries.len() == 1 {
            self.first_id = id;
        }
    }

    /// Delete one entry (a tombstone in its node; an emptied node goes). True if it was there.
    pub fn delete(&mut self, id: StreamId) -> bool {
        if self.entries.remove(&id).is_none() {
            return false;
        }
        if let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() {
            node.live -= 1;
            node.deleted += 1;
            if node.live == 0 {
                self.nodes.remove(&master);
            }
        }
        true
    }

    /// After deletions: the recorded first ID follows the first live entry.
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.entries.first_key_value().map(|(k, _)| *k).unwrap_or_default();
    }

    /// The first ID counting tombstones (what Redis propagates for an approximate MINID),
    /// or the largest ID when empty.
    pub fn first_id_with_tombstones(&self) -> StreamId {
        self.nodes.first_key_value().map(|(k, _)| *k).unwrap_or(MAX_ID)
    }

    /// Trim to `maxlen` entries or to IDs >= `minid`; `approx` removes whole nodes only,
    /// `limit` (0: none) caps the entries removed. Returns how many went.
    pub fn trim(&mut self, maxlen: Option<u64>, minid: Option<StreamId>, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        while let Some((&master, node)) = self.nodes.first_key_value() {
            let len = self.entries.len() as u64;
            if let Some(m) = maxlen {
                if len <= m {
                    break;
                }
            }
            let entries = node.live;
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let remove_node = match (maxlen, minid) {
                (Some(m), _) => len - entries >= m,
                (None, Some(min)) => node.last < min,
                _ => false,
            };
            let node_last = node.last;
            if remove_node {
                let ids: Vec<StreamId> = self.entries.range(master..=node_last).map(|(k, _)| *k).collect();
                for id in ids {
                    self.entries.remove(&id);
                }
                self.nodes.remove(&master);
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let mut from_node = 0u64;
            let ids: Vec<StreamId> = self.entries.range(master..=node_last).map(|(k, _)| *k).collect();
            for id in ids {
                let stop = match (maxlen, minid) {
                    (Some(m), _) => self.entries.len() as u64 <= m,
                    (None, Some(min)) => id >= min,
                    _ => true,
                };
                if stop {
                    break;
                }
                self.entries.remove(&id);
                from_node += 1;
            }
            if let Some(n) = self.nodes.get_mut(&master) {
                n.live -= from_node;
                n.deleted += from_node;
            }
            deleted += from_node;
            break;
        }
        if self.entries.is_empty() {
            self.first_id = MIN_ID;
        } else if deleted > 0 {
            self.refresh_first_id();
        }
        deleted
    }

    /// Whether a deleted entry may lie in `start..=end` (streamRangeHasTombstones).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted_id == MIN_ID || self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// How many entries were added up to `id` (streamEstimateDistanceFromFirstEverEntry);
    /// None when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.entries.is_empty() && id <= self.last_id {
            return Some(added);
        }
        if id == self.last_id {
            return Some(added);
        } else if id > self.last_id {
            return None;
        }
        let len = self.entries.len() as i64;
        if self.max_deleted_id == MIN_ID || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return Some(added.wrapping_sub(len));
            } else if id == self.first_id {
                return Some(added.wrapping_sub(len).wrapping_add(1));
            }
        }
        None
    }

    /// A group's lag, None when unknown.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != -1 && !self.range_has_tombstones(g.last_id, MAX_ID) {
            return Some((self.entries_added as i64).wrapping_sub(g.entries_read));
        }
        self.estimate_distance(g.last_id).map(|r| (self.entries_added as i64).wrapping_sub(r))
    }

    // ------------------------------------------------------------ persistence

    /// The persistence view (RDB save, DUMP, digest, AOF rewrite).
    pub fn to_stream_value(&self) -> StreamValue {
        let entries = self
            .entries
            .iter()
            .map(|(id, f)| (*id, f.iter().map(|(a, b)| (a.to_vec(), b.to_vec())).collect()))
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|(name, g)| RdbGroup {
                name: Elem::Bytes(name.to_vec().into()),
                last_delivered: g.last_id,
                entries_read: Some(g.entries_read),
                pending: g
                    .pel
                    .iter()
                    .map(|(id, n)| PendingEntry {
                        id: *id,
                        delivery_time: n.delivery_time,
                        delivery_count: n.delivery_count,
                    })
                    .collect(),
                consumers: g
                    .consumers
                    .iter()
                    .map(|(cn, c)| RdbConsumer {
                        name: Elem::Bytes(cn.to_vec().into()),
                        seen_time: c.seen_time,
                        active_time: Some(c.active_time),
                        pending: c.pel.iter().copied().collect(),
                    })
                    .collect(),
                nacked: g.pel.iter().filter(|(_, n)| n.consumer.is_none()).map(|(id, _)| *id).collect(),
            })
            .collect();
        StreamValue {
            entries,
            meta: StreamMeta {
                length: self.entries.len() as u64,
                last_id: self.last_id,
                first_id: Some(self.first_id),
                max_deleted_id: Some(self.max_deleted_id),
                entries_added: Some(self.entries_added),
                groups,
                idmp: self.idmp.clone(),
            },
        }
    }

    /// Build from the persistence view, with nodes laid out as appends would make them.
    pub fn from_stream_value(v: &StreamValue, limits: &Limits) -> Stream {
        let mut meta = v.meta.clone();
        canonical_stream_meta(&mut meta, &v.entries);
        let mut s = Stream::default();
        for (id, fields) in &v.entries {
            s.append(*id, Fields::new(fields.iter().map(|(f, x)| (f.as_slice(), x.as_slice()))), limits);
        }
        // A loaded listpack is allocated at its size.
        for n in s.nodes.values_mut() {
            n.prealloc = 0;
        }
        s.last_id = meta.last_id;
        s.first_id = meta.first_id.unwrap_or_default();
        s.max_deleted_id = meta.max_deleted_id.unwrap_or_default();
        s.entries_added = meta.entries_added.unwrap_or(meta.length);
        s.idmp = meta.idmp.clone();
        for g in &meta.groups {
            let mut group = Group::new(g.last_delivered, g.entries_read.unwrap_or(-1));
            for p in &g.pending {
                group.pel.insert(
                    p.id,
                    Nack { delivery_time: p.delivery_time, delivery_count: p.delivery_count, consumer: None },
                );
            }
            for c in &g.consumers {
                let name = sds(&c.name.to_bytes());
                let mut consumer = Consumer::new(c.seen_time, false);
                consumer.active_time = c.active_time.unwrap_or(c.seen_time);
                for id in &c.pending {
                    if let Some(n) = group.pel.get_mut(id) {
                        n.consumer = Some(name.clone());
                        consumer.pel.insert(*id);
                    }
                }
                group.consumers.insert(name, consumer);
            }
            s.groups.insert(sds(&g.name.to_bytes()), group);
        }
        s
    }
}

/// Nodes of a rax holding `keys` (sorted, distinct, equal length) below a node at `depth`
/// bytes: a compressed node for a shared prefix, a branching node where keys differ, and
/// an empty leaf node per key.
/// Nodes of a rax holding `ids` as 16-byte big-endian keys (1 for an empty one).
pub fn rax_nodes_of(ids: impl Iterator<Item = StreamId>) -> usize {
    let keys: Vec<[u8; 16]> = ids
        .map(|id| {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&id.ms.to_be_bytes());
            k[8..].copy_from_slice(&id.seq.to_be_bytes());
            k
        })
        .collect();
    if keys.is_empty() {
        return 1;
    }
    rax_size(&keys, 0)
}

fn rax_size(keys: &[[u8; 16]], depth: usize) -> usize {
    if depth == 16 {
        return 1;
    }
    let (first, last) = (&keys[0], &keys[keys.len() - 1]);
    let common = (depth..16).take_while(|&i| first[i] == last[i]).count();
    if common > 0 {
        return 1 + rax_size(keys, depth + common);
    }
    // A branching node; each child continues one byte further.
    let mut n = 1;
    let mut i = 0;
    while i < keys.len() {
        let b = keys[i][depth];
        let j = i + keys[i..].iter().take_while(|k| k[depth] == b).count();
        n += rax_size(&keys[i..j], depth + 1);
        i = j;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_pairs_in_one_exact_block() {
        let long = vec![b'x'; 300];
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"user", b"42"), (b"", &long), (&long, b"")];
        let f = Fields::new(pairs.iter().copied());
        assert_eq!(f.len(), 3);
        assert!(f.iter().eq(pairs.iter().copied()));
        assert_eq!(f.0.len(), 1 + (1 + 4 + 1 + 2) + (1 + 2 + 300) + (2 + 300 + 1));
        let empty = Fields::new(std::iter::empty());
        assert!(empty.is_empty() && empty.iter().next().is_none());
    }

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    #[test]
    fn nodes_split_at_max_entries_and_trim_by_node() {
        let limits = Limits { stream_node_max_entries: 3, ..Limits::default() };
        let mut s = Stream::default();
        for i in 1..=10 {
            s.append(id(i, 0), Fields::new([(&b"f"[..], &b"v"[..])]), &limits);
        }
        assert_eq!(s.node_count(), 4);
        assert_eq!(s.trim(Some(5), None, true, 0), 3);
        assert_eq!(s.len(), 7);
        assert_eq!(s.trim(Some(5), None, false, 0), 2);
        assert_eq!(s.first_id, id(6, 0));
        assert!(s.delete(id(6, 0)));
        assert_eq!(s.first_id_with_tombstones(), id(7, 0));
    }

    #[test]
    fn rax_of_one_key_has_two_nodes() {
        let mut s = Stream::default();
        assert_eq!(s.rax_nodes(), 1);
        s.append(id(1, 0), Fields::new([(&b"f"[..], &b"v"[..])]), &Limits::default());
        assert_eq!(s.rax_nodes(), 2);
    }
}
