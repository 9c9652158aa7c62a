//! Every RDB type and opcode number, per dialect.
//!
//! `REDIS00NN` and `VALKEY0NN` give the same bytes different meanings (type 22, opcode 243),
//! so the magic picks a `Dialect` and the tables below map bytes to meanings for it.

use std::fmt;

use crate::format::input::{ErrorKind, FormatError};

/// Newest Redis RDB version we read.
pub const REDIS_MAX_VERSION: u32 = 13;
/// Valkey versions we read (`VALKEY080`).
pub const VALKEY_VERSIONS: std::ops::RangeInclusive<u32> = 80..=80;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Redis,
    Valkey,
}

/// Which writer family and version produced the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dialect {
    pub family: Family,
    pub version: u32,
}

/// C's atoi over `b`: leading white space, a sign, then the digits up to the first other
/// byte (0 when there are none).
fn atoi(b: &[u8]) -> i64 {
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let negative = b.get(i) == Some(&b'-');
    if matches!(b.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut v: i64 = 0;
    while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
        v = v * 10 + i64::from(d - b'0');
        i += 1;
    }
    if negative {
        -v
    } else {
        v
    }
}

impl Dialect {
    pub const fn redis(version: u32) -> Self {
        Dialect { family: Family::Redis, version }
    }

    /// Read the 9-byte magic. `Err` says why it is not one we read.
    pub fn from_magic(magic: &[u8]) -> Result<Dialect, FormatError> {
        let digits = |d: &[u8]| -> Option<u32> {
            if d.iter().all(u8::is_ascii_digit) {
                std::str::from_utf8(d).ok()?.parse().ok()
            } else {
                None
            }
        };
        if magic.len() < 9 {
            return Err(FormatError::truncated(0, format!("file too short for an RDB header ({} bytes)", magic.len())));
        }
        if &magic[..5] == b"REDIS" {
            // Redis reads the four characters with atoi: leading digits count, the rest is
            // ignored ("001q" is version 1, which it loads).
            let v = atoi(&magic[5..9]);
            if v < 1 || v > i64::from(REDIS_MAX_VERSION) {
                return Err(unsupported(format!(
                    "unsupported RDB version {v} ({:?}; this build reads REDIS0001 to REDIS{REDIS_MAX_VERSION:04})",
                    String::from_utf8_lossy(&magic[5..9])
                )));
            }
            return Ok(Dialect { family: Family::Redis, version: v as u32 });
        }
        if &magic[..6] == b"VALKEY" {
            let v = digits(&magic[6..9]).ok_or_else(|| {
                bad(format!("bad Valkey RDB version digits {:?}", String::from_utf8_lossy(&magic[6..9])))
            })?;
            if !VALKEY_VERSIONS.contains(&v) {
                return Err(unsupported(format!("unsupported Valkey RDB version {v} (this build reads VALKEY080)")));
            }
            return Ok(Dialect { family: Family::Valkey, version: v });
        }
        Err(bad(format!("not an RDB file: wrong signature {:?}", String::from_utf8_lossy(&magic[..9]))))
    }

    /// The magic this dialect writes.
    pub fn magic(&self) -> String {
        match self.family {
            Family::Redis => format!("REDIS{:04}", self.version),
            Family::Valkey => format!("VALKEY{:03}", self.version),
        }
    }

    pub fn opcode(&self, b: u8) -> Option<Opcode> {
        Some(match b {
            0xFF => Opcode::Eof,
            0xFE => Opcode::SelectDb,
            0xFD => Opcode::ExpireTimeSec,
            0xFC => Opcode::ExpireTimeMs,
            0xFB => Opcode::ResizeDb,
            0xFA => Opcode::Aux,
            0xF9 => Opcode::Freq,
            0xF8 => Opcode::Idle,
            0xF7 => Opcode::ModuleAux,
            0xF6 => Opcode::FunctionPreGa,
            0xF5 => Opcode::Function2,
            0xF4 => Opcode::SlotInfo,
            0xF3 => match self.family {
                Family::Redis => Opcode::KeyMeta,
                Family::Valkey => Opcode::SlotImport,
            },
            _ => return None,
        })
    }

    pub fn value_type(&self, b: u8) -> Option<ValueType> {
        use ValueType::*;
        Some(match b {
            0 => String,
            1 => ListLinked,
            2 => SetHashtable,
            3 => ZsetText,
            4 => Hash,
            5 => Zset2,
            6 => ModulePreGa,
            7 => Module2,
            9 => HashZipmap,
            10 => ListZiplist,
            11 => SetIntset,
            12 => ZsetZiplist,
            13 => HashZiplist,
            14 => ListQuicklist,
            15 => Stream1,
            16 => HashListpack,
            17 => ZsetListpack,
            18 => ListQuicklist2,
            19 => Stream2,
            20 => SetListpack,
            21 => Stream3,
            22 => match self.family {
                Family::Redis => HashMetadataPreGa,
                Family::Valkey => ValkeyHash2,
            },
            23 if self.family == Family::Redis => HashListpackExPreGa,
            24 if self.family == Family::Redis => HashMetadata,
            25 if self.family == Family::Redis => HashListpackEx,
            26 if self.family == Family::Redis => Stream4,
            27 if self.family == Family::Redis => Stream5,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    Eof,
    SelectDb,
    ExpireTimeSec,
    ExpireTimeMs,
    ResizeDb,
    Aux,
    Freq,
    Idle,
    ModuleAux,
    FunctionPreGa,
    Function2,
    SlotInfo,
    /// Valkey 9: slots being imported.
    SlotImport,
    /// Redis 8.6+: per-key module metadata before the type byte.
    KeyMeta,
}

/// The logical type, what `TYPE` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogicalType {
    String,
    List,
    Set,
    Zset,
    Hash,
    Stream,
    Module,
}

impl LogicalType {
    pub fn name(self) -> &'static str {
        match self {
            LogicalType::String => "string",
            LogicalType::List => "list",
            LogicalType::Set => "set",
            LogicalType::Zset => "zset",
            LogicalType::Hash => "hash",
            LogicalType::Stream => "stream",
            LogicalType::Module => "module",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "string" => LogicalType::String,
            "list" => LogicalType::List,
            "set" => LogicalType::Set,
            "zset" => LogicalType::Zset,
            "hash" => LogicalType::Hash,
            "stream" => LogicalType::Stream,
            "module" => LogicalType::Module,
            _ => return None,
        })
    }

    pub const ALL: [LogicalType; 7] = [
        LogicalType::String,
        LogicalType::List,
        LogicalType::Set,
        LogicalType::Zset,
        LogicalType::Hash,
        LogicalType::Stream,
        LogicalType::Module,
    ];
}

impl fmt::Display for LogicalType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A value type byte, as the dialect reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    String,
    ListLinked,
    SetHashtable,
    ZsetText,
    Hash,
    Zset2,
    ModulePreGa,
    Module2,
    HashZipmap,
    ListZiplist,
    SetIntset,
    ZsetZiplist,
    HashZiplist,
    ListQuicklist,
    Stream1,
    HashListpack,
    ZsetListpack,
    ListQuicklist2,
    Stream2,
    SetListpack,
    Stream3,
    HashMetadataPreGa,
    HashListpackExPreGa,
    HashMetadata,
    HashListpackEx,
    Stream4,
    Stream5,
    ValkeyHash2,
}

impl ValueType {
    /// Every value type, in a fixed order (their `code`s).
    pub const ALL: [ValueType; 28] = {
        use ValueType::*;
        [
            String,
            ListLinked,
            SetHashtable,
            ZsetText,
            Hash,
            Zset2,
            ModulePreGa,
            Module2,
            HashZipmap,
            ListZiplist,
            SetIntset,
            ZsetZiplist,
            HashZiplist,
            ListQuicklist,
            Stream1,
            HashListpack,
            ZsetListpack,
            ListQuicklist2,
            Stream2,
            SetListpack,
            Stream3,
            HashMetadataPreGa,
            HashListpackExPreGa,
            HashMetadata,
            HashListpackEx,
            Stream4,
            Stream5,
            ValkeyHash2,
        ]
    };

    /// A stable small number for the type (its index in `ALL`), for compact indexes.
    pub fn code(self) -> u8 {
        // ALL lists the variants in declaration order (a test holds it to that).
        self as u8
    }

    pub fn from_code(code: u8) -> Option<ValueType> {
        Self::ALL.get(usize::from(code)).copied()
    }

    /// The first RDB version whose writer (in the Redis family) has this type, for the
    /// listpack-era types whose versions are known exactly: a loader refuses a type newer
    /// than itself ("Unknown RDB encoding type"), so an RDB 10 file holding a set-listpack
    /// loads in Redis 7.2 but not in the Redis 7.0 that writes RDB 10. Older types: 1.
    pub fn first_rdb_version(self) -> u32 {
        use ValueType::*;
        match self {
            Stream1 => 9,
            HashListpack | ZsetListpack | ListQuicklist2 | Stream2 => 10,
            SetListpack | Stream3 => 11,
            // Redis 7.4's; the streams of Redis 8 are at least that new.
            HashMetadataPreGa | HashListpackExPreGa | HashMetadata | HashListpackEx | Stream4 | Stream5 => 12,
            _ => 1,
        }
    }

    pub fn logical(self) -> LogicalType {
        use ValueType::*;
        match self {
            String => LogicalType::String,
            ListLinked | ListZiplist | ListQuicklist | ListQuicklist2 => LogicalType::List,
            SetHashtable | SetIntset | SetListpack => LogicalType::Set,
            ZsetText | Zset2 | ZsetZiplist | ZsetListpack => LogicalType::Zset,
            Hash | HashZipmap | HashZiplist | HashListpack | HashMetadataPreGa | HashListpackExPreGa | HashMetadata
            | HashListpackEx | ValkeyHash2 => LogicalType::Hash,
            Stream1 | Stream2 | Stream3 | Stream4 | Stream5 => LogicalType::Stream,
            ModulePreGa | Module2 => LogicalType::Module,
        }
    }

    /// The name redis-check-rdb uses for the type byte, used in messages and `--json` output.
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            String => "string",
            ListLinked => "list-linked",
            SetHashtable => "set-hashtable",
            ZsetText => "zset-v1",
            Hash => "hash-hashtable",
            Zset2 => "zset-v2",
            ModulePreGa => "module-pre-release",
            Module2 => "module-value",
            HashZipmap => "hash-zipmap",
            ListZiplist => "list-ziplist",
            SetIntset => "set-intset",
            ZsetZiplist => "zset-ziplist",
            HashZiplist => "hash-ziplist",
            ListQuicklist => "quicklist",
            Stream1 => "stream",
            HashListpack => "hash-listpack",
            ZsetListpack => "zset-listpack",
            ListQuicklist2 => "quicklist-v2",
            Stream2 => "stream-v2",
            SetListpack => "set-listpack",
            Stream3 => "stream-v3",
            HashMetadataPreGa => "hash-hashtable-md-pre-ga",
            HashListpackExPreGa => "hash-listpack-md-pre-ga",
            HashMetadata => "hash-hashtable-md",
            HashListpackEx => "hash-listpack-md",
            Stream4 => "stream-v4",
            Stream5 => "stream-v5",
            ValkeyHash2 => "hash-2",
        }
    }

    /// The storage encoding, named as `OBJECT ENCODING` names the in-memory form it loads to.
    pub fn encoding(self) -> &'static str {
        use ValueType::*;
        match self {
            String => "string",
            ListLinked => "linkedlist",
            SetHashtable | Hash | HashMetadata | HashMetadataPreGa | ValkeyHash2 => "hashtable",
            ZsetText | Zset2 => "skiplist",
            ModulePreGa | Module2 => "module",
            HashZipmap => "zipmap",
            ListZiplist | ZsetZiplist | HashZiplist => "ziplist",
            SetIntset => "intset",
            ListQuicklist | ListQuicklist2 => "quicklist",
            Stream1 | Stream2 | Stream3 | Stream4 | Stream5 => "stream",
            HashListpack | ZsetListpack | SetListpack => "listpack",
            HashListpackEx | HashListpackExPreGa => "listpackex",
        }
    }

    /// What Redis's loader calls the value in its "<name> integrity check failed." line.
    pub fn integrity_name(self) -> &'static str {
        use ValueType::*;
        match self {
            HashZipmap => "Zipmap",
            ListZiplist => "List ziplist",
            SetIntset => "Intset",
            ZsetZiplist => "Zset ziplist",
            HashZiplist => "Hash ziplist",
            ListQuicklist => "Ziplist",
            ListQuicklist2 => "Listpack",
            HashListpack | HashListpackEx | HashListpackExPreGa => "Hash listpack",
            ZsetListpack => "Zset listpack",
            SetListpack => "Set listpack",
            Stream1 | Stream2 | Stream3 | Stream4 | Stream5 => "Stream listpack",
            _ => "Value",
        }
    }

    /// Stream layout generation: 1 (type 15) .. 5 (type 27).
    pub fn stream_version(self) -> u8 {
        match self {
            ValueType::Stream1 => 1,
            ValueType::Stream2 => 2,
            ValueType::Stream3 => 3,
            ValueType::Stream4 => 4,
            ValueType::Stream5 => 5,
            _ => 0,
        }
    }
}

/// A header that is not an RDB's.
fn bad(what: String) -> FormatError {
    FormatError::new(0, what)
}

/// A header of a version this reader does not know.
fn unsupported(what: String) -> FormatError {
    FormatError { kind: ErrorKind::Unsupported, ..FormatError::new(0, what) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_indexes_in_all() {
        for (i, t) in ValueType::ALL.iter().enumerate() {
            assert_eq!(usize::from(t.code()), i);
            assert_eq!(ValueType::from_code(t.code()), Some(*t));
        }
    }

    /// The version digits as Redis reads them (atoi): a stray byte after the digits is
    /// ignored, none at all is version 0 (refused).
    #[test]
    fn version_digits_read_as_atoi() {
        let version = |m: &[u8]| Dialect::from_magic(m).map(|d| d.version).ok();
        assert_eq!(version(b"REDIS0011"), Some(11));
        assert_eq!(version(b"REDIS001q"), Some(1));
        assert_eq!(version(b"REDIS 012"), Some(12));
        assert_eq!(version(b"REDIS+010"), Some(10));
        assert_eq!(version(b"REDISq011"), None);
        assert_eq!(version(b"REDIS-001"), None);
        assert_eq!(version(b"REDIS0099"), None);
    }
}
