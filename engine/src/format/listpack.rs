//! Listpack (Redis 5.0+ streams, 7.0+ hashes, zsets, lists, sets).
//!
//! # Format
//! ```text
//! u32 total_bytes LE | u16 num_elements LE (65535 = unknown) | entry* | 0xFF
//! entry = encoding+data | backlen (size of encoding+data, 1-5 bytes, 7 bits per byte,
//!         most significant group first, every byte but the first with bit 7 set)
//! ```
//! Every entry is checked as it is read: bounds, backlen, and at the end the terminator
//! position and the declared element count.

use super::blob::{Blob, Elem, FlatWriter};
use super::input::FormatError;

const HEADER: usize = 6;
const END: u8 = 0xFF;

/// Iterator over a listpack's elements, validating as it goes.
pub struct ListpackIter<'a> {
    blob: Blob<'a>,
    pos: usize,
    seen: usize,
    declared: Option<usize>,
    done: bool,
}

impl<'a> ListpackIter<'a> {
    /// Check the header and terminator, and position before the first element.
    pub fn new(blob: Blob<'a>) -> Result<Self, FormatError> {
        let data = blob.data();
        if data.len() < HEADER + 1 {
            return Err(blob.error(0, format!("listpack too short ({} bytes)", data.len())));
        }
        let total = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if total != data.len() {
            return Err(blob.error(0, format!("listpack header says {total} bytes but the blob has {}", data.len())));
        }
        if data[data.len() - 1] != END {
            return Err(blob.error(data.len() - 1, "listpack does not end with 0xFF"));
        }
        let n = u16::from_le_bytes([data[4], data[5]]);
        let declared = if n == u16::MAX { None } else { Some(n as usize) };
        Ok(ListpackIter { blob, pos: HEADER, seen: 0, declared, done: false })
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
        if data.get(start) == Some(&END) {
            if start != data.len() - 1 {
                return Err(self.blob.error(start, "listpack terminator before the end of the blob"));
            }
            if let Some(n) = self.declared {
                if n != self.seen {
                    return Err(self
                        .blob
                        .error(4, format!("listpack header declares {n} elements but holds {}", self.seen)));
                }
            }
            return Ok(None);
        }
        let (elem, next) = match self.small_entry_at(start) {
            Some(small) => small,
            None => self.entry_at(start)?,
        };
        self.pos = next;
        self.seen += 1;
        Ok(Some(elem))
    }

    /// The entry at `start` by [`short_entry`]: what [`Self::entry_at`] returns for it.
    #[inline]
    fn small_entry_at(&self, start: usize) -> Option<(Elem<'a>, usize)> {
        let (short, next) = short_entry(self.blob.data(), start)?;
        let elem = match short {
            Short::Int(v) => Elem::Int(v),
            Short::Str(from, to) => self.blob.elem(from, to),
        };
        Some((elem, next))
    }

    /// The entry starting at `start` and where the next begins, checked as Redis's
    /// lpValidateNext checks one: its encoding and data inside the listpack, and a backlen
    /// that matches its size. (Not for the terminator.)
    fn entry_at(&self, start: usize) -> Result<(Elem<'a>, usize), FormatError> {
        let data = self.blob.data();
        let Some(&b) = data.get(start).filter(|_| start >= HEADER) else {
            return Err(self.blob.error(start, "listpack entry runs past the end"));
        };
        let need = |k: usize| -> Result<(), FormatError> {
            if start + k > data.len() - 1 {
                Err(self.blob.error(start, "listpack entry runs past the end"))
            } else {
                Ok(())
            }
        };
        let (elem, size) = if b & 0x80 == 0 {
            (Elem::Int(i64::from(b & 0x7F)), 1)
        } else if b & 0xC0 == 0x80 {
            let len = (b & 0x3F) as usize;
            need(1 + len)?;
            (self.blob.elem(start + 1, start + 1 + len), 1 + len)
        } else if b & 0xE0 == 0xC0 {
            need(2)?;
            let raw = (u16::from(b & 0x1F) << 8) | u16::from(data[start + 1]);
            // Sign-extend 13 bits.
            let v = if raw & 0x1000 != 0 { i64::from(raw) - 0x2000 } else { i64::from(raw) };
            (Elem::Int(v), 2)
        } else if b & 0xF0 == 0xE0 {
            need(2)?;
            let len = ((b & 0x0F) as usize) << 8 | data[start + 1] as usize;
            need(2 + len)?;
            (self.blob.elem(start + 2, start + 2 + len), 2 + len)
        } else {
            match b {
                0xF0 => {
                    need(5)?;
                    let len = u32::from_le_bytes([data[start + 1], data[start + 2], data[start + 3], data[start + 4]])
                        as usize;
                    need(5usize.saturating_add(len))?;
                    (self.blob.elem(start + 5, start + 5 + len), 5 + len)
                }
                0xF1 => {
                    need(3)?;
                    (Elem::Int(i64::from(i16::from_le_bytes([data[start + 1], data[start + 2]]))), 3)
                }
                0xF2 => {
                    need(4)?;
                    let v = i32::from_le_bytes([0, data[start + 1], data[start + 2], data[start + 3]]) >> 8;
                    (Elem::Int(i64::from(v)), 4)
                }
                0xF3 => {
                    need(5)?;
                    let v = i32::from_le_bytes([data[start + 1], data[start + 2], data[start + 3], data[start + 4]]);
                    (Elem::Int(i64::from(v)), 5)
                }
                0xF4 => {
                    need(9)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&data[start + 1..start + 9]);
                    (Elem::Int(i64::from_le_bytes(a)), 9)
                }
                other => return Err(self.blob.error(start, format!("invalid listpack encoding byte 0x{other:02x}"))),
            }
        };
        let bl = backlen_size(size);
        let end = start + size;
        if end + bl > data.len() - 1 {
            return Err(self.blob.error(end, "listpack entry backlen runs past the end"));
        }
        // Checked as Redis's lpValidateNext does: the backlen decoded backwards from its
        // last byte, which may read on into the entry's own bytes while bit 7 is set.
        if decode_backlen(data, end + bl - 1) != Some(size) {
            return Err(self.blob.error(end, format!("listpack entry backlen does not match its size {size}")));
        }
        Ok((elem, end + bl))
    }

    /// The element Redis's lpSeek(lp, index) returns, with the checks its walk makes (a
    /// failed one is an assertion: the server crashes). With a known count it walks from
    /// the end when `index` is past the middle: each step back reads a backlen and checks
    /// the entry it points at; otherwise from the start, where a terminator ends the walk.
    pub fn seek_as_redis(self, index: usize) -> Result<Option<Elem<'a>>, FormatError> {
        let data = self.blob.data();
        let n = match self.declared {
            Some(n) if index >= n => return Ok(None),
            Some(n) if index > n / 2 => n,
            _ => {
                let mut pos = HEADER;
                for i in 0..=index {
                    if data[pos] == END {
                        return Ok(None);
                    }
                    let (elem, next) = self.entry_at(pos)?;
                    if i == index {
                        return Ok(Some(elem));
                    }
                    pos = next;
                }
                return Ok(None);
            }
        };
        // lpLast, then lpPrev: n - index entries back from the terminator.
        let mut pos = data.len() - 1;
        let mut elem = None;
        for _ in 0..n - index {
            if pos == HEADER {
                return Ok(None);
            }
            let size = decode_backlen(data, pos - 1)
                .ok_or_else(|| self.blob.error(pos - 1, "listpack backlen is not one (walking back)"))?;
            let start = pos
                .checked_sub(size + backlen_size(size))
                .ok_or_else(|| self.blob.error(pos - 1, "listpack backlen points before the listpack"))?;
            if data.get(start) == Some(&END) {
                return Err(self.blob.error(start, "listpack backlen points at the terminator"));
            }
            elem = Some(self.entry_at(start)?.0);
            pos = start;
        }
        Ok(elem)
    }
}

/// Every entry of the listpack `data` in order, given to `f` straight from the bytes, with
/// the checks [`ListpackIter`] makes; how many there are. None when a check fails or `f`
/// returns false: the iterator then says what is wrong. For hot loops (a deep check of
/// millions of small values), where the iterator's per-element `Result` costs more than
/// reading the entry.
pub fn visit<'b>(data: &'b [u8], mut f: impl FnMut(Elem<'b>) -> bool) -> Option<usize> {
    let it = ListpackIter::new(Blob::Borrowed { data, offset: 0 }).ok()?;
    let (mut pos, mut n) = (HEADER, 0usize);
    while *data.get(pos)? != END {
        let (elem, next) = match short_entry(data, pos) {
            Some((Short::Int(v), next)) => (Elem::Int(v), next),
            Some((Short::Str(from, to), next)) => (Elem::borrowed(&data[from..to]), next),
            None => it.entry_at(pos).ok()?,
        };
        if !f(elem) {
            return None;
        }
        pos = next;
        n += 1;
    }
    (pos == data.len() - 1 && it.declared.is_none_or(|d| d == n)).then_some(n)
}

/// An entry [`short_entry`] read: an integer, or where a string's bytes are.
enum Short {
    Int(i64),
    Str(usize, usize),
}

/// An entry of at most 127 bytes (every integer form, a string of up to 125 bytes) when it
/// is whole and its one-byte backlen is right, and where the next one starts: what
/// [`ListpackIter::entry_at`] finds for it, with fewer checks to get there. None sends
/// everything else (and every error) to `entry_at`.
#[inline(always)]
fn short_entry(data: &[u8], start: usize) -> Option<(Short, usize)> {
    if start < HEADER {
        return None;
    }
    // The entry and what follows it, short of the terminator.
    let e = data.get(start..data.len().checked_sub(1)?)?;
    let b = *e.first()?;
    if b < 0x80 {
        return (*e.get(1)? == 1).then_some((Short::Int(i64::from(b)), start + 2));
    }
    if b < 0xC0 {
        let size = 1 + usize::from(b & 0x3F);
        return (*e.get(size)? == size as u8).then_some((Short::Str(start + 1, start + size), start + size + 1));
    }
    let size = match b {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 2 + (usize::from(b & 0x0F) << 8 | usize::from(*e.get(1)?)),
        0xF1 => 3,
        0xF2 => 4,
        0xF3 => 5,
        0xF4 => 9,
        _ => return None,
    };
    // One backlen byte holds sizes up to 127.
    if size > 127 || *e.get(size)? != size as u8 {
        return None;
    }
    let short = match b {
        0xC0..=0xDF => {
            // Sign-extend 13 bits.
            let raw = i64::from(b & 0x1F) << 8 | i64::from(e[1]);
            Short::Int(if raw & 0x1000 != 0 { raw - 0x2000 } else { raw })
        }
        0xE0..=0xEF => Short::Str(start + 2, start + size),
        0xF1 => Short::Int(i64::from(i16::from_le_bytes([e[1], e[2]]))),
        0xF2 => Short::Int(i64::from(i32::from_le_bytes([0, e[1], e[2], e[3]]) >> 8)),
        0xF3 => Short::Int(i64::from(i32::from_le_bytes([e[1], e[2], e[3], e[4]]))),
        _ => Short::Int(i64::from_le_bytes([e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8]])),
    };
    Some((short, start + size + 1))
}

/// Redis's lpDecodeBacklen: the size the backlen ending at `last` encodes (read backwards,
/// 7 bits a byte while bit 7 is set); None past 5 bytes.
fn decode_backlen(data: &[u8], last: usize) -> Option<usize> {
    let (mut val, mut shift, mut p) = (0usize, 0u32, last);
    loop {
        let b = *data.get(p)?;
        val |= usize::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Some(val);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
        p = p.checked_sub(1)?;
    }
}

impl<'a> Iterator for ListpackIter<'a> {
    type Item = Result<Elem<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.read();
        crate::format::blob::fused(&mut self.done, r)
    }
}

/// Builds a listpack the way Redis does: canonical integers become integer entries
/// (`lpStringToInt64`), everything else a string entry of the smallest form.
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl ListpackWriter {
    pub fn new() -> Self {
        ListpackWriter { buf: vec![0; HEADER], count: 0 }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// The encoded size an element would add (entry plus backlen).
    fn entry_bytes(b: &[u8]) -> usize {
        entry_bytes(b)
    }

    fn push_elem(&mut self, b: &[u8]) {
        match super::blob::parse_canonical_i64(b) {
            Some(v) => self.push_int(v),
            None => self.push_str(b),
        }
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u16) & 0x1FFF;
            self.buf.push(0xC0 | (u >> 8) as u8);
            self.buf.push((u & 0xFF) as u8);
        } else if i16::try_from(v).is_ok() {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if i32::try_from(v).is_ok() {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        let size = self.buf.len() - start;
        encode_backlen(size, &mut self.buf);
        self.count += 1;
    }

    pub fn push_str(&mut self, b: &[u8]) {
        let start = self.buf.len();
        let n = b.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xE0 | (n >> 8) as u8);
            self.buf.push((n & 0xFF) as u8);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(b);
        let size = self.buf.len() - start;
        encode_backlen(size, &mut self.buf);
        self.count += 1;
    }

    fn finish_bytes(mut self) -> Vec<u8> {
        self.buf.push(END);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let n = if self.count < u16::MAX as usize { self.count as u16 } else { u16::MAX };
        self.buf[4..6].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

impl Default for ListpackWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl FlatWriter for ListpackWriter {
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
        Self::entry_bytes(b)
    }
    fn finish(self) -> Vec<u8> {
        self.finish_bytes()
    }
}

/// The bytes an element takes in a listpack: its entry (an integer when the text is a
/// canonical one) plus the backlen.
pub fn entry_bytes(b: &[u8]) -> usize {
    let size = match super::blob::parse_canonical_i64(b) {
        Some(v) => int_size(v),
        None => str_header(b.len()) + b.len(),
    };
    size + backlen_size(size)
}

/// A listpack's header (total bytes, count) and end byte.
pub const OVERHEAD: usize = 7;

fn int_size(v: i64) -> usize {
    if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if i16::try_from(v).is_ok() {
        3
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    }
}

fn str_header(n: usize) -> usize {
    if n < 64 {
        1
    } else if n < 4096 {
        2
    } else {
        5
    }
}

/// How many bytes the backlen of an entry of `size` bytes takes.
pub fn backlen_size(size: usize) -> usize {
    if size <= 127 {
        1
    } else if size < 16383 {
        2
    } else if size < 2097151 {
        3
    } else if size < 268435455 {
        4
    } else {
        5
    }
}

/// Write the backlen of an entry of `size` bytes.
pub fn encode_backlen(size: usize, out: &mut Vec<u8>) {
    let n = backlen_size(size);
    for i in (0..n).rev() {
        let group = ((size >> (7 * i)) & 0x7F) as u8;
        out.push(if i == n - 1 { group } else { group | 0x80 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        for e in entries {
            body.extend_from_slice(e);
        }
        let total = (HEADER + body.len() + 1) as u32;
        let mut v = total.to_le_bytes().to_vec();
        v.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        v.extend_from_slice(&body);
        v.push(END);
        v
    }

    fn items(data: &[u8]) -> Result<Vec<Elem<'_>>, FormatError> {
        ListpackIter::new(Blob::Borrowed { data, offset: 1000 })?.collect()
    }

    #[test]
    fn reads_every_encoding() {
        let data = lp(&[
            &[0x05, 0x01],                         // uint7 5
            &[0x82, b'h', b'i', 0x03],             // 2-byte string
            &[0xDF, 0xFF, 0x02],                   // int13 -1
            &[0xF1, 0x34, 0x12, 0x03],             // int16 0x1234
            &[0xF2, 0x00, 0x00, 0x80, 0x04],       // int24 -8388608
            &[0xF3, 0xFF, 0xFF, 0xFF, 0x7F, 0x05], // int32 max
        ]);
        let v = items(&data).unwrap();
        assert_eq!(
            v,
            vec![
                Elem::Int(5),
                Elem::borrowed(b"hi"),
                Elem::Int(-1),
                Elem::Int(0x1234),
                Elem::Int(-8388608),
                Elem::Int(i64::from(i32::MAX))
            ]
        );
    }

    #[test]
    fn twelve_bit_string_and_long_backlen() {
        let s = vec![b'x'; 200];
        let mut e = vec![0xE0 | (200 >> 8) as u8, (200 & 0xFF) as u8];
        e.extend_from_slice(&s);
        encode_backlen(202, &mut e);
        assert_eq!(&e[202..], &[0x01, 0xCA]);
        let data = lp(&[&e]);
        assert_eq!(items(&data).unwrap(), vec![Elem::borrowed(&s)]);
    }

    #[test]
    fn backlen_is_read_as_redis_reads_it() {
        // An int64 entry (9 bytes) whose backlen byte has bit 7 set: decoded backwards it
        // goes on into the value's top byte, 0x00, and still says 9, so Redis accepts it
        // (a real Redis 7.4.1 loaded such a file).
        let mut e = vec![0xF4, 1, 2, 3, 4, 5, 6, 7, 0x00, 0x09];
        let data = lp(&[&e]);
        assert_eq!(items(&data).unwrap(), vec![Elem::Int(0x0007_0605_0403_0201)]);
        e[9] = 0x89;
        assert_eq!(items(&lp(&[&e])).unwrap(), vec![Elem::Int(0x0007_0605_0403_0201)]);
        // With a top byte that adds bits, the decoded size is wrong: refused.
        e[8] = 0x01;
        assert!(items(&lp(&[&e])).is_err());
    }

    #[test]
    fn seeks_as_redis_checking_only_the_entries_on_its_way() {
        fn seek(data: &[u8], i: usize) -> Result<Option<Elem<'_>>, FormatError> {
            ListpackIter::new(Blob::Borrowed { data, offset: 0 })?.seek_as_redis(i)
        }
        // Six entries: index 2 is reached from the start (entries 0..=2 checked).
        let mut six = lp(&[&[0x01, 0x01], &[0x02, 0x01], &[0x03, 0x01], &[0x04, 0x01], &[0x05, 0x01], &[0x06, 0x01]]);
        assert_eq!(seek(&six, 2).unwrap(), Some(Elem::Int(3)));
        six[HEADER + 9] = 0x07; // entry 4's backlen: not on the way
        assert_eq!(seek(&six, 2).unwrap(), Some(Elem::Int(3)));
        six[HEADER + 3] = 0x07; // entry 1's backlen
        assert!(seek(&six, 2).is_err());
        // Three entries: index 2 is the last, read back from the terminator.
        let mut three = lp(&[&[0x01, 0x01], &[0x02, 0x01], &[0x03, 0x01]]);
        assert_eq!(seek(&three, 2).unwrap(), Some(Elem::Int(3)));
        three[HEADER + 1] = 0x07; // entry 0's backlen: not on the way back
        assert_eq!(seek(&three, 2).unwrap(), Some(Elem::Int(3)));
        three[HEADER + 5] = 0x05; // the last backlen points before the listpack
        assert!(seek(&three, 2).is_err());
        // A terminator on the way forward ends the walk.
        let mut short = lp(&[&[0x01, 0x01], &[0x02, 0x01]]);
        short[4] = 0xFF;
        short[5] = 0xFF;
        assert_eq!(seek(&short, 2).unwrap(), None);
    }

    #[test]
    fn rejects_bad_backlen_with_offset() {
        let data = lp(&[&[0x05, 0x02]]);
        let e = items(&data).unwrap_err();
        assert_eq!(e.offset, 1000 + 7);
        assert!(e.what.contains("backlen"));
    }

    #[test]
    fn rejects_wrong_count_and_length() {
        let mut data = lp(&[&[0x05, 0x01]]);
        data[4] = 2;
        assert!(items(&data).unwrap_err().what.contains("declares 2"));
        let mut data = lp(&[&[0x05, 0x01]]);
        data[0] = 99;
        assert!(items(&data).is_err());
    }

    #[test]
    fn writer_round_trips_every_form() {
        let vals: Vec<Vec<u8>> = [
            "0",
            "127",
            "128",
            "-1",
            "4095",
            "-4096",
            "4096",
            "32767",
            "-32768",
            "40000",
            "8388607",
            "-8388608",
            "8388608",
            "2147483647",
            "-2147483648",
            "2147483648",
            "9223372036854775807",
            "007",
            "+1",
            "-0",
            "",
            "x",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([vec![b'a'; 63], vec![b'b'; 64], vec![b'c'; 4095], vec![b'd'; 4096], vec![0xFF; 20000]])
        .collect();
        let mut w = ListpackWriter::new();
        for v in &vals {
            w.push(v);
        }
        let data = w.finish();
        let back: Vec<Vec<u8>> = items(&data).unwrap().iter().map(|e| e.to_bytes().into_owned()).collect();
        assert_eq!(back, vals);
    }

    /// The short path answers only what the full entry check answers: every entry form,
    /// as written and with each byte changed four ways.
    #[test]
    fn the_short_path_agrees_with_the_full_entry_check() {
        let mut w = ListpackWriter::new();
        for v in ["5", "-1", "4095", "-4096", "32767", "40000", "-8388608", "2147483647", "9223372036854775807"] {
            w.push(v.as_bytes());
        }
        for n in [0, 1, 63, 64, 125, 126, 200] {
            w.push(&vec![b'v'; n]);
        }
        let data = w.finish();
        let (mut short, mut full) = (0, 0);
        let mut copy = data.clone();
        for at in std::iter::once(None).chain((HEADER..data.len()).map(Some)) {
            for flip in [0x01u8, 0x40, 0x80, 0xFF] {
                copy.copy_from_slice(&data);
                if let Some(at) = at {
                    copy[at] ^= flip;
                }
                let blob = Blob::Borrowed { data: &copy, offset: 0 };
                let it = ListpackIter { blob, pos: HEADER, seen: 0, declared: None, done: false };
                for start in HEADER..copy.len() {
                    match it.small_entry_at(start) {
                        Some(got) => {
                            short += 1;
                            let checked = it.entry_at(start).map_err(|e| e.what);
                            assert_eq!(Ok(got), checked, "byte {at:?} ^ {flip:#x}, entry at {start}");
                        }
                        None => full += 1,
                    }
                }
            }
        }
        assert!(short > 1000 && full > 1000, "short {short}, full {full}");
    }

    #[test]
    fn truncated_entry_is_an_error_not_a_panic() {
        let data = lp(&[&[0xF4, 1, 2, 3]]);
        assert!(items(&data).is_err());
    }
}
