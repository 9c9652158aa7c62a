//! What a diff finds: the report and its parts.

use ferrokv::format::rdb::{LogicalType, StreamId};

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
