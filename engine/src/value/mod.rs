//! In-memory values with Redis's encodings.
//!
//! Each type keeps the representation Redis would pick (a small hash is a "listpack", a
//! big one a "hashtable"), because OBJECT ENCODING, reply order and the RDB a snapshot
//! writes all follow from it. Conversions happen at the thresholds in [`Limits`].

mod compact;
mod from_rdb;
pub mod hash;
mod indexed;
pub mod list;
mod packed;
pub mod set;
pub mod str;
pub mod stream;
mod varint;
pub mod zset;

use smallvec::SmallVec;

pub use compact::CompactBytes;
pub use from_rdb::FromRdbError;
pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use str::Str;
pub use stream::Stream;
pub use zset::Zset;

use crate::format::logical::Logical;
use crate::format::rdb::LogicalType;

/// Give back a vector's spare capacity for real: move its elements into a block of their
/// exact size. `shrink_to_fit` asks the allocator to shrink in place, and mimalloc keeps
/// a block that would shrink by less than half at its grown size, so a value built by
/// doubling kept up to twice its bytes (measured: 117 MB over 376,579 blocks of 0.5-1 KB
/// loading the small-keys file).
pub(crate) fn fit<T>(v: &mut Vec<T>) {
    if v.capacity() > v.len() {
        let mut exact = Vec::with_capacity(v.len());
        exact.append(v);
        *v = exact;
    }
}

/// Bytes of a key or element: inline up to 16 bytes, on the heap beyond.
pub type Sds = SmallVec<[u8; 16]>;

/// Build an [`Sds`] from a slice.
pub fn sds(b: &[u8]) -> Sds {
    SmallVec::from_slice(b)
}

/// Conversion thresholds (Redis's `*-max-listpack-*` and `set-max-intset-entries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    /// Redis 7.2+ keeps small sets of strings in a listpack; 0 gives Redis 7.0's behaviour
    /// (intset or hashtable only).
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    /// Entries (positive) or bytes class (-1..-5) per quicklist node.
    pub list_max_listpack_size: i64,
    /// Stream listpack node limits (0: no limit).
    pub stream_node_max_bytes: usize,
    pub stream_node_max_entries: usize,
    /// Redis 6.2's ziplist keeps a -0 score as the text "-0"; Redis 7's listpack stores an
    /// integral score as the integer, so -0 reads back as 0 ([`crate::Config::set_version`]).
    pub zset_listpack_keeps_negative_zero: bool,
    /// Redis 7.2+ makes a zset that ZADD creates with more members than the listpack limit
    /// a skiplist at once (scores as given); 7.0 fills a listpack first and converts it.
    pub zset_created_by_size: bool,
    /// hll-sparse-max-bytes: a sparse HyperLogLog past this size becomes dense.
    pub hll_sparse_max_bytes: usize,
    /// Redis 7.2+ keeps a small list as one listpack ([`List::new_packed`]).
    pub list_packed: bool,
    /// Valkey 8.0's ZADD sizes the zset by its longest member, where Redis looks at the
    /// first one when creating it and at none after.
    pub zset_sized_by_longest: bool,
    /// Redis 6.2 converts a ziplist hash for a long field or value only in HSET and kin
    /// (HSETNX even when the field exists): HINCRBY, HINCRBYFLOAT and an RDB's ziplist
    /// leave it a ziplist; Redis 7 converts.
    pub hash_ziplist_keeps_long: bool,
}

impl Default for Limits {
    /// Redis 7.x's defaults.
    fn default() -> Self {
        Limits {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            hll_sparse_max_bytes: 3000,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            zset_listpack_keeps_negative_zero: false,
            zset_created_by_size: false,
            list_packed: false,
            zset_sized_by_longest: false,
            hash_ziplist_keeps_long: false,
        }
    }
}

impl Limits {
    /// The directive's Redis 7 name for its Redis 6.2 (ziplist) name.
    fn canonical(name: &str) -> &str {
        match name {
            "hash-max-ziplist-entries" => "hash-max-listpack-entries",
            "hash-max-ziplist-value" => "hash-max-listpack-value",
            "zset-max-ziplist-entries" => "zset-max-listpack-entries",
            "zset-max-ziplist-value" => "zset-max-listpack-value",
            "list-max-ziplist-size" => "list-max-listpack-size",
            other => other,
        }
    }

    /// The threshold a configuration directive names (either name), if it names one here.
    pub fn get_by_name(&self, name: &str) -> Option<i64> {
        let u = |v: usize| Some(v as i64);
        match Limits::canonical(name) {
            "hash-max-listpack-entries" => u(self.hash_max_listpack_entries),
            "hash-max-listpack-value" => u(self.hash_max_listpack_value),
            "set-max-intset-entries" => u(self.set_max_intset_entries),
            "set-max-listpack-entries" => u(self.set_max_listpack_entries),
            "set-max-listpack-value" => u(self.set_max_listpack_value),
            "zset-max-listpack-entries" => u(self.zset_max_listpack_entries),
            "zset-max-listpack-value" => u(self.zset_max_listpack_value),
            "list-max-listpack-size" => Some(self.list_max_listpack_size),
            "hll-sparse-max-bytes" => u(self.hll_sparse_max_bytes),
            "stream-node-max-entries" => u(self.stream_node_max_entries),
            "stream-node-max-bytes" => u(self.stream_node_max_bytes),
            _ => None,
        }
    }

    /// Set the threshold a configuration directive names (either name); false when it
    /// names none here.
    pub fn set_by_name(&mut self, name: &str, n: i64) -> bool {
        let u = n.max(0) as usize;
        match Limits::canonical(name) {
            "hash-max-listpack-entries" => self.hash_max_listpack_entries = u,
            "hash-max-listpack-value" => self.hash_max_listpack_value = u,
            "set-max-intset-entries" => self.set_max_intset_entries = u,
            "set-max-listpack-entries" => self.set_max_listpack_entries = u,
            "set-max-listpack-value" => self.set_max_listpack_value = u,
            "zset-max-listpack-entries" => self.zset_max_listpack_entries = u,
            "zset-max-listpack-value" => self.zset_max_listpack_value = u,
            "list-max-listpack-size" => self.list_max_listpack_size = n,
            "hll-sparse-max-bytes" => self.hll_sparse_max_bytes = u,
            "stream-node-max-entries" => self.stream_node_max_entries = u,
            "stream-node-max-bytes" => self.stream_node_max_bytes = u,
            _ => return false,
        }
        true
    }
}

/// A key's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(Str),
    List(Box<List>),
    Hash(Box<Hash>),
    Set(Box<Set>),
    Zset(Box<Zset>),
    Stream(Box<Stream>),
}

impl Value {
    /// The name TYPE answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::Zset(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    pub fn logical_type(&self) -> LogicalType {
        match self {
            Value::Str(_) => LogicalType::String,
            Value::List(_) => LogicalType::List,
            Value::Hash(_) => LogicalType::Hash,
            Value::Set(_) => LogicalType::Set,
            Value::Zset(_) => LogicalType::Zset,
            Value::Stream(_) => LogicalType::Stream,
        }
    }

    /// The name OBJECT ENCODING answers.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding(),
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::Zset(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// Elements held (1 for a string).
    pub fn len(&self) -> usize {
        match self {
            Value::Str(_) => 1,
            Value::List(l) => l.len(),
            Value::Hash(h) => h.len(),
            Value::Set(s) => s.len(),
            Value::Zset(z) => z.len(),
            Value::Stream(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A list, hash, set or zset without elements: never stored (Redis deletes a key
    /// whose collection empties, skips one when loading, rejects one in RESTORE).
    pub fn is_empty_collection(&self) -> bool {
        !matches!(self, Value::Str(_) | Value::Stream(_)) && self.is_empty()
    }

    /// The canonical, encoding-free view (for comparing): set members and hash fields
    /// sorted.
    pub fn to_logical(&self) -> Logical {
        let mut l = self.to_logical_in_order();
        match &mut l {
            Logical::Hash(v) => v.sort_by(|a, b| a.field.cmp(&b.field)),
            Logical::Set(v) => v.sort(),
            _ => {}
        }
        l
    }

    /// The value with its elements in memory order (for encoders: DUMP payloads and RDB
    /// files then hold a small hash or set in the order Redis's listpack would).
    pub fn to_logical_in_order(&self) -> Logical {
        match self {
            Value::Str(s) => Logical::String(s.to_vec()),
            Value::List(l) => Logical::List(l.iter().map(|e| e.to_vec()).collect()),
            Value::Hash(h) => Logical::Hash(
                h.iter_with_ttl()
                    .map(|(f, v, t)| crate::format::logical::Field {
                        field: f.to_vec(),
                        value: v.to_vec(),
                        expire_ms: t.map(|t| t as i64),
                    })
                    .collect(),
            ),
            Value::Set(s) => Logical::Set(s.members()),
            Value::Zset(z) => Logical::Zset(z.iter().map(|(m, s)| (m.to_vec(), s)).collect()),
            Value::Stream(s) => Logical::Stream(Box::new(s.to_stream_value())),
        }
    }

    /// A value from its RDB form, in the encoding `limits` call for, keeping the file's
    /// element order (and a compact zset's scores exactly, `-0` too).
    pub fn from_rdb(v: &crate::format::rdb::Value<'_>, limits: &Limits) -> Result<Value, FromRdbError> {
        from_rdb::from_rdb(v, limits)
    }

    /// [`Value::from_rdb`] with Redis's deep integrity checks when `deep`
    /// (sanitize-dump-payload).
    pub fn from_rdb_checked(
        v: &crate::format::rdb::Value<'_>,
        limits: &Limits,
        deep: bool,
    ) -> Result<Value, FromRdbError> {
        from_rdb::from_rdb_checked(v, limits, deep)
    }

    /// [`Value::from_logical`] taking ownership, so long strings and streams move instead
    /// of being copied (loading).
    pub fn from_logical_owned(v: Logical, limits: &Limits) -> Result<Value, String> {
        match v {
            Logical::String(b) if b.len() > str::EMBSTR_MAX => Ok(Value::Str(Str::raw(b))),
            Logical::Stream(s) => Ok(Value::Stream(Box::new(Stream::from_stream_value(&s, limits)))),
            other => Value::from_logical(&other, limits),
        }
    }

    /// Build a value from its canonical view, in the encoding `limits` call for (a hash
    /// with field TTLs as Redis 7.4 loads one). Module values cannot be held and are
    /// refused.
    pub fn from_logical(v: &Logical, limits: &Limits) -> Result<Value, String> {
        Ok(match v {
            Logical::String(b) => Value::Str(Str::from_loaded(b)),
            Logical::List(items) => Value::List(Box::new(List::loaded(items, limits))),
            Logical::Hash(fields) => {
                if fields.iter().any(|f| f.expire_ms.is_some()) {
                    let entries = fields
                        .iter()
                        .map(|f| (sds(&f.field), sds(&f.value), f.expire_ms.map_or(0, |t| t.max(0) as u64)))
                        .collect();
                    return Ok(Value::Hash(Box::new(Hash::from_entries_with_ttls(entries, false, limits))));
                }
                let mut h = Hash::with_capacity(fields.len(), limits);
                for f in fields {
                    h.insert(&f.field, &f.value, limits);
                }
                h.shrink_to_fit();
                Value::Hash(Box::new(h))
            }
            Logical::Set(members) => {
                let mut s = Set::for_members(members.iter().map(|m| m.as_slice()), members.len(), limits);
                for m in members {
                    s.insert(m, limits);
                }
                s.shrink_to_fit();
                Value::Set(Box::new(s))
            }
            Logical::Zset(items) => {
                // As Redis loads a zset: a skiplist, a listpack only when small enough. A
                // skiplist keeps a -0 score; a listpack reads it back as 0.
                let small = items.len() <= limits.zset_max_listpack_entries
                    && items.iter().all(|(m, _)| m.len() <= limits.zset_max_listpack_value);
                let mut z = if small { Zset::default() } else { Zset::Skiplist(Default::default()) };
                for (m, sc) in items {
                    z.insert(m, *sc, limits);
                }
                Value::Zset(Box::new(z))
            }
            Logical::Stream(s) => Value::Stream(Box::new(Stream::from_stream_value(s, limits))),
            Logical::Module(m) => return Err(format!("module type '{}' is not supported", m.name)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_stay_small() {
        assert_eq!(std::mem::size_of::<Sds>(), 24);
        assert!(std::mem::size_of::<Value>() <= 32, "{}", std::mem::size_of::<Value>());
    }
}
