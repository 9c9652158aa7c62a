//! What Redis's own allocation for a key comes to: the sizes of its structures for the
//! value's encoding (robj, sds headers, listpacks, quicklist nodes, dict tables and
//! entries, skiplists, intsets), each allocation rounded up to jemalloc's size classes,
//! nested values sampled as Redis's objectComputeSize samples them. MEMORY USAGE answers
//! with it, and `rdbtool memory` reports with it. It describes Redis's layout, not
//! ferrokv's own; docs/memory.md gives the formulas and how close each comes.

use crate::command::catalog::ServerVersion;
use crate::format::double::Doubles;
use crate::format::listpack;
use crate::value::stream::rax_nodes_of;
use crate::value::{Hash, List, Set, Str, Value, Zset};

const ROBJ: usize = 16;
/// A dict entry (key, value and next pointers).
pub const DICT_ENTRY: usize = 24;
const QUICKLIST: usize = 40;
const QUICKLIST_NODE: usize = 40;
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
    /// Redis 7.2+ keeps a list of one small node as a bare listpack.
    list_listpack: bool,
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
            list_listpack: v >= ServerVersion::Redis72,
            dict_entry: DICT_ENTRY,
            dict: 56,
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
    /// one node is a listpack.
    pub fn encoding(&self, v: &Value, list_fill: i64) -> &'static str {
        match v {
            Value::List(l) if self.list_listpack && quicklist_nodes(l, list_fill).len() <= 1 => "listpack",
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

/// What Redis's objectComputeSize answers for `v`.
pub fn value_size(v: &Value, samples: usize, list_fill: i64, m: &Model) -> usize {
    let samples = samples.max(1);
    match v {
        Value::Str(Str::Int(_)) => ROBJ,
        Value::Str(Str::Emb(b)) => m.round(ROBJ + 3 + b.len() + 1),
        Value::Str(Str::Raw(b)) => ROBJ + m.sds_alloc(b.len()),
        Value::List(l) => list_size(l, samples, list_fill, m),
        Value::Hash(h) => match &**h {
            Hash::Listpack(pairs) => {
                ROBJ + m.round(listpack_bytes(pairs.iter().flat_map(|(f, v)| [f.as_slice(), v.as_slice()])))
            }
            Hash::ListpackEx(_) => {
                // The triplets' listpack (a TTL is a listpack integer) and the listpackEx
                // header (its expiry metadata and key pointer).
                let ttls: Vec<String> = h.iter_with_ttl().map(|(_, _, t)| t.unwrap_or(0).to_string()).collect();
                let items = h.iter_with_ttl().zip(&ttls).flat_map(|((f, v, _), t)| [f, v, t.as_bytes()]);
                ROBJ + LISTPACK_EX_HEADER + m.round(listpack_bytes(items))
            }
            Hash::Table(_) => {
                let per =
                    sampled(h.iter(), samples, |(f, v)| m.sds_alloc(f.len()) + m.sds_alloc(v.len()) + m.dict_entry);
                ROBJ + m.dict + 8 * dict_slots(h.len()) + (per * h.len() as f64) as usize
            }
        },
        Value::Set(st) => match &**st {
            Set::Intset(v) => {
                let width = match v.iter().map(|x| x.unsigned_abs()).max().unwrap_or(0) {
                    m if m <= i16::MAX as u64 => 2,
                    m if m <= i32::MAX as u64 => 4,
                    _ => 8,
                };
                ROBJ + m.round(8 + v.len() * width)
            }
            Set::Listpack(members) => ROBJ + m.round(listpack_bytes(members.iter().map(|m| m.as_slice()))),
            Set::Table(_) => {
                let (n, slots) = (st.len(), dict_slots(st.len()));
                if m.bare_set_members && !m.usage_formula {
                    // Members in a bucket of their own need no entry: the expected number
                    // of occupied buckets is slots * (1 - (1 - 1/slots)^n).
                    let occupied = slots as f64 * (1.0 - (1.0 - 1.0 / slots as f64).powi(n as i32));
                    let entries = (n as f64 - occupied).max(0.0);
                    let per = sampled(st.iter(), samples, |member| m.sds_alloc(member.len()));
                    return ROBJ + m.dict + 8 * slots + (per * n as f64 + entries * m.round(16) as f64) as usize;
                }
                let per = sampled(st.iter(), samples, |member| m.sds_alloc(member.len()) + m.dict_entry);
                ROBJ + m.dict + 8 * slots + (per * n as f64) as usize
            }
        },
        Value::Zset(z) => match &**z {
            Zset::Listpack(items) => {
                let scores: Vec<String> = items.iter().map(|(_, sc)| m.doubles.listpack(*sc)).collect();
                let entries = items.iter().zip(&scores).flat_map(|((m, _), sc)| [m.as_slice(), sc.as_bytes()]);
                ROBJ + m.round(listpack_bytes(entries))
            }
            Zset::Skiplist(_) => {
                let per =
                    sampled(z.iter(), samples, |(member, _)| m.sds_alloc(member.len()) + m.dict_entry) + zsl_node(m);
                ROBJ + ZSET
                    + ZSKIPLIST
                    + m.dict
                    + 8 * dict_slots(z.len())
                    + ZSL_HEADER
                    + (per * z.len() as f64) as usize
            }
        },
        Value::Stream(st) => {
            // Redis's objectComputeSize: the stream, its radix tree, the listpacks (the first
            // `samples` averaged for all but the last), the groups and their consumers.
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
    }
}

/// The average of `f` over the first `samples` items (0 for none).
fn sampled<T>(items: impl Iterator<Item = T>, samples: usize, f: impl Fn(T) -> usize) -> f64 {
    let (mut sum, mut n) = (0usize, 0usize);
    for it in items.take(samples) {
        sum += f(it);
        n += 1;
    }
    if n == 0 {
        0.0
    } else {
        sum as f64 / n as f64
    }
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

/// A list: a quicklist of 40-byte nodes and their listpacks, or (Redis 7.2+, one node)
/// the bare listpack.
fn list_size(l: &List, samples: usize, fill: i64, m: &Model) -> usize {
    let nodes = quicklist_nodes(l, fill);
    if m.list_listpack && nodes.len() <= 1 {
        return ROBJ + m.round(nodes.first().copied().unwrap_or(7));
    }
    let n = nodes.len();
    let per = sampled(nodes.into_iter(), samples, |b| QUICKLIST_NODE + m.round(b));
    ROBJ + QUICKLIST + (per * n as f64) as usize
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
