//! Streams (RDB types 15, 19, 21, 26, 27).
//!
//! # Format
//! ```text
//! len n_nodes, n x (str node_key: 16 bytes ms BE || seq BE, str listpack)
//! len length, len last.ms, len last.seq
//! [v2+] len first.ms, first.seq, max_deleted.ms, max_deleted.seq, entries_added
//! len n_groups, n x (str name, len last.ms, len last.seq, [v2+] len entries_read,
//!     len pel, pel x (16 raw id, u64 LE delivery_time, len delivery_count),
//!     len consumers, consumers x (str name, u64 LE seen, [v3+] u64 LE active,
//!         len n, n x 16 raw id),
//!     [v5] len nacked, nacked x 16 raw id)
//! [v4+] IDMP: len duration, len max_entries, len producers,
//!     producers x (str id, len n, n x (str iid, len ms, len seq)), len iids_added, len iids_duplicates
//! ```
//! Node listpacks hold a master entry (count, deleted, n_fields, fields.., 0) then entries
//! (flags, ms_delta, seq_delta, [n_fields, f/v pairs | values with SAMEFIELDS], lp_count).
//! The metadata after the nodes is small and read whole; the entries stream.

use std::collections::HashSet;

use crate::format::blob::Elem;
use crate::format::input::{fail, finish, le_i64, take_bytes, FormatError, Input, PResult};
use crate::format::listpack::ListpackIter;

use super::prim::{length, rdb_elem, rdb_str, RStr};
use super::types::ValueType;

/// A stream entry ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

impl StreamId {
    /// `ms-seq`, the Display form, as bytes (a reply writes one per entry: without the
    /// formatting machinery, which took a twentieth of an XRANGE).
    pub fn to_bytes(self) -> Vec<u8> {
        let (mut a, mut b) = (itoa::Buffer::new(), itoa::Buffer::new());
        let (ms, seq) = (a.format(self.ms).as_bytes(), b.format(self.seq).as_bytes());
        let mut out = Vec::with_capacity(ms.len() + 1 + seq.len());
        out.extend_from_slice(ms);
        out.push(b'-');
        out.extend_from_slice(seq);
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PendingEntry {
    pub id: StreamId,
    pub delivery_time: i64,
    pub delivery_count: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Consumer<'a> {
    pub name: Elem<'a>,
    pub seen_time: i64,
    pub active_time: Option<i64>,
    pub pending: Vec<StreamId>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group<'a> {
    pub name: Elem<'a>,
    pub last_delivered: StreamId,
    /// Logical read counter; -1 when Redis does not know it.
    pub entries_read: Option<i64>,
    pub pending: Vec<PendingEntry>,
    pub consumers: Vec<Consumer<'a>>,
    /// Type 27: pending IDs in the NACK zone (owned by no consumer).
    pub nacked: Vec<StreamId>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IdmpProducer<'a> {
    pub id: Elem<'a>,
    pub entries: Vec<(Elem<'a>, StreamId)>,
}

/// Type 26+: idempotent-producer state.
#[derive(Debug, Clone, PartialEq)]
pub struct Idmp<'a> {
    pub duration: u64,
    pub max_entries: u64,
    pub producers: Vec<IdmpProducer<'a>>,
    pub iids_added: u64,
    pub iids_duplicates: u64,
}

/// Everything after the nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamMeta<'a> {
    pub length: u64,
    pub last_id: StreamId,
    pub first_id: Option<StreamId>,
    pub max_deleted_id: Option<StreamId>,
    pub entries_added: Option<u64>,
    pub groups: Vec<Group<'a>>,
    pub idmp: Option<Idmp<'a>>,
}

/// A parsed stream: entries on demand, metadata read.
pub struct Stream<'a> {
    nodes: Input<'a>,
    n_nodes: u64,
    pub meta: StreamMeta<'a>,
    pub version: u8,
}

/// One stream entry (deleted entries are skipped by the iterator).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEntry<'a> {
    pub id: StreamId,
    pub fields: Vec<(Elem<'a>, Elem<'a>)>,
}

pub fn skip_stream(input: Input<'_>, vtype: ValueType) -> PResult<'_, ()> {
    let (rest, n) = length(input, "stream node count")?;
    let mut rest = rest;
    for _ in 0..n {
        let (r, key) = rdb_str(rest)?;
        if key.len() != 16 {
            return fail(rest, format!("stream node key is {} bytes, expected 16", key.len()));
        }
        rest = rdb_str(r)?.0;
    }
    let (rest, _) = stream_meta(rest, vtype.stream_version())?;
    Ok((rest, ()))
}

fn id_pair<'a>(i: Input<'a>, what: &str) -> PResult<'a, StreamId> {
    let (i, ms) = length(i, what)?;
    let (i, seq) = length(i, what)?;
    Ok((i, StreamId { ms, seq }))
}

fn raw_id(i: Input<'_>) -> PResult<'_, StreamId> {
    let (i, b) = take_bytes(i, 16, "a raw stream ID")?;
    let b = b.bytes();
    let ms = u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let seq = u64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
    Ok((i, StreamId { ms, seq }))
}

fn stream_meta(input: Input<'_>, version: u8) -> PResult<'_, StreamMeta<'_>> {
    let (i, len) = length(input, "stream length")?;
    let (mut i, last_id) = id_pair(i, "stream last ID")?;
    let (mut first_id, mut max_deleted_id, mut entries_added) = (None, None, None);
    if version >= 2 {
        let (r, f) = id_pair(i, "stream first ID")?;
        let (r, m) = id_pair(r, "stream max deleted ID")?;
        let (r, a) = length(r, "stream entries added")?;
        first_id = Some(f);
        max_deleted_id = Some(m);
        entries_added = Some(a);
        i = r;
    }
    let (mut i, n_groups) = length(i, "consumer group count")?;
    let mut groups = Vec::new();
    // Redis's loader refuses repeated groups, consumers and PEL entries (the texts are its own).
    let mut group_names = HashSet::new();
    for _ in 0..n_groups {
        let (r, name) = rdb_elem(i)?;
        if !group_names.insert(name.to_bytes().into_owned()) {
            return fail(i, format!("Duplicated consumer group name {}", String::from_utf8_lossy(&name.to_bytes())));
        }
        let (mut r, last_delivered) = id_pair(r, "group last delivered ID")?;
        let mut entries_read = None;
        if version >= 2 {
            let (r2, n) = length(r, "group entries read")?;
            entries_read = Some(n as i64);
            r = r2;
        }
        let (mut r, n_pel) = length(r, "group PEL size")?;
        let mut pending = Vec::new();
        let mut pending_ids = HashSet::new();
        for _ in 0..n_pel {
            let (r2, id) = raw_id(r)?;
            if !pending_ids.insert(id) {
                return fail(r, "Duplicated global PEL entry loading stream consumer group");
            }
            let (r2, delivery_time) = le_i64(r2)?;
            let (r2, delivery_count) = length(r2, "PEL delivery count")?;
            pending.push(PendingEntry { id, delivery_time, delivery_count });
            r = r2;
        }
        let (mut r, n_cons) = length(r, "consumer count")?;
        let mut consumers = Vec::new();
        let mut consumer_names = HashSet::new();
        for _ in 0..n_cons {
            let (r2, cname) = rdb_elem(r)?;
            if !consumer_names.insert(cname.to_bytes().into_owned()) {
                return fail(r, "Duplicate stream consumer detected.");
            }
            let (mut r2, seen_time) = le_i64(r2)?;
            let mut active_time = None;
            if version >= 3 {
                let (r3, a) = le_i64(r2)?;
                active_time = Some(a);
                r2 = r3;
            }
            let (mut r2, n) = length(r2, "consumer PEL size")?;
            let mut cpel = Vec::new();
            let mut cpel_ids = HashSet::new();
            for _ in 0..n {
                let (r3, id) = raw_id(r2)?;
                if !pending_ids.contains(&id) {
                    return fail(r2, "Consumer entry not found in group global PEL");
                }
                if !cpel_ids.insert(id) {
                    return fail(r2, "Duplicated consumer PEL entry loading a stream consumer group");
                }
                cpel.push(id);
                r2 = r3;
            }
            consumers.push(Consumer { name: cname, seen_time, active_time, pending: cpel });
            r = r2;
        }
        let mut nacked = Vec::new();
        if version >= 5 {
            let (mut r2, n) = length(r, "NACK zone size")?;
            for _ in 0..n {
                let (r3, id) = raw_id(r2)?;
                nacked.push(id);
                r2 = r3;
            }
            r = r2;
        }
        groups.push(Group { name, last_delivered, entries_read, pending, consumers, nacked });
        i = r;
    }
    let mut idmp = None;
    if version >= 4 {
        let (r, duration) = length(i, "IDMP duration")?;
        let (r, max_entries) = length(r, "IDMP max entries")?;
        let (mut r, n_prod) = length(r, "IDMP producer count")?;
        let mut producers = Vec::new();
        for _ in 0..n_prod {
            let (r2, id) = rdb_elem(r)?;
            let (mut r2, n) = length(r2, "IDMP entry count")?;
            let mut entries = Vec::new();
            for _ in 0..n {
                let (r3, iid) = rdb_elem(r2)?;
                let (r3, sid) = id_pair(r3, "IDMP stream ID")?;
                entries.push((iid, sid));
                r2 = r3;
            }
            producers.push(IdmpProducer { id, entries });
            r = r2;
        }
        let (r, iids_added) = length(r, "IDMP iids added")?;
        let (r, iids_duplicates) = length(r, "IDMP iids duplicates")?;
        idmp = Some(Idmp { duration, max_entries, producers, iids_added, iids_duplicates });
        i = r;
    }
    let meta = StreamMeta { length: len, last_id, first_id, max_deleted_id, entries_added, groups, idmp };
    Ok((i, meta))
}

impl<'a> Stream<'a> {
    pub fn parse(body: Input<'a>, vtype: ValueType) -> Result<Self, FormatError> {
        let version = vtype.stream_version();
        let (rest, n_nodes) = length(body, "stream node count").map_err(|e| finish(e, "stream node count"))?;
        let mut r = rest;
        for _ in 0..n_nodes {
            let (r2, _) = rdb_str(r).map_err(|e| finish(e, "a stream node key"))?;
            let (r2, _) = rdb_str(r2).map_err(|e| finish(e, "a stream node"))?;
            r = r2;
        }
        let (_, meta) = stream_meta(r, version).map_err(|e| finish(e, "stream metadata"))?;
        Ok(Stream { nodes: rest, n_nodes, meta, version })
    }

    /// The listpack nodes the stream is stored in.
    pub fn node_count(&self) -> u64 {
        self.n_nodes
    }

    pub fn entries(&self) -> StreamEntries<'a> {
        StreamEntries { rest: self.nodes, left: self.n_nodes, node: None, failed: false }
    }
}

struct NodeCursor<'a> {
    lp: ListpackIter<'a>,
    master: StreamId,
    master_fields: Vec<Elem<'a>>,
    left: u64,
}

/// Live entries of a stream, node by node.
pub struct StreamEntries<'a> {
    rest: Input<'a>,
    left: u64,
    node: Option<NodeCursor<'a>>,
    failed: bool,
}

fn need<'a>(lp: &mut ListpackIter<'a>, what: &str, at: usize) -> Result<Elem<'a>, FormatError> {
    match lp.next() {
        Some(r) => r,
        None => Err(FormatError::new(at, format!("stream node listpack ends before {what}"))),
    }
}

fn need_int(lp: &mut ListpackIter<'_>, what: &str, at: usize) -> Result<i64, FormatError> {
    need(lp, what, at)?.as_i64().ok_or_else(|| FormatError::new(at, format!("stream {what} is not an integer")))
}

impl<'a> StreamEntries<'a> {
    fn open_node(&mut self) -> Result<Option<NodeCursor<'a>>, FormatError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let at = self.rest.offset();
        let (r, key) = rdb_str(self.rest).map_err(|e| finish(e, "a stream node key"))?;
        let (r, lp) = rdb_str(r).map_err(|e| finish(e, "a stream node"))?;
        self.rest = r;
        let kb = key.to_elem()?;
        let kb = kb.to_bytes();
        if kb.len() != 16 {
            return Err(FormatError::new(at, format!("stream node key is {} bytes, expected 16", kb.len())));
        }
        let ms = u64::from_be_bytes([kb[0], kb[1], kb[2], kb[3], kb[4], kb[5], kb[6], kb[7]]);
        let seq = u64::from_be_bytes([kb[8], kb[9], kb[10], kb[11], kb[12], kb[13], kb[14], kb[15]]);
        let lp_at = match lp {
            RStr::Raw(i) => i.offset(),
            _ => at,
        };
        let mut it = ListpackIter::new(lp.to_blob()?)?;
        let count = need_int(&mut it, "master entry count", lp_at)?;
        let deleted = need_int(&mut it, "master deleted count", lp_at)?;
        let nf = need_int(&mut it, "master field count", lp_at)?;
        if count < 0 || deleted < 0 || nf < 0 {
            return Err(FormatError::new(lp_at, "negative count in stream master entry"));
        }
        if count == 0 && deleted == 0 {
            return Err(FormatError::new(lp_at, "empty stream node"));
        }
        let mut master_fields = Vec::new();
        for _ in 0..nf {
            master_fields.push(need(&mut it, "a master field", lp_at)?);
        }
        if need_int(&mut it, "the master terminator", lp_at)? != 0 {
            return Err(FormatError::new(lp_at, "stream master entry terminator is not 0"));
        }
        Ok(Some(NodeCursor { lp: it, master: StreamId { ms, seq }, master_fields, left: (count + deleted) as u64 }))
    }

    fn read(&mut self) -> Result<Option<StreamEntry<'a>>, FormatError> {
        loop {
            if self.node.is_none() {
                match self.open_node()? {
                    Some(n) => self.node = Some(n),
                    None => return Ok(None),
                }
            }
            let Some(node) = self.node.as_mut() else { return Ok(None) };
            if node.left == 0 {
                if let Some(extra) = node.lp.next() {
                    extra?;
                    return Err(FormatError::new(
                        self.rest.offset(),
                        "stream node holds more entries than its master entry counts",
                    ));
                }
                self.node = None;
                continue;
            }
            node.left -= 1;
            let at = self.rest.offset();
            let lp = &mut node.lp;
            let flags = need_int(lp, "entry flags", at)?;
            let ms_delta = need_int(lp, "entry ms delta", at)?;
            let seq_delta = need_int(lp, "entry seq delta", at)?;
            let id = StreamId {
                ms: node.master.ms.wrapping_add(ms_delta as u64),
                seq: node.master.seq.wrapping_add(seq_delta as u64),
            };
            let same = flags & 2 != 0;
            let mut fields = Vec::new();
            let nvals;
            if same {
                nvals = node.master_fields.len();
                for f in &node.master_fields {
                    let v = need(lp, "an entry value", at)?;
                    fields.push((f.clone(), v));
                }
            } else {
                let nf = need_int(lp, "entry field count", at)?;
                if nf < 0 {
                    return Err(FormatError::new(at, "negative stream entry field count"));
                }
                for _ in 0..nf {
                    let f = need(lp, "an entry field", at)?;
                    let v = need(lp, "an entry value", at)?;
                    fields.push((f, v));
                }
                nvals = 2 * nf as usize + 1;
            }
            let lp_count = need_int(lp, "entry lp-count", at)?;
            if lp_count != nvals as i64 + 3 {
                return Err(FormatError::new(
                    at,
                    format!("stream entry {id} lp-count {lp_count}, expected {}", nvals + 3),
                ));
            }
            if flags & 1 != 0 {
                continue;
            }
            return Ok(Some(StreamEntry { id, fields }));
        }
    }
}

impl<'a> Iterator for StreamEntries<'a> {
    type Item = Result<StreamEntry<'a>, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.read();
        crate::format::blob::fused(&mut self.failed, r)
    }
}
