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
//!
//! The parts: `options.rs` (the arguments), `scan.rs` (pass 1), `partition.rs` (the entry
//! files), `hash.rs` (the digests), `compare.rs` (pass 2 and the detail), `report.rs` and
//! `output.rs` (what is found, as text and as JSON); this file runs them in turn.

use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ferrokv::Source;

use self::compare::{Compare, Part, Reread, MAX_FANOUT};
use self::scan::function_diff;
use crate::out::ToolError;

mod compare;
mod hash;
mod options;
mod output;
mod partition;
mod report;
mod scan;

pub use compare::value_diff;
pub use options::{DiffArgs, DiffFormat, Options, DEFAULT_PARTITION_BYTES};
pub use output::{human, json};
pub use partition::TempDir;
pub use report::{
    Counts, DiffReport, Difference, EntryFields, FieldValue, KeyDiff, Shown, Side, Status, ValueDiff, SHOWN_MAX,
};

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
    let fa = scan::scan(&a_name, &sa, opts, &tmp.0, "a", nparts)?;
    let fb = scan::scan(&b_name, &sb, opts, &tmp.0, "b", nparts)?;
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

#[cfg(test)]
mod tests {
    use super::hash::{key_hash, part_of, raw_digest, score_bits, H, T_FUNCTION};
    use super::partition::{decode, encode, vt_code, vt_of, Meta, HEADER};
    use super::scan::library_name;
    use super::*;
    use ferrokv::format::rdb::ValueType;
    use ferrokv::format::Elem;
    use ferrokv::logical::Field;
    use ferrokv::logical::Logical;

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
