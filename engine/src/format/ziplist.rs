//! Ziplist (RDB types 10, 12, 13 and the nodes of quicklist v1).
//!
//! # Format
//! ```text
//! u32 zlbytes LE | u32 zltail LE | u16 zllen LE (65535 = count by walking) | entry* | 0xFF
//! entry = prevlen (1 byte < 254, else 0xFE + u32 LE) | encoding | data
//! ```
//! String lengths in the encoding are big-endian; integers are little-endian.
//! The iterator checks prevlen against the previous entry, the tail offset and the count.

use super::blob::{Blob, Elem, FlatWriter};
use super::input::FormatError;

const HEADER: usize = 10;
const END: u8 = 0xFF;

pub struct ZiplistIter<'a> {
    blob: Blob<'a>,
    pos: usize,
    prev_size: usize,
    last_start: Option<usize>,
    seen: usize,
    declared: Option<usize>,
    tail: usize,
    done: bool,
}

impl<'a> ZiplistIter<'a> {
    pub fn new(blob: Blob<'a>) -> Result<Self, FormatError> {
        let data = blob.data();
        if data.len() < HEADER + 1 {
            return Err(blob.error(0, format!("ziplist too short ({} bytes)", data.len())));
        }
        let total = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if total != data.len() {
            return Err(blob.error(0, format!("ziplist header says {total} bytes but the blob has {}", data.len())));
        }
        let tail = u32::from_le_bytes([data[4], data[5], data[6], data[7]]) as usize;
        if tail >= data.len() {
            return Err(blob.error(4, format!("ziplist tail offset {tail} is outside the blob")));
        }
        if data[data.len() - 1] != END {
            return Err(blob.error(data.len() - 1, "ziplist does not end with 0xFF"));
        }
        let n = u16::from_le_bytes([data[8], data[9]]);
        let declared = if n == u16::MAX { None } else { Some(n as usize) };
        Ok(ZiplistIter { blob, pos: HEADER, prev_size: 0, last_start: None, seen: 0, declared, tail, done: false })
    }

    /// Number of elements the header declares, if it knows.
    pub fn declared_len(&self) -> Option<usize> {
        self.declared
    }

    /// Iterate without comparing the header's count with the entries at the end (what a
    /// loader walking the entries, not counting them, accepts).
    pub fn without_count_check(mut self) -> Self {
        self.declared = None;
        self
    }

    fn read(&mut self) -> Result<Option<Elem<'a>>, FormatError> {
        let data = self.blob.data();
        let start = self.pos;
        let limit = data.len() - 1;
        let Some(&first) = data.get(start) else {
            return Err(self.blob.error(start, "ziplist entry runs past the end"));
        };
        if first == END {
            if start != limit {
                return Err(self.blob.error(start, "ziplist terminator before the end of the blob"));
            }
            let expect_tail = self.last_start.unwrap_or(HEADER);
            if self.tail != expect_tail {
                return Err(self.blob.error(
                    4,
                    format!("ziplist tail offset {} but the last entry starts at {expect_tail}", self.tail),
                ));
            }
            if let Some(n) = self.declared {
                if n != self.seen {
                    return Err(self
                        .blob
                        .error(8, format!("ziplist header declares {n} entries but holds {}", self.seen)));
                }
            }
            return Ok(None);
        }
        let need = |k: usize| -> Result<(), FormatError> {
            if start.saturating_add(k) > limit {
                Err(self.blob.error(start, "ziplist entry runs past the end"))
            } else {
                Ok(())
            }
        };
        // prevlen
        let (prevlen, pl) = if first < 254 {
            (first as usize, 1)
        } else if first == 254 {
            need(5)?;
            (u32::from_le_bytes([data[start + 1], data[start + 2], data[start + 3], data[start + 4]]) as usize, 5)
        } else {
            return Err(self.blob.error(start, "invalid ziplist prevlen byte 0xff"));
        };
        if prevlen != self.prev_size {
            return Err(self.blob.error(
                start,
                format!("ziplist entry prevlen {prevlen} but the previous entry is {} bytes", self.prev_size),
            ));
        }
        let e = start + pl;
        need(pl + 1)?;
        let enc = data[e];
        let (elem, hdr, len) = match enc >> 6 {
            0 => {
                let len = (enc & 0x3F) as usize;
                (None, 1, len)
            }
            1 => {
                need(pl + 2)?;
                let len = ((enc & 0x3F) as usize) << 8 | data[e + 1] as usize;
                (None, 2, len)
            }
            2 => {
                need(pl + 5)?;
                let len = u32::from_be_bytes([data[e + 1], data[e + 2], data[e + 3], data[e + 4]]) as usize;
                (None, 5, len)
            }
            _ => {
                let (v, size): (i64, usize) = match enc {
                    0xC0 => {
                        need(pl + 3)?;
                        (i64::from(i16::from_le_bytes([data[e + 1], data[e + 2]])), 2)
                    }
                    0xD0 => {
                        need(pl + 5)?;
                        (i64::from(i32::from_le_bytes([data[e + 1], data[e + 2], data[e + 3], data[e + 4]])), 4)
                    }
                    0xE0 => {
                        need(pl + 9)?;
                        let mut a = [0u8; 8];
                        a.copy_from_slice(&data[e + 1..e + 9]);
                        (i64::from_le_bytes(a), 8)
                    }
                    0xF0 => {
                        need(pl + 4)?;
                        (i64::from(i32::from_le_bytes([0, data[e + 1], data[e + 2], data[e + 3]]) >> 8), 3)
                    }
                    0xFE => {
                        need(pl + 2)?;
                        (i64::from(data[e + 1] as i8), 1)
                    }
                    0xF1..=0xFD => (i64::from(enc & 0x0F) - 1, 0),
                    other => return Err(self.blob.error(e, format!("invalid ziplist encoding byte 0x{other:02x}"))),
                };
                (Some(Elem::Int(v)), 1, size)
            }
        };
        let total = pl + hdr + len;
        need(total)?;
        let elem = match elem {
            Some(x) => x,
            None => self.blob.elem(e + hdr, e + hdr + len),
        };
        self.last_start = Some(start);
        self.prev_size = total;
        self.pos = start + total;
        self.seen += 1;
        Ok(Some(elem))
    }
}

impl<'a> Iterator for ZiplistIter<'a> {
    type Item = Result<Elem<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.read();
        crate::format::blob::fused(&mut self.done, r)
    }
}

/// Builds a ziplist as Redis 6.2 does (zipTryEncoding: strings of up to 31 bytes that
/// are canonical integers become integer entries of the smallest width).
pub struct ZiplistWriter {
    buf: Vec<u8>,
    count: usize,
    prev: usize,
    tail: usize,
}

impl ZiplistWriter {
    pub fn new() -> Self {
        ZiplistWriter { buf: vec![0; HEADER], count: 0, prev: 0, tail: HEADER }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    fn push_elem(&mut self, b: &[u8]) {
        let start = self.buf.len();
        if self.prev < 254 {
            self.buf.push(self.prev as u8);
        } else {
            self.buf.push(254);
            self.buf.extend_from_slice(&(self.prev as u32).to_le_bytes());
        }
        let int = if b.len() <= 31 { super::blob::parse_canonical_i64(b) } else { None };
        match int {
            Some(v @ 0..=12) => self.buf.push(0xF1 + v as u8),
            Some(v) if i8::try_from(v).is_ok() => {
                self.buf.push(0xFE);
                self.buf.push(v as i8 as u8);
            }
            Some(v) if i16::try_from(v).is_ok() => {
                self.buf.push(0xC0);
                self.buf.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                self.buf.push(0xF0);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Some(v) if i32::try_from(v).is_ok() => {
                self.buf.push(0xD0);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Some(v) => {
                self.buf.push(0xE0);
                self.buf.extend_from_slice(&v.to_le_bytes());
            }
            None => {
                let n = b.len();
                if n < 64 {
                    self.buf.push(n as u8);
                } else if n < 16384 {
                    self.buf.push(0x40 | (n >> 8) as u8);
                    self.buf.push((n & 0xFF) as u8);
                } else {
                    self.buf.push(0x80);
                    self.buf.extend_from_slice(&(n as u32).to_be_bytes());
                }
                self.buf.extend_from_slice(b);
            }
        }
        self.tail = start;
        self.prev = self.buf.len() - start;
        self.count += 1;
    }

    fn finish_bytes(mut self) -> Vec<u8> {
        self.buf.push(END);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        self.buf[4..8].copy_from_slice(&(self.tail as u32).to_le_bytes());
        let n = if self.count < u16::MAX as usize { self.count as u16 } else { u16::MAX };
        self.buf[8..10].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

impl Default for ZiplistWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl FlatWriter for ZiplistWriter {
    fn push(&mut self, b: &[u8]) {
        self.push_elem(b)
    }
    fn len(&self) -> usize {
        self.buf.len()
    }
    fn is_empty(&self) -> bool {
        self.count == 0
    }
    fn entry_size(b: &[u8]) -> usize {
        b.len() + 11
    }
    fn finish(self) -> Vec<u8> {
        self.finish_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A ziplist holding "ab", 7 (immediate), 300 (int16), -2 (int8).
    fn sample() -> Vec<u8> {
        let entries: Vec<Vec<u8>> =
            vec![vec![0, 0x02, b'a', b'b'], vec![4, 0xF8], vec![2, 0xC0, 0x2C, 0x01], vec![4, 0xFE, 0xFE]];
        let mut body = Vec::new();
        let mut tail = HEADER;
        for e in &entries {
            tail = HEADER + body.len();
            body.extend_from_slice(e);
        }
        let total = (HEADER + body.len() + 1) as u32;
        let mut v = total.to_le_bytes().to_vec();
        v.extend_from_slice(&(tail as u32).to_le_bytes());
        v.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        v.extend_from_slice(&body);
        v.push(END);
        v
    }

    #[test]
    fn reads_strings_and_integers() {
        let data = sample();
        let v: Vec<_> =
            ZiplistIter::new(Blob::Borrowed { data: &data, offset: 0 }).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(v, vec![Elem::borrowed(b"ab"), Elem::Int(7), Elem::Int(300), Elem::Int(-2)]);
    }

    #[test]
    fn rejects_wrong_prevlen() {
        let mut data = sample();
        data[HEADER + 4] = 9; // prevlen of the second entry
        let err = ZiplistIter::new(Blob::Borrowed { data: &data, offset: 50 })
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err();
        assert_eq!(err.offset, 50 + HEADER + 4);
    }

    #[test]
    fn writer_round_trips() {
        let vals: Vec<Vec<u8>> = ["0", "12", "13", "-1", "127", "-129", "40000", "8388608", "2147483648", "x", "007"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .chain([vec![b'a'; 300], vec![b'b'; 20000], vec![]])
            .collect();
        let mut w = ZiplistWriter::new();
        for v in &vals {
            w.push(v);
        }
        let data = w.finish();
        let back: Vec<Vec<u8>> = ZiplistIter::new(Blob::Borrowed { data: &data, offset: 0 })
            .unwrap()
            .map(|e| e.unwrap().to_bytes().into_owned())
            .collect();
        assert_eq!(back, vals);
    }

    #[test]
    fn rejects_wrong_tail() {
        let mut data = sample();
        data[4] = 10;
        let r: Result<Vec<_>, _> = ZiplistIter::new(Blob::Borrowed { data: &data, offset: 0 }).unwrap().collect();
        assert!(r.unwrap_err().what.contains("tail"));
    }
}
