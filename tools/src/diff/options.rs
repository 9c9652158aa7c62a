//! `rdbtool diff`'s arguments and options.

use std::path::PathBuf;

use ferrokv::format::rdb::KeyRecord;

use crate::pipeline::Pipeline;

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
    pub(super) fn wants(&self, k: &KeyRecord<'_>) -> bool {
        if self.db.is_some_and(|d| d != k.db) {
            return false;
        }
        match &self.key {
            // `*` alone takes every key, the empty one too (as Redis's KEYS).
            Some(p) => p.as_slice() == b"*" || ferrokv::glob::matches(p, &k.key.to_bytes()),
            None => true,
        }
    }

    pub(super) fn filtered(&self) -> bool {
        self.db.is_some() || self.key.is_some()
    }

    pub(super) fn ttl_eq(&self, a: Option<i64>, b: Option<i64>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(x), Some(y)) => x.abs_diff(y) <= self.ttl_tolerance_ms,
            _ => false,
        }
    }
}
