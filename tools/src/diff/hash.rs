//! Hashing values without materialising them: two 64-bit lanes of multiply-fold mixing,
//! order-free sums for unordered types, domain tags per type.

use ferrokv::format::blob::{fmt_i64, itoa_buf};
use ferrokv::format::rdb::{LogicalType, StreamMeta, Value, ValueType};
use ferrokv::format::{Elem, FormatError};

pub(super) const K0: u64 = 0xa076_1d64_78bd_642f;
pub(super) const K1: u64 = 0xe703_7ed1_a0b4_28db;
pub(super) const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
pub(super) const K3: u64 = 0x5899_65cc_7537_4cc3;
pub(super) const K4: u64 = 0x1d8e_4e27_c47d_124f;
pub(super) const K5: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
pub(super) fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
pub(super) fn le64(c: &[u8]) -> u64 {
    u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
}

/// A running 128-bit hash.
#[derive(Clone, Copy)]
pub(super) struct H {
    pub(super) x: u64,
    pub(super) y: u64,
}

// Domain tags: a value of one type never hashes like another's.
pub(super) const T_STRING: u64 = 1;
pub(super) const T_LIST: u64 = 2;
pub(super) const T_SET: u64 = 3;
pub(super) const T_SET_MEMBER: u64 = 4;
pub(super) const T_ZSET: u64 = 5;
pub(super) const T_ZSET_MEMBER: u64 = 6;
pub(super) const T_HASH: u64 = 7;
pub(super) const T_HASH_FIELD: u64 = 8;
pub(super) const T_FIELD_TTL: u64 = 9;
pub(super) const T_STREAM: u64 = 10;
pub(super) const T_GROUP: u64 = 11;
pub(super) const T_PEL: u64 = 12;
pub(super) const T_CONSUMER: u64 = 13;
pub(super) const T_MODULE: u64 = 14;
pub(super) const T_KEY: u64 = 15;
pub(super) const T_FUNCTION: u64 = 16;
pub(super) const T_RAW: u64 = 17;

impl H {
    pub(super) fn new(tag: u64) -> H {
        H { x: tag ^ K0, y: tag.rotate_left(32) ^ K1 }
    }

    #[inline]
    pub(super) fn block(&mut self, a: u64, b: u64) {
        self.x = mum(a ^ K0, b ^ self.x);
        self.y = mum(b ^ K2, a.rotate_left(29) ^ self.y ^ K3);
    }

    pub(super) fn u64(&mut self, v: u64) -> &mut Self {
        self.block(v, K4);
        self
    }

    pub(super) fn u128(&mut self, v: u128) -> &mut Self {
        self.block(v as u64, (v >> 64) as u64);
        self
    }

    pub(super) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        // The length goes first, so zero padding of the tail is unambiguous.
        self.block(b.len() as u64, K5);
        let mut chunks = b.chunks_exact(16);
        for c in &mut chunks {
            self.block(le64(&c[..8]), le64(&c[8..]));
        }
        let r = chunks.remainder();
        if !r.is_empty() {
            let mut t = [0u8; 16];
            t[..r.len()].copy_from_slice(r);
            self.block(le64(&t[..8]), le64(&t[8..]));
        }
        self
    }

    /// An element as Redis sees it: integers as their decimal text.
    pub(super) fn elem(&mut self, e: &Elem<'_>) -> &mut Self {
        match e {
            Elem::Bytes(b) => self.bytes(b),
            Elem::Int(i) => {
                let mut buf = itoa_buf();
                self.bytes(fmt_i64(*i, &mut buf))
            }
        }
    }

    pub(super) fn finish(&self) -> u128 {
        let a = mum(self.x ^ K4, self.y ^ K1);
        let b = mum(self.y ^ K5, self.x.rotate_left(17) ^ K3);
        (u128::from(a) << 64) | u128::from(b)
    }
}

/// Digest of stored bytes: four independent multiply-fold lanes over 32-byte blocks, so
/// the multiplier stays busy (several GB/s on one core), then mixed into 128 bits.
pub(super) fn raw_digest(tag: u64, b: &[u8]) -> u128 {
    let seed = T_RAW ^ tag.rotate_left(8);
    let (mut s0, mut s1, mut s2, mut s3) = (seed ^ K0, seed ^ K1, seed ^ K2, seed ^ K3);
    let mut chunks = b.chunks_exact(32);
    for c in &mut chunks {
        let (w0, w1, w2, w3) = (le64(&c[..8]), le64(&c[8..16]), le64(&c[16..24]), le64(&c[24..32]));
        s0 = mum(w0 ^ K0, w1 ^ s0);
        s1 = mum(w2 ^ K1, w3 ^ s1);
        s2 = mum(w1 ^ K2, w0.rotate_left(29) ^ s2);
        s3 = mum(w3 ^ K3, w2.rotate_left(29) ^ s3);
    }
    let mut h = H { x: s0 ^ s2.rotate_left(32), y: s1 ^ s3.rotate_left(32) };
    h.u64(s0).u64(s1).u64(s2).u64(s3);
    h.bytes(chunks.remainder()).u64(b.len() as u64);
    h.finish()
}

pub(super) fn fold(d: u128) -> u64 {
    (d as u64) ^ ((d >> 64) as u64)
}

pub(super) fn key_hash(db: u64, key: &[u8]) -> u64 {
    fold(H::new(T_KEY ^ db.rotate_left(8)).bytes(key).finish())
}

/// Which of `n` partitions a key hash goes to at a split level (each level uses other bits).
pub(super) fn part_of(h: u64, level: u32, n: usize) -> usize {
    let m = mum(h ^ K2.rotate_left(level * 7), K3 ^ u64::from(level));
    ((u128::from(m) * n as u128) >> 64) as usize
}

/// Values at least this big are first compared by their stored bytes.
pub(super) const RAW_MIN: usize = 128;

/// Whether a value is digested by its stored bytes in the scan, its canonical digest being
/// computed later only if the other file's stored bytes differ. Decoding (LZF above all)
/// is most of a scan's cost, and two saves of the same data by the same Redis mostly store
/// the same bytes: same LZF output, same listpacks, zsets in score order. Not for
/// dict-encoded hashes and sets, whose order depends on the server's hash seed, nor for
/// small values, whose decoding costs less than reading them again.
pub(super) fn raw_form(v: &Value<'_>) -> bool {
    use ValueType::*;
    v.body.len() >= RAW_MIN
        && !matches!(v.vtype, SetHashtable | Hash | HashMetadata | HashMetadataPreGa | ValkeyHash2 | ModulePreGa)
}

/// A score's bits: -0 and 0 order alike in Redis, but ZSCORE, DEBUG DIGEST and the files
/// tell them apart, so a diff does too.
pub(super) fn score_bits(s: f64) -> u64 {
    s.to_bits()
}

/// Digest of a value straight from its element iterators: (value, field TTLs). The value
/// digest leaves hash field TTLs out; they get their own order-free digest (0 when no field
/// has one) so `--ttl-tolerance` and `--ignore-ttl` can apply to them.
pub(super) fn value_digest(v: &Value<'_>) -> Result<(u128, u128), FormatError> {
    let mut fttl = 0u128;
    let d = match v.logical() {
        LogicalType::String => H::new(T_STRING).elem(&v.string()?.to_elem()?).finish(),
        LogicalType::List => {
            let mut h = H::new(T_LIST);
            let mut n = 0u64;
            for e in v.list()? {
                h.elem(&e?);
                n += 1;
            }
            h.u64(n).finish()
        }
        LogicalType::Set => {
            let (mut sum, mut n) = (0u128, 0u64);
            for e in v.set()? {
                sum = sum.wrapping_add(H::new(T_SET_MEMBER).elem(&e?).finish());
                n += 1;
            }
            H::new(T_SET).u64(n).u128(sum).finish()
        }
        LogicalType::Zset => {
            let (mut sum, mut n) = (0u128, 0u64);
            for e in v.zset()? {
                let (m, s) = e?;
                sum = sum.wrapping_add(H::new(T_ZSET_MEMBER).elem(&m).u64(score_bits(s)).finish());
                n += 1;
            }
            H::new(T_ZSET).u64(n).u128(sum).finish()
        }
        LogicalType::Hash => {
            let (mut sum, mut n) = (0u128, 0u64);
            for e in v.hash()? {
                let f = e?;
                sum = sum.wrapping_add(H::new(T_HASH_FIELD).elem(&f.field).elem(&f.value).finish());
                if let Some(t) = f.expire_ms {
                    fttl = fttl.wrapping_add(H::new(T_FIELD_TTL).elem(&f.field).u64(t as u64).finish());
                }
                n += 1;
            }
            H::new(T_HASH).u64(n).u128(sum).finish()
        }
        LogicalType::Stream => {
            let s = v.stream()?;
            let mut h = H::new(T_STREAM);
            let mut n = 0u64;
            for e in s.entries() {
                let e = e?;
                h.u64(e.id.ms).u64(e.id.seq).u64(e.fields.len() as u64);
                for (f, val) in &e.fields {
                    h.elem(f).elem(val);
                }
                n += 1;
            }
            h.u64(n);
            stream_meta_digest(&mut h, &s.meta);
            h.finish()
        }
        LogicalType::Module => {
            let m = v.module()?;
            H::new(T_MODULE).u64(m.id).bytes(m.payload.bytes()).finish()
        }
    };
    Ok((d, fttl))
}

/// What of a stream's metadata counts as its value: the last ID and, per consumer group
/// (order-free), its name, last delivered ID, PEL (ID and delivery count) and consumers
/// (name and owned IDs). Times (delivery, seen, active) and counters derived from history
/// (entries_read, entries_added, max_deleted_id) do not. `stream_meta_diffs` compares the same.
pub(super) fn stream_meta_digest(h: &mut H, m: &StreamMeta<'_>) {
    h.u64(m.last_id.ms).u64(m.last_id.seq);
    let mut groups = 0u128;
    for g in &m.groups {
        let mut gh = H::new(T_GROUP);
        gh.elem(&g.name).u64(g.last_delivered.ms).u64(g.last_delivered.seq);
        let mut pel = 0u128;
        for p in &g.pending {
            pel = pel.wrapping_add(H::new(T_PEL).u64(p.id.ms).u64(p.id.seq).u64(p.delivery_count).finish());
        }
        let mut cons = 0u128;
        for c in &g.consumers {
            let mut ch = H::new(T_CONSUMER);
            ch.elem(&c.name);
            let mut ids = 0u128;
            for id in &c.pending {
                ids = ids.wrapping_add(H::new(T_PEL).u64(id.ms).u64(id.seq).finish());
            }
            cons = cons.wrapping_add(ch.u64(c.pending.len() as u64).u128(ids).finish());
        }
        gh.u64(g.pending.len() as u64).u128(pel).u64(g.consumers.len() as u64).u128(cons);
        groups = groups.wrapping_add(gh.finish());
    }
    h.u64(m.groups.len() as u64).u128(groups);
}
