//! Streams: entries ordered by ID, consumer groups with their pending entries lists.
//!
//! Redis keeps entries in listpack "nodes" of a radix tree; so does the engine, in a B-tree
//! of nodes by master ID, each one packed block of entries (about what Redis's listpack
//! takes: an entry with its node's field names keeps its values only), with the size
//! Redis's listpack would have, because approximate trimming (`~`) removes whole nodes and
//! XINFO and MEMORY USAGE report them. An entry is found by a walk of its node (at most
//! `stream-node-max-entries`), from either end.

use std::collections::{BTreeMap, BTreeSet};

use super::{fit, sds, varint, Limits, Sds};
use crate::format::blob::FlatWriter;
use crate::format::listpack::ListpackWriter;
use crate::format::logical::{canonical_stream_meta, owned_meta, Entry, StreamValue};
use crate::format::rdb::{
    Consumer as RdbConsumer, Group as RdbGroup, Idmp, PendingEntry, Stream as RdbStream, StreamId, StreamMeta,
};
use crate::format::Elem;
use crate::format::FormatError;

/// An entry's field/value pairs in one block of their exact size: the number of pairs,
/// then each field and value as its length and its bytes (lengths as varints). A vector of
/// `(Sds, Sds)` took 48 bytes a pair and a heap block past 16 bytes each, more than four
/// times what Redis's listpack nodes take. An entry is built as one (XADD, a load) and
/// copied into its node.
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

    /// The pairs as a stored entry's are read.
    pub fn view(&self) -> FieldsRef<'_> {
        FieldsRef { names: None, buf: &self.0 }
    }

    /// Pairs.
    pub fn len(&self) -> usize {
        self.view().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> FieldsIter<'_> {
        self.view().iter()
    }
}

impl std::fmt::Debug for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.view().fmt(f)
    }
}

/// An entry's pairs where they are kept: a [`Fields`] block, or, for an entry with its
/// node's field names (Redis's "same fields" flag), the values alone beside the node's names.
#[derive(Clone, Copy)]
pub struct FieldsRef<'a> {
    names: Option<&'a [Sds]>,
    buf: &'a [u8],
}

impl<'a> FieldsRef<'a> {
    /// Pairs.
    pub fn len(&self) -> usize {
        match self.names {
            Some(names) => names.len(),
            None => varint::read(self.buf).0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> FieldsIter<'a> {
        match self.names {
            Some(names) => FieldsIter { buf: self.buf, at: 0, left: names.len(), names: Some(names) },
            None => {
                let (left, at) = varint::read(self.buf);
                FieldsIter { buf: self.buf, at, left, names: None }
            }
        }
    }

    /// The pairs at the start of `buf` (with `names`, the values alone) and the bytes they take.
    fn parse(buf: &'a [u8], names: Option<&'a [Sds]>) -> (FieldsRef<'a>, usize) {
        let mut it = FieldsRef { names, buf }.iter();
        while it.next().is_some() {}
        let end = it.at.min(buf.len());
        (FieldsRef { names, buf: &buf[..end] }, end)
    }
}

impl<'a> IntoIterator for FieldsRef<'a> {
    type Item = (&'a [u8], &'a [u8]);
    type IntoIter = FieldsIter<'a>;

    fn into_iter(self) -> FieldsIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a Fields {
    type Item = (&'a [u8], &'a [u8]);
    type IntoIter = FieldsIter<'a>;

    fn into_iter(self) -> FieldsIter<'a> {
        self.iter()
    }
}

impl PartialEq for FieldsRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for FieldsRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        f.debug_map().entries(self.iter().map(|(k, v)| (text(k), text(v)))).finish()
    }
}

/// The pairs of an entry, in order.
#[derive(Clone)]
pub struct FieldsIter<'a> {
    buf: &'a [u8],
    at: usize,
    left: usize,
    names: Option<&'a [Sds]>,
}

impl<'a> FieldsIter<'a> {
    fn item(&mut self) -> &'a [u8] {
        let rest = self.buf.get(self.at..).unwrap_or_default();
        let (n, head) = varint::read(rest);
        let item = rest.get(head..head + n).unwrap_or_default();
        self.at += head + n;
        item
    }
}

impl<'a> Iterator for FieldsIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let field = match self.names {
            Some(names) => names[names.len() - 1 - self.left].as_slice(),
            None => self.item(),
        };
        Some((field, self.item()))
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

/// One node of entries, as Redis's listpack nodes (keyed by its master ID, its first
/// entry's ID): the entries themselves, packed, and what Redis's listpack would take.
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
    /// The first entry's field names; an entry with the same names keeps its values only.
    master_fields: Vec<Sds>,
    /// The entries in ID order, deleted ones too: a flag byte ([`DELETED`], [`SAME_FIELDS`]),
    /// the ID as its distance from the master ID (milliseconds, then the sequence: from the
    /// master's within its millisecond, whole after), the pairs (a [`Fields`] block, or the
    /// values alone with [`SAME_FIELDS`]), then the length of all that as a varint written
    /// backwards, so that the entries walk from the end too (XREVRANGE), as a listpack's do.
    data: Vec<u8>,
}

/// An entry's flags in its node.
const DELETED: u8 = 1;
const SAME_FIELDS: u8 = 2;

/// One entry as a node holds it.
struct NodeEntry<'a> {
    id: StreamId,
    deleted: bool,
    fields: FieldsRef<'a>,
    /// Where its flag byte is in the node.
    at: usize,
    /// Where the next entry starts.
    end: usize,
}

impl Node {
    /// The entry at `at` (a flag byte), None at the end.
    fn entry_at(&self, master: StreamId, at: usize) -> Option<NodeEntry<'_>> {
        let flags = *self.data.get(at)?;
        let mut pos = at + 1;
        let (ms, n) = varint::read(&self.data[pos..]);
        pos += n;
        let (seq, n) = varint::read(&self.data[pos..]);
        pos += n;
        let id = if ms == 0 {
            StreamId { ms: master.ms, seq: master.seq.wrapping_add(seq as u64) }
        } else {
            StreamId { ms: master.ms.wrapping_add(ms as u64), seq: seq as u64 }
        };
        let names = (flags & SAME_FIELDS != 0).then_some(self.master_fields.as_slice());
        let (fields, n) = FieldsRef::parse(&self.data[pos..], names);
        pos += n;
        let end = pos + varint::len(pos - at);
        Some(NodeEntry { id, deleted: flags & DELETED != 0, fields, at, end })
    }

    /// Where the entry ending at `end` starts (its length is written backwards before `end`).
    fn start_before(&self, end: usize) -> usize {
        let (mut len, mut shift, mut pos) = (0usize, 0u32, end);
        while pos > 0 {
            pos -= 1;
            let b = self.data[pos];
            len |= usize::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        pos.saturating_sub(len)
    }

    /// Every entry, deleted ones too, in order.
    fn walk(&self, master: StreamId) -> impl Iterator<Item = NodeEntry<'_>> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let e = self.entry_at(master, at)?;
            at = e.end;
            Some(e)
        })
    }

    /// The live entry with `id` in this node.
    fn find(&self, master: StreamId, id: StreamId) -> Option<NodeEntry<'_>> {
        self.walk(master).take_while(|e| e.id <= id).find(|e| e.id == id && !e.deleted)
    }

    /// Add an entry after the last (`master` is the node's key; `same`: the entry has the
    /// node's field names).
    fn push(&mut self, master: StreamId, id: StreamId, fields: &Fields, same: bool) {
        let start = self.data.len();
        let ms = id.ms.wrapping_sub(master.ms) as usize;
        let seq = if ms == 0 { id.seq.wrapping_sub(master.seq) } else { id.seq } as usize;
        self.data.push(if same { SAME_FIELDS } else { 0 });
        push_varint(&mut self.data, ms);
        push_varint(&mut self.data, seq);
        if same {
            for (_, v) in fields.iter() {
                push_varint(&mut self.data, v.len());
                self.data.extend_from_slice(v);
            }
        } else {
            self.data.extend_from_slice(&fields.0);
        }
        let len = self.data.len() - start;
        let mut b = [0u8; 10];
        let w = varint::write(&mut b, len);
        self.data.extend(b[..w].iter().rev());
    }
}

/// The live entries of one node with IDs in `start..=end`, from either end.
#[derive(Clone)]
struct NodeRange<'a> {
    node: &'a Node,
    master: StreamId,
    start: StreamId,
    end: StreamId,
    /// The unread bytes of the node.
    front: usize,
    back: usize,
}

impl<'a> Iterator for NodeRange<'a> {
    type Item = (StreamId, FieldsRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        while self.front < self.back {
            let e = self.node.entry_at(self.master, self.front)?;
            self.front = e.end;
            if e.id > self.end {
                self.front = self.back;
            } else if !e.deleted && e.id >= self.start {
                return Some((e.id, e.fields));
            }
        }
        None
    }
}

impl DoubleEndedIterator for NodeRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        while self.back > self.front {
            let at = self.node.start_before(self.back);
            let e = self.node.entry_at(self.master, at)?;
            self.back = at;
            if e.id < self.start {
                self.back = self.front;
            } else if !e.deleted && e.id <= self.end {
                return Some((e.id, e.fields));
            }
        }
        None
    }
}

fn push_varint(out: &mut Vec<u8>, n: usize) {
    let mut b = [0u8; 10];
    let w = varint::write(&mut b, n);
    out.extend_from_slice(&b[..w]);
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
    /// The entries, in nodes by master ID.
    nodes: BTreeMap<StreamId, Node>,
    /// Live entries.
    len: usize,
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
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The live entry with `id`.
    fn find(&self, id: StreamId) -> Option<NodeEntry<'_>> {
        let (&master, node) = self.nodes.range(..=id).next_back()?;
        node.find(master, id)
    }

    pub fn get(&self, id: StreamId) -> Option<FieldsRef<'_>> {
        self.find(id).map(|e| e.fields)
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.find(id).is_some()
    }

    /// Entries with IDs in `start..=end`, forward.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = (StreamId, FieldsRef<'_>)> + Clone {
        // The node holding `start` may begin before it.
        let nodes = match self.nodes.range(..=start).next_back() {
            _ if start > end => self.nodes.range(MIN_ID..MIN_ID),
            Some((&first, _)) => self.nodes.range(first..=end),
            None => self.nodes.range(start..=end),
        };
        nodes.flat_map(move |(&master, node)| NodeRange { node, master, start, end, front: 0, back: node.data.len() })
    }

    /// Every entry, by ID.
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = (StreamId, FieldsRef<'_>)> + Clone {
        self.range(MIN_ID, MAX_ID)
    }

    pub fn first_entry(&self) -> Option<(StreamId, FieldsRef<'_>)> {
        self.entries().next()
    }

    pub fn last_entry(&self) -> Option<(StreamId, FieldsRef<'_>)> {
        self.entries().next_back()
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
                // The node before is full: its block at its size.
                if let Some(mut last) = self.nodes.last_entry() {
                    fit(&mut last.get_mut().data);
                }
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
                let node = Node { last: id, live: 0, deleted: 0, bytes, prealloc, master_fields, data: Vec::new() };
                self.nodes.insert(id, node);
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
            node.push(master, id, &fields, same);
        }
        self.len += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.len == 1 {
            self.first_id = id;
        }
    }

    /// Delete one entry (a tombstone in its node; an emptied node goes). True if it was there.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() else { return false };
        let Some(at) = node.find(master, id).map(|e| e.at) else { return false };
        node.data[at] |= DELETED;
        node.live -= 1;
        node.deleted += 1;
        if node.live == 0 {
            self.nodes.remove(&master);
        }
        self.len -= 1;
        true
    }

    /// After deletions: the recorded first ID follows the first live entry.
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.first_entry().map(|(id, _)| id).unwrap_or_default();
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
            let len = self.len as u64;
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
            if remove_node {
                self.nodes.remove(&master);
                self.len -= entries as usize;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let live: Vec<(usize, StreamId)> = node.walk(master).filter(|e| !e.deleted).map(|e| (e.at, e.id)).collect();
            let mut from_node = 0u64;
            if let Some(node) = self.nodes.get_mut(&master) {
                for (at, id) in live {
                    let stop = match (maxlen, minid) {
                        (Some(m), _) => self.len as u64 <= m,
                        (None, Some(min)) => id >= min,
                        _ => true,
                    };
                    if stop {
                        break;
                    }
                    node.data[at] |= DELETED;
                    self.len -= 1;
                    from_node += 1;
                }
                node.live -= from_node;
                node.deleted += from_node;
            }
            deleted += from_node;
            break;
        }
        if self.len == 0 {
            self.first_id = MIN_ID;
        } else if deleted > 0 {
            self.refresh_first_id();
        }
        deleted
    }

    /// Whether a deleted entry may lie in `start..=end` (streamRangeHasTombstones).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.len == 0 || self.max_deleted_id == MIN_ID || self.first_id > self.max_deleted_id {
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
        if self.len == 0 && id <= self.last_id {
            return Some(added);
        }
        if id == self.last_id {
            return Some(added);
        } else if id > self.last_id {
            return None;
        }
        let len = self.len as i64;
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

    /// The persistence view (DUMP, digest, AOF rewrite; an RDB save writes the entries
    /// from the nodes with [`Stream::meta`]).
    pub fn to_stream_value(&self) -> StreamValue {
        let entries =
            self.entries().map(|(id, f)| (id, f.iter().map(|(a, b)| (a.to_vec(), b.to_vec())).collect())).collect();
        StreamValue { entries, meta: self.meta() }
    }

    /// Everything but the entries, as the persistence view has it.
    pub fn meta(&self) -> StreamMeta<'static> {
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
        StreamMeta {
            length: self.len as u64,
            last_id: self.last_id,
            first_id: Some(self.first_id),
            max_deleted_id: Some(self.max_deleted_id),
            entries_added: Some(self.entries_added),
            groups,
            idmp: self.idmp.clone(),
        }
    }

    /// Build from the persistence view, with nodes laid out as appends would make them.
    pub fn from_stream_value(v: &StreamValue, limits: &Limits) -> Stream {
        let mut meta = v.meta.clone();
        canonical_stream_meta(&mut meta, v.entries.first().map(|e| e.0));
        let mut s = Stream::default();
        // Entries go in ID order, the last of equal IDs kept (a damaged file's may not be
        // in order; Redis's loader takes them).
        let mut entries: Vec<&Entry> = v.entries.iter().collect();
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            entries.sort_by_key(|e| e.0);
            entries.reverse();
            entries.dedup_by_key(|e| e.0);
            entries.reverse();
        }
        for (id, fields) in entries {
            s.append(*id, Fields::new(fields.iter().map(|(f, x)| (f.as_slice(), x.as_slice()))), limits);
        }
        s.loaded(&meta);
        s
    }

    /// Build from a stream of an RDB file entry by entry, without a copy of it whole; None
    /// when its entries are not in ID order (a damaged file's: [`Stream::from_stream_value`]
    /// sorts them).
    pub fn from_rdb(v: &RdbStream<'_>, limits: &Limits) -> Result<Option<Stream>, FormatError> {
        let mut meta = owned_meta(&v.meta);
        canonical_stream_meta(&mut meta, v.entries().next().transpose()?.map(|e| e.id));
        let mut s = Stream::default();
        let mut prev = None;
        for e in v.entries() {
            let e = e?;
            if prev.is_some_and(|p| e.id <= p) {
                return Ok(None);
            }
            prev = Some(e.id);
            let pairs: Vec<_> = e.fields.iter().map(|(f, x)| (f.to_bytes(), x.to_bytes())).collect();
            s.append(e.id, Fields::new(pairs.iter().map(|(f, x)| (f.as_ref(), x.as_ref()))), limits);
        }
        s.loaded(&meta);
        Ok(Some(s))
    }

    /// After a load's appends: nodes at their size, and the rest from the metadata.
    fn loaded(&mut self, meta: &StreamMeta<'static>) {
        // A loaded listpack is allocated at its size.
        for n in self.nodes.values_mut() {
            n.prealloc = 0;
            fit(&mut n.data);
        }
        self.last_id = meta.last_id;
        self.first_id = meta.first_id.unwrap_or_default();
        self.max_deleted_id = meta.max_deleted_id.unwrap_or_default();
        self.entries_added = meta.entries_added.unwrap_or(meta.length);
        self.idmp = meta.idmp.clone();
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
            self.groups.insert(sds(&g.name.to_bytes()), group);
        }
    }
}

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

/// Nodes of a rax holding `keys` (sorted, distinct, equal length) below a node at `depth`
/// bytes: a compressed node for a shared prefix, a branching node where keys differ, and
/// an empty leaf node per key.
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

    /// (op, ms step, seq, field-name choice, value length, range bounds)
    type Op = (u8, u8, u8, bool, u16, (u16, u16));
    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    proptest::proptest! {
        /// Appends (same or other field names, IDs across milliseconds), deletions and
        /// trims against a map of IDs, read forward, backward and by ranges.
        #[test]
        fn entries_match_a_btreemap(ops in proptest::collection::vec(
            (0u8..10, 0u8..3, 0u8..3, proptest::bool::ANY, 0u16..300, (0u16..200, 0u16..200)), 0..300)) {
            let limits = Limits { stream_node_max_entries: 7, ..Limits::default() };
            let mut s = Stream::default();
            let mut model: BTreeMap<StreamId, Pairs> = BTreeMap::new();
            let mut next = id(1, 0);
            let mut n = 0u64;
            let ops: Vec<Op> = ops;
            for (op, step, seq, same, vlen, (a, b)) in ops {
                let at = |x: u16| id(u64::from(x) / 2, u64::from(x) % 2);
                match op {
                    0..=5 => {
                        n += 1;
                        let value = vec![b'v'; usize::from(vlen)];
                        let name: &[u8] = if same { b"f" } else { b"other" };
                        let pairs: Pairs = if op == 5 {
                            vec![(b"f".to_vec(), value.clone()), (n.to_string().into_bytes(), b"x".to_vec())]
                        } else {
                            vec![(name.to_vec(), value)]
                        };
                        s.append(next, Fields::new(pairs.iter().map(|(f, v)| (f.as_slice(), v.as_slice()))), &limits);
                        model.insert(next, pairs);
                        next = if step == 0 { id(next.ms, next.seq + 1 + u64::from(seq)) } else { id(next.ms + u64::from(step) * 70, u64::from(seq)) };
                    }
                    6 | 7 => {
                        let target = model.keys().nth(usize::from(a) % model.len().max(1)).copied().unwrap_or(at(a));
                        proptest::prop_assert_eq!(s.delete(target), model.remove(&target).is_some());
                    }
                    8 => {
                        let keep = u64::from(a % 20);
                        s.trim(Some(keep), None, b % 2 == 0, 0);
                        proptest::prop_assert!(s.len() >= keep.min(model.len() as u64) as usize);
                        while model.len() > s.len() {
                            model.pop_first();
                        }
                    }
                    _ => {
                        let (lo, hi) = (at(a), at(b));
                        let want: Vec<_> = if lo <= hi { model.range(lo..=hi).map(|(k, _)| *k).collect() } else { vec![] };
                        proptest::prop_assert_eq!(s.range(lo, hi).map(|(k, _)| k).collect::<Vec<_>>(), want.clone());
                        proptest::prop_assert_eq!(s.range(lo, hi).rev().map(|(k, _)| k).collect::<Vec<_>>(), want.into_iter().rev().collect::<Vec<_>>());
                    }
                }
                proptest::prop_assert_eq!(s.len(), model.len());
                let got: Vec<Entry> = s.entries().map(|(k, f)| (k, f.iter().map(|(x, y)| (x.to_vec(), y.to_vec())).collect())).collect();
                let want: Vec<Entry> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
                proptest::prop_assert_eq!(&got, &want);
                let mut back: Vec<StreamId> = s.entries().rev().map(|(k, _)| k).collect();
                back.reverse();
                proptest::prop_assert_eq!(back, model.keys().copied().collect::<Vec<_>>());
                // Both ends at once meet without losing or repeating an entry.
                let mut it = s.entries();
                let mut both = Vec::new();
                let mut tail = Vec::new();
                loop {
                    match (it.next(), it.next_back()) {
                        (Some(x), Some(y)) => { both.push(x.0); tail.push(y.0); }
                        (Some(x), None) => { both.push(x.0); break; }
                        _ => break,
                    }
                }
                both.extend(tail.into_iter().rev());
                proptest::prop_assert_eq!(both, model.keys().copied().collect::<Vec<_>>());
                for k in model.keys() {
                    proptest::prop_assert!(s.contains(*k));
                    proptest::prop_assert!(s.get(*k).is_some_and(|f| f.iter().eq(model[k].iter().map(|(x, y)| (x.as_slice(), y.as_slice())))));
                }
                if let Some((first, _)) = model.first_key_value() {
                    proptest::prop_assert_eq!(s.first_entry().map(|(k, _)| k), Some(*first));
                    proptest::prop_assert_eq!(s.last_entry().map(|(k, _)| k), model.last_key_value().map(|(k, _)| *k));
                }
                let round = Stream::from_stream_value(&s.to_stream_value(), &limits);
                proptest::prop_assert!(round.entries().eq(s.entries()));
            }
        }
    }

    #[test]
    fn rax_of_one_key_has_two_nodes() {
        let mut s = Stream::default();
        assert_eq!(s.rax_nodes(), 1);
        s.append(id(1, 0), Fields::new([(&b"f"[..], &b"v"[..])]), &Limits::default());
        assert_eq!(s.rax_nodes(), 2);
    }
}
