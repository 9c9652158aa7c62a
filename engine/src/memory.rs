//! What Redis's own allocation for a key comes to: the sizes of its structures for the
//! value's encoding (robj, sds headers, listpacks, quicklist nodes, dict tables and
//! entries, skiplists, intsets), each allocation rounded up to jemalloc's size classes,
//! nested values sampled as Redis's objectComputeSize samples them. MEMORY USAGE answers
//! with it, and `rdbtool memory` reports with it. It describes Redis's layout, not
//! ferrokv's own; docs/memory.md gives the formulas and how close each comes.

use crate::command::catalog::ServerVersion;
use crate::format::blob::parse_canonical_i64;
use crate::format::double::Doubles;
use crate::format::input::FormatError;
use crate::format::intset::IntsetIter;
use crate::format::listpack;
use crate::format::listpack::ListpackIter;
use crate::format::rdb::{self, RStr, ValueType};
use crate::format::ziplist::ZiplistIter;
use crate::value::str::EMBSTR_MAX;
use crate::value::stream::rax_nodes_of;
use crate::value::{Hash, Limits, List, Set, Str, Value, Zset};

const ROBJ: usize = 16;
/// A dict entry (key, value and next pointers).
pub const DICT_ENTRY: usize = 24;
const QUICKLIST: usize = 40;
const ZSET: usize = 16;
const ZSKIPLIST: usize = 32;
/// zmalloc_size of a skiplist header (32 levels).
const ZSL_HEADER: usize = 640;

/// The sizes that differ between what MEMORY USAGE counts (C's `sizeof`) and what the
/// allocator hands out (jemalloc's classes: a 24-byte dict entry takes 32), and between
/// versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    pub alloc: Allocator,
    pub dict_entry: usize,
    pub dict: usize,
    /// How the version writes a score into a listpack (7.0 `%.17g`, 7.2+ shortest).
    doubles: Doubles,
    /// Redis 7.0+ keeps compact values as listpacks (6.2: ziplists).
    listpacks: bool,
    /// Redis 7.2+ keeps a list of one small node as a bare listpack.
    list_listpack: bool,
    /// A quicklist node struct (32 bytes before Redis 7, 40 from 7.0).
    quicklist_node: usize,
    /// Redis 6.2's MEMORY USAGE counts compact blobs, quicklist nodes' ziplists and embstrs
    /// by their bytes, not by what the allocator hands out for them.
    exact_blobs: bool,
    stream: usize,
    consumer: usize,
    /// MEMORY USAGE's figures (streams by its flat 244 bytes per radix-tree node, a set's
    /// members each with a dict entry) rather than the allocations.
    usage_formula: bool,
    /// Redis 7.2+ keeps a set member in its dict bucket when the bucket is empty: only
    /// members that share a bucket take a 16-byte entry.
    bare_set_members: bool,
}

impl Model {
    /// What MEMORY USAGE answers on `version` built with `alloc`.
    pub fn usage(version: ServerVersion, alloc: Allocator) -> Model {
        let v = version.behaves_as();
        Model {
            alloc,
            doubles: version.doubles(),
            listpacks: v >= ServerVersion::Redis70,
            list_listpack: v >= ServerVersion::Redis72,
            quicklist_node: if v < ServerVersion::Redis70 { 32 } else { 40 },
            exact_blobs: v < ServerVersion::Redis70,
            dict_entry: DICT_ENTRY,
            // Redis 6.2's dict holds its two tables' headers inline.
            dict: if v < ServerVersion::Redis70 { 96 } else { 56 },
            stream: if v < ServerVersion::Redis70 { 40 } else { 80 },
            consumer: if v < ServerVersion::Redis72 { 24 } else { 32 },
            usage_formula: true,
            bare_set_members: v >= ServerVersion::Redis72,
        }
    }

    /// What `version`'s allocator hands out for the same structures: the sum INFO's
    /// `used_memory_dataset` is made of.
    pub fn allocated(version: ServerVersion, alloc: Allocator) -> Model {
        let u = Model::usage(version, alloc);
        Model {
            dict_entry: alloc.round(u.dict_entry),
            dict: alloc.round(u.dict),
            stream: alloc.round(u.stream),
            consumer: alloc.round(u.consumer),
            exact_blobs: false,
            usage_formula: false,
            ..u
        }
    }

    fn round(&self, n: usize) -> usize {
        self.alloc.round(n)
    }

    /// An sds string's allocation: header by length class, bytes, terminator.
    pub fn sds_alloc(&self, len: usize) -> usize {
        let header = match len {
            0..=31 => 1,
            32..=255 => 3,
            256..=65535 => 5,
            _ => 9,
        };
        self.round(header + len + 1)
    }

    /// The name OBJECT ENCODING gives `v` in the modelled version: a Redis 7.2+ list of
    /// one node is a listpack, a Redis 6.2 compact value a ziplist.
    pub fn encoding(&self, v: &Value, list_fill: i64) -> &'static str {
        match v {
            Value::List(l) if self.list_listpack && quicklist_nodes(l, list_fill).len() <= 1 => "listpack",
            // Redis 6.2's compact hashes and zsets are ziplists.
            _ if !self.listpacks && v.encoding() == "listpack" => "ziplist",
            _ => v.encoding(),
        }
    }
}

/// The allocator whose size classes allocations are rounded to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    /// jemalloc as Redis builds its bundled copy (an 8-byte quantum: 8, 16, 24, 32, 40,
    /// 48, 56, 64, 80, ...): Redis built from source, the official images.
    Jemalloc,
    /// A system jemalloc (a 16-byte quantum: 8, 16, 32, 48, 64, 80, ...), as Debian's and
    /// Ubuntu's packages link.
    JemallocQ16,
    /// glibc's malloc: 16-byte chunks with an 8-byte header, 24 usable bytes at least.
    Libc,
}

impl Allocator {
    pub fn parse(name: &str) -> Option<Allocator> {
        match name {
            "jemalloc" => Some(Allocator::Jemalloc),
            "jemalloc-q16" => Some(Allocator::JemallocQ16),
            "libc" => Some(Allocator::Libc),
            _ => None,
        }
    }

    /// The usable size of an allocation of `n` bytes.
    pub fn round(self, n: usize) -> usize {
        match self {
            Allocator::Libc => (n + 8).div_ceil(16).max(2) * 16 - 8,
            Allocator::Jemalloc | Allocator::JemallocQ16 => {
                let quantum = if self == Allocator::Jemalloc { 8 } else { 16 };
                if n <= 8 {
                    return 8;
                }
                if n <= 64 && quantum == 8 {
                    return n.div_ceil(8) * 8;
                }
                if n <= 128 {
                    return n.div_ceil(16) * 16;
                }
                // Four classes per doubling above 128.
                let pow = usize::BITS - (n - 1).leading_zeros();
                let step = 1usize << (pow - 3);
                n.div_ceil(step) * step
            }
        }
    }
}

/// MEMORY USAGE of a key: its value, its name's sds and its dict entry.
pub fn key_usage(key: &[u8], v: &Value, samples: usize, list_fill: i64, m: &Model) -> usize {
    value_size(v, samples, list_fill, m) + m.sds_alloc(key.len()) + m.dict_entry
}

/// A database's own tables: the keyspace dict's buckets, and the expires dict's
/// buckets and entries for `volatile` keys with a TTL (what MEMORY USAGE leaves out).
pub fn db_overhead(keys: usize, volatile: usize, m: &Model) -> usize {
    let expires = if volatile > 0 { 8 * dict_slots(volatile) + volatile * m.dict_entry } else { 0 };
    let main = if keys > 0 { 8 * dict_slots(keys) } else { 0 };
    main + expires
}

/// Redis's streamRadixTreeMemoryUsage (its `sizeof(*rax)` is overwritten, as in Redis),
/// or the nodes' allocations (a node's header, key bytes and pointers: about 24 bytes).
fn rax_usage(elements: usize, nodes: usize, m: &Model) -> usize {
    if m.usage_formula {
        elements * 16 + nodes * 4 + nodes * 8 * 30
    } else {
        m.round(24) + nodes * 24
    }
}

/// Redis 7.4's `listpackEx` beside its listpack: expiry metadata, key and listpack pointers.
const LISTPACK_EX_HEADER: usize = 32;

/// What a value's size is made of, in Redis's structures: what both of a version's
/// models (MEMORY USAGE's and the allocator's) compute a size from. Element sums are of
/// the first `sampled` elements, as objectComputeSize samples them, and already rounded
/// to the allocator's classes (both models of a version share the allocator).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    Int,
    /// An embstr of this many bytes.
    Emb(usize),
    /// A raw string of this many bytes.
    Raw(usize),
    /// One listpack, ziplist or intset of this many bytes (a hash, zset or set; a Redis
    /// 7.2+ one-node list).
    Packed(usize),
    /// A Redis 7.4 hash with field TTLs: the listpackEx header and its listpack.
    ListpackEx(usize),
    /// `bytes`: the listpacks (ziplists before Redis 7) of the first `sampled` of `nodes`;
    /// `allocated`: the same rounded to the allocator's classes, node by node.
    Quicklist {
        nodes: usize,
        bytes: usize,
        allocated: usize,
        sampled: usize,
    },
    /// `sds`: the field and value strings of the first `sampled` of `n` fields.
    HashTable {
        n: usize,
        sds: usize,
        sampled: usize,
    },
    /// `sds`: the strings of the first `sampled` of `n` members.
    SetTable {
        n: usize,
        sds: usize,
        sampled: usize,
    },
    /// `sds`: the member strings of the first `sampled` of `n` members.
    Skiplist {
        n: usize,
        sds: usize,
        sampled: usize,
    },
}

impl Shape {
    /// A string of this length as Redis loads it when it is not an integer.
    fn of_text(len: usize) -> Shape {
        if len <= EMBSTR_MAX {
            Shape::Emb(len)
        } else {
            Shape::Raw(len)
        }
    }

    /// A string as Redis loads it: an integer, an embstr, a raw string.
    pub fn of_string(b: &[u8]) -> Shape {
        match parse_canonical_i64(b) {
            Some(_) => Shape::Int,
            None => Shape::of_text(b.len()),
        }
    }

    /// The value's size under `m` (objectComputeSize's formula, or the allocations).
    pub fn size(&self, m: &Model) -> usize {
        // The average over the sampled elements of their strings and `each` more bytes.
        let avg = |sum: usize, sampled: usize, each: usize| {
            if sampled == 0 {
                0.0
            } else {
                (sum + sampled * each) as f64 / sampled as f64
            }
        };
        match *self {
            Shape::Int => ROBJ,
            // Redis 6.2 counts an embstr as its bytes, a 2-byte header and the object.
            Shape::Emb(len) if m.exact_blobs => ROBJ + len + 2,
            Shape::Emb(len) => m.round(ROBJ + 3 + len + 1),
            Shape::Raw(len) => ROBJ + m.sds_alloc(len),
            Shape::Packed(bytes) => ROBJ + if m.exact_blobs { bytes } else { m.round(bytes) },
            Shape::ListpackEx(bytes) => ROBJ + LISTPACK_EX_HEADER + m.round(bytes),
            Shape::Quicklist { nodes, bytes, allocated, sampled } => {
                let blobs = if m.exact_blobs { bytes } else { allocated };
                ROBJ + QUICKLIST + (avg(blobs, sampled, m.quicklist_node) * nodes as f64) as usize
            }
            Shape::HashTable { n, sds, sampled } => {
                ROBJ + m.dict + 8 * dict_slots(n) + (avg(sds, sampled, m.dict_entry) * n as f64) as usize
            }
            Shape::SetTable { n, sds, sampled } => {
                let slots = dict_slots(n);
                if m.bare_set_members && !m.usage_formula {
                    // Members in a bucket of their own need no entry: the expected number
                    // of occupied buckets is slots * (1 - (1 - 1/slots)^n).
                    let occupied = slots as f64 * (1.0 - (1.0 - 1.0 / slots as f64).powi(n as i32));
                    let entries = (n as f64 - occupied).max(0.0);
                    let per = avg(sds, sampled, 0);
                    return ROBJ + m.dict + 8 * slots + (per * n as f64 + entries * m.round(16) as f64) as usize;
                }
                ROBJ + m.dict + 8 * slots + (avg(sds, sampled, m.dict_entry) * n as f64) as usize
            }
            Shape::Skiplist { n, sds, sampled } => {
                let per = avg(sds, sampled, m.dict_entry) + zsl_node(m);
                ROBJ + ZSET + ZSKIPLIST + m.dict + 8 * dict_slots(n) + ZSL_HEADER + (per * n as f64) as usize
            }
        }
    }
}

/// What Redis's objectComputeSize answers for `v`, its elements sampled as it samples them.
pub fn value_size(v: &Value, samples: usize, list_fill: i64, m: &Model) -> usize {
    let samples = samples.max(1);
    let shape = match v {
        Value::Str(Str::Int(_)) => Shape::Int,
        Value::Str(Str::Emb(b)) => Shape::Emb(b.len()),
        Value::Str(s @ (Str::Raw(_) | Str::Grown(_))) => Shape::Raw(s.len()),
        Value::List(l) => list_shape(l, samples, list_fill, m),
        Value::Hash(h) => hash_shape(h, samples, m),
        Value::Set(st) => set_shape(st, samples, m),
        Value::Zset(z) => zset_shape(z, samples, m),
        Value::Stream(st) => return stream_size(st, samples, m),
    };
    shape.size(m)
}

/// The allocations of the first `samples` items, and how many there were.
fn sum<T>(items: impl Iterator<Item = T>, samples: usize, f: impl Fn(T) -> usize) -> (usize, usize) {
    items.take(samples).fold((0, 0), |(s, k), it| (s + f(it), k + 1))
}

fn list_shape(l: &List, samples: usize, fill: i64, m: &Model) -> Shape {
    let nodes = quicklist_nodes(l, fill);
    if m.list_listpack && nodes.len() <= 1 {
        return Shape::Packed(nodes.first().copied().unwrap_or(listpack::OVERHEAD));
    }
    let n = nodes.len();
    let (bytes, sampled) = sum(nodes.iter().copied(), samples, |b| b);
    let (allocated, _) = sum(nodes.into_iter(), samples, |b| m.round(b));
    Shape::Quicklist { nodes: n, bytes, allocated, sampled }
}

fn hash_shape(h: &Hash, samples: usize, m: &Model) -> Shape {
    match h {
        Hash::Listpack(pairs) => Shape::Packed(listpack_bytes(pairs.iter().flat_map(|(f, v)| [f, v]))),
        Hash::ListpackEx(_) => {
            // The triplets' listpack (a TTL is a listpack integer).
            let ttls: Vec<String> = h.iter_with_ttl().map(|(_, _, t)| t.unwrap_or(0).to_string()).collect();
            let items = h.iter_with_ttl().zip(&ttls).flat_map(|((f, v, _), t)| [f, v, t.as_bytes()]);
            Shape::ListpackEx(listpack_bytes(items))
        }
        Hash::Table(_) => {
            let (sds, sampled) = sum(h.iter(), samples, |(f, v)| m.sds_alloc(f.len()) + m.sds_alloc(v.len()));
            Shape::HashTable { n: h.len(), sds, sampled }
        }
    }
}

fn set_shape(st: &Set, samples: usize, m: &Model) -> Shape {
    match st {
        Set::Intset(v) => Shape::Packed(8 + v.len() * v.width()),
        Set::Listpack(members) => Shape::Packed(listpack_bytes(members.iter())),
        Set::Table(_) => {
            let (sds, sampled) = sum(st.iter(), samples, |member| m.sds_alloc(member.len()));
            Shape::SetTable { n: st.len(), sds, sampled }
        }
    }
}

fn zset_shape(z: &Zset, samples: usize, m: &Model) -> Shape {
    match z {
        Zset::Listpack(items) => {
            let scores: Vec<String> = items.iter().map(|(_, sc)| m.doubles.listpack(sc)).collect();
            let entries = items.iter().zip(&scores).flat_map(|((m, _), sc)| [m, sc.as_bytes()]);
            Shape::Packed(listpack_bytes(entries))
        }
        Zset::Skiplist(_) => {
            let (sds, sampled) = sum(z.iter(), samples, |(member, _)| m.sds_alloc(member.len()));
            Shape::Skiplist { n: z.len(), sds, sampled }
        }
    }
}

/// A key's shape read from its RDB record: its type, the encoding the loading server
/// gives it, its elements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecordShape {
    pub shape: Shape,
    pub kind: &'static str,
    pub encoding: &'static str,
    pub elements: usize,
}

/// The shape of a record's value read from the record itself, without building the value,
/// when the server modelled by `m` (with `limits`) loads it in the record's own encoding:
/// strings; listpacks, intsets and Redis 7 quicklists it keeps as they are (their sizes
/// are the blobs'); hashes, sets and zsets too big for a compact encoding (their
/// elements' lengths). None for the rest (a conversion, a stream, an older encoding):
/// the caller builds the value.
pub fn record_shape(v: &rdb::Value<'_>, limits: &Limits, m: &Model) -> Result<Option<RecordShape>, FormatError> {
    use ValueType as T;
    let shape = |shape, kind, encoding, elements| Ok(Some(RecordShape { shape, kind, encoding, elements }));
    match v.vtype {
        T::String => {
            let s = match v.string()? {
                RStr::Int(_) => Shape::Int,
                // Redis compresses only strings longer than any integer's text.
                RStr::Lzf { len, .. } => Shape::of_text(len),
                RStr::Raw(i) => Shape::of_string(i.bytes()),
            };
            let encoding = match s {
                Shape::Int => "int",
                Shape::Emb(_) => "embstr",
                _ => "raw",
            };
            shape(s, "string", encoding, 1)
        }
        T::HashListpack | T::ZsetListpack | T::SetListpack if m.listpacks => {
            let Some(blob) = v.packed()? else { return Ok(None) };
            let bytes = blob.data().len();
            let Some(entries) = ListpackIter::new(blob)?.declared_len() else { return Ok(None) };
            let (kind, n, keeps) = match v.vtype {
                T::HashListpack => ("hash", entries / 2, entries / 2 <= limits.hash_max_listpack_entries),
                T::ZsetListpack => ("zset", entries / 2, entries / 2 <= limits.zset_max_listpack_entries),
                _ => ("set", entries, entries <= limits.set_max_listpack_entries),
            };
            if !keeps {
                return Ok(None);
            }
            shape(Shape::Packed(bytes), kind, "listpack", n)
        }
        T::SetIntset => {
            let Some(blob) = v.packed()? else { return Ok(None) };
            let bytes = blob.data().len();
            let n = IntsetIter::new(blob)?.len();
            if n > limits.set_max_intset_entries {
                return Ok(None);
            }
            shape(Shape::Packed(bytes), "set", "intset", n)
        }
        // A quicklist the version keeps node by node: Redis 7's of listpacks, 6.2's of
        // ziplists (7.0 converts those).
        T::ListQuicklist2 | T::ListQuicklist if m.listpacks == (v.vtype == T::ListQuicklist2) => {
            let (mut nodes, mut bytes, mut allocated, mut elements, mut first) = (0, 0, 0, 0, 0);
            for node in v.quicklist_nodes()? {
                // A plain node (one big element) is left to the built value.
                let Some(blob) = node? else { return Ok(None) };
                let size = blob.data().len();
                let count = if m.listpacks {
                    ListpackIter::new(blob)?.declared_len()
                } else {
                    ZiplistIter::new(blob)?.declared_len()
                };
                let Some(n) = count else { return Ok(None) };
                nodes += 1;
                bytes += size;
                allocated += m.round(size);
                elements += n;
                if nodes == 1 {
                    first = size;
                }
            }
            if m.list_listpack && nodes <= 1 {
                return shape(Shape::Packed(first.max(listpack::OVERHEAD)), "list", "listpack", elements);
            }
            shape(Shape::Quicklist { nodes, bytes, allocated, sampled: nodes }, "list", "quicklist", elements)
        }
        // Redis 6.2 keeps a ziplist hash or zset as it is, unless it has too many entries.
        T::HashZiplist | T::ZsetZiplist if !m.listpacks => {
            let Some(blob) = v.packed()? else { return Ok(None) };
            let bytes = blob.data().len();
            let Some(entries) = ZiplistIter::new(blob)?.declared_len() else { return Ok(None) };
            let (kind, limit) = match v.vtype {
                T::HashZiplist => ("hash", limits.hash_max_listpack_entries),
                _ => ("zset", limits.zset_max_listpack_entries),
            };
            if entries / 2 > limit {
                return Ok(None);
            }
            shape(Shape::Packed(bytes), kind, "ziplist", entries / 2)
        }
        T::Hash => {
            let mut it = v.hash()?;
            let n = it.declared_len().unwrap_or(0) as usize;
            if n <= limits.hash_max_listpack_entries {
                return Ok(None);
            }
            let mut sds = 0;
            for e in &mut it {
                let e = e?;
                sds += m.sds_alloc(e.field.len()) + m.sds_alloc(e.value.len());
            }
            shape(Shape::HashTable { n, sds, sampled: n }, "hash", "hashtable", n)
        }
        T::SetHashtable => {
            let mut it = v.set()?;
            let n = it.declared_len().unwrap_or(0) as usize;
            if n <= limits.set_max_intset_entries.max(limits.set_max_listpack_entries) {
                return Ok(None);
            }
            let mut sds = 0;
            for e in &mut it {
                sds += m.sds_alloc(e?.len());
            }
            shape(Shape::SetTable { n, sds, sampled: n }, "set", "hashtable", n)
        }
        T::Zset2 | T::ZsetText => {
            let mut n = 0;
            let mut sds = 0;
            for e in v.zset()? {
                sds += m.sds_alloc(e?.0.len());
                n += 1;
            }
            if n <= limits.zset_max_listpack_entries {
                return Ok(None);
            }
            shape(Shape::Skiplist { n, sds, sampled: n }, "zset", "skiplist", n)
        }
        _ => Ok(None),
    }
}

/// Redis's objectComputeSize of a stream: the stream, its radix tree, the listpacks (the
/// first `samples` averaged for all but the last), the groups and their consumers.
fn stream_size(st: &crate::value::Stream, samples: usize, m: &Model) -> usize {
    let mut size = ROBJ + m.stream + rax_usage(st.node_count(), st.rax_nodes(), m);
    let nodes: Vec<usize> = st.node_allocations().map(|b| m.round(b)).collect();
    if nodes.len() <= samples {
        size += nodes.iter().sum::<usize>();
    } else {
        let avg = nodes[..samples].iter().sum::<usize>() / samples;
        size += avg * (nodes.len() - 1) + nodes.last().copied().unwrap_or(0);
    }
    for g in st.groups.values() {
        size += 40 + rax_usage(g.pel.len(), rax_nodes_of(g.pel.keys().copied()), m) + 24 * g.pel.len();
        for (name, c) in &g.consumers {
            size += m.consumer + name.len() + rax_usage(c.pel.len(), rax_nodes_of(c.pel.iter().copied()), m);
        }
    }
    size
}

/// The listpack sizes of the nodes of a quicklist built by appending: each filled up to
/// the list-max-listpack-size limit.
fn quicklist_nodes(l: &List, fill: i64) -> Vec<usize> {
    let limit_bytes = match fill {
        -1 => 4096,
        -3 => 16384,
        -4 => 32768,
        f if f <= -5 => 65536,
        _ => 8192,
    };
    let mut nodes: Vec<usize> = Vec::new();
    let (mut sz, mut count) = (0usize, 0i64);
    for item in l.iter() {
        let fits = count > 0 && sz + item.len() + 8 <= limit_bytes && (fill < 0 || count < fill.max(1));
        if !fits {
            if count > 0 {
                nodes.push(sz);
            }
            sz = 7;
            count = 0;
        }
        sz += listpack::entry_bytes(item);
        count += 1;
    }
    if count > 0 {
        nodes.push(sz);
    }
    nodes
}

/// The expected allocation of a skiplist node: 24 bytes and 16 per level, a node having
/// level k with probability (3/4)(1/4)^(k-1).
fn zsl_node(m: &Model) -> f64 {
    (1..=32).map(|k| 0.75 * 0.25f64.powi(k - 1) * m.round(24 + 16 * k as usize) as f64).sum()
}

/// Bytes of a listpack holding `items` (header, entries, end byte).
fn listpack_bytes<'a>(items: impl Iterator<Item = &'a [u8]>) -> usize {
    listpack::OVERHEAD + items.map(listpack::entry_bytes).sum::<usize>()
}

/// Slots of a dict holding `n` entries (a power of two, at least 4).
pub fn dict_slots(n: usize) -> usize {
    n.max(4).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_classes() {
        let q16: Vec<usize> =
            [1, 8, 9, 17, 100, 128, 129, 160, 161, 257, 544, 1025].map(|n| Allocator::JemallocQ16.round(n)).to_vec();
        assert_eq!(q16, [8, 8, 16, 32, 112, 128, 160, 160, 192, 320, 640, 1280]);
        let q8: Vec<usize> = [1, 9, 17, 25, 41, 57, 65, 100, 129].map(|n| Allocator::Jemalloc.round(n)).to_vec();
        assert_eq!(q8, [8, 16, 24, 32, 48, 64, 80, 112, 160]);
        let libc: Vec<usize> = [1, 24, 25, 40, 41].map(|n| Allocator::Libc.round(n)).to_vec();
        assert_eq!(libc, [24, 24, 40, 40, 56]);
    }
}
