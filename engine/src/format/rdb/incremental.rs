//! `IncrementalReader`: an RDB read record by record from a byte stream (a master's
//! socket, a pipe) instead of memory holding the whole file.
//!
//! Each record is parsed by [`RdbReader`] over the bytes buffered so far; when it runs
//! out of them (a `Truncated` error) more are read and the record is parsed again from
//! its start. A read offers room for as many bytes again as the record has so far, and
//! the parse is retried after each read (a blocking source gives what it has: waiting
//! for more could wait for bytes a master never sends). Parsing is cheap next to
//! decoding (values are skipped, not decoded), and the buffer holds about one record:
//! memory is bounded by the largest record, not by the file. Records, verdicts and offsets are those
//! `RdbReader` gives over the whole file (the fuzz target `rdb` checks it).

use std::io::{self, Read};

use crate::format::crc::Crc64;
use crate::format::input::ErrorKind;

use super::reader::{Checksum, RdbError, RdbReader, ReadOptions, Record};
use super::types::Dialect;

/// A failure of [`IncrementalReader`]: the source's, or the data's.
#[derive(Debug)]
pub enum IncrementalError {
    /// Reading the source failed after `offset` bytes.
    Io {
        offset: usize,
        source: io::Error,
    },
    Rdb(RdbError),
}

impl std::fmt::Display for IncrementalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IncrementalError::Io { offset, source } => write!(f, "offset {offset}: {source}"),
            IncrementalError::Rdb(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for IncrementalError {}

/// Read at least this much at a time.
const READ_MIN: usize = 64 << 10;

pub struct IncrementalReader<R> {
    src: R,
    /// Bytes read, in `buf[..end]`; the rest is room for the next read (kept, so a read
    /// does not zero its room again).
    buf: Vec<u8>,
    end: usize,
    /// Offset in the file of `buf[0]`.
    base: usize,
    /// The next record starts at `buf[pos]`.
    pos: usize,
    /// Known once the magic is read.
    dialect: Option<Dialect>,
    db: u64,
    /// The source said it has no more bytes.
    source_ended: bool,
    /// The EOF record or an error was returned.
    done: bool,
    check_crc: bool,
    crc: Crc64,
    /// Offset in the file up to which `crc` has been fed.
    crc_pos: usize,
}

impl<R: Read> IncrementalReader<R> {
    pub fn new(src: R, opts: ReadOptions) -> Self {
        IncrementalReader {
            src,
            buf: Vec::new(),
            end: 0,
            base: 0,
            pos: 0,
            dialect: None,
            db: 0,
            source_ended: false,
            done: false,
            check_crc: opts.check_crc,
            crc: Crc64::new(),
            crc_pos: 0,
        }
    }

    /// Offset in the file of the next record (after the last one returned).
    pub fn position(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes read from the source beyond the last record returned: after the EOF record,
    /// whatever followed the RDB (an end mark, a replication stream).
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// The source, to go on reading what follows the RDB (after [`Self::unread`]).
    pub fn source_mut(&mut self) -> &mut R {
        &mut self.src
    }

    /// Read the next record and hand it to `f` (it borrows the reader's buffer, so it is
    /// consumed there). None after the EOF record or an error.
    pub fn next_with<T>(&mut self, f: impl FnOnce(Record<'_>) -> T) -> Option<Result<T, IncrementalError>> {
        if self.done {
            return None;
        }
        let r = self.read_next(f);
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }

    fn read_next<T>(&mut self, f: impl FnOnce(Record<'_>) -> T) -> Result<T, IncrementalError> {
        let dialect = match self.dialect {
            Some(d) => d,
            None => self.read_magic()?,
        };
        loop {
            let at = self.base + self.pos;
            let mut reader = RdbReader::resume(&self.buf[self.pos..self.end], at, dialect, self.db);
            match reader.next() {
                None => return Err(IncrementalError::Rdb(RdbError::at(at, "internal: no record after the last"))),
                Some(Err(e)) if e.kind == ErrorKind::Truncated && !self.source_ended => {
                    // Everything before `at` has been handed out: no record borrows it.
                    self.fill(self.end - self.pos)?;
                }
                Some(Err(e)) => return Err(IncrementalError::Rdb(e)),
                Some(Ok(record)) => {
                    let end = reader.position() - self.base;
                    let record = match record {
                        Record::Eof { offset, end, checksum } => {
                            let checksum = self.check_eof(offset, checksum)?;
                            self.done = true;
                            Record::Eof { offset, end, checksum }
                        }
                        other => other,
                    };
                    if let Record::SelectDb { db, .. } = record {
                        self.db = db;
                    }
                    let out = f(record);
                    self.pos = end;
                    return Ok(out);
                }
            }
        }
    }

    fn read_magic(&mut self) -> Result<Dialect, IncrementalError> {
        while self.end < 9 && !self.source_ended {
            self.fill(9)?;
        }
        let dialect = Dialect::from_magic(&self.buf[..self.end])
            .map_err(|e| IncrementalError::Rdb(RdbError::from_format(e, None)))?;
        self.pos = 9;
        self.dialect = Some(dialect);
        Ok(dialect)
    }

    /// The stored checksum against the bytes before the EOF byte at `eof_at` and it.
    fn check_eof(&mut self, eof_at: usize, read: Checksum) -> Result<Checksum, IncrementalError> {
        let Checksum::Unchecked(stored) = read else { return Ok(read) };
        if !self.check_crc {
            return Ok(read);
        }
        self.feed_crc(eof_at + 1);
        let computed = self.crc.finish();
        if computed != stored {
            return Err(IncrementalError::Rdb(RdbError::checksum(eof_at, stored, computed)));
        }
        Ok(Checksum::Valid(stored))
    }

    /// Hash the file's bytes up to offset `upto` (all of them buffered).
    fn feed_crc(&mut self, upto: usize) {
        if self.check_crc && upto > self.crc_pos {
            self.crc.update(&self.buf[self.crc_pos - self.base..upto - self.base]);
            self.crc_pos = upto;
        }
    }

    /// One read from the source, with room for `room` bytes or READ_MIN, whichever is
    /// more. The bytes of records already returned are dropped first.
    fn fill(&mut self, room: usize) -> Result<(), IncrementalError> {
        if self.pos > 0 {
            let consumed = self.base + self.pos;
            self.feed_crc(consumed);
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.base = consumed;
            self.pos = 0;
        }
        let want = self.end + room.max(READ_MIN);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        } else if self.buf.len() > (want * 4).max(8 << 20) {
            // A big record went: give its room back.
            self.buf.truncate(want);
            self.buf.shrink_to_fit();
        }
        let n = loop {
            match self.src.read(&mut self.buf[self.end..want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(IncrementalError::Io { offset: self.base + self.end, source }),
            }
        };
        self.end += n;
        if n == 0 {
            self.source_ended = true;
        }
        Ok(())
    }
}

/// A source that gives at most `chunk` bytes a read (tests and the fuzz target).
struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.data.len().min(out.len()).min(self.chunk.max(1));
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Whether reading `data` in reads of at most `chunk` bytes gives the records and the
/// verdict [`RdbReader`] gives over it whole: None, or the first difference. For the
/// unit tests and the fuzz target `rdb`.
#[doc(hidden)]
pub fn differs_from_whole(data: &[u8], chunk: usize) -> Option<String> {
    let whole: Vec<String> = match RdbReader::new(data) {
        Err(e) => vec![format!("error {e:?}")],
        Ok(reader) => reader
            .map(|r| match r {
                Ok(rec) => format!("{rec:?}"),
                Err(e) => format!("error {e:?}"),
            })
            .collect(),
    };
    let mut inc = IncrementalReader::new(Chunked { data, chunk }, ReadOptions::default());
    let mut got = Vec::new();
    while let Some(r) = inc.next_with(|rec| format!("{rec:?}")) {
        got.push(match r {
            Ok(rec) => rec,
            Err(IncrementalError::Rdb(e)) => format!("error {e:?}"),
            Err(e) => format!("i/o error {e}"),
        });
    }
    let at = whole.iter().zip(&got).position(|(a, b)| a != b).unwrap_or(whole.len().min(got.len()));
    if at == whole.len() && at == got.len() {
        return None;
    }
    Some(format!(
        "record {at} read in chunks of {chunk}: {:?}, whole: {:?}",
        got.get(at).map_or("(nothing)", String::as_str),
        whole.get(at).map_or("(nothing)", String::as_str)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> Vec<(String, Vec<u8>)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb");
        let mut files = Vec::new();
        let mut dirs = vec![dir];
        while let Some(d) = dirs.pop() {
            for entry in std::fs::read_dir(&d).unwrap().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|e| e == "rdb") {
                    files.push((p.display().to_string(), std::fs::read(&p).unwrap()));
                }
            }
        }
        assert!(!files.is_empty());
        files
    }

    #[test]
    fn records_read_in_chunks_are_those_of_the_whole_file() {
        for (name, data) in fixtures() {
            for chunk in [1, 3, 9, 64, 4096, 1 << 20] {
                assert_eq!(differs_from_whole(&data, chunk), None, "{name}");
            }
        }
    }

    #[test]
    fn cut_and_damaged_files_give_the_whole_files_verdict() {
        for (name, data) in fixtures() {
            let step = (data.len() / 40).max(1);
            for cut in (0..data.len()).step_by(step) {
                assert_eq!(differs_from_whole(&data[..cut], 5), None, "{name} cut at {cut}");
                let mut bad = data.clone();
                bad[cut] ^= 0x5a;
                assert_eq!(differs_from_whole(&bad, 7), None, "{name} byte {cut} changed");
            }
        }
    }

    #[test]
    fn what_follows_the_rdb_stays_unread() {
        let (_, mut data) = fixtures().remove(0);
        let len = data.len();
        data.extend_from_slice(b"0123456789abcdef0123456789abcdef01234567*1\r\n$4\r\nPING\r\n");
        let mut inc = IncrementalReader::new(Chunked { data: &data, chunk: 1000 }, ReadOptions::default());
        while let Some(r) = inc.next_with(|_| ()) {
            r.unwrap();
        }
        assert_eq!(inc.position(), len);
        let mut rest = inc.unread().to_vec();
        inc.source_mut().read_to_end(&mut rest).unwrap();
        assert_eq!(&rest[..], &data[len..]);
    }
}
