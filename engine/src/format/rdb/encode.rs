//! The RDB encoder: logical values in, the bytes a given Redis (or Valkey) version would
//! write out, choosing encodings the way that version does with its default thresholds.
//!
//! What a target cannot hold (field TTLs before 7.4, functions before 7.0, stream fields
//! newer than the target, ...) is converted where a faithful form exists and otherwise
//! dropped and reported as a `Loss`.

use std::fmt;
use std::io::{self, Write};

use crate::format::blob::{parse_canonical_i64, FlatWriter};
use crate::format::crc::{crc64, Crc64};
use crate::format::intset::encode_intset;
use crate::format::listpack::ListpackWriter;
use crate::format::logical::{Field, Logical, StreamValue};
use crate::format::ziplist::ZiplistWriter;

use super::stream::{StreamId, StreamMeta};
use super::types::{Dialect, Family};

/// A version to write for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Redis62,
    Redis70,
    Redis72,
    Redis74,
    Valkey9,
}

impl Target {
    pub const ALL: [Target; 5] = [Target::Redis62, Target::Redis70, Target::Redis72, Target::Redis74, Target::Valkey9];

    pub fn parse(s: &str) -> Option<Target> {
        Some(match s {
            "redis-6.2" => Target::Redis62,
            "redis-7.0" => Target::Redis70,
            "redis-7.2" => Target::Redis72,
            "redis-7.4" => Target::Redis74,
            "valkey-9" => Target::Valkey9,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Redis62 => "redis-6.2",
            Target::Redis70 => "redis-7.0",
            Target::Redis72 => "redis-7.2",
            Target::Redis74 => "redis-7.4",
            Target::Valkey9 => "valkey-9",
        }
    }

    pub fn version(self) -> u32 {
        match self {
            Target::Redis62 => 9,
            Target::Redis70 => 10,
            Target::Redis72 => 11,
            Target::Redis74 => 12,
            Target::Valkey9 => 80,
        }
    }

    pub fn dialect(self) -> Dialect {
        match self {
            Target::Valkey9 => Dialect { family: Family::Valkey, version: 80 },
            t => Dialect::redis(t.version()),
        }
    }

    /// The server version written in the `redis-ver` / `valkey-ver` aux field.
    pub fn server_version(self) -> &'static str {
        match self {
            Target::Redis62 => "6.2.16",
            Target::Redis70 => "7.0.15",
            Target::Redis72 => "7.2.7",
            Target::Redis74 => "7.4.1",
            Target::Valkey9 => "9.0.0",
        }
    }

    /// The aux field naming the writer: `redis-ver` or `valkey-ver`, with
    /// [`Target::server_version`].
    pub fn writer_aux(self) -> (&'static str, &'static str) {
        let key = if self == Target::Valkey9 { "valkey-ver" } else { "redis-ver" };
        (key, self.server_version())
    }

    /// How this target's server writes doubles (its listpack and ziplist scores).
    pub fn doubles(self) -> crate::format::double::Doubles {
        use crate::format::double::Doubles;
        match self {
            Target::Redis62 => Doubles::Redis62,
            Target::Redis70 => Doubles::Redis70,
            _ => Doubles::Redis72,
        }
    }

    /// The target in the stream layout generation it writes (1 = type 15, 2 = 19, 3 = 21).
    fn stream_version(self) -> u8 {
        match self {
            Target::Redis62 => 1,
            Target::Redis70 => 2,
            _ => 3,
        }
    }

    fn has_listpacks(self) -> bool {
        self != Target::Redis62
    }

    fn has_set_listpack(self) -> bool {
        matches!(self, Target::Redis72 | Target::Redis74 | Target::Valkey9)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Redis's compiled-in default thresholds (not redis.conf's sample values).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub hash_entries: usize,
    pub hash_value: usize,
    pub zset_entries: usize,
    pub zset_value: usize,
    pub intset_entries: usize,
    pub set_listpack_entries: usize,
    pub set_listpack_value: usize,
    /// list-max-listpack-size -2: 8 KiB per node.
    pub list_node_bytes: usize,
    /// list-max-listpack-size when positive: entries per node (with 8 KB kept as a safety
    /// limit); 0 when nodes are limited by `list_node_bytes` alone.
    pub list_node_entries: usize,
    /// Elements at least this big get a PLAIN quicklist node of their own (7.0+; Redis's
    /// packed threshold, 1 GiB by default).
    pub list_plain_bytes: usize,
    pub stream_node_bytes: usize,
    pub stream_node_entries: usize,
    pub compression: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            hash_entries: 512,
            hash_value: 64,
            zset_entries: 128,
            zset_value: 64,
            intset_entries: 512,
            set_listpack_entries: 128,
            set_listpack_value: 64,
            list_node_bytes: 8192,
            list_node_entries: 0,
            list_plain_bytes: 1 << 30,
            stream_node_bytes: 4096,
            stream_node_entries: 100,
            compression: true,
        }
    }
}

/// Something the target could not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    pub what: String,
}

// ---------------------------------------------------------------- primitives

pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push((n & 0xFF) as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// An RDB string as Redis writes it: int-encoded when it is a canonical int32 of at most
/// 11 characters, LZF when longer than 20 bytes and it saves at least 4, else raw.
pub fn put_str(out: &mut Vec<u8>, b: &[u8], compress: bool) {
    if b.len() <= 11 {
        if let Some(v) = parse_canonical_i64(b) {
            if let Ok(x) = i8::try_from(v) {
                out.push(0xC0);
                out.push(x as u8);
                return;
            }
            if let Ok(x) = i16::try_from(v) {
                out.push(0xC1);
                out.extend_from_slice(&x.to_le_bytes());
                return;
            }
            if let Ok(x) = i32::try_from(v) {
                out.push(0xC2);
                out.extend_from_slice(&x.to_le_bytes());
                return;
            }
        }
    }
    if compress && b.len() > 20 {
        let compressed = crate::format::lzf::compress_with(b, b.len() - 4, |c| {
            out.push(0xC3);
            put_len(out, c.len() as u64);
            put_len(out, b.len() as u64);
            out.extend_from_slice(c);
        });
        if compressed.is_some() {
            return;
        }
    }
    put_raw_str(out, b);
}

/// A length-prefixed string that is never int-encoded or compressed.
fn put_raw_str(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub use crate::format::double::{score_text, score_text_into};

// ---------------------------------------------------------------- values

/// The in-memory encoding a collection is written in, when the writer knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Intset,
    /// A listpack (a ziplist for targets before 7.0).
    Listpack,
    /// A hashtable or skiplist.
    Table,
}

impl Form {
    /// The form of an OBJECT ENCODING name, for the collections whose form the limits
    /// may not tell.
    pub fn of_encoding(name: &str) -> Option<Form> {
        match name {
            "intset" => Some(Form::Intset),
            "listpack" | "ziplist" | "listpackex" => Some(Form::Listpack),
            "hashtable" | "skiplist" => Some(Form::Table),
            _ => None,
        }
    }
}

/// Encodes values for one target.
#[derive(Clone)]
pub struct Encoder {
    pub target: Target,
    pub limits: Limits,
}

impl Encoder {
    pub fn new(target: Target) -> Self {
        Encoder { target, limits: Limits::default() }
    }

    fn s(&self, out: &mut Vec<u8>, b: &[u8]) {
        put_str(out, b, self.limits.compression);
    }

    /// Append a value's encoding to `out`, in the form the limits choose; returns its
    /// type byte.
    pub fn value(&self, v: &Logical, out: &mut Vec<u8>, losses: &mut Vec<Loss>) -> u8 {
        self.value_in(v, None, out, losses)
    }

    /// As [`Encoder::value`], in `form` when given: a server writes a collection in the
    /// encoding it holds, which the limits do not tell (a zset that shrank stays a
    /// skiplist; a setting changed since).
    pub fn value_in(&self, v: &Logical, form: Option<Form>, out: &mut Vec<u8>, losses: &mut Vec<Loss>) -> u8 {
        match v {
            Logical::String(s) => {
                self.s(out, s);
                0
            }
            Logical::List(items) => self.list(items, out),
            Logical::Set(members) => self.set(members, form, out),
            Logical::Zset(members) => self.zset(members, form, out),
            Logical::Hash(fields) => self.hash(fields, form, out, losses),
            Logical::Stream(s) => self.stream(s, out, losses),
            Logical::Module(m) => {
                put_len(out, m.id);
                out.extend_from_slice(&m.payload);
                7
            }
        }
    }

    fn list(&self, items: &[Vec<u8>], out: &mut Vec<u8>) -> u8 {
        self.list_of(items.iter().map(Vec::as_slice), out)
    }

    /// A list from its items in order: quicklist nodes of at most list-max-listpack-size
    /// bytes, ziplists in a type 14 before 7.0, PACKED listpack containers in a type 18
    /// after, with PLAIN nodes for items at the packed threshold.
    pub fn list_of<'i>(&self, items: impl Iterator<Item = &'i [u8]>, out: &mut Vec<u8>) -> u8 {
        let max = (self.limits.list_node_bytes, self.limits.list_node_entries);
        if !self.target.has_listpacks() {
            let nodes = pack_nodes::<ZiplistWriter>(items, max);
            put_len(out, nodes.len() as u64);
            for n in &nodes {
                self.s(out, n);
            }
            return 14;
        }
        let plain = self.limits.list_plain_bytes;
        let mut nodes: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut packer = NodePacker::<ListpackWriter>::new(max);
        for item in items {
            if item.len() >= plain {
                nodes.extend(packer.take().into_iter().map(|n| (2, n)));
                nodes.push((1, item.to_vec()));
            } else if let Some(full) = packer.push(item) {
                nodes.push((2, full));
            }
        }
        nodes.extend(packer.take().into_iter().map(|n| (2, n)));
        put_len(out, nodes.len() as u64);
        for (container, n) in &nodes {
            put_len(out, *container);
            self.s(out, n);
        }
        18
    }

    /// A flat container of `items` in the target's form (listpack, or ziplist before 7.0).
    fn flat<'i>(&self, items: impl Iterator<Item = &'i [u8]>) -> Vec<u8> {
        fn fill<'i, W: FlatWriter>(items: impl Iterator<Item = &'i [u8]>) -> Vec<u8> {
            let mut w = W::default();
            for it in items {
                w.push(it);
            }
            w.finish()
        }
        if self.target.has_listpacks() {
            fill::<ListpackWriter>(items)
        } else {
            fill::<ZiplistWriter>(items)
        }
    }

    /// A set in its hashtable form (type 2) from its `len` members.
    pub fn set_table<B: AsRef<[u8]>>(&self, len: usize, members: impl Iterator<Item = B>, out: &mut Vec<u8>) -> u8 {
        put_len(out, len as u64);
        for m in members {
            self.s(out, m.as_ref());
        }
        2
    }

    fn set(&self, members: &[Vec<u8>], form: Option<Form>, out: &mut Vec<u8>) -> u8 {
        let l = &self.limits;
        let table = |out: &mut Vec<u8>| self.set_table(members.len(), members.iter(), out);
        match form {
            Some(Form::Table) => return table(out),
            Some(Form::Listpack) if self.target.has_set_listpack() && !members.is_empty() => {
                self.s(out, &self.flat(members.iter().map(Vec::as_slice)));
                return 20;
            }
            _ => {}
        }
        // An empty set (Redis never writes one; a file may hold one) stays a plain set:
        // an empty intset is invalid.
        if !members.is_empty() && (members.len() <= l.intset_entries || form == Some(Form::Intset)) {
            let ints: Option<Vec<i64>> = members.iter().map(|m| parse_canonical_i64(m)).collect();
            if let Some(mut ints) = ints {
                ints.sort_unstable();
                self.s(out, &encode_intset(&ints));
                return 11;
            }
        }
        if self.target.has_set_listpack()
            && members.len() <= l.set_listpack_entries
            && members.iter().all(|m| m.len() <= l.set_listpack_value)
        {
            self.s(out, &self.flat(members.iter().map(Vec::as_slice)));
            return 20;
        }
        table(out)
    }

    fn zset(&self, members: &[(Vec<u8>, f64)], form: Option<Form>, out: &mut Vec<u8>) -> u8 {
        let l = &self.limits;
        let small = members.len() <= l.zset_entries && members.iter().all(|(m, _)| m.len() <= l.zset_value);
        if form.map_or(small, |f| f != Form::Table) {
            // Ascending (score, member), member then score.
            let doubles = self.target.doubles();
            let scores: Vec<String> = members.iter().map(|(_, s)| doubles.listpack(*s)).collect();
            let items = members.iter().zip(&scores).flat_map(|((m, _), s)| [m.as_slice(), s.as_bytes()]);
            self.s(out, &self.flat(items));
            return if self.target.has_listpacks() { 17 } else { 12 };
        }
        self.zset_table(members.len(), members.iter().rev().map(|(m, s)| (m.as_slice(), *s)), out)
    }

    /// A zset in its skiplist form (ZSET_2, type 5) from its `len` members, highest score
    /// first; scores as binary doubles.
    pub fn zset_table<'m>(
        &self,
        len: usize,
        descending: impl Iterator<Item = (&'m [u8], f64)>,
        out: &mut Vec<u8>,
    ) -> u8 {
        put_len(out, len as u64);
        for (m, s) in descending {
            self.s(out, m);
            out.extend_from_slice(&s.to_le_bytes());
        }
        5
    }

    fn hash(&self, fields: &[Field], form: Option<Form>, out: &mut Vec<u8>, losses: &mut Vec<Loss>) -> u8 {
        let l = &self.limits;
        let small = form.map_or_else(
            || {
                fields.len() <= l.hash_entries
                    && fields.iter().all(|f| f.field.len() <= l.hash_value && f.value.len() <= l.hash_value)
            },
            |f| f != Form::Table,
        );
        let ttls = fields.iter().filter(|f| f.expire_ms.is_some()).count();
        if ttls > 0 {
            match self.target {
                Target::Redis74 => return self.hash_hfe(fields, small, out),
                Target::Valkey9 if !small => return self.hash_valkey(fields, out),
                Target::Valkey9 => {
                    // Valkey keeps field TTLs only in the hashtable form.
                    return self.hash_valkey(fields, out);
                }
                t => losses.push(Loss { what: format!("{ttls} hash field TTL(s) dropped: {t} has no field expiry") }),
            }
        }
        if small {
            self.s(out, &self.flat(fields.iter().flat_map(|f| [f.field.as_slice(), f.value.as_slice()])));
            return if self.target.has_listpacks() { 16 } else { 13 };
        }
        self.hash_table(fields.len(), fields.iter().map(|f| (f.field.as_slice(), f.value.as_slice())), out)
    }

    /// A hash without field TTLs in its hashtable form (type 4) from its `len` pairs.
    pub fn hash_table<'f>(
        &self,
        len: usize,
        pairs: impl Iterator<Item = (&'f [u8], &'f [u8])>,
        out: &mut Vec<u8>,
    ) -> u8 {
        put_len(out, len as u64);
        for (f, v) in pairs {
            self.s(out, f);
            self.s(out, v);
        }
        4
    }

    /// Redis 7.4's listpack-ex (25) as a listpackex in memory writes it: the triplets in
    /// their order (a field without TTL has 0), after the time the hash is registered under
    /// for expiry (0: none), which may be earlier than any TTL left.
    pub fn hash_listpack_ex(&self, fields: &[Field], registered: u64, out: &mut Vec<u8>) -> u8 {
        out.extend_from_slice(&registered.to_le_bytes());
        let mut w = ListpackWriter::new();
        for f in fields {
            w.push(&f.field);
            w.push(&f.value);
            w.push_int(f.expire_ms.unwrap_or(0));
        }
        self.s(out, &w.finish());
        25
    }

    /// Redis 7.4: listpack-ex (25) or hashtable with metadata (24).
    fn hash_hfe(&self, fields: &[Field], small: bool, out: &mut Vec<u8>) -> u8 {
        let min = fields.iter().filter_map(|f| f.expire_ms).min().unwrap_or(0);
        out.extend_from_slice(&(min as u64).to_le_bytes());
        if small {
            // Triplets ordered by TTL ascending, fields without a TTL last.
            let mut order: Vec<&Field> = fields.iter().collect();
            order.sort_by_key(|f| (f.expire_ms.is_none(), f.expire_ms.unwrap_or(0)));
            let mut w = ListpackWriter::new();
            for f in order {
                w.push(&f.field);
                w.push(&f.value);
                w.push_int(f.expire_ms.unwrap_or(0));
            }
            self.s(out, &w.finish());
            return 25;
        }
        put_len(out, fields.len() as u64);
        for f in fields {
            let ttl = f.expire_ms.map_or(0, |t| (t - min + 1) as u64);
            put_len(out, ttl);
            self.s(out, &f.field);
            self.s(out, &f.value);
        }
        24
    }

    /// Valkey 9 HASH_2 (22): field, value, u64 LE expiry (-1 none).
    fn hash_valkey(&self, fields: &[Field], out: &mut Vec<u8>) -> u8 {
        put_len(out, fields.len() as u64);
        for f in fields {
            self.s(out, &f.field);
            self.s(out, &f.value);
            out.extend_from_slice(&f.expire_ms.map_or(u64::MAX, |t| t as u64).to_le_bytes());
        }
        22
    }

    fn stream(&self, s: &StreamValue, out: &mut Vec<u8>, losses: &mut Vec<Loss>) -> u8 {
        let entries =
            s.entries.iter().map(|(id, fields)| (*id, fields.iter().map(|(f, v)| (f.as_slice(), v.as_slice()))));
        self.stream_of(entries, &s.meta, out, losses)
    }

    /// A stream from its live entries in ID order (walked twice a node: its extent, then
    /// its listpack) and its metadata, so a held stream is written without a copy of it.
    pub fn stream_of<'e, I, P>(&self, entries: I, m: &StreamMeta<'_>, out: &mut Vec<u8>, losses: &mut Vec<Loss>) -> u8
    where
        I: Iterator<Item = (StreamId, P)> + Clone,
        P: Iterator<Item = (&'e [u8], &'e [u8])> + Clone,
    {
        let version = self.target.stream_version();
        let first_entry = entries.clone().next().map(|e| e.0);
        let size = |fields: P| {
            fields
                .map(|(f, v)| {
                    <ListpackWriter as FlatWriter>::entry_size(f) + <ListpackWriter as FlatWriter>::entry_size(v)
                })
                .sum::<usize>()
                + 8
        };
        // Nodes: a master entry from the node's first entry, SAMEFIELDS where fields match.
        // A node closes at stream-node-max-entries or once it passes stream-node-max-bytes.
        let mut nodes: Vec<(StreamId, Vec<u8>)> = Vec::new();
        let mut rest = entries;
        while let Some((master, master_fields)) = rest.clone().next() {
            let mut extent = rest.clone();
            let (mut count, mut bytes) = (0, 0);
            while count < self.limits.stream_node_entries && (count == 0 || bytes < self.limits.stream_node_bytes) {
                let Some((_, fields)) = extent.next() else { break };
                bytes += size(fields);
                count += 1;
            }
            let names: Vec<&[u8]> = master_fields.map(|(f, _)| f).collect();
            let mut w = ListpackWriter::new();
            w.push_int(count as i64);
            w.push_int(0);
            w.push_int(names.len() as i64);
            for f in &names {
                w.push(f);
            }
            w.push_int(0);
            for (id, fields) in rest.by_ref().take(count) {
                let n = fields.clone().count();
                let same = n == names.len() && fields.clone().zip(&names).all(|((f, _), m)| f == *m);
                w.push_int(if same { 2 } else { 0 });
                w.push_int(id.ms.wrapping_sub(master.ms) as i64);
                w.push_int(id.seq.wrapping_sub(master.seq) as i64);
                if same {
                    for (_, v) in fields {
                        w.push(v);
                    }
                    w.push_int(n as i64 + 3);
                } else {
                    w.push_int(n as i64);
                    for (f, v) in fields {
                        w.push(f);
                        w.push(v);
                    }
                    w.push_int(2 * n as i64 + 4);
                }
            }
            nodes.push((master, w.finish()));
        }
        put_len(out, nodes.len() as u64);
        for (id, lp) in &nodes {
            let mut key = id.ms.to_be_bytes().to_vec();
            key.extend_from_slice(&id.seq.to_be_bytes());
            put_raw_str(out, &key);
            self.s(out, lp);
        }
        // The stored length, even when stale (Redis 5 could save one; Redis keeps it on load).
        put_len(out, m.length);
        put_len(out, m.last_id.ms);
        put_len(out, m.last_id.seq);
        if version >= 2 {
            let first = m.first_id.or(first_entry).unwrap_or_default();
            put_len(out, first.ms);
            put_len(out, first.seq);
            let md = m.max_deleted_id.unwrap_or_default();
            put_len(out, md.ms);
            put_len(out, md.seq);
            put_len(out, m.entries_added.unwrap_or(m.length));
        } else if m.entries_added.is_some_and(|a| a != m.length)
            || m.max_deleted_id.is_some_and(|d| d != StreamId::default())
        {
            losses.push(Loss {
                what: "stream entries-added / max-deleted-id dropped (RDB 9 has no place for them)".into(),
            });
        }
        put_len(out, m.groups.len() as u64);
        let mut lost_active = false;
        for g in &m.groups {
            self.s(out, &g.name.to_bytes());
            put_len(out, g.last_delivered.ms);
            put_len(out, g.last_delivered.seq);
            if version >= 2 {
                put_len(out, g.entries_read.map_or(u64::MAX, |v| v as u64));
            }
            put_len(out, g.pending.len() as u64);
            for p in &g.pending {
                out.extend_from_slice(&p.id.ms.to_be_bytes());
                out.extend_from_slice(&p.id.seq.to_be_bytes());
                out.extend_from_slice(&p.delivery_time.to_le_bytes());
                put_len(out, p.delivery_count);
            }
            put_len(out, g.consumers.len() as u64);
            for c in &g.consumers {
                self.s(out, &c.name.to_bytes());
                out.extend_from_slice(&c.seen_time.to_le_bytes());
                if version >= 3 {
                    out.extend_from_slice(&c.active_time.unwrap_or(c.seen_time).to_le_bytes());
                } else if c.active_time.is_some_and(|a| a != c.seen_time) {
                    lost_active = true;
                }
                put_len(out, c.pending.len() as u64);
                for id in &c.pending {
                    out.extend_from_slice(&id.ms.to_be_bytes());
                    out.extend_from_slice(&id.seq.to_be_bytes());
                }
            }
            if !g.nacked.is_empty() {
                losses.push(Loss {
                    what: format!("{} NACK-zone entries of group dropped (no target holds them)", g.nacked.len()),
                });
            }
        }
        if lost_active {
            losses.push(Loss { what: "consumer active-time dropped (needs RDB 11)".into() });
        }
        if let Some(idmp) = &m.idmp {
            if !idmp.producers.is_empty() {
                losses.push(Loss { what: "stream IDMP producer state dropped (needs RDB 13)".into() });
            }
        }
        match version {
            1 => 15,
            2 => 19,
            _ => 21,
        }
    }
}

/// Split `items` into flat nodes of at most `max` bytes (a node holds at least one item).
fn pack_nodes<'i, W: FlatWriter>(items: impl Iterator<Item = &'i [u8]>, max: (usize, usize)) -> Vec<Vec<u8>> {
    let mut packer = NodePacker::<W>::new(max);
    let mut nodes: Vec<Vec<u8>> = items.filter_map(|it| packer.push(it)).collect();
    nodes.extend(packer.take());
    nodes
}

/// Fills flat nodes of at most `max` bytes and `max_entries` items (0: any number) one item
/// at a time, a node holding at least one.
struct NodePacker<W: FlatWriter> {
    cur: W,
    count: usize,
    max: usize,
    max_entries: usize,
}

impl<W: FlatWriter> NodePacker<W> {
    fn new((max, max_entries): (usize, usize)) -> Self {
        NodePacker { cur: W::default(), count: 0, max, max_entries }
    }

    /// Add `item`; the node it closed, if it did not fit.
    fn push(&mut self, item: &[u8]) -> Option<Vec<u8>> {
        let full = (self.max_entries > 0 && self.count >= self.max_entries)
            || self.cur.len() + W::entry_size(item) + 1 > self.max;
        let closed = if !self.cur.is_empty() && full { self.take() } else { None };
        self.cur.push(item);
        self.count += 1;
        closed
    }

    /// The node being filled, if it holds anything.
    fn take(&mut self) -> Option<Vec<u8>> {
        self.count = 0;
        (!self.cur.is_empty()).then(|| std::mem::take(&mut self.cur).finish())
    }
}

// ---------------------------------------------------------------- DUMP payloads

/// DUMP payload: type byte, value, RDB version (u16 LE), CRC-64 (LE) of all before it.
pub fn dump_payload(enc: &Encoder, v: &Logical, losses: &mut Vec<Loss>) -> Vec<u8> {
    dump_payload_with(enc, |enc, out| enc.value(v, out, losses))
}

/// [`dump_payload`] with the value written by `body` (which returns its type byte).
pub fn dump_payload_with(enc: &Encoder, body: impl FnOnce(&Encoder, &mut Vec<u8>) -> u8) -> Vec<u8> {
    let mut out = vec![0u8];
    let t = body(enc, &mut out);
    out[0] = t;
    out.extend_from_slice(&(enc.target.version() as u16).to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// FUNCTION DUMP payload: a FUNCTION2 record per library, the RDB version (u16 LE), the
/// CRC-64 (LE) of all before it.
pub fn function_payload<C: AsRef<[u8]>>(enc: &Encoder, codes: &[C]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in codes {
        put_function(enc, &mut out, c.as_ref());
    }
    out.extend_from_slice(&(enc.target.version() as u16).to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why a FUNCTION RESTORE payload is refused, with Redis's texts (after "ERR ").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FunctionPayloadError {
    /// Too short, newer than `max_version`, or a wrong checksum.
    VersionOrChecksum,
    /// A record that is not FUNCTION2 (Redis's "given type is not a function" and
    /// "Pre-GA function format not supported").
    Record(String),
}

impl std::fmt::Display for FunctionPayloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FunctionPayloadError::VersionOrChecksum => f.write_str("DUMP payload version or checksum are wrong"),
            FunctionPayloadError::Record(what) => f.write_str(what),
        }
    }
}

/// The libraries' code in a FUNCTION DUMP payload, as FUNCTION RESTORE reads it: footer
/// checked as RESTORE checks a key's (a version up to `max_version`), then FUNCTION2
/// records to the footer.
pub fn read_function_payload(payload: &[u8], max_version: u16) -> Result<Vec<Vec<u8>>, FunctionPayloadError> {
    use crate::format::input::Input;
    let n = payload.len();
    if n < 10 {
        return Err(FunctionPayloadError::VersionOrChecksum);
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    let stored = u64::from_le_bytes(payload[n - 8..].try_into().unwrap_or([0; 8]));
    if version > max_version || stored != crc64(&payload[..n - 8]) {
        return Err(FunctionPayloadError::VersionOrChecksum);
    }
    let mut input = Input::at(&payload[..n - 10], 0);
    let mut codes = Vec::new();
    while !input.is_empty() {
        let opcode = input.bytes()[0];
        match opcode {
            0xF5 => {}
            0xF6 => return Err(FunctionPayloadError::Record("Pre-GA function format not supported".into())),
            _ => return Err(FunctionPayloadError::Record("given type is not a function".into())),
        }
        let body = nom::Input::take_from(&input, 1);
        let (rest, code) = super::prim::rdb_elem(body)
            .map_err(|_| FunctionPayloadError::Record("failed loading the given functions payload".into()))?;
        codes.push(code.to_bytes().into_owned());
        input = rest;
    }
    Ok(codes)
}

// ---------------------------------------------------------------- files

/// SELECTDB, and RESIZEDB when the sizes are known.
pub fn put_select_db(out: &mut Vec<u8>, db: u64, sizes: Option<(u64, u64)>) {
    out.push(0xFE);
    put_len(out, db);
    if let Some((a, b)) = sizes {
        out.push(0xFB);
        put_len(out, a);
        put_len(out, b);
    }
}

/// What goes before a key's value.
pub struct KeyParts<'k> {
    pub key: &'k [u8],
    pub expire_ms: Option<i64>,
    pub idle: Option<u64>,
    pub freq: Option<u8>,
}

/// A whole key record: per-key opcodes, type, key, value.
pub fn put_key(enc: &Encoder, out: &mut Vec<u8>, k: KeyParts<'_>, value: &Logical, losses: &mut Vec<Loss>) {
    put_key_with(enc, out, k, |enc, out| enc.value(value, out, losses));
}

/// [`put_key`] with the value written by `body` (which returns its type byte).
pub fn put_key_with(
    enc: &Encoder,
    out: &mut Vec<u8>,
    k: KeyParts<'_>,
    body: impl FnOnce(&Encoder, &mut Vec<u8>) -> u8,
) {
    if let Some(ms) = k.expire_ms {
        out.push(0xFC);
        out.extend_from_slice(&ms.to_le_bytes());
    }
    if let Some(i) = k.idle {
        out.push(0xF8);
        put_len(out, i);
    } else if let Some(f) = k.freq {
        out.push(0xF9);
        out.push(f);
    }
    let type_at = out.len();
    out.push(0);
    put_str(out, k.key, enc.limits.compression);
    let t = body(enc, out);
    out[type_at] = t;
}

/// A FUNCTION2 record, or the loss when the target has no functions.
pub fn put_function(enc: &Encoder, out: &mut Vec<u8>, code: &[u8]) -> Option<Loss> {
    if enc.target == Target::Redis62 {
        return Some(Loss { what: "function library dropped: RDB 9 has no functions".into() });
    }
    out.push(0xF5);
    put_str(out, code, enc.limits.compression);
    None
}

/// Writes an RDB file record by record, keeping the CRC as it goes.
pub struct RdbWriter<W: Write> {
    w: W,
    crc: Crc64,
    pub enc: Encoder,
    scratch: Vec<u8>,
    db: Option<u64>,
}

impl<W: Write> RdbWriter<W> {
    /// Write the magic and the aux fields Redis writes.
    pub fn new(w: W, target: Target, ctime: i64) -> io::Result<Self> {
        Self::with_aof_base(w, target, ctime, false)
    }

    /// As [`RdbWriter::new`]; `aof_base` marks an AOF base file (`aof-base` 1), as Redis
    /// writes the RDB it rewrites its AOF into.
    pub fn with_aof_base(w: W, target: Target, ctime: i64, aof_base: bool) -> io::Result<Self> {
        Self::with_writer(w, target, target.writer_aux(), &[], ctime, aof_base)
    }

    /// As [`RdbWriter::with_aof_base`], naming the writer with `writer` (`redis-ver 7.2.7`,
    /// `valkey-ver 8.0.1`: servers that share a format differ there).
    /// `extra` aux fields go after `used-mem`, where Redis puts its replication ones.
    pub fn with_writer(
        w: W,
        target: Target,
        writer: (&str, &str),
        extra: &[(&[u8], &[u8])],
        ctime: i64,
        aof_base: bool,
    ) -> io::Result<Self> {
        let mut me = RdbWriter { w, crc: Crc64::new(), enc: Encoder::new(target), scratch: Vec::new(), db: None };
        me.put(target.dialect().magic().as_bytes())?;
        me.aux(writer.0.as_bytes(), writer.1.as_bytes())?;
        me.aux(b"redis-bits", b"64")?;
        me.aux(b"ctime", ctime.to_string().as_bytes())?;
        me.aux(b"used-mem", b"0")?;
        for (k, v) in extra {
            me.aux(k, v)?;
        }
        if target == Target::Redis62 {
            // Redis 6.2 names the RDB part of its single-file AOF a preamble.
            me.aux(b"aof-preamble", if aof_base { b"1" } else { b"0" })?;
        } else {
            me.aux(b"aof-base", if aof_base { b"1" } else { b"0" })?;
        }
        Ok(me)
    }

    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc.update(b);
        self.w.write_all(b)
    }

    fn put_scratch(&mut self) -> io::Result<()> {
        let s = std::mem::take(&mut self.scratch);
        let r = self.put(&s);
        self.scratch = s;
        self.scratch.clear();
        r
    }

    pub fn aux(&mut self, k: &[u8], v: &[u8]) -> io::Result<()> {
        self.scratch.clear();
        self.scratch.push(0xFA);
        put_str(&mut self.scratch, k, false);
        put_str(&mut self.scratch, v, false);
        self.put_scratch()
    }

    /// A function library; targets before 7.0 cannot hold one.
    pub fn function(&mut self, code: &[u8]) -> io::Result<Option<Loss>> {
        self.scratch.clear();
        let loss = put_function(&self.enc, &mut self.scratch, code);
        self.put_scratch()?;
        Ok(loss)
    }

    /// A MODULE_AUX record, as read (everything after the opcode byte).
    pub fn module_aux(&mut self, raw: &[u8]) -> io::Result<()> {
        self.put(&[0xF7])?;
        self.put(raw)
    }

    /// Start database `db` with optional RESIZEDB sizes.
    pub fn select_db(&mut self, db: u64, sizes: Option<(u64, u64)>) -> io::Result<()> {
        self.scratch.clear();
        put_select_db(&mut self.scratch, db, sizes);
        self.db = Some(db);
        self.put_scratch()
    }

    /// Append records encoded elsewhere (by `put_key` / `put_select_db` on other threads);
    /// `db` is the database the last of them selected, if any.
    pub fn raw(&mut self, bytes: &[u8], db: Option<u64>) -> io::Result<()> {
        if db.is_some() {
            self.db = db;
        }
        self.put(bytes)
    }

    pub fn current_db(&self) -> Option<u64> {
        self.db
    }

    /// One key with its expiry and LRU/LFU information.
    pub fn key(
        &mut self,
        key: &[u8],
        expire_ms: Option<i64>,
        idle: Option<u64>,
        freq: Option<u8>,
        value: &Logical,
        losses: &mut Vec<Loss>,
    ) -> io::Result<()> {
        self.key_with(KeyParts { key, expire_ms, idle, freq }, |enc, out| enc.value(value, out, losses))
    }

    /// [`RdbWriter::key`] with the value written by `body` (which returns its type byte).
    pub fn key_with(&mut self, k: KeyParts<'_>, body: impl FnOnce(&Encoder, &mut Vec<u8>) -> u8) -> io::Result<()> {
        let mut rec = std::mem::take(&mut self.scratch);
        rec.clear();
        put_key_with(&self.enc, &mut rec, k, body);
        let r = self.put(&rec);
        self.scratch = rec;
        r
    }

    /// EOF and checksum; returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.put(&[0xFF])?;
        let crc = self.crc.finish();
        self.w.write_all(&crc.to_le_bytes())?;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// Read a DUMP payload (as `RESTORE` does): at least 11 bytes, an RDB version this build
/// reads, a matching CRC-64, and one value that fills the payload exactly.
pub fn read_dump_payload(
    payload: &[u8],
    family: Family,
) -> Result<super::value::Value<'_>, crate::format::FormatError> {
    read_dump_payload_with(payload, family, true)
}

/// [`read_dump_payload`], the CRC-64 checked only when `check_crc` (DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION turns it off).
pub fn read_dump_payload_with(
    payload: &[u8],
    family: Family,
    check_crc: bool,
) -> Result<super::value::Value<'_>, crate::format::FormatError> {
    use crate::format::input::{finish, Input};
    use crate::format::FormatError;
    // A type byte, then the 2-byte version and the 8-byte CRC.
    if payload.len() < 11 {
        return Err(FormatError::new(0, format!("DUMP payload too short ({} bytes)", payload.len())));
    }
    let n = payload.len();
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    let max = match family {
        Family::Redis => super::types::REDIS_MAX_VERSION,
        Family::Valkey => 80,
    };
    if u32::from(version) > max {
        return Err(FormatError::new(n - 10, format!("DUMP payload RDB version {version} is newer than {max}")));
    }
    let stored = u64::from_le_bytes(payload[n - 8..].try_into().unwrap_or([0; 8]));
    let computed = crc64(&payload[..n - 8]);
    if check_crc && stored != computed {
        return Err(FormatError::new(
            n - 8,
            format!("DUMP payload checksum {stored:016x} does not match {computed:016x}"),
        ));
    }
    let dialect = Dialect { family, version: u32::from(version) };
    let vtype = dialect
        .value_type(payload[0])
        .ok_or_else(|| FormatError::new(0, format!("unknown DUMP payload type {}", payload[0])))?;
    let body = Input::at(&payload[1..n - 10], 1);
    let (rest, ()) = super::value::skip_value(body, vtype).map_err(|e| finish(e, "the DUMP payload value"))?;
    if !rest.is_empty() {
        return Err(FormatError::new(rest.offset(), "bytes left after the DUMP payload value"));
    }
    Ok(super::value::Value { vtype, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rdb::{RdbReader, Record};

    #[test]
    fn big_list_elements_get_plain_nodes() {
        let enc_limits = Limits { list_plain_bytes: 100, ..Limits::default() };
        let items: Vec<Vec<u8>> =
            vec![b"a".to_vec(), vec![b'x'; 150], b"b".to_vec(), b"c".to_vec(), vec![b'y'; 100], vec![b'z'; 99]];
        let mut w = RdbWriter::new(Vec::new(), Target::Redis70, 0).unwrap();
        w.enc.limits = enc_limits;
        w.select_db(0, None).unwrap();
        w.key(b"l", None, None, None, &Logical::List(items.clone()), &mut Vec::new()).unwrap();
        let file = w.finish().unwrap();
        let rec = RdbReader::new(&file).unwrap().find_map(|r| match r.unwrap() {
            Record::Key(k) => Some(k),
            _ => None,
        });
        let k = rec.unwrap();
        assert_eq!(Logical::from_record(&k).unwrap(), Logical::List(items));
        // Nodes: [a] PLAIN(x*150) [b c] PLAIN(y*100) [z*99]
        assert_eq!(k.value.body.bytes()[0], 5);
    }
}
