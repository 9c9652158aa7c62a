//! Partition files: fixed-size entries (db, key, type, expiry, digests, where the value
//! sits) written by pass 1 and read back by pass 2.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use ferrokv::format::rdb::{LogicalType, ValueType};

use super::hash::le64;
use crate::out::ToolError;

pub(super) const HEADER: usize = 79;
pub(super) const F_EXPIRE: u8 = 1;
pub(super) const F_RAW: u8 = 2;

/// Where a key's value is and what it digests to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Meta {
    pub(super) rec_off: u64,
    pub(super) body_off: u64,
    pub(super) body_len: u64,
    pub(super) expire: Option<i64>,
    pub(super) digest: u128,
    pub(super) fttl: u128,
    pub(super) ltype: u8,
    pub(super) vtype: u8,
    /// `digest` hashes the stored bytes, not the canonical value (see `raw_form`).
    pub(super) raw: bool,
}

pub(super) fn vt_code(v: ValueType) -> u8 {
    v.code()
}

pub(super) fn vt_of(code: u8) -> Option<ValueType> {
    ValueType::from_code(code)
}

pub(super) fn lt_code(t: LogicalType) -> u8 {
    LogicalType::ALL.iter().position(|x| *x == t).map_or(u8::MAX, |p| p as u8)
}

pub(super) fn lt_of(code: u8) -> LogicalType {
    LogicalType::ALL.get(usize::from(code)).copied().unwrap_or(LogicalType::Module)
}

pub(super) fn encode(out: &mut Vec<u8>, db: u64, key: &[u8], m: &Meta) {
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

pub(super) fn le128(c: &[u8]) -> u128 {
    u128::from(le64(c)) | (u128::from(le64(&c[8..])) << 64)
}

/// Decode a header: (db, meta, key length).
pub(super) fn decode(h: &[u8]) -> (u64, Meta, usize) {
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
pub(super) struct EntryReader {
    pub(super) name: PathBuf,
    pub(super) r: BufReader<File>,
    pub(super) header: [u8; HEADER],
    pub(super) key: Vec<u8>,
}

impl EntryReader {
    pub(super) fn open(path: &Path) -> Result<Self, ToolError> {
        let f = File::open(path).map_err(|e| temp_err(path, e))?;
        Ok(EntryReader {
            name: path.to_path_buf(),
            r: BufReader::with_capacity(256 << 10, f),
            header: [0; HEADER],
            key: Vec::new(),
        })
    }

    /// The next entry: (db, meta); the key is in `self.key`.
    pub(super) fn next(&mut self) -> Result<Option<(u64, Meta)>, ToolError> {
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

pub(super) fn temp_err(path: &Path, e: io::Error) -> ToolError {
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
pub(super) struct PartFile {
    pub(super) path: PathBuf,
    pub(super) bytes: u64,
    pub(super) entries: u64,
}

/// A set of partition files being written.
pub(super) struct PartWriters {
    pub(super) files: Vec<(BufWriter<File>, PartFile)>,
}

impl PartWriters {
    pub(super) fn create(dir: &Path, prefix: &str, side: &str, n: usize) -> Result<Self, ToolError> {
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

    pub(super) fn write(&mut self, part: usize, entry: &[u8]) -> Result<(), ToolError> {
        let (w, pf) = &mut self.files[part];
        w.write_all(entry).map_err(|e| temp_err(&pf.path, e))?;
        pf.bytes += entry.len() as u64;
        pf.entries += 1;
        Ok(())
    }

    pub(super) fn finish(self) -> Result<Vec<PartFile>, ToolError> {
        let mut out = Vec::with_capacity(self.files.len());
        for (mut w, pf) in self.files {
            w.flush().map_err(|e| temp_err(&pf.path, e))?;
            out.push(pf);
        }
        Ok(out)
    }
}
