//! `rdbtool diff A B`: compare two datasets by value, whatever their encodings.
//!
//! Two keys are equal when their logical values, types and absolute expiries are equal
//! (`ferrokv::logical`): a listpack hash equals a hashtable hash with the same fields, an
//! int-encoded "12" equals a raw "12". Memory stays bounded for files of any size:
//!
//! 1. **Scan.** Each file is streamed once through the decode [`Pipeline`] (every core).
//!    For each key a fixed-size entry (db, key, logical type, expiry, a 128-bit digest of the
//!    value, where the value sits in the file) goes to one of P temporary partition files,
//!    chosen by a hash of (db, key). Digests are computed over the element iterators without
//!    materialising values: order-free sums of per-element hashes for sets, hashes and
//!    zsets, a running hash for lists and streams. Big values are first digested by their
//!    stored bytes (`raw_form`), which skips decoding (LZF above all) for the common case of
//!    two saves by the same server.
//! 2. **Compare.** Per partition, A's entries are loaded into a hash map and B's entries are
//!    streamed past it. Keys whose stored bytes differ are read again (`pread`) and digested
//!    canonically. A partition whose map would exceed the budget
//!    ([`Options::partition_bytes`]) is first split again by other bits of the hash.
//! 3. **Detail.** The first [`Options::max_keys`] differing keys in (db, key) order are
//!    kept; for those whose values differ, both values are read again from the mapped files
//!    and materialised with [`Logical::from_record`] to name the elements that differ.
//!
//! The output is the same whatever the partition count or the thread count.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fs::{self, File};
use std::hash::{BuildHasher, Hash, Hasher};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use ferrokv::format::blob::{fmt_i64, itoa_buf};
use ferrokv::format::input::Input;
use ferrokv::format::rdb::{
    escape_key, KeyRecord, LogicalType, RdbError, RdbReader, Record, StreamId, StreamMeta, Value, ValueType,
};
use ferrokv::format::{Elem, FormatError};
use ferrokv::logical::{Field, Logical};
use ferrokv::Source;

use crate::jsonw;
use crate::out::ToolError;
use crate::pipeline::{Batch, Pipeline};
use crate::progress::Progress;

// ---------------------------------------------------------------------------------------
// Arguments and options
// ---------------------------------------------------------------------------------------

/// Output format of `rdbtool diff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    /// One line per differing key, element lines under it, a summary line.
    Human,
    /// One JSON document (docs/diff.md).
    Json,
}

/// Arguments of `rdbtool diff`.
#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// First dataset (A): an RDB file, an AOF (file, manifest or directory, replayed), or a jsonl dump.
    pub a: PathBuf,
    /// Second dataset (B), as A.
    pub b: PathBuf,
    /// Only database N.
    #[arg(long, value_name = "N")]
    pub db: Option<u64>,
    /// Only keys matching this Redis glob pattern.
    #[arg(long, value_name = "GLOB")]
    pub key: Option<String>,
    /// Do not compare key TTLs or hash field TTLs.
    #[arg(long)]
    pub ignore_ttl: bool,
    /// Key and hash field TTLs that differ by at most this many milliseconds are equal.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub ttl_tolerance: u64,
    /// Differing elements (fields, members, entries) shown per key.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub max_details: usize,
    /// Differing keys shown, first in (db, key) order; the rest are only counted.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_keys: usize,
    /// human (default) or json.
    #[arg(long, value_enum, default_value = "human")]
    pub format: DiffFormat,
    /// Print nothing; the exit code says same (0) or different (1).
    #[arg(long, short)]
    pub quiet: bool,
    /// Memory budget of one partition's index in bytes (testing and tuning).
    #[arg(long, value_name = "BYTES", hide = true)]
    pub partition_bytes: Option<u64>,
}

/// What to compare and how much to show.
pub struct Options {
    pub db: Option<u64>,
    pub key: Option<Vec<u8>>,
    pub ignore_ttl: bool,
    pub ttl_tolerance_ms: u64,
    pub max_details: usize,
    pub max_keys: usize,
    /// Memory for one partition's in-memory index: its entries plus the hash map over them.
    /// Peak memory is about this plus the pipeline's in-flight batches.
    pub partition_bytes: u64,
    pub pipeline: Pipeline,
    /// Where the partition files go; default `std::env::temp_dir()` (honours TMPDIR).
    pub temp_dir: Option<PathBuf>,
}

/// Default budget of one partition's index.
pub const DEFAULT_PARTITION_BYTES: u64 = 64 << 20;

impl Default for Options {
    fn default() -> Self {
        Options {
            db: None,
            key: None,
            ignore_ttl: false,
            ttl_tolerance_ms: 0,
            max_details: 10,
            max_keys: 100,
            partition_bytes: DEFAULT_PARTITION_BYTES,
            pipeline: Pipeline::default(),
            temp_dir: None,
        }
    }
}

impl Options {
    fn wants(&self, k: &KeyRecord<'_>) -> bool {
        if self.db.is_some_and(|d| d != k.db) {
            return false;
        }
        match &self.key {
            // `*` alone takes every key, the empty one too (as Redis's KEYS).
            Some(p) => p.as_slice() == b"*" || ferrokv::glob::matches(p, &k.key.to_bytes()),
            None => true,
        }
    }

    fn filtered(&self) -> bool {
        self.db.is_some() || self.key.is_some()
    }

    fn ttl_eq(&self, a: Option<i64>, b: Option<i64>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(x), Some(y)) => x.abs_diff(y) <= self.ttl_tolerance_ms,
            _ => false,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------

/// Key counts (after `--db` / `--key`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub keys_a: u64,
    pub keys_b: u64,
    /// Keys in both files with equal type, value and TTL.
    pub keys_same: u64,
    /// Keys reported: only in A + only in B + type changed + changed (value and/or TTL).
    pub keys_differ: u64,
    pub only_in_a: u64,
    pub only_in_b: u64,
    pub type_changed: u64,
    /// Same type, different value (a key can count here and in `ttl_changed`).
    pub value_changed: u64,
    pub ttl_changed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    OnlyInA,
    OnlyInB,
    TypeChanged,
    /// Same type; the value, the TTL or both differ.
    Changed,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::OnlyInA => "only_in_a",
            Status::OnlyInB => "only_in_b",
            Status::TypeChanged => "type_changed",
            Status::Changed => "changed",
        }
    }
}

/// One side of a reported key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    pub ltype: LogicalType,
    /// How the file stores it (`ValueType::encoding`).
    pub encoding: &'static str,
    pub expire_ms: Option<i64>,
    /// Offset of the key's record in its file.
    pub offset: u64,
}

/// Bytes shown in a difference: whole up to [`SHOWN_MAX`] bytes, else the first
/// `SHOWN_MAX` bytes and the full length, so a report stays small whatever the values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub head: Vec<u8>,
    pub len: u64,
}

/// Longest element shown whole in a difference.
pub const SHOWN_MAX: usize = 256;

impl Shown {
    pub fn of(b: &[u8]) -> Shown {
        Shown { head: b[..b.len().min(SHOWN_MAX)].to_vec(), len: b.len() as u64 }
    }

    pub fn is_whole(&self) -> bool {
        self.head.len() as u64 == self.len
    }
}

/// A hash field's value and TTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldValue {
    pub value: Shown,
    pub expire_ms: Option<i64>,
}

/// One element-level difference inside a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    /// Strings: up to 64 bytes of each value from `offset`, a little before the first
    /// differing byte.
    Bytes { offset: u64, a: Vec<u8>, b: Vec<u8> },
    /// Lists: the elements at `index` (None past the end).
    Index { index: u64, a: Option<Shown>, b: Option<Shown> },
    /// Sets: a member present on one side only.
    Member { member: Shown, in_a: bool },
    /// Zsets: a member's score on each side (None when absent).
    Score { member: Shown, a: Option<f64>, b: Option<f64> },
    /// Hashes: a field's value and TTL on each side (None when absent).
    Field { field: Shown, a: Option<FieldValue>, b: Option<FieldValue> },
    /// Streams: an entry on each side (None when absent).
    Entry { id: StreamId, a: Option<EntryFields>, b: Option<EntryFields> },
    /// Stream metadata (last ID, groups, PELs, consumers) or a module payload.
    Meta { what: String, a: String, b: String },
}

/// A stream entry's fields and values, in order.
pub type EntryFields = Vec<(Shown, Shown)>;

/// How two values of the same type differ.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueDiff {
    /// Bytes for strings, elements for collections, entries for streams, 1 for modules.
    pub len_a: u64,
    pub len_b: u64,
    /// Every difference found; `shown` holds the first `max_details`.
    pub total: u64,
    pub shown: Vec<Difference>,
}

/// One reported key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyDiff {
    pub db: u64,
    pub key: Vec<u8>,
    pub status: Status,
    pub a: Option<Side>,
    pub b: Option<Side>,
    pub value_changed: bool,
    pub ttl_changed: bool,
    /// Element-level differences, when `value_changed`.
    pub value: Option<ValueDiff>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffReport {
    pub a_name: String,
    pub b_name: String,
    pub counts: Counts,
    /// The first `max_keys` differing keys, sorted by (db, key bytes).
    pub keys: Vec<KeyDiff>,
    pub keys_not_shown: u64,
    /// Function libraries (by code) present in one file only; not compared under filters.
    pub functions_only_in_a: Vec<String>,
    pub functions_only_in_b: Vec<String>,
    /// Partitions the scan wrote, and how many were split again (not in the output).
    pub partitions: usize,
    pub splits: usize,
    // The options, echoed in the JSON output.
    pub db: Option<u64>,
    pub key_pattern: Option<Vec<u8>>,
    pub ignore_ttl: bool,
    pub ttl_tolerance_ms: u64,
    pub max_details: usize,
    pub max_keys: usize,
}

impl DiffReport {
    pub fn same(&self) -> bool {
        self.counts.keys_differ == 0 && self.functions_only_in_a.is_empty() && self.functions_only_in_b.is_empty()
    }
}

// ---------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------

/// Run the command; Ok(exit code): 0 same, 1 different. Every error (unreadable or corrupt
/// input, temp-disk trouble) is an `Err` whose message names the file; nothing is printed
/// on stdout then.
pub fn run_cli(args: DiffArgs) -> Result<u8, ToolError> {
    let opts = Options {
        db: args.db,
        key: args.key.map(String::into_bytes),
        ignore_ttl: args.ignore_ttl,
        ttl_tolerance_ms: args.ttl_tolerance,
        max_details: args.max_details,
        max_keys: args.max_keys,
        partition_bytes: args.partition_bytes.unwrap_or(DEFAULT_PARTITION_BYTES).max(1),
        ..Options::default()
    };
    // AOF and jsonl inputs are staged as RDB files first (RDB inputs are read in place).
    let parent = opts.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut staging: Option<TempDir> = None;
    let mut stage = |p: &Path, name: &str| -> Result<PathBuf, ToolError> {
        if crate::dataset::dataset_kind(p) == crate::dataset::DatasetKind::Rdb {
            return Ok(p.to_path_buf());
        }
        let dir = match &staging {
            Some(t) => t.0.clone(),
            None => staging.insert(TempDir::new(&parent)?).0.clone(),
        };
        crate::dataset::stage_as_rdb(p, &dir, name)
    };
    let a = stage(&args.a, "a.rdb")?;
    let b = stage(&args.b, "b.rdb")?;
    let mut report = diff_files(&a, &b, &opts)?;
    report.a_name = args.a.display().to_string();
    report.b_name = args.b.display().to_string();
    drop(staging);
    if !args.quiet {
        let text = match args.format {
            DiffFormat::Human => human(&report),
            DiffFormat::Json => {
                let mut j = json(&report);
                j.push(b'\n');
                j
            }
        };
        let mut stdout = io::stdout().lock();
        stdout.write_all(&text)?;
        stdout.flush()?;
    }
    Ok(if report.same() { 0 } else { 1 })
}

/// Compare two RDB files.
///
/// # Errors
/// `ToolError::Usage` with a message naming the file for an unreadable or corrupt input
/// (the decoder's offset, db and key included) or a temp-file failure.
pub fn diff_files(a: &Path, b: &Path, opts: &Options) -> Result<DiffReport, ToolError> {
    let a_name = a.display().to_string();
    let b_name = b.display().to_string();
    let open =
        |p: &Path, name: &str| Source::open(p).map_err(|e| ToolError::Usage(format!("{name}: cannot read: {e}")));
    let sa = open(a, &a_name)?;
    let sb = open(b, &b_name)?;
    let parent = opts.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = TempDir::new(&parent)?;
    let budget = opts.partition_bytes.max(1);
    let nparts = initial_partitions(sa.len() as u64, budget);
    let fa = scan(&a_name, &sa, opts, &tmp.0, "a", nparts)?;
    let fb = scan(&b_name, &sb, opts, &tmp.0, "b", nparts)?;
    let mut cmp = Compare {
        a: Reread::new(&a_name, a, &sa),
        b: Reread::new(&b_name, b, &sb),
        opts,
        dir: &tmp.0,
        counts: Counts { keys_a: fa.keys, keys_b: fb.keys, ..Counts::default() },
        listed: BinaryHeap::new(),
        splits: 0,
    };
    for (i, (pa, pb)) in fa.parts.into_iter().zip(fb.parts).enumerate() {
        let part = Part { name: format!("p{i}"), a: pa.path, b: pb.path, a_bytes: pa.bytes, a_entries: pa.entries };
        cmp.process(part, 0)?;
    }
    let listed = std::mem::take(&mut cmp.listed).into_sorted_vec();
    let out = listed.into_iter().map(|p| cmp.detail(p)).collect::<Result<Vec<_>, _>>()?;
    let counts = cmp.counts.clone();
    let splits = cmp.splits;
    drop(tmp);
    let (functions_only_in_a, functions_only_in_b) =
        if opts.filtered() { (Vec::new(), Vec::new()) } else { function_diff(fa.functions, fb.functions) };
    Ok(DiffReport {
        a_name,
        b_name,
        keys_not_shown: counts.keys_differ - out.len() as u64,
        counts,
        keys: out,
        functions_only_in_a,
        functions_only_in_b,
        partitions: nparts,
        splits,
        db: opts.db,
        key_pattern: opts.key.clone(),
        ignore_ttl: opts.ignore_ttl,
        ttl_tolerance_ms: opts.ttl_tolerance_ms,
        max_details: opts.max_details,
        max_keys: opts.max_keys,
    })
}

/// Partitions for the scan: the index of A (entry bytes plus hash map) is assumed to be at
/// most a third of A's size, which holds for files Redis writes (about a fifth for
/// ~900-byte keys). Denser files are fixed up by splitting partitions before comparing.
fn initial_partitions(size_a: u64, budget: u64) -> usize {
    let est = size_a / 3 + 1;
    est.div_ceil(budget).clamp(1, MAX_FANOUT as u64) as usize
}

/// At most this many partition files are open at once.
const MAX_FANOUT: usize = 256;
/// Estimated hash-map bytes per entry of a partition (slot of 40 bytes, load factor, control).
const MAP_COST: u64 = 96;
/// Splitting a partition more often than this means the hashes cannot separate its keys.
const MAX_LEVEL: u32 = 6;

// ---------------------------------------------------------------------------------------
// Hashing: two 64-bit lanes of multiply-fold mixing, 16 input bytes per step. Fast and
// well distributed, not cryptographic (docs/diff.md says what that means for a verdict).
// ---------------------------------------------------------------------------------------

const K0: u64 = 0xa076_1d64_78bd_642f;
const K1: u64 = 0xe703_7ed1_a0b4_28db;
const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
const K3: u64 = 0x5899_65cc_7537_4cc3;
const K4: u64 = 0x1d8e_4e27_c47d_124f;
const K5: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
fn le64(c: &[u8]) -> u64 {
    u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
}

/// A running 128-bit hash.
#[derive(Clone, Copy)]
struct H {
    x: u64,
    y: u64,
}

// Domain tags: a value of one type never hashes like another's.
const T_STRING: u64 = 1;
const T_LIST: u64 = 2;
const T_SET: u64 = 3;
const T_SET_MEMBER: u64 = 4;
const T_ZSET: u64 = 5;
const T_ZSET_MEMBER: u64 = 6;
const T_HASH: u64 = 7;
const T_HASH_FIELD: u64 = 8;
const T_FIELD_TTL: u64 = 9;
const T_STREAM: u64 = 10;
const T_GROUP: u64 = 11;
const T_PEL: u64 = 12;
const T_CONSUMER: u64 = 13;
const T_MODULE: u64 = 14;
const T_KEY: u64 = 15;
const T_FUNCTION: u64 = 16;
const T_RAW: u64 = 17;

impl H {
    fn new(tag: u64) -> H {
        H { x: tag ^ K0, y: tag.rotate_left(32) ^ K1 }
    }

    #[inline]
    fn block(&mut self, a: u64, b: u64) {
        self.x = mum(a ^ K0, b ^ self.x);
        self.y = mum(b ^ K2, a.rotate_left(29) ^ self.y ^ K3);
    }

    fn u64(&mut self, v: u64) -> &mut Self {
        self.block(v, K4);
        self
    }

    fn u128(&mut self, v: u128) -> &mut Self {
        self.block(v as u64, (v >> 64) as u64);
        self
    }

    fn bytes(&mut self, b: &[u8]) -> &mut Self {
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
    fn elem(&mut self, e: &Elem<'_>) -> &mut Self {
        match e {
            Elem::Bytes(b) => self.bytes(b),
            Elem::Int(i) => {
                let mut buf = itoa_buf();
                self.bytes(fmt_i64(*i, &mut buf))
            }
        }
    }

    fn finish(&self) -> u128 {
        let a = mum(self.x ^ K4, self.y ^ K1);
        let b = mum(self.y ^ K5, self.x.rotate_left(17) ^ K3);
        (u128::from(a) << 64) | u128::from(b)
    }
}

/// Digest of stored bytes: four independent multiply-fold lanes over 32-byte blocks, so
/// the multiplier stays busy (several GB/s on one core), then mixed into 128 bits.
fn raw_digest(tag: u64, b: &[u8]) -> u128 {
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

fn fold(d: u128) -> u64 {
    (d as u64) ^ ((d >> 64) as u64)
}

fn key_hash(db: u64, key: &[u8]) -> u64 {
    fold(H::new(T_KEY ^ db.rotate_left(8)).bytes(key).finish())
}

/// Which of `n` partitions a key hash goes to at a split level (each level uses other bits).
fn part_of(h: u64, level: u32, n: usize) -> usize {
    let m = mum(h ^ K2.rotate_left(level * 7), K3 ^ u64::from(level));
    ((u128::from(m) * n as u128) >> 64) as usize
}

/// Values at least this big are first compared by their stored bytes.
const RAW_MIN: usize = 128;

/// Whether a value is digested by its stored bytes in the scan, its canonical digest being
/// computed later only if the other file's stored bytes differ. Decoding (LZF above all)
/// is most of a scan's cost, and two saves of the same data by the same Redis mostly store
/// the same bytes: same LZF output, same listpacks, zsets in score order. Not for
/// dict-encoded hashes and sets, whose order depends on the server's hash seed, nor for
/// small values, whose decoding costs less than reading them again.
fn raw_form(v: &Value<'_>) -> bool {
    use ValueType::*;
    v.body.len() >= RAW_MIN
        && !matches!(v.vtype, SetHashtable | Hash | HashMetadata | HashMetadataPreGa | ValkeyHash2 | ModulePreGa)
}

/// A score's bits: -0 and 0 order alike in Redis, but ZSCORE, DEBUG DIGEST and the files
/// tell them apart, so a diff does too.
fn score_bits(s: f64) -> u64 {
    s.to_bits()
}

/// Digest of a value straight from its element iterators: (value, field TTLs). The value
/// digest leaves hash field TTLs out; they get their own order-free digest (0 when no field
/// has one) so `--ttl-tolerance` and `--ignore-ttl` can apply to them.
fn value_digest(v: &Value<'_>) -> Result<(u128, u128), FormatError> {
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
fn stream_meta_digest(h: &mut H, m: &StreamMeta<'_>) {
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

// ---------------------------------------------------------------------------------------
// Partition entries
//
// # Format
// ```text
// db u64 | record offset u64 | value body offset u64 | body length u64 | expire i64 |
// digest u128 | field-TTL digest u128 | logical type u8 | value type u8 | flags u8 |
// key length u32 | key bytes                      (little-endian; 79 bytes + key)
// ```
// ---------------------------------------------------------------------------------------

const HEADER: usize = 79;
const F_EXPIRE: u8 = 1;
const F_RAW: u8 = 2;

/// Where a key's value is and what it digests to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    rec_off: u64,
    body_off: u64,
    body_len: u64,
    expire: Option<i64>,
    digest: u128,
    fttl: u128,
    ltype: u8,
    vtype: u8,
    /// `digest` hashes the stored bytes, not the canonical value (see `raw_form`).
    raw: bool,
}

fn vt_code(v: ValueType) -> u8 {
    v.code()
}

fn vt_of(code: u8) -> Option<ValueType> {
    ValueType::from_code(code)
}

fn lt_code(t: LogicalType) -> u8 {
    LogicalType::ALL.iter().position(|x| *x == t).map_or(u8::MAX, |p| p as u8)
}

fn lt_of(code: u8) -> LogicalType {
    LogicalType::ALL.get(usize::from(code)).copied().unwrap_or(LogicalType::Module)
}

fn encode(out: &mut Vec<u8>, db: u64, key: &[u8], m: &Meta) {
    out.extend_from_slice(&db.to_le_bytes());
    out.extend_from_slice(&m.rec_off.to_le_bytes());
    out.extend_from_slice(&m.body_off.to_le_bytes());
    out.extend_from_slice(&m.body_len.to_le_bytes());
    out.extend_from_slice(&m.expire.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&m.digest.to_le_bytes());
    out.extend_from_slice(&m.fttl.to_le_bytes());
    out.push(m.ltype);
    out.push(m.vtype);
    out.push(if m.expire.is_some() { F_EXPIRE } else { 0 } | if m.raw { F_RAW } else { 0 });
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
}

fn le128(c: &[u8]) -> u128 {
    u128::from(le64(c)) | (u128::from(le64(&c[8..])) << 64)
}

/// Decode a header: (db, meta, key length).
fn decode(h: &[u8]) -> (u64, Meta, usize) {
    let flags = h[74];
    let m = Meta {
        rec_off: le64(&h[8..]),
        body_off: le64(&h[16..]),
        body_len: le64(&h[24..]),
        expire: (flags & F_EXPIRE != 0).then(|| le64(&h[32..]) as i64),
        digest: le128(&h[40..]),
        fttl: le128(&h[56..]),
        ltype: h[72],
        vtype: h[73],
        raw: flags & F_RAW != 0,
    };
    let klen = u32::from_le_bytes([h[75], h[76], h[77], h[78]]) as usize;
    (le64(h), m, klen)
}

/// Reads entries back from a partition file.
struct EntryReader {
    name: PathBuf,
    r: BufReader<File>,
    header: [u8; HEADER],
    key: Vec<u8>,
}

impl EntryReader {
    fn open(path: &Path) -> Result<Self, ToolError> {
        let f = File::open(path).map_err(|e| temp_err(path, e))?;
        Ok(EntryReader {
            name: path.to_path_buf(),
            r: BufReader::with_capacity(256 << 10, f),
            header: [0; HEADER],
            key: Vec::new(),
        })
    }

    /// The next entry: (db, meta); the key is in `self.key`.
    fn next(&mut self) -> Result<Option<(u64, Meta)>, ToolError> {
        let at_end = self.r.fill_buf().map_err(|e| temp_err(&self.name, e))?.is_empty();
        if at_end {
            return Ok(None);
        }
        self.r.read_exact(&mut self.header).map_err(|e| temp_err(&self.name, e))?;
        let (db, m, klen) = decode(&self.header);
        self.key.resize(klen, 0);
        self.r.read_exact(&mut self.key).map_err(|e| temp_err(&self.name, e))?;
        Ok(Some((db, m)))
    }
}

fn temp_err(path: &Path, e: io::Error) -> ToolError {
    ToolError::Usage(format!("temporary file {}: {e}", path.display()))
}

/// A directory of partition files, removed with everything in it when dropped (also on
/// errors and panics).
/// A temporary directory, removed with its files on drop (also used by `replay --against`).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(parent: &Path) -> Result<TempDir, ToolError> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        for attempt in 0..1000u32 {
            let p = parent.join(format!("ferrokv-diff-{}-{nanos:x}-{attempt}", std::process::id()));
            match fs::create_dir(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(temp_err(&p, e)),
            }
        }
        Err(ToolError::Usage(format!("cannot create a temporary directory in {}", parent.display())))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// One written partition file.
struct PartFile {
    path: PathBuf,
    bytes: u64,
    entries: u64,
}

/// A set of partition files being written.
struct PartWriters {
    files: Vec<(BufWriter<File>, PartFile)>,
}

impl PartWriters {
    fn create(dir: &Path, prefix: &str, side: &str, n: usize) -> Result<Self, ToolError> {
        // Keep the buffers of all files together around 8 MiB.
        let cap = ((8usize << 20) / n.max(1)).clamp(16 << 10, 256 << 10);
        let mut files = Vec::with_capacity(n);
        for i in 0..n {
            let path = dir.join(format!("{prefix}.{i}.{side}"));
            let f = File::create(&path).map_err(|e| temp_err(&path, e))?;
            files.push((BufWriter::with_capacity(cap, f), PartFile { path, bytes: 0, entries: 0 }));
        }
        Ok(PartWriters { files })
    }

    fn write(&mut self, part: usize, entry: &[u8]) -> Result<(), ToolError> {
        let (w, pf) = &mut self.files[part];
        w.write_all(entry).map_err(|e| temp_err(&pf.path, e))?;
        pf.bytes += entry.len() as u64;
        pf.entries += 1;
        Ok(())
    }

    fn finish(self) -> Result<Vec<PartFile>, ToolError> {
        let mut out = Vec::with_capacity(self.files.len());
        for (mut w, pf) in self.files {
            w.flush().map_err(|e| temp_err(&pf.path, e))?;
            out.push(pf);
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------
// Pass 1: scan
// ---------------------------------------------------------------------------------------

struct Scanned {
    keys: u64,
    parts: Vec<PartFile>,
    /// (digest of the code, library name) of every function library.
    functions: Vec<(u128, String)>,
}

/// One batch's entries, encoded back to back, and which partition each goes to.
#[derive(Default)]
struct BatchOut {
    buf: Vec<u8>,
    index: Vec<(usize, usize, usize)>,
    functions: Vec<(u128, String)>,
}

fn entry_of(rec: &Record<'_>, opts: &Options, nparts: usize, out: &mut BatchOut) -> Result<(), ToolError> {
    match rec {
        Record::Key(k) => {
            if !opts.wants(k) {
                return Ok(());
            }
            let raw = raw_form(&k.value);
            let (digest, fttl) = if raw {
                (raw_digest(u64::from(vt_code(k.value.vtype)), k.value.body.bytes()), 0)
            } else {
                value_digest(&k.value).map_err(|e| ToolError::Data(RdbError::in_key(e, k)))?
            };
            let key = k.key.to_bytes();
            let part = part_of(key_hash(k.db, &key), 0, nparts);
            let m = Meta {
                rec_off: k.offset as u64,
                body_off: k.value.body.offset() as u64,
                body_len: k.value.body.len() as u64,
                expire: k.expire_ms,
                digest,
                fttl,
                ltype: lt_code(k.value.logical()),
                vtype: vt_code(k.value.vtype),
                raw,
            };
            let start = out.buf.len();
            encode(&mut out.buf, k.db, &key, &m);
            out.index.push((part, start, out.buf.len()));
        }
        Record::Function { code, .. } | Record::FunctionPreGa { code, .. } if !opts.filtered() => {
            let code = code.to_bytes();
            out.functions.push((H::new(T_FUNCTION).bytes(&code).finish(), library_name(&code)));
        }
        _ => {}
    }
    Ok(())
}

/// The library name from the code's shebang line (`#!lua name=mylib`).
fn library_name(code: &[u8]) -> String {
    let line = code.split(|&c| c == b'\n').next().unwrap_or_default();
    if let Some(p) = line.windows(5).position(|w| w == b"name=") {
        let rest = &line[p + 5..];
        let end = rest.iter().position(|c| c.is_ascii_whitespace()).unwrap_or(rest.len());
        return String::from_utf8_lossy(&rest[..end]).into_owned();
    }
    format!("<library of {} bytes>", code.len())
}

/// Stream `data` once and write one entry per key to `nparts` partition files.
fn scan(name: &str, src: &Source, opts: &Options, dir: &Path, side: &str, nparts: usize) -> Result<Scanned, ToolError> {
    let data: &[u8] = src;
    let with_name = |e: ToolError| match e {
        ToolError::Data(e) => ToolError::Usage(format!("{name}: {e}")),
        other => other,
    };
    let reader = RdbReader::new(data).map_err(|e| ToolError::Usage(format!("{name}: {e}")))?;
    let writers = RefCell::new(PartWriters::create(dir, "p", side, nparts)?);
    let keys = RefCell::new(0u64);
    let functions = RefCell::new(Vec::new());
    let mut progress = Progress::new(data.len() as u64);
    let store = |o: BatchOut| -> Result<(), ToolError> {
        let mut w = writers.borrow_mut();
        for &(part, s, e) in &o.index {
            w.write(part, &o.buf[s..e])?;
        }
        *keys.borrow_mut() += o.index.len() as u64;
        functions.borrow_mut().extend(o.functions);
        Ok(())
    };
    let work = |batch: &Batch<'_>| -> Result<BatchOut, ToolError> {
        let mut out = BatchOut::default();
        for rec in &batch.records {
            entry_of(rec, opts, nparts, &mut out)?;
        }
        Ok(out)
    };
    let inline = |rec: &Record<'_>, _: Option<u64>| -> Result<(), ToolError> {
        let mut out = BatchOut::default();
        entry_of(rec, opts, nparts, &mut out)?;
        store(out)
    };
    let result = opts.pipeline.run(reader, work, &store, inline, |o| src.release_before(o), |p| progress.set(p as u64));
    progress.finish();
    result.map_err(with_name)?;
    let parts = writers.into_inner().finish()?;
    let mut functions = functions.into_inner();
    functions.sort();
    Ok(Scanned { keys: keys.into_inner(), parts, functions })
}

/// Libraries whose code is in one file only, by name.
fn function_diff(a: Vec<(u128, String)>, b: Vec<(u128, String)>) -> (Vec<String>, Vec<String>) {
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                only_a.push(x.1.clone());
                i += 1;
            }
            (Some(x), None) => {
                only_a.push(x.1.clone());
                i += 1;
            }
            (_, Some(y)) => {
                only_b.push(y.1.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    only_a.sort();
    only_b.sort();
    (only_a, only_b)
}

// ---------------------------------------------------------------------------------------
// Pass 2: compare partitions
// ---------------------------------------------------------------------------------------

/// A key in the in-memory index: its hash, db and bytes (borrowed from the partition).
trait KeyView {
    fn parts(&self) -> (u64, u64, &[u8]);
}

#[derive(Clone, Copy)]
struct KeyRef<'a> {
    h: u64,
    db: u64,
    key: &'a [u8],
}

/// A lookup key that owns its bytes, so B's entries can be streamed through one buffer.
struct Probe {
    h: u64,
    db: u64,
    key: Vec<u8>,
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
struct PassHasher(u64);

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
struct PassBuild;

impl BuildHasher for PassBuild {
    type Hasher = PassHasher;
    fn build_hasher(&self) -> PassHasher {
        PassHasher(0)
    }
}

/// A differing key kept for the report, ordered by (db, key).
struct Pending {
    db: u64,
    key: Vec<u8>,
    status: Status,
    a: Option<Meta>,
    b: Option<Meta>,
    value_changed: bool,
    ttl_changed: bool,
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

struct Part {
    name: String,
    a: PathBuf,
    b: PathBuf,
    a_bytes: u64,
    a_entries: u64,
}

/// Reads values again after the scan. A mapped input is read with `pread` into a buffer
/// freed after use, so pages of the mapping touched again do not pile up in the resident
/// set; a buffered input (stdin) is sliced.
struct Reread<'s> {
    name: &'s str,
    data: &'s [u8],
    file: Option<File>,
}

impl<'s> Reread<'s> {
    fn new(name: &'s str, path: &Path, src: &'s Source) -> Self {
        let file = match src {
            Source::Mapped(..) => File::open(path).ok(),
            Source::Buffered(_) => None,
        };
        Reread { name, data: src, file }
    }

    /// A key's value bytes, and the value decoded from them with `f`.
    fn with_value<T>(
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
            key_storage: "raw",
            expire_ms: m.expire,
            idle: None,
            freq: None,
            meta: Vec::new(),
            value: Value { vtype, body: Input::at(body, start) },
            end,
        };
        f(&rec).map_err(|e| ToolError::Usage(format!("{}: {}", self.name, RdbError::in_key(e, &rec))))
    }

    /// The canonical value (held whole in memory).
    fn logical(&self, db: u64, key: &[u8], m: &Meta) -> Result<Logical, ToolError> {
        self.with_value(db, key, m, Logical::from_record)
    }

    /// The canonical (value, field TTL) digests of an entry scanned in raw form.
    fn canonical(&self, db: u64, key: &[u8], m: &Meta) -> Result<(u128, u128), ToolError> {
        if !m.raw {
            return Ok((m.digest, m.fttl));
        }
        self.with_value(db, key, m, |k| value_digest(&k.value))
    }
}

struct Compare<'s> {
    a: Reread<'s>,
    b: Reread<'s>,
    opts: &'s Options,
    dir: &'s Path,
    counts: Counts,
    /// Max-heap of the smallest `max_keys` differing keys seen so far.
    listed: BinaryHeap<Pending>,
    splits: usize,
}

impl Compare<'_> {
    fn process(&mut self, part: Part, level: u32) -> Result<(), ToolError> {
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
    fn split(&mut self, part: &Part, level: u32, n: usize) -> Result<Vec<Part>, ToolError> {
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

    fn compare(&mut self, part: &Part) -> Result<(), ToolError> {
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

    fn classify(&mut self, db: u64, key: &[u8], a: Meta, b: Meta) -> Result<(), ToolError> {
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
    fn field_ttls_differ(&self, db: u64, key: &[u8], a: &Meta, b: &Meta) -> Result<bool, ToolError> {
        let la = self.a.logical(db, key, a)?;
        let lb = self.b.logical(db, key, b)?;
        Ok(value_diff(&la, &lb, self.opts).total > 0)
    }

    #[allow(clippy::too_many_arguments)]
    fn note(
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

    fn detail(&self, p: Pending) -> Result<KeyDiff, ToolError> {
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
struct Collect {
    max: usize,
    total: u64,
    shown: Vec<Difference>,
}

impl Collect {
    fn add(&mut self, d: impl FnOnce() -> Difference) {
        self.total += 1;
        if self.shown.len() < self.max {
            self.shown.push(d());
        }
    }
}

/// Walk two sequences sorted by `cmp` together: `f(Some(a), Some(b))` for equal items,
/// one side `None` for items present on one side only.
fn merge<'x, T>(
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

fn entry_fields(fields: &[(Vec<u8>, Vec<u8>)]) -> EntryFields {
    fields.iter().map(|(f, v)| (Shown::of(f), Shown::of(v))).collect()
}

fn zset_by_member(v: &[(Vec<u8>, f64)]) -> Vec<(&[u8], f64)> {
    let mut s: Vec<(&[u8], f64)> = v.iter().map(|(m, s)| (m.as_slice(), *s)).collect();
    s.sort_unstable_by(|p, q| p.0.cmp(q.0));
    s
}

/// Metadata differences of two streams, as `stream_meta_digest` sees metadata.
fn stream_meta_diffs(a: &StreamMeta<'_>, b: &StreamMeta<'_>, c: &mut Collect) {
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

// ---------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------

/// Bytes for a human line: quoted, escaped, cut at 64 bytes.
fn show(b: &[u8]) -> String {
    let cut = &b[..b.len().min(64)];
    let mut s = format!("'{}'", escape_key(cut));
    if b.len() > 64 {
        s.push_str(&format!("... ({} bytes)", b.len()));
    }
    s
}

/// A shown element for a human line.
fn show_el(e: &Shown) -> String {
    if e.is_whole() {
        show(&e.head)
    } else {
        format!("'{}'... ({} bytes)", escape_key(&e.head[..e.head.len().min(64)]), e.len)
    }
}

fn ttl_text(t: Option<i64>) -> String {
    t.map_or("none".into(), |v| v.to_string())
}

fn unit(t: LogicalType) -> &'static str {
    match t {
        LogicalType::String => "bytes",
        LogicalType::List => "elements",
        LogicalType::Set | LogicalType::Zset => "members",
        LogicalType::Hash => "fields",
        LogicalType::Stream => "entries",
        LogicalType::Module => "values",
    }
}

fn human_difference(out: &mut String, d: &Difference) {
    use std::fmt::Write as _;
    let opt = |v: &Option<Shown>| v.as_ref().map_or("(none)".to_string(), show_el);
    let _ = match d {
        Difference::Bytes { offset, a, b } => writeln!(out, "    at byte {offset}: {} -> {}", show(a), show(b)),
        Difference::Index { index, a, b } => writeln!(out, "    [{index}]: {} -> {}", opt(a), opt(b)),
        Difference::Member { member, in_a: true } => writeln!(out, "    - {}", show_el(member)),
        Difference::Member { member, in_a: false } => writeln!(out, "    + {}", show_el(member)),
        Difference::Score { member, a, b } => {
            let s = |v: &Option<f64>| v.map_or("(none)".to_string(), jsonw::score_text);
            writeln!(out, "    {}: score {} -> {}", show_el(member), s(a), s(b))
        }
        Difference::Field { field, a, b } => {
            let f = |v: &Option<FieldValue>| match v {
                None => "(none)".to_string(),
                Some(FieldValue { value, expire_ms: None }) => show_el(value),
                Some(FieldValue { value, expire_ms: Some(t) }) => format!("{} (TTL {t})", show_el(value)),
            };
            writeln!(out, "    {}: {} -> {}", show_el(field), f(a), f(b))
        }
        Difference::Entry { id, a, b } => {
            let e = |v: &Option<EntryFields>| match v {
                None => "(none)".to_string(),
                Some(fs) => {
                    let parts: Vec<String> =
                        fs.iter().map(|(f, v)| format!("{}: {}", show_el(f), show_el(v))).collect();
                    format!("{{{}}}", parts.join(", "))
                }
            };
            writeln!(out, "    entry {id}: {} -> {}", e(a), e(b))
        }
        Difference::Meta { what, a, b } => writeln!(out, "    {what}: {a} -> {b}"),
    };
}

/// The human report: one line per shown key (elements indented under it), then a summary.
pub fn human(r: &DiffReport) -> Vec<u8> {
    use std::fmt::Write as _;
    let mut s = String::new();
    for k in &r.keys {
        let name = format!("db {} {}", k.db, show(&k.key));
        let ttl = |side: &Option<Side>| side.as_ref().and_then(|x| x.expire_ms).map(|t| format!(", TTL {t}"));
        let _ = match (k.status, &k.a, &k.b) {
            (Status::OnlyInA, Some(a), _) => {
                writeln!(s, "{name}: only in A ({}{})", a.ltype, ttl(&k.a).unwrap_or_default())
            }
            (Status::OnlyInB, _, Some(b)) => {
                writeln!(s, "{name}: only in B ({}{})", b.ltype, ttl(&k.b).unwrap_or_default())
            }
            (Status::TypeChanged, Some(a), Some(b)) => writeln!(s, "{name}: type {} (A) -> {} (B)", a.ltype, b.ltype),
            (_, Some(a), Some(b)) => {
                let mut line = format!("{name} ({})", a.ltype);
                if let Some(v) = &k.value {
                    let u = unit(a.ltype);
                    let n = v.total;
                    let _ = write!(
                        line,
                        ": value differs: {n} difference{} (A {} {u}, B {} {u})",
                        if n == 1 { "" } else { "s" },
                        v.len_a,
                        v.len_b
                    );
                } else if k.value_changed {
                    line.push_str(": value differs");
                }
                if k.ttl_changed {
                    line.push_str(if k.value_changed { "; " } else { ": " });
                    let _ = write!(line, "TTL {} -> {}", ttl_text(a.expire_ms), ttl_text(b.expire_ms));
                    if let (Some(x), Some(y)) = (a.expire_ms, b.expire_ms) {
                        let _ = write!(line, " ({:+} ms)", i128::from(y) - i128::from(x));
                    }
                }
                writeln!(s, "{line}")
            }
            _ => writeln!(s, "{name}: {}", k.status.name()),
        };
        if let Some(v) = &k.value {
            for d in &v.shown {
                human_difference(&mut s, d);
            }
            if v.total > v.shown.len() as u64 {
                let _ = writeln!(s, "    ... {} more (--max-details)", v.total - v.shown.len() as u64);
            }
        }
    }
    if r.keys_not_shown > 0 {
        let _ = writeln!(s, "... {} more differing keys not shown (--max-keys)", r.keys_not_shown);
    }
    for f in &r.functions_only_in_a {
        let _ = writeln!(s, "function library '{f}': only in A");
    }
    for f in &r.functions_only_in_b {
        let _ = writeln!(s, "function library '{f}': only in B");
    }
    let c = &r.counts;
    if r.same() {
        let _ = writeln!(s, "same: {} keys (A {}, B {})", c.keys_same, r.a_name, r.b_name);
    } else {
        let _ = writeln!(
            s,
            "different: {} key{} differ ({} only in A, {} only in B, {} type changed, {} value changed, {} TTL changed); {} same; A {} keys, B {} keys",
            c.keys_differ,
            if c.keys_differ == 1 { "" } else { "s" },
            c.only_in_a,
            c.only_in_b,
            c.type_changed,
            c.value_changed,
            c.ttl_changed,
            c.keys_same,
            c.keys_a,
            c.keys_b
        );
    }
    s.into_bytes()
}

fn j_opt_i64(o: &mut Vec<u8>, v: Option<i64>) {
    match v {
        Some(t) => jsonw::int(o, t),
        None => o.extend_from_slice(b"null"),
    }
}

/// A shown element: bytes when whole, else `{"truncated": bytes, "len": n}`.
fn j_shown(o: &mut Vec<u8>, e: &Shown) {
    if e.is_whole() {
        jsonw::bytes(o, &e.head);
    } else {
        o.extend_from_slice(b"{\"truncated\":");
        jsonw::bytes(o, &e.head);
        o.extend_from_slice(b",\"len\":");
        jsonw::uint(o, e.len);
        o.push(b'}');
    }
}

fn j_opt_shown(o: &mut Vec<u8>, v: Option<&Shown>) {
    match v {
        Some(e) => j_shown(o, e),
        None => o.extend_from_slice(b"null"),
    }
}

fn j_opt_bytes(o: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        Some(b) => jsonw::bytes(o, b),
        None => o.extend_from_slice(b"null"),
    }
}

fn j_key(o: &mut Vec<u8>, name: &str) {
    jsonw::string(o, name);
    o.push(b':');
}

fn j_difference(o: &mut Vec<u8>, d: &Difference) {
    o.push(b'{');
    match d {
        Difference::Bytes { offset, a, b } => {
            j_key(o, "offset");
            jsonw::uint(o, *offset);
            o.extend_from_slice(b",\"a\":");
            jsonw::bytes(o, a);
            o.extend_from_slice(b",\"b\":");
            jsonw::bytes(o, b);
        }
        Difference::Index { index, a, b } => {
            j_key(o, "index");
            jsonw::uint(o, *index);
            o.extend_from_slice(b",\"a\":");
            j_opt_shown(o, a.as_ref());
            o.extend_from_slice(b",\"b\":");
            j_opt_shown(o, b.as_ref());
        }
        Difference::Member { member, in_a } => {
            j_key(o, "member");
            j_shown(o, member);
            o.extend_from_slice(if *in_a { b",\"in\":\"a\"" } else { b",\"in\":\"b\"" });
        }
        Difference::Score { member, a, b } => {
            j_key(o, "member");
            j_shown(o, member);
            for (name, v) in [("a", a), ("b", b)] {
                o.push(b',');
                j_key(o, name);
                match v {
                    Some(s) => jsonw::string(o, &jsonw::score_text(*s)),
                    None => o.extend_from_slice(b"null"),
                }
            }
        }
        Difference::Field { field, a, b } => {
            j_key(o, "field");
            j_shown(o, field);
            for (name, v) in [("a", a), ("b", b)] {
                o.push(b',');
                j_key(o, name);
                match v {
                    Some(f) => {
                        o.extend_from_slice(b"{\"value\":");
                        j_shown(o, &f.value);
                        o.extend_from_slice(b",\"expire_ms\":");
                        j_opt_i64(o, f.expire_ms);
                        o.push(b'}');
                    }
                    None => o.extend_from_slice(b"null"),
                }
            }
        }
        Difference::Entry { id, a, b } => {
            j_key(o, "id");
            jsonw::string(o, &id.to_string());
            for (name, v) in [("a", a), ("b", b)] {
                o.push(b',');
                j_key(o, name);
                match v {
                    Some(fs) => {
                        o.push(b'[');
                        for (i, (f, v)) in fs.iter().enumerate() {
                            if i > 0 {
                                o.push(b',');
                            }
                            j_shown(o, f);
                            o.push(b',');
                            j_shown(o, v);
                        }
                        o.push(b']');
                    }
                    None => o.extend_from_slice(b"null"),
                }
            }
        }
        Difference::Meta { what, a, b } => {
            j_key(o, "meta");
            jsonw::string(o, what);
            o.extend_from_slice(b",\"a\":");
            jsonw::string(o, a);
            o.extend_from_slice(b",\"b\":");
            jsonw::string(o, b);
        }
    }
    o.push(b'}');
}

fn j_names(o: &mut Vec<u8>, names: &[String]) {
    o.push(b'[');
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        jsonw::string(o, n);
    }
    o.push(b']');
}

/// The JSON report: one document, layout in docs/diff.md.
pub fn json(r: &DiffReport) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend_from_slice(b"{\"a\":");
    jsonw::string(&mut o, &r.a_name);
    o.extend_from_slice(b",\"b\":");
    jsonw::string(&mut o, &r.b_name);
    o.extend_from_slice(if r.same() { b",\"same\":true" } else { b",\"same\":false" });
    o.extend_from_slice(b",\"options\":{\"db\":");
    match r.db {
        Some(d) => jsonw::uint(&mut o, d),
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"key\":");
    j_opt_bytes(&mut o, r.key_pattern.as_deref());
    o.extend_from_slice(if r.ignore_ttl { b",\"ignore_ttl\":true" } else { b",\"ignore_ttl\":false" });
    o.extend_from_slice(b",\"ttl_tolerance_ms\":");
    jsonw::uint(&mut o, r.ttl_tolerance_ms);
    o.extend_from_slice(b",\"max_details\":");
    jsonw::uint(&mut o, r.max_details as u64);
    o.extend_from_slice(b",\"max_keys\":");
    jsonw::uint(&mut o, r.max_keys as u64);
    o.extend_from_slice(b"},\"counts\":{");
    let c = &r.counts;
    let counts = [
        ("keys_a", c.keys_a),
        ("keys_b", c.keys_b),
        ("keys_same", c.keys_same),
        ("keys_differ", c.keys_differ),
        ("only_in_a", c.only_in_a),
        ("only_in_b", c.only_in_b),
        ("type_changed", c.type_changed),
        ("value_changed", c.value_changed),
        ("ttl_changed", c.ttl_changed),
    ];
    for (i, (name, v)) in counts.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        j_key(&mut o, name);
        jsonw::uint(&mut o, *v);
    }
    o.extend_from_slice(b"},\"functions\":{\"only_in_a\":");
    j_names(&mut o, &r.functions_only_in_a);
    o.extend_from_slice(b",\"only_in_b\":");
    j_names(&mut o, &r.functions_only_in_b);
    o.extend_from_slice(b"},\"keys\":[");
    for (i, k) in r.keys.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        o.extend_from_slice(b"{\"db\":");
        jsonw::uint(&mut o, k.db);
        o.extend_from_slice(b",\"key\":");
        jsonw::bytes(&mut o, &k.key);
        o.extend_from_slice(b",\"status\":");
        jsonw::string(&mut o, k.status.name());
        for (suffix, side) in [("a", &k.a), ("b", &k.b)] {
            o.push(b',');
            j_key(&mut o, &format!("type_{suffix}"));
            match side {
                Some(s) => jsonw::string(&mut o, s.ltype.name()),
                None => o.extend_from_slice(b"null"),
            }
            o.push(b',');
            j_key(&mut o, &format!("encoding_{suffix}"));
            match side {
                Some(s) => jsonw::string(&mut o, s.encoding),
                None => o.extend_from_slice(b"null"),
            }
            o.push(b',');
            j_key(&mut o, &format!("expire_ms_{suffix}"));
            j_opt_i64(&mut o, side.as_ref().and_then(|s| s.expire_ms));
            o.push(b',');
            j_key(&mut o, &format!("offset_{suffix}"));
            match side {
                Some(s) => jsonw::uint(&mut o, s.offset),
                None => o.extend_from_slice(b"null"),
            }
        }
        o.extend_from_slice(if k.value_changed { b",\"value_changed\":true" } else { b",\"value_changed\":false" });
        o.extend_from_slice(if k.ttl_changed { b",\"ttl_changed\":true" } else { b",\"ttl_changed\":false" });
        if let Some(v) = &k.value {
            o.extend_from_slice(b",\"value\":{\"len_a\":");
            jsonw::uint(&mut o, v.len_a);
            o.extend_from_slice(b",\"len_b\":");
            jsonw::uint(&mut o, v.len_b);
            o.extend_from_slice(b",\"differences_total\":");
            jsonw::uint(&mut o, v.total);
            o.extend_from_slice(b",\"differences\":[");
            for (i, d) in v.shown.iter().enumerate() {
                if i > 0 {
                    o.push(b',');
                }
                j_difference(&mut o, d);
            }
            o.extend_from_slice(b"]}");
        }
        o.push(b'}');
    }
    o.extend_from_slice(b"],\"keys_not_shown\":");
    jsonw::uint(&mut o, r.keys_not_shown);
    o.push(b'}');
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokv::logical::Field;

    fn field(f: &str, v: &str, t: Option<i64>) -> Field {
        Field { field: f.into(), value: v.into(), expire_ms: t }
    }

    #[test]
    fn entries_round_trip() {
        let m = Meta {
            rec_off: 1,
            body_off: 2,
            body_len: 3,
            expire: Some(-5),
            digest: u128::MAX - 7,
            fttl: 9,
            ltype: 4,
            vtype: 27,
            raw: true,
        };
        let mut buf = Vec::new();
        encode(&mut buf, 15, b"key", &m);
        assert_eq!(buf.len(), HEADER + 3);
        let (db, back, klen) = decode(&buf);
        assert_eq!((db, back, klen), (15, m, 3));
        assert_eq!(&buf[HEADER..], b"key");
        let none = Meta { expire: None, raw: false, ..m };
        buf.clear();
        encode(&mut buf, 0, b"", &none);
        assert_eq!(decode(&buf).1, none);
    }

    #[test]
    fn hashes_separate_lengths_and_ints_equal_their_text() {
        let d = |b: &[u8]| H::new(1).bytes(b).finish();
        assert_ne!(d(b""), d(b"\0"));
        assert_ne!(d(b"ab"), d(b"ab\0"));
        assert_ne!(d(&[0u8; 16]), d(&[0u8; 17]));
        assert_eq!(H::new(1).elem(&Elem::Int(-12)).finish(), d(b"-12"));
        let two = H::new(1).bytes(b"a").bytes(b"b").finish();
        // Raw digests see every byte and the length.
        let base = vec![0u8; 100];
        for i in 0..100 {
            let mut v = base.clone();
            v[i] = 1;
            assert_ne!(raw_digest(3, &v), raw_digest(3, &base), "byte {i}");
        }
        assert_ne!(raw_digest(3, &base[..64]), raw_digest(3, &base[..65]));
        assert_ne!(raw_digest(3, &base), raw_digest(4, &base));
        assert_ne!(two, d(b"ab"));
        // Every vtype has a code and comes back.
        for v in ValueType::ALL {
            assert_eq!(vt_of(vt_code(v)), Some(v));
        }
    }

    #[test]
    fn field_ttls_follow_the_tolerance() {
        let a = Logical::Hash(vec![field("f", "v", Some(1000)), field("g", "w", None)]);
        let b = Logical::Hash(vec![field("f", "v", Some(1400)), field("g", "w", None)]);
        let mut o = Options { ttl_tolerance_ms: 500, ..Options::default() };
        assert_eq!(value_diff(&a, &b, &o).total, 0);
        o.ttl_tolerance_ms = 100;
        let d = value_diff(&a, &b, &o);
        assert_eq!(d.total, 1);
        assert!(matches!(&d.shown[0], Difference::Field { field, .. } if field.head == b"f"));
        o.ignore_ttl = true;
        assert_eq!(value_diff(&a, &b, &o).total, 0);
    }

    #[test]
    fn negative_zero_score_differs_from_zero() {
        let a = Logical::Zset(vec![(b"m".to_vec(), -0.0), (b"n".to_vec(), 1.0)]);
        let b = Logical::Zset(vec![(b"m".to_vec(), 0.0), (b"n".to_vec(), 1.0)]);
        let d = value_diff(&a, &b, &Options::default());
        assert_eq!(d.total, 1);
        assert!(matches!(&d.shown[0], Difference::Score { member, a: Some(x), b: Some(y) }
            if member.head == b"m" && x.is_sign_negative() && !y.is_sign_negative()));
        assert_ne!(score_bits(-0.0), score_bits(0.0));
    }

    #[test]
    fn details_are_capped_but_counted() {
        let a = Logical::Set((0..50).map(|i| format!("m{i:02}").into_bytes()).collect());
        let b = Logical::Set(Vec::new());
        let o = Options { max_details: 3, ..Options::default() };
        let d = value_diff(&a, &b, &o);
        assert_eq!((d.total, d.shown.len()), (50, 3));
        assert_eq!(d.shown[0], Difference::Member { member: Shown::of(b"m00"), in_a: true });
        let long = Shown::of(&[7u8; 1000]);
        assert!(!long.is_whole() && long.head.len() == SHOWN_MAX && long.len == 1000);
    }

    #[test]
    fn functions_are_matched_by_code() {
        let f = |c: &str| (H::new(T_FUNCTION).bytes(c.as_bytes()).finish(), library_name(c.as_bytes()));
        let mut a = vec![f("#!lua name=one\nx"), f("#!lua name=two\ny")];
        let mut b = vec![f("#!lua name=two\ny"), f("#!lua name=three\nz")];
        a.sort();
        b.sort();
        assert_eq!(function_diff(a, b), (vec!["one".to_string()], vec!["three".to_string()]));
    }

    #[test]
    fn partitions_use_every_slot() {
        let mut seen = [0u32; 7];
        for i in 0..7000u64 {
            seen[part_of(key_hash(0, &i.to_le_bytes()), 1, 7)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }
}
