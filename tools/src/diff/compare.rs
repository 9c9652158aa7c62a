//! Pass 2: per partition, A's entries in a map and B's streamed past it; keys whose
//! stored bytes differ read again and compared canonically.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fs::{self, File};
use std::hash::{BuildHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use ferrokv::format::input::Input;
use ferrokv::format::rdb::{escape_key, KeyRecord, RdbError, StreamId, StreamMeta, Value, ValueType};
use ferrokv::format::{Elem, FormatError};
use ferrokv::logical::{Field, Logical};
use ferrokv::Source;

use super::hash::{key_hash, part_of, value_digest, K5};
use super::options::Options;
use super::partition::{decode, encode, lt_of, temp_err, vt_of, EntryReader, Meta, PartWriters, HEADER};
use super::report::{Counts, Difference, EntryFields, FieldValue, KeyDiff, Shown, Side, Status, ValueDiff};
use crate::out::ToolError;

pub(super) trait KeyView {
    fn parts(&self) -> (u64, u64, &[u8]);
}

#[derive(Clone, Copy)]
pub(super) struct KeyRef<'a> {
    pub(super) h: u64,
    pub(super) db: u64,
    pub(super) key: &'a [u8],
}

/// A lookup key that owns its bytes, so B's entries can be streamed through one buffer.
pub(super) struct Probe {
    pub(super) h: u64,
    pub(super) db: u64,
    pub(super) key: Vec<u8>,
}

impl KeyView for KeyRef<'_> {
    fn parts(&self) -> (u64, u64, &[u8]) {
        (self.h, self.db, self.key)
    }
}

impl KeyView for Probe {
    fn parts(&self) -> (u64, u64, &[u8]) {
        (self.h, self.db, &self.key)
    }
}

impl Hash for dyn KeyView + '_ {
    fn hash<S: Hasher>(&self, s: &mut S) {
        s.write_u64(self.parts().0);
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, o: &Self) -> bool {
        self.parts() == o.parts()
    }
}

impl Eq for dyn KeyView + '_ {}

impl Hash for KeyRef<'_> {
    fn hash<S: Hasher>(&self, s: &mut S) {
        s.write_u64(self.h);
    }
}

impl PartialEq for KeyRef<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.parts() == o.parts()
    }
}

impl Eq for KeyRef<'_> {}

impl<'a> Borrow<dyn KeyView + 'a> for KeyRef<'a> {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

/// The key hash is already well mixed: use it as is.
#[derive(Default)]
pub(super) struct PassHasher(pub(super) u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(K5);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

#[derive(Default, Clone, Copy)]
pub(super) struct PassBuild;

impl BuildHasher for PassBuild {
    type Hasher = PassHasher;
    fn build_hasher(&self) -> PassHasher {
        PassHasher(0)
    }
}

/// A differing key kept for the report, ordered by (db, key).
pub(super) struct Pending {
    pub(super) db: u64,
    pub(super) key: Vec<u8>,
    pub(super) status: Status,
    pub(super) a: Option<Meta>,
    pub(super) b: Option<Meta>,
    pub(super) value_changed: bool,
    pub(super) ttl_changed: bool,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.db, &self.key).cmp(&(o.db, &o.key))
    }
}

pub(super) struct Part {
    pub(super) name: String,
    pub(super) a: PathBuf,
    pub(super) b: PathBuf,
    pub(super) a_bytes: u64,
    pub(super) a_entries: u64,
}

/// Reads values again after the scan. A mapped input is read with `pread` into a buffer
/// freed after use, so pages of the mapping touched again do not pile up in the resident
/// set; a buffered input (stdin) is sliced.
pub(super) struct Reread<'s> {
    pub(super) name: &'s str,
    pub(super) data: &'s [u8],
    pub(super) file: Option<File>,
}

impl<'s> Reread<'s> {
    pub(super) fn new(name: &'s str, path: &Path, src: &'s Source) -> Self {
        let file = match src {
            Source::Mapped(..) => File::open(path).ok(),
            Source::Buffered(_) => None,
        };
        Reread { name, data: src, file }
    }

    /// A key's value bytes, and the value decoded from them with `f`.
    pub(super) fn with_value<T>(
        &self,
        db: u64,
        key: &[u8],
        m: &Meta,
        f: impl FnOnce(&KeyRecord<'_>) -> Result<T, FormatError>,
    ) -> Result<T, ToolError> {
        let bad = |why: String| {
            ToolError::Usage(format!(
                "{}: db {db} key '{}': cannot read the value again: {why}",
                self.name,
                escape_key(key)
            ))
        };
        let vtype = vt_of(m.vtype).ok_or_else(|| bad("unknown value type".into()))?;
        let start = usize::try_from(m.body_off).map_err(|e| bad(e.to_string()))?;
        let len = usize::try_from(m.body_len).map_err(|e| bad(e.to_string()))?;
        let end = start.checked_add(len).filter(|&e| e <= self.data.len()).ok_or_else(|| bad("past the end".into()))?;
        let owned;
        let body: &[u8] = match &self.file {
            #[cfg(unix)]
            Some(file) => {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; len];
                file.read_exact_at(&mut buf, m.body_off).map_err(|e| bad(e.to_string()))?;
                owned = buf;
                &owned
            }
            _ => &self.data[start..end],
        };
        let rec = KeyRecord {
            offset: m.rec_off as usize,
            db,
            key: Elem::borrowed(key),
            expire_ms: m.expire,
            idle: None,
            freq: None,
            meta: None,
            value: Value { vtype, body: Input::at(body, start) },
            end,
        };
        f(&rec).map_err(|e| ToolError::Usage(format!("{}: {}", self.name, RdbError::in_key(e, &rec))))
    }

    /// The canonical value (held whole in memory).
    pub(super) fn logical(&self, db: u64, key: &[u8], m: &Meta) -> Result<Logical, ToolError> {
        self.with_value(db, key, m, Logical::from_record)
    }

    /// The canonical (value, field TTL) digests of an entry scanned in raw form.
    pub(super) fn canonical(&self, db: u64, key: &[u8], m: &Meta) -> Result<(u128, u128), ToolError> {
        if !m.raw {
            return Ok((m.digest, m.fttl));
        }
        self.with_value(db, key, m, |k| value_digest(&k.value))
    }
}

pub(super) struct Compare<'s> {
    pub(super) a: Reread<'s>,
    pub(super) b: Reread<'s>,
    pub(super) opts: &'s Options,
    pub(super) dir: &'s Path,
    pub(super) counts: Counts,
    /// Max-heap of the smallest `max_keys` differing keys seen so far.
    pub(super) listed: BinaryHeap<Pending>,
    pub(super) splits: usize,
}

impl Compare<'_> {
    pub(super) fn process(&mut self, part: Part, level: u32) -> Result<(), ToolError> {
        let budget = self.opts.partition_bytes.max(1);
        let need = part.a_bytes + part.a_entries * MAP_COST;
        if need > budget && level < MAX_LEVEL && part.a_entries > 1 {
            let n = (need / budget + 1).clamp(2, MAX_FANOUT as u64) as usize;
            self.splits += 1;
            for sub in self.split(&part, level + 1, n)? {
                self.process(sub, level + 1)?;
            }
            return Ok(());
        }
        self.compare(&part)?;
        let _ = fs::remove_file(&part.a);
        let _ = fs::remove_file(&part.b);
        Ok(())
    }

    /// Spread a partition's entries over `n` smaller ones using other hash bits.
    pub(super) fn split(&mut self, part: &Part, level: u32, n: usize) -> Result<Vec<Part>, ToolError> {
        let mut outs = Vec::new();
        for (side, path) in [("a", &part.a), ("b", &part.b)] {
            let mut w = PartWriters::create(self.dir, &part.name, side, n)?;
            let mut r = EntryReader::open(path)?;
            let mut buf = Vec::new();
            while let Some((db, m)) = r.next()? {
                buf.clear();
                encode(&mut buf, db, &r.key, &m);
                w.write(part_of(key_hash(db, &r.key), level, n), &buf)?;
            }
            drop(r);
            let _ = fs::remove_file(path);
            outs.push(w.finish()?);
        }
        let bs = outs.pop().unwrap_or_default();
        let as_ = outs.pop().unwrap_or_default();
        Ok(as_
            .into_iter()
            .zip(bs)
            .enumerate()
            .map(|(i, (pa, pb))| Part {
                name: format!("{}-{i}", part.name),
                a: pa.path,
                b: pb.path,
                a_bytes: pa.bytes,
                a_entries: pa.entries,
            })
            .collect())
    }

    pub(super) fn compare(&mut self, part: &Part) -> Result<(), ToolError> {
        let abuf = fs::read(&part.a).map_err(|e| temp_err(&part.a, e))?;
        let mut map: HashMap<KeyRef<'_>, usize, PassBuild> =
            HashMap::with_capacity_and_hasher(part.a_entries as usize, PassBuild);
        let mut pos = 0;
        while pos + HEADER <= abuf.len() {
            let (db, _, klen) = decode(&abuf[pos..]);
            let key = &abuf[pos + HEADER..pos + HEADER + klen];
            if map.insert(KeyRef { h: key_hash(db, key), db, key }, pos).is_some() {
                return Err(ToolError::Usage(format!(
                    "{}: db {db} key '{}' appears twice (Redis refuses to load such a file)",
                    self.a.name,
                    escape_key(key)
                )));
            }
            pos += HEADER + klen;
        }
        let mut r = EntryReader::open(&part.b)?;
        let mut probe = Probe { h: 0, db: 0, key: Vec::new() };
        while let Some((db, mb)) = r.next()? {
            std::mem::swap(&mut probe.key, &mut r.key);
            probe.h = key_hash(db, &probe.key);
            probe.db = db;
            match map.remove(&probe as &dyn KeyView) {
                None => {
                    self.counts.only_in_b += 1;
                    self.note(db, &probe.key, Status::OnlyInB, None, Some(mb), false, false);
                }
                Some(p) => {
                    let (_, ma, _) = decode(&abuf[p..]);
                    self.classify(db, &probe.key, ma, mb)?;
                }
            }
            std::mem::swap(&mut probe.key, &mut r.key);
        }
        for (k, p) in map {
            let (_, ma, _) = decode(&abuf[p..]);
            self.counts.only_in_a += 1;
            self.note(k.db, k.key, Status::OnlyInA, Some(ma), None, false, false);
        }
        Ok(())
    }

    pub(super) fn classify(&mut self, db: u64, key: &[u8], a: Meta, b: Meta) -> Result<(), ToolError> {
        if a.ltype != b.ltype {
            self.counts.type_changed += 1;
            self.note(db, key, Status::TypeChanged, Some(a), Some(b), false, false);
            return Ok(());
        }
        let opts = self.opts;
        // The same stored bytes are the same value; otherwise compare canonical digests.
        let same_bytes = a.raw && b.raw && a.vtype == b.vtype && a.digest == b.digest;
        let mut value_changed = false;
        if !same_bytes {
            let (da, fa) = self.a.canonical(db, key, &a)?;
            let (db_, fb) = self.b.canonical(db, key, &b)?;
            value_changed = da != db_;
            if !value_changed && fa != fb && !opts.ignore_ttl {
                value_changed = opts.ttl_tolerance_ms == 0 || self.field_ttls_differ(db, key, &a, &b)?;
            }
        }
        let ttl_changed = !opts.ignore_ttl && !opts.ttl_eq(a.expire, b.expire);
        if !value_changed && !ttl_changed {
            self.counts.keys_same += 1;
            return Ok(());
        }
        self.counts.value_changed += u64::from(value_changed);
        self.counts.ttl_changed += u64::from(ttl_changed);
        self.note(db, key, Status::Changed, Some(a), Some(b), value_changed, ttl_changed);
        Ok(())
    }

    /// Equal hashes whose field TTLs differ: within the tolerance, or not?
    pub(super) fn field_ttls_differ(&self, db: u64, key: &[u8], a: &Meta, b: &Meta) -> Result<bool, ToolError> {
        let la = self.a.logical(db, key, a)?;
        let lb = self.b.logical(db, key, b)?;
        Ok(value_diff(&la, &lb, self.opts).total > 0)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn note(
        &mut self,
        db: u64,
        key: &[u8],
        status: Status,
        a: Option<Meta>,
        b: Option<Meta>,
        value_changed: bool,
        ttl_changed: bool,
    ) {
        self.counts.keys_differ += 1;
        let max = self.opts.max_keys;
        if max == 0 {
            return;
        }
        if self.listed.len() >= max {
            match self.listed.peek() {
                Some(top) if (db, key) < (top.db, top.key.as_slice()) => {
                    self.listed.pop();
                }
                _ => return,
            }
        }
        self.listed.push(Pending { db, key: key.to_vec(), status, a, b, value_changed, ttl_changed });
    }

    // -----------------------------------------------------------------------------------
    // Pass 3: details of the listed keys
    // -----------------------------------------------------------------------------------

    pub(super) fn detail(&self, p: Pending) -> Result<KeyDiff, ToolError> {
        let side = |m: &Option<Meta>| {
            m.map(|m| Side {
                ltype: lt_of(m.ltype),
                encoding: vt_of(m.vtype).map_or("unknown", ValueType::encoding),
                expire_ms: m.expire,
                offset: m.rec_off,
            })
        };
        let value = match (&p.a, &p.b) {
            (Some(a), Some(b)) if p.value_changed => {
                let la = self.a.logical(p.db, &p.key, a)?;
                let lb = self.b.logical(p.db, &p.key, b)?;
                Some(value_diff(&la, &lb, self.opts))
            }
            _ => None,
        };
        Ok(KeyDiff {
            db: p.db,
            a: side(&p.a),
            b: side(&p.b),
            key: p.key,
            status: p.status,
            value_changed: p.value_changed,
            ttl_changed: p.ttl_changed,
            value,
        })
    }
}

/// Collects differences, keeping the first `max`.
pub(super) struct Collect {
    pub(super) max: usize,
    pub(super) total: u64,
    pub(super) shown: Vec<Difference>,
}

impl Collect {
    pub(super) fn add(&mut self, d: impl FnOnce() -> Difference) {
        self.total += 1;
        if self.shown.len() < self.max {
            self.shown.push(d());
        }
    }
}

/// Walk two sequences sorted by `cmp` together: `f(Some(a), Some(b))` for equal items,
/// one side `None` for items present on one side only.
pub(super) fn merge<'x, T>(
    a: &'x [T],
    b: &'x [T],
    cmp: impl Fn(&T, &T) -> Ordering,
    mut f: impl FnMut(Option<&'x T>, Option<&'x T>),
) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let ord = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => cmp(x, y),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match ord {
            Ordering::Equal => {
                f(a.get(i), b.get(j));
                i += 1;
                j += 1;
            }
            Ordering::Less => {
                f(a.get(i), None);
                i += 1;
            }
            Ordering::Greater => {
                f(None, b.get(j));
                j += 1;
            }
        }
    }
}

/// Name the differences between two values of the same type, under the same rules as the
/// digests (`value_digest`, `stream_meta_digest`) plus the TTL options for hash fields.
pub fn value_diff(a: &Logical, b: &Logical, opts: &Options) -> ValueDiff {
    let mut c = Collect { max: opts.max_details, total: 0, shown: Vec::new() };
    let (mut len_a, mut len_b) = (a.len() as u64, b.len() as u64);
    let shown = |v: &Vec<u8>| Shown::of(v);
    match (a, b) {
        (Logical::String(x), Logical::String(y)) => {
            len_a = x.len() as u64;
            len_b = y.len() as u64;
            if x != y {
                let first = x.iter().zip(y.iter()).position(|(p, q)| p != q).unwrap_or(x.len().min(y.len()));
                let start = first.saturating_sub(16);
                let window = |v: &[u8]| v[start.min(v.len())..(start + 64).min(v.len())].to_vec();
                c.add(|| Difference::Bytes { offset: start as u64, a: window(x), b: window(y) });
            }
        }
        (Logical::List(x), Logical::List(y)) => {
            for i in 0..x.len().max(y.len()) {
                let (p, q) = (x.get(i), y.get(i));
                if p != q {
                    c.add(|| Difference::Index { index: i as u64, a: p.map(shown), b: q.map(shown) });
                }
            }
        }
        (Logical::Set(x), Logical::Set(y)) => merge(
            x,
            y,
            |p, q| p.cmp(q),
            |p, q| match (p, q) {
                (Some(m), None) => c.add(|| Difference::Member { member: Shown::of(m), in_a: true }),
                (None, Some(m)) => c.add(|| Difference::Member { member: Shown::of(m), in_a: false }),
                _ => {}
            },
        ),
        (Logical::Zset(x), Logical::Zset(y)) => {
            let (x, y) = (zset_by_member(x), zset_by_member(y));
            merge(
                &x,
                &y,
                |p, q| p.0.cmp(q.0),
                |p, q| {
                    // Bit equality: a -0 score is not a 0 one (ZSCORE, DEBUG DIGEST).
                    if p.map(|e| e.1.to_bits()) != q.map(|e| e.1.to_bits()) {
                        let m = p.or(q).map(|e| Shown::of(e.0)).unwrap_or(Shown { head: Vec::new(), len: 0 });
                        c.add(|| Difference::Score { member: m, a: p.map(|e| e.1), b: q.map(|e| e.1) });
                    }
                },
            );
        }
        (Logical::Hash(x), Logical::Hash(y)) => {
            let fv = |f: &Field| FieldValue { value: Shown::of(&f.value), expire_ms: f.expire_ms };
            merge(
                x,
                y,
                |p, q| p.field.cmp(&q.field),
                |p, q| {
                    let differs = match (p, q) {
                        (Some(f), Some(g)) => {
                            f.value != g.value || (!opts.ignore_ttl && !opts.ttl_eq(f.expire_ms, g.expire_ms))
                        }
                        _ => true,
                    };
                    if differs {
                        let field = p.or(q).map(|f| Shown::of(&f.field)).unwrap_or(Shown { head: Vec::new(), len: 0 });
                        c.add(|| Difference::Field { field, a: p.map(fv), b: q.map(fv) });
                    }
                },
            );
        }
        (Logical::Stream(x), Logical::Stream(y)) => {
            stream_meta_diffs(&x.meta, &y.meta, &mut c);
            merge(
                &x.entries,
                &y.entries,
                |p, q| p.0.cmp(&q.0),
                |p, q| {
                    if p != q {
                        let id = p.or(q).map(|e| e.0).unwrap_or_default();
                        c.add(|| Difference::Entry {
                            id,
                            a: p.map(|e| entry_fields(&e.1)),
                            b: q.map(|e| entry_fields(&e.1)),
                        });
                    }
                },
            );
        }
        (Logical::Module(x), Logical::Module(y)) => {
            if x != y {
                let show = |m: &ferrokv::logical::ModuleBlob| format!("{} ({} payload bytes)", m.name, m.payload.len());
                c.add(|| Difference::Meta { what: "module value".into(), a: show(x), b: show(y) });
            }
        }
        _ => c.add(|| Difference::Meta {
            what: "type".into(),
            a: a.logical_type().name().into(),
            b: b.logical_type().name().into(),
        }),
    }
    ValueDiff { len_a, len_b, total: c.total, shown: c.shown }
}

pub(super) fn entry_fields(fields: &[(Vec<u8>, Vec<u8>)]) -> EntryFields {
    fields.iter().map(|(f, v)| (Shown::of(f), Shown::of(v))).collect()
}

pub(super) fn zset_by_member(v: &[(Vec<u8>, f64)]) -> Vec<(&[u8], f64)> {
    let mut s: Vec<(&[u8], f64)> = v.iter().map(|(m, s)| (m.as_slice(), *s)).collect();
    s.sort_unstable_by(|p, q| p.0.cmp(q.0));
    s
}

/// Metadata differences of two streams, as `stream_meta_digest` sees metadata.
pub(super) fn stream_meta_diffs(a: &StreamMeta<'_>, b: &StreamMeta<'_>, c: &mut Collect) {
    if a.last_id != b.last_id {
        c.add(|| Difference::Meta { what: "last_id".into(), a: a.last_id.to_string(), b: b.last_id.to_string() });
    }
    let groups = |m: &StreamMeta<'_>| -> BTreeMap<Vec<u8>, usize> {
        m.groups.iter().enumerate().map(|(i, g)| (g.name.to_bytes().into_owned(), i)).collect()
    };
    let (ga, gb) = (groups(a), groups(b));
    let mut names: Vec<&Vec<u8>> = ga.keys().chain(gb.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let label = format!("group '{}'", escape_key(name));
        let (x, y) = match (ga.get(name), gb.get(name)) {
            (Some(&i), Some(&j)) => (&a.groups[i], &b.groups[j]),
            (p, _) => {
                let (pa, pb) = if p.is_some() { ("present", "absent") } else { ("absent", "present") };
                c.add(|| Difference::Meta { what: label, a: pa.into(), b: pb.into() });
                continue;
            }
        };
        if x.last_delivered != y.last_delivered {
            c.add(|| Difference::Meta {
                what: format!("{label} last_delivered_id"),
                a: x.last_delivered.to_string(),
                b: y.last_delivered.to_string(),
            });
        }
        let pel = |g: &ferrokv::format::rdb::Group<'_>| {
            let mut v: Vec<(StreamId, u64)> = g.pending.iter().map(|p| (p.id, p.delivery_count)).collect();
            v.sort();
            v
        };
        let (pa, pb) = (pel(x), pel(y));
        merge(
            &pa,
            &pb,
            |p, q| p.0.cmp(&q.0),
            |p, q| {
                if p != q {
                    let show = |e: Option<&(StreamId, u64)>| {
                        e.map_or("absent".to_string(), |(id, n)| format!("{id} delivered {n}x"))
                    };
                    let id = p.or(q).map(|e| e.0).unwrap_or_default();
                    c.add(|| Difference::Meta { what: format!("{label} pending {id}"), a: show(p), b: show(q) });
                }
            },
        );
        let cons = |g: &ferrokv::format::rdb::Group<'_>| -> BTreeMap<Vec<u8>, Vec<StreamId>> {
            g.consumers
                .iter()
                .map(|c| {
                    let mut ids = c.pending.clone();
                    ids.sort();
                    (c.name.to_bytes().into_owned(), ids)
                })
                .collect()
        };
        let (ca, cb) = (cons(x), cons(y));
        let mut cnames: Vec<&Vec<u8>> = ca.keys().chain(cb.keys()).collect();
        cnames.sort();
        cnames.dedup();
        for cn in cnames {
            let (p, q) = (ca.get(cn), cb.get(cn));
            if p != q {
                let show =
                    |e: Option<&Vec<StreamId>>| e.map_or("absent".to_string(), |ids| format!("{} pending", ids.len()));
                c.add(|| Difference::Meta {
                    what: format!("{label} consumer '{}'", escape_key(cn)),
                    a: show(p),
                    b: show(q),
                });
            }
        }
    }
}

/// At most this many partition files are open at once.
pub(super) const MAX_FANOUT: usize = 256;
/// Estimated hash-map bytes per entry of a partition (slot of 40 bytes, load factor, control).
pub(super) const MAP_COST: u64 = 96;
/// Splitting a partition more often than this means the hashes cannot separate its keys.
pub(super) const MAX_LEVEL: u32 = 6;
