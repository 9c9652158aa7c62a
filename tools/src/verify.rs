//! `rdbtool verify` and `rdbtool info`: walk a file and gather what it holds.
//!
//! verify decodes every element of every key and checks every internal blob (lengths,
//! back-lengths, terminators, counts, intset order, duplicates in compact encodings, stream
//! PEL consistency) plus the CRC. info only walks the record structure.

use std::collections::BTreeMap;

use ferrokv::format::rdb::{Checksum, KeyRecord, LogicalType, RdbError, RdbReader, Record, ValueType};
use ferrokv::format::{Elem, FormatError};

use std::cell::{Cell, RefCell};

use crate::out::ToolError;
use crate::pipeline::{Batch, Pipeline};
use crate::progress::Progress;

/// What the walk found in one database.
#[derive(Debug, Default, Clone)]
pub struct DbStats {
    pub keys: u64,
    pub types: BTreeMap<&'static str, u64>,
    pub encodings: BTreeMap<&'static str, u64>,
    pub with_expiry: u64,
    pub already_expired: u64,
    pub resize_hint: Option<(u64, u64)>,
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub magic: String,
    pub version: u32,
    pub size: u64,
    pub aux: Vec<(String, String)>,
    pub dbs: BTreeMap<u64, DbStats>,
    pub functions: u64,
    pub module_aux: Vec<String>,
    pub checksum: Option<Checksum>,
    pub eof_offset: Option<usize>,
    pub trailing_bytes: u64,
    pub with_idle: u64,
    pub with_freq: u64,
    pub elements: u64,
    pub warnings: Vec<String>,
    pub warnings_total: u64,
}

impl Report {
    pub fn keys(&self) -> u64 {
        self.dbs.values().map(|d| d.keys).sum()
    }

    fn warn(&mut self, w: String) {
        self.warnings_total += 1;
        if self.warnings.len() < 20 {
            self.warnings.push(w);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Structure only: values are skipped, not decoded.
    Records,
    /// Every element decoded and checked.
    Deep,
}

/// Walk `data` on every core. On error the partial report comes back with the error.
pub fn walk(data: &[u8], depth: Depth, now_ms: i64) -> Result<Report, (Box<Report>, RdbError)> {
    walk_with(data, depth, now_ms, &Pipeline::default(), &|_| {})
}

/// Deep-check results of one batch: (elements, warnings) or the first error.
struct Checked_ {
    elements: u64,
    warnings: Vec<String>,
}

fn check_key(k: &KeyRecord<'_>) -> Result<Checked, RdbError> {
    check_value(k).map_err(|e| RdbError::in_key(e, k))
}

fn key_warning(k: &KeyRecord<'_>, w: &str) -> String {
    format!(
        "offset {}: db {} key '{}' (type {}): {w}",
        k.offset,
        k.db,
        ferrokv::format::rdb::escape_key(&k.key.to_bytes()),
        k.value.vtype.name(),
    )
}

/// `release(offset)` is told when everything before `offset` has been checked.
pub fn walk_with(
    data: &[u8],
    depth: Depth,
    now_ms: i64,
    pipeline: &Pipeline,
    release: &dyn Fn(usize),
) -> Result<Report, (Box<Report>, RdbError)> {
    let rep = RefCell::new(Report { size: data.len() as u64, ..Report::default() });
    let reader = match RdbReader::new(data) {
        Ok(r) => r,
        Err(e) => return Err((Box::new(rep.into_inner()), e)),
    };
    {
        let d = reader.dialect();
        let mut r = rep.borrow_mut();
        r.magic = d.magic();
        r.version = d.version;
    }
    let mut progress = Progress::new(data.len() as u64);
    let current_db = Cell::new(0u64);
    // Structure and counts on this thread, as records are read.
    let records = reader.inspect(|rec| {
        let Ok(rec) = rec else { return };
        let mut rep = rep.borrow_mut();
        match rec {
            Record::Aux { key, value } => rep.aux.push((lossy(key), lossy(value))),
            Record::SelectDb { db } => current_db.set(*db),
            Record::ResizeDb { db_size, expires_size } => {
                rep.dbs.entry(current_db.get()).or_default().resize_hint = Some((*db_size, *expires_size));
            }
            Record::Function { .. } | Record::FunctionPreGa { .. } => rep.functions += 1,
            Record::ModuleAux(m) => rep.module_aux.push(m.name.clone()),
            Record::SlotInfo { .. } | Record::SlotImport { .. } => {}
            Record::Key(k) => {
                let st = rep.dbs.entry(k.db).or_default();
                st.keys += 1;
                *st.types.entry(k.value.logical().name()).or_default() += 1;
                *st.encodings.entry(k.value.vtype.name()).or_default() += 1;
                if let Some(ms) = k.expire_ms {
                    st.with_expiry += 1;
                    if ms <= now_ms {
                        st.already_expired += 1;
                    }
                }
                rep.with_idle += u64::from(k.idle.is_some());
                rep.with_freq += u64::from(k.freq.is_some());
            }
            Record::Eof { offset, end, checksum } => {
                rep.checksum = Some(*checksum);
                rep.eof_offset = Some(*offset);
                rep.trailing_bytes = (data.len() - end) as u64;
            }
        }
    });
    let result = if depth == Depth::Records {
        let mut res = Ok(());
        for r in records {
            match r {
                Ok(Record::Key(k)) => release(k.end),
                Ok(_) => {}
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        res
    } else {
        let work = |batch: &Batch<'_>| -> Result<Checked_, ToolError> {
            let mut c = Checked_ { elements: 0, warnings: Vec::new() };
            for rec in &batch.records {
                if let Record::Key(k) = rec {
                    let r = check_key(k)?;
                    c.elements += r.elements;
                    if let Some(w) = r.warning {
                        c.warnings.push(key_warning(k, &w));
                    }
                }
            }
            Ok(c)
        };
        let sink = |c: Checked_| -> Result<(), ToolError> {
            let mut r = rep.borrow_mut();
            r.elements += c.elements;
            for w in c.warnings {
                r.warn(w);
            }
            Ok(())
        };
        let inline = |rec: &Record<'_>, _: Option<u64>| -> Result<(), ToolError> {
            if let Record::Key(k) = rec {
                let c = check_key(k)?;
                let mut r = rep.borrow_mut();
                r.elements += c.elements;
                if let Some(w) = c.warning {
                    r.warn(key_warning(k, &w));
                }
            }
            Ok(())
        };
        pipeline.run(records, work, sink, inline, release, |p| progress.set(p as u64)).map_err(|e| match e {
            ToolError::Data(e) => e,
            other => RdbError::at(0, format!("{other:?}")),
        })
    };
    progress.finish();
    let rep = rep.into_inner();
    match result {
        Ok(()) => Ok(rep),
        Err(e) => Err((Box::new(rep), e)),
    }
}

fn lossy(e: &Elem<'_>) -> String {
    String::from_utf8_lossy(&e.to_bytes()).into_owned()
}

/// Fast 64-bit hash for duplicate detection inside one compact container.
fn hash_bytes(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ (b.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h ^ v).wrapping_mul(0x0000_0100_0000_01B3).rotate_left(29);
    }
    for &c in chunks.remainder() {
        h = (h ^ u64::from(c)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

fn elem_hash(e: &Elem<'_>) -> u64 {
    match e {
        Elem::Bytes(b) => hash_bytes(b),
        Elem::Int(i) => {
            let mut buf = ferrokv::format::blob::itoa_buf();
            hash_bytes(ferrokv::format::blob::fmt_i64(*i, &mut buf))
        }
    }
}

/// Duplicate check over hashes; an equal hash is confirmed by comparing bytes.
struct DupCheck {
    on: bool,
    hashes: Vec<u64>,
}

impl DupCheck {
    fn new(on: bool) -> Self {
        DupCheck { on, hashes: Vec::new() }
    }
    fn add(&mut self, e: &Elem<'_>) {
        if self.on {
            self.hashes.push(elem_hash(e));
        }
    }
    fn suspicious(&mut self) -> bool {
        if !self.on || self.hashes.len() < 2 {
            return false;
        }
        self.hashes.sort_unstable();
        self.hashes.windows(2).any(|w| w[0] == w[1])
    }
}

fn find_dup<'a>(items: impl Iterator<Item = Result<Elem<'a>, FormatError>>) -> Result<Option<Vec<u8>>, FormatError> {
    let mut seen = std::collections::HashSet::new();
    for e in items {
        let b = e?.to_bytes().into_owned();
        if !seen.insert(b.clone()) {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

fn dup_error(kind: &str, b: &[u8]) -> FormatError {
    FormatError::new(0, format!("duplicate {kind} '{}'", ferrokv::format::rdb::escape_key(b)))
}

/// What a deep check of one value found.
pub struct Checked {
    pub elements: u64,
    /// Something Redis accepts but an operator should know about.
    pub warning: Option<String>,
}

/// Decode every element of a value and check it.
pub fn check_value(k: &KeyRecord<'_>) -> Result<Checked, FormatError> {
    use ValueType::*;
    let v = &k.value;
    let compact =
        !matches!(v.vtype, SetHashtable | Hash | HashMetadata | HashMetadataPreGa | ValkeyHash2 | ZsetText | Zset2);
    let mut n = 0u64;
    match v.logical() {
        LogicalType::String => {
            v.string()?.validate()?;
            return Ok(Checked { elements: 1, warning: None });
        }
        LogicalType::List => {
            for e in v.list()? {
                e?;
                n += 1;
            }
        }
        LogicalType::Set => {
            let mut d = DupCheck::new(compact && v.vtype != SetIntset);
            for e in v.set()? {
                d.add(&e?);
                n += 1;
            }
            if d.suspicious() {
                if let Some(b) = find_dup(v.set()?)? {
                    return Err(dup_error("set member", &b));
                }
            }
        }
        LogicalType::Zset => {
            let mut d = DupCheck::new(compact);
            for e in v.zset()? {
                let (m, s) = e?;
                if s.is_nan() {
                    return Err(FormatError::new(0, "zset score is NaN"));
                }
                d.add(&m);
                n += 1;
            }
            if d.suspicious() {
                if let Some(b) = find_dup(v.zset()?.map(|r| r.map(|(m, _)| m)))? {
                    return Err(dup_error("zset member", &b));
                }
            }
        }
        LogicalType::Hash => {
            let mut d = DupCheck::new(compact);
            for e in v.hash()? {
                let h = e?;
                if let Some(t) = h.expire_ms {
                    if !(0..=0xFFFF_FFFF_FFFF).contains(&t) && v.vtype != ValkeyHash2 {
                        return Err(FormatError::new(0, format!("hash field TTL {t} is out of range")));
                    }
                }
                d.add(&h.field);
                n += 1;
            }
            if d.suspicious() {
                if let Some(b) = find_dup(v.hash()?.map(|r| r.map(|h| h.field)))? {
                    return Err(dup_error("hash field", &b));
                }
            }
        }
        LogicalType::Stream => {
            let s = v.stream()?;
            let mut live = 0u64;
            let mut prev = None;
            for e in s.entries() {
                let e = e?;
                if prev.is_some_and(|p| e.id <= p) {
                    return Err(FormatError::new(0, format!("stream entry IDs not increasing at {}", e.id)));
                }
                prev = Some(e.id);
                live += 1;
            }
            let mut warning = None;
            if live != s.meta.length {
                // Redis 5 could save a stale length after XTRIM; Redis loads such files.
                warning = Some(format!(
                    "stream length says {} but {live} live entries were read (Redis loads it)",
                    s.meta.length
                ));
            }
            for g in &s.meta.groups {
                let pel: std::collections::HashSet<_> = g.pending.iter().map(|p| p.id).collect();
                for c in &g.consumers {
                    for id in &c.pending {
                        if !pel.contains(id) {
                            return Err(FormatError::new(
                                0,
                                format!(
                                    "consumer '{}' in group '{}' owns {id}, which is not in the group PEL",
                                    lossy(&c.name),
                                    lossy(&g.name)
                                ),
                            ));
                        }
                    }
                }
            }
            return Ok(Checked { elements: live, warning });
        }
        LogicalType::Module => {
            v.module()?;
            return Ok(Checked { elements: 1, warning: None });
        }
    }
    let warning = (n == 0).then(|| format!("empty {} (Redis skips it on load)", v.logical()));
    Ok(Checked { elements: n, warning })
}
