//! `RdbReader`: an RDB file as a stream of records, one at a time, borrowing from the input.
//!
//! # Format
//! ```text
//! magic (REDIS0001..REDIS0013 | VALKEY080) | record* | 0xFF | [v5+] CRC-64 LE over all before it
//! record = opcode payload | [expire][idle|freq][key_meta] type str:key value
//! ```
//! Per-key opcodes (expire, idle, freq, key metadata) apply to the next key only.

use std::fmt;

use crate::format::blob::Elem;
use crate::format::crc;
use crate::format::input::{finish, le_i64, le_u32, le_u64, u8_, ErrorKind, FormatError, Input};

use super::module::{key_meta, module_aux, KeyMetaClass, ModuleAux};
use super::prim::{length, rdb_elem, rdb_str};
use super::types::{Dialect, Opcode};
use super::value::{skip_value, Value};

/// A decoding error with everything known about where it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbError {
    pub offset: usize,
    pub db: Option<u64>,
    pub key: Option<Vec<u8>>,
    pub vtype: Option<&'static str>,
    pub what: String,
    /// Truncated, malformed, a bad checksum, or an unknown version: matchable.
    pub kind: ErrorKind,
}

impl RdbError {
    /// Malformed bytes at `offset`.
    pub fn at(offset: usize, what: impl Into<String>) -> Self {
        RdbError { offset, db: None, key: None, vtype: None, what: what.into(), kind: ErrorKind::Malformed }
    }

    /// The checksum after the EOF byte at `eof_at` is not the data's.
    pub(super) fn checksum(eof_at: usize, stored: u64, computed: u64) -> Self {
        RdbError::at(eof_at + 1, format!("wrong RDB checksum: stored {stored:016x}, computed {computed:016x}"))
            .of_kind(ErrorKind::Checksum)
    }

    /// `at` with another kind.
    pub fn of_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }

    pub(super) fn from_format(e: FormatError, db: Option<u64>) -> Self {
        RdbError { offset: e.offset, db, key: None, vtype: None, what: e.what, kind: e.kind }
    }

    /// Attach a key's context to an error found while reading its value.
    pub fn in_key(e: FormatError, key: &KeyRecord<'_>) -> Self {
        // Element errors without a position of their own point at the record.
        let offset = if e.offset == 0 { key.offset } else { e.offset };
        RdbError {
            offset,
            db: Some(key.db),
            key: Some(key.key.to_bytes().into_owned()),
            vtype: Some(key.value.vtype.name()),
            what: e.what,
            kind: e.kind,
        }
    }
}

/// Render key bytes for a message: printable ASCII as is, the rest as \xNN.
/// The `repl-stream-db` field among the first records of an RDB a master sent for a full
/// sync (`head` may be only the file's start): the database its stream has selected
/// where the snapshot ends; 0 without one.
pub fn repl_stream_db(head: &[u8]) -> usize {
    head_aux_int(head, b"repl-stream-db").and_then(|db| usize::try_from(db).ok()).unwrap_or(0)
}

/// The numeric aux field `name` of an RDB's header (`ctime`, `repl-stream-db`), read from
/// its first bytes; None when absent.
pub fn head_aux_int(head: &[u8], name: &[u8]) -> Option<i64> {
    head_aux_with(head, name, aux_int)
}

/// The aux field `name` of an RDB's header (`repl-id`), as bytes; None when absent.
pub fn head_aux(head: &[u8], name: &[u8]) -> Option<Vec<u8>> {
    head_aux_with(head, name, |value| Some(value.to_bytes().into_owned()))
}

fn head_aux_with<T>(head: &[u8], name: &[u8], read: impl Fn(&Elem<'_>) -> Option<T>) -> Option<T> {
    let reader = RdbReader::with_options(head, ReadOptions { check_crc: false }).ok()?;
    for record in reader {
        match record {
            Ok(Record::Aux { key, value }) if key.to_bytes().as_ref() == name => return read(&value),
            Ok(Record::Aux { .. }) => continue,
            _ => break,
        }
    }
    None
}

/// An aux field's value as a number: Redis writes the numeric ones as integer-encoded
/// strings, or as text.
pub fn aux_int(value: &Elem<'_>) -> Option<i64> {
    value.as_i64().or_else(|| std::str::from_utf8(&value.to_bytes()).ok()?.parse().ok())
}

pub fn escape_key(k: &[u8]) -> String {
    let mut s = String::new();
    for &b in k.iter().take(200) {
        match b {
            b'\'' => s.push_str("\\'"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7E => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    if k.len() > 200 {
        s.push_str("...");
    }
    s
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "offset {}", self.offset)?;
        if let Some(db) = self.db {
            write!(f, ": db {db}")?;
        }
        if let Some(k) = &self.key {
            write!(f, " key '{}'", escape_key(k))?;
        }
        if let Some(t) = self.vtype {
            write!(f, " (type {t})")?;
        }
        write!(f, ": {}", self.what)
    }
}

impl std::error::Error for RdbError {}

/// What the trailing checksum said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// RDB < 5 has no checksum.
    Absent,
    /// Stored as zero: the writer had checksums off.
    Disabled,
    /// Stored and matching.
    Valid(u64),
    /// Stored but not checked (checking was turned off).
    Unchecked(u64),
}

/// A key record.
#[derive(Debug, Clone)]
pub struct KeyRecord<'a> {
    /// Offset of the record's first byte (its first per-key opcode, or its type byte).
    pub offset: usize,
    pub db: u64,
    pub key: Elem<'a>,
    pub expire_ms: Option<i64>,
    pub idle: Option<u64>,
    pub freq: Option<u8>,
    /// Key metadata (Redis 8 / Valkey), None for a key without: boxed, as a record is moved
    /// per key and one of 128 bytes moves without a call to memcpy (144 did not).
    pub meta: Option<Box<Vec<KeyMetaClass<'a>>>>,
    pub value: Value<'a>,
    /// Offset just past the value.
    pub end: usize,
}

/// One record of the file.
///
/// Keys are by far the most common record: held inline, not boxed, as a box per key cost
/// an allocation on the reading thread and a free on whichever worker consumed it.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Record<'a> {
    Aux {
        key: Elem<'a>,
        value: Elem<'a>,
    },
    /// `offset` is the record's opcode.
    SelectDb {
        offset: usize,
        db: u64,
    },
    ResizeDb {
        db_size: u64,
        expires_size: u64,
    },
    Key(KeyRecord<'a>),
    ModuleAux(ModuleAux<'a>),
    /// FUNCTION2: one library's source; `offset` is the record's opcode.
    Function {
        offset: usize,
        code: Elem<'a>,
    },
    /// 7.0-rc1/rc2 pre-release function record.
    FunctionPreGa {
        name: Elem<'a>,
        engine: Elem<'a>,
        desc: Option<Elem<'a>>,
        code: Elem<'a>,
    },
    SlotInfo {
        slot: u64,
        keys: u64,
        expires: u64,
    },
    SlotImport {
        job: Elem<'a>,
        ranges: Vec<(u64, u64)>,
    },
    /// The end: offset of the 0xFF byte, and of the first byte after the checksum.
    Eof {
        offset: usize,
        end: usize,
        checksum: Checksum,
    },
}

/// Options for reading.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Compare the trailing CRC-64 with the data.
    pub check_crc: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { check_crc: true }
    }
}

/// Streaming reader over an RDB held in memory (usually memory-mapped).
pub struct RdbReader<'a> {
    file: &'a [u8],
    rest: Input<'a>,
    dialect: Dialect,
    db: u64,
    done: bool,
    opts: ReadOptions,
    /// Running CRC over `file[..crc_pos]`, advanced as records are read so every byte is
    /// hashed while it is still in cache and the whole file is never touched twice.
    crc: crc::Crc64,
    crc_pos: usize,
}

/// Feed the checksum in steps of this many bytes: the reader reads again up to this far
/// behind the records it has returned.
pub const CRC_STEP: usize = 1 << 20;

impl<'a> RdbReader<'a> {
    /// Check the magic and position at the first record. `data` may start at a non-zero
    /// offset of a larger file (an AOF preamble); offsets are then relative to `data`.
    pub fn new(data: &'a [u8]) -> Result<Self, RdbError> {
        Self::with_options(data, ReadOptions::default())
    }

    pub fn with_options(data: &'a [u8], opts: ReadOptions) -> Result<Self, RdbError> {
        let dialect = Dialect::from_magic(data).map_err(|e| RdbError::from_format(e, None))?;
        Ok(RdbReader {
            file: data,
            rest: Input::at(&data[9..], 9),
            dialect,
            db: 0,
            done: false,
            opts,
            crc: crc::Crc64::new(),
            crc_pos: 0,
        })
    }

    /// Records of a `dialect` file from `data`, which holds its bytes from `offset` on
    /// (offsets are the file's); `db` is the database selected before. The checksum is
    /// not checked: the EOF record says it is `Unchecked` (see `IncrementalReader`).
    pub(super) fn resume(data: &'a [u8], offset: usize, dialect: Dialect, db: u64) -> Self {
        RdbReader {
            file: data,
            rest: Input::at(data, offset),
            dialect,
            db,
            done: false,
            opts: ReadOptions { check_crc: false },
            crc: crc::Crc64::new(),
            crc_pos: 0,
        }
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.rest.offset()
    }

    pub fn len(&self) -> usize {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    fn err(&self, e: nom::Err<FormatError>, reading: &str) -> RdbError {
        let mut fe = finish(e, reading);
        if fe.offset == 0 {
            fe.offset = self.rest.offset();
        }
        RdbError::from_format(fe, Some(self.db))
    }

    fn read(&mut self) -> Result<Record<'a>, RdbError> {
        let mut expire_ms = None;
        let mut idle = None;
        let mut freq = None;
        let mut meta = None;
        let record_start = self.rest.offset();
        loop {
            let at = self.rest;
            let (r, b) = u8_(at).map_err(|e| self.err(e, "a record type (the file ends without an EOF opcode)"))?;
            if let Some(op) = self.dialect.opcode(b) {
                match op {
                    Opcode::ExpireTimeSec => {
                        let (r, s) = le_u32(r).map_err(|e| self.err(e, "an expire time"))?;
                        expire_ms = Some(i64::from(s as i32) * 1000);
                        self.rest = r;
                        continue;
                    }
                    Opcode::ExpireTimeMs => {
                        let (r, ms) = le_i64(r).map_err(|e| self.err(e, "an expire time"))?;
                        expire_ms = Some(ms);
                        self.rest = r;
                        continue;
                    }
                    Opcode::Idle => {
                        let (r, v) = length(r, "an LRU idle time").map_err(|e| self.err(e, "an LRU idle time"))?;
                        idle = Some(v);
                        self.rest = r;
                        continue;
                    }
                    Opcode::Freq => {
                        let (r, v) = u8_(r).map_err(|e| self.err(e, "an LFU frequency"))?;
                        freq = Some(v);
                        self.rest = r;
                        continue;
                    }
                    Opcode::KeyMeta => {
                        let (r, m) = key_meta(r).map_err(|e| self.err(e, "key metadata"))?;
                        meta = (!m.is_empty()).then(|| Box::new(m));
                        self.rest = r;
                        continue;
                    }
                    _ => {}
                }
                if expire_ms.is_some() || idle.is_some() || freq.is_some() || meta.is_some() {
                    return Err(RdbError {
                        offset: at.offset(),
                        db: Some(self.db),
                        key: None,
                        vtype: None,
                        kind: ErrorKind::Malformed,
                        what: format!(
                            "per-key opcodes at offset {record_start} are followed by opcode 0x{b:02x}, not a key"
                        ),
                    });
                }
                return self.opcode_record(op, r, at);
            }
            let Some(vtype) = self.dialect.value_type(b) else {
                return Err(RdbError::at(
                    at.offset(),
                    format!("unknown value type or opcode {b} (0x{b:02x}) for {}", self.dialect.magic()),
                )
                .with_db(self.db));
            };
            let (r, key) = rdb_str(r).map_err(|e| self.err(e, "a key"))?;
            let key_elem = key.to_elem().map_err(|e| RdbError::from_format(e, Some(self.db)))?;
            let (r2, ()) = skip_value(r, vtype).map_err(|e| {
                let mut err = self.err(e, &format!("a {} value", vtype.name()));
                err.key = Some(key_elem.to_bytes().into_owned());
                err.vtype = Some(vtype.name());
                err
            })?;
            let body = r.until(&r2);
            self.rest = r2;
            return Ok(Record::Key(KeyRecord {
                offset: record_start,
                db: self.db,
                key: key_elem,
                expire_ms,
                idle,
                freq,
                meta,
                value: Value { vtype, body },
                end: r2.offset(),
            }));
        }
    }

    fn opcode_record(&mut self, op: Opcode, r: Input<'a>, at: Input<'a>) -> Result<Record<'a>, RdbError> {
        let rec = match op {
            Opcode::Eof => {
                let eof_at = at.offset();
                let (rest, checksum) = if self.dialect.version >= 5 {
                    let (rest, stored) = le_u64(r).map_err(|e| self.err(e, "the checksum after EOF"))?;
                    let c = if stored == 0 {
                        Checksum::Disabled
                    } else if self.opts.check_crc {
                        self.crc.update(&self.file[self.crc_pos..eof_at + 1]);
                        self.crc_pos = eof_at + 1;
                        let computed = self.crc.finish();
                        if computed != stored {
                            return Err(RdbError::checksum(eof_at, stored, computed));
                        }
                        Checksum::Valid(stored)
                    } else {
                        Checksum::Unchecked(stored)
                    };
                    (rest, c)
                } else {
                    (r, Checksum::Absent)
                };
                self.rest = rest;
                self.done = true;
                return Ok(Record::Eof { offset: eof_at, end: rest.offset(), checksum });
            }
            Opcode::SelectDb => {
                let (r, db) = length(r, "a database number").map_err(|e| self.err(e, "a database number"))?;
                self.db = db;
                self.rest = r;
                Record::SelectDb { offset: at.offset(), db }
            }
            Opcode::ResizeDb => {
                let (r, a) = length(r, "a db size").map_err(|e| self.err(e, "RESIZEDB"))?;
                let (r, b) = length(r, "an expires size").map_err(|e| self.err(e, "RESIZEDB"))?;
                self.rest = r;
                Record::ResizeDb { db_size: a, expires_size: b }
            }
            Opcode::Aux => {
                let (r, k) = rdb_elem(r).map_err(|e| self.err(e, "an AUX field name"))?;
                let (r, v) = rdb_elem(r).map_err(|e| self.err(e, "an AUX field value"))?;
                self.rest = r;
                Record::Aux { key: k, value: v }
            }
            Opcode::ModuleAux => {
                let (r, m) = module_aux(r).map_err(|e| self.err(e, "a module AUX record"))?;
                self.rest = r;
                Record::ModuleAux(m)
            }
            Opcode::Function2 => {
                let (r, code) = rdb_elem(r).map_err(|e| self.err(e, "a function library"))?;
                self.rest = r;
                Record::Function { offset: at.offset(), code }
            }
            Opcode::FunctionPreGa => {
                let (r, name) = rdb_elem(r).map_err(|e| self.err(e, "a pre-release function name"))?;
                let (r, engine) = rdb_elem(r).map_err(|e| self.err(e, "a pre-release function engine"))?;
                let (r, has_desc) = length(r, "a description flag").map_err(|e| self.err(e, "a function"))?;
                let (r, desc) = if has_desc != 0 {
                    let (r, d) = rdb_elem(r).map_err(|e| self.err(e, "a function description"))?;
                    (r, Some(d))
                } else {
                    (r, None)
                };
                let (r, code) = rdb_elem(r).map_err(|e| self.err(e, "a function body"))?;
                self.rest = r;
                Record::FunctionPreGa { name, engine, desc, code }
            }
            Opcode::SlotInfo => {
                let (r, slot) = length(r, "a slot").map_err(|e| self.err(e, "SLOT_INFO"))?;
                let (r, keys) = length(r, "a slot key count").map_err(|e| self.err(e, "SLOT_INFO"))?;
                let (r, expires) = length(r, "a slot expires count").map_err(|e| self.err(e, "SLOT_INFO"))?;
                self.rest = r;
                Record::SlotInfo { slot, keys, expires }
            }
            Opcode::SlotImport => {
                let (r, job) = rdb_elem(r).map_err(|e| self.err(e, "a slot import job name"))?;
                let (mut r, n) = length(r, "a slot range count").map_err(|e| self.err(e, "SLOT_IMPORT"))?;
                let mut ranges = Vec::new();
                for _ in 0..n {
                    let (r2, a) = length(r, "a slot").map_err(|e| self.err(e, "SLOT_IMPORT"))?;
                    let (r2, b) = length(r2, "a slot").map_err(|e| self.err(e, "SLOT_IMPORT"))?;
                    ranges.push((a, b));
                    r = r2;
                }
                self.rest = r;
                Record::SlotImport { job, ranges }
            }
            Opcode::ExpireTimeSec | Opcode::ExpireTimeMs | Opcode::Idle | Opcode::Freq | Opcode::KeyMeta => {
                return Err(RdbError::at(at.offset(), "internal: per-key opcode reached record dispatch"));
            }
        };
        Ok(rec)
    }
}

impl RdbError {
    fn with_db(mut self, db: u64) -> Self {
        self.db = Some(db);
        self
    }
}

impl<'a> Iterator for RdbReader<'a> {
    type Item = Result<Record<'a>, RdbError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.read();
        if r.is_err() {
            self.done = true;
        }
        let pos = self.rest.offset().min(self.file.len());
        if self.opts.check_crc && !self.done && pos >= self.crc_pos + CRC_STEP {
            self.crc.update(&self.file[self.crc_pos..pos]);
            self.crc_pos = pos;
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record is moved for every key (reader to batch, batch to check); up to 128 bytes
    /// the move is inline, past it a memcpy call (2 % of verify's instructions at 144).
    #[test]
    fn a_record_moves_inline() {
        assert!(std::mem::size_of::<Record<'_>>() <= 128, "{}", std::mem::size_of::<Record<'_>>());
    }
}
