//! RDB primitives: length encoding, strings (raw, int, LZF) and doubles.
//!
//! # Format
//! ```text
//! len:  00xxxxxx (6 bits) | 01xxxxxx yyyyyyyy (14 bits BE) | 0x80 u32 BE | 0x81 u64 BE
//!       11xxxxxx: not a length but a string encoding (0 int8, 1 int16, 2 int32, 3 LZF)
//! str:  len + bytes | 0xC0 i8 | 0xC1 i16 LE | 0xC2 i32 LE | 0xC3 len clen, len ulen, clen bytes
//! ```

use std::borrow::Cow;
use std::rc::Rc;

use crate::format::blob::{Blob, Elem};
use crate::format::input::{fail, take_bytes, u8_, FormatError, Input, PResult};
use crate::format::lzf;

/// A length, or the special string encoding found in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    Len(u64),
    Encoded(u8),
}

pub fn rdb_len(input: Input<'_>) -> PResult<'_, Len> {
    // Fast path: the 1-byte form is by far the most common.
    if let Some(&b) = input.bytes().first() {
        if b < 0x40 {
            return Ok((nom::Input::take_from(&input, 1), Len::Len(u64::from(b))));
        }
    }
    let (rest, b) = u8_(input)?;
    match b >> 6 {
        0 => Ok((rest, Len::Len(u64::from(b & 0x3F)))),
        1 => {
            let (rest, b2) = u8_(rest)?;
            Ok((rest, Len::Len(u64::from(b & 0x3F) << 8 | u64::from(b2))))
        }
        2 => match b {
            0x80 => {
                let (rest, v) = nom::number::complete::be_u32(rest)?;
                Ok((rest, Len::Len(u64::from(v))))
            }
            0x81 => {
                let (rest, v) = nom::number::complete::be_u64(rest)?;
                Ok((rest, Len::Len(v)))
            }
            other => fail(input, format!("invalid length encoding byte 0x{other:02x}")),
        },
        _ => Ok((rest, Len::Encoded(b & 0x3F))),
    }
}

/// A plain length. A string-encoding byte (0xC0..0xFF) where a length is expected reads as
/// its low six bits, as Redis's rdbLoadLen reads it (the loader accepts such files).
pub fn length<'a>(input: Input<'a>, _what: &str) -> PResult<'a, u64> {
    match rdb_len(input) {
        Ok((rest, Len::Len(n))) => Ok((rest, n)),
        Ok((rest, Len::Encoded(e))) => Ok((rest, u64::from(e))),
        Err(e) => Err(e),
    }
}

/// A length that must fit in memory as a count or size.
pub fn length_usize<'a>(input: Input<'a>, what: &str) -> PResult<'a, usize> {
    let (rest, n) = length(input, what)?;
    match usize::try_from(n) {
        Ok(v) => Ok((rest, v)),
        Err(_) => fail(input, format!("{what} {n} is too large")),
    }
}

/// A compressed container's bytes and what they decompress to.
type CachedBlob = (Vec<u8>, Rc<Vec<u8>>);

thread_local! {
    /// The last compressed container this thread decompressed, by its compressed bytes: a
    /// checker reads a value's blob several times (the loader's header check, the element
    /// walk, a duplicate search), and decompressing costs more than comparing.
    static LAST_BLOB: std::cell::RefCell<Option<CachedBlob>> = const { std::cell::RefCell::new(None) };
}

/// Larger blobs are not kept after use.
const CACHED_BLOB_MAX: usize = 256 << 10;

/// An RDB string as stored, not yet decompressed.
#[derive(Debug, Clone, Copy)]
pub enum RStr<'a> {
    Raw(Input<'a>),
    Int(i64),
    Lzf { data: Input<'a>, len: usize, at: usize },
}

impl<'a> RStr<'a> {
    /// The string's bytes as an element, decompressing LZF.
    pub fn to_elem(&self) -> Result<Elem<'a>, FormatError> {
        match *self {
            RStr::Raw(i) => Ok(Elem::Bytes(Cow::Borrowed(i.bytes()))),
            RStr::Int(v) => Ok(Elem::Int(v)),
            RStr::Lzf { data, len, at } => lzf::decompress(data.bytes(), len)
                .map(|v| Elem::Bytes(Cow::Owned(v)))
                .map_err(|e| FormatError::new(at, e.to_string())),
        }
    }

    /// The string's bytes as an encoded container blob.
    pub fn to_blob(&self) -> Result<Blob<'a>, FormatError> {
        match *self {
            RStr::Raw(i) => Ok(Blob::Borrowed { data: i.bytes(), offset: i.offset() }),
            RStr::Int(_) => Err(FormatError::new(0, "an integer-encoded string cannot hold an encoded container")),
            RStr::Lzf { data, len, at } => LAST_BLOB.with(|last| {
                let mut last = last.borrow_mut();
                if let Some((compressed, blob)) = last.as_ref() {
                    if compressed.as_slice() == data.bytes() && blob.len() == len {
                        return Ok(Blob::Owned { data: Rc::clone(blob), offset: at });
                    }
                }
                // The last blob's buffers are reused when nothing holds it any more: no
                // allocation, and no zeroing of the bytes about to be overwritten.
                let (mut compressed, old) = last.take().unwrap_or_default();
                let mut out = Rc::try_unwrap(old).unwrap_or_default();
                lzf::decompress_into(data.bytes(), len, &mut out).map_err(|e| FormatError::new(at, e.to_string()))?;
                // Rc<Vec>: the decompressed bytes are not copied into a new allocation.
                let blob = Rc::new(out);
                if len > CACHED_BLOB_MAX {
                    return Ok(Blob::Owned { data: blob, offset: at });
                }
                compressed.clear();
                compressed.extend_from_slice(data.bytes());
                *last = Some((compressed, Rc::clone(&blob)));
                Ok(Blob::Owned { data: blob, offset: at })
            }),
        }
    }

    /// Check that the string decodes, without materialising it (LZF is validated in place).
    pub fn validate(&self) -> Result<(), FormatError> {
        match *self {
            RStr::Raw(_) | RStr::Int(_) => Ok(()),
            RStr::Lzf { data, len, at } => {
                lzf::validate(data.bytes(), len).map_err(|e| FormatError::new(at, e.to_string()))
            }
        }
    }

    /// Length in bytes once decoded.
    pub fn len(&self) -> usize {
        match *self {
            RStr::Raw(i) => i.len(),
            RStr::Int(v) => Elem::Int(v).len(),
            RStr::Lzf { len, .. } => len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How the file stores it: "int", "lzf" or "raw".
    pub fn storage(&self) -> &'static str {
        match self {
            RStr::Raw(_) => "raw",
            RStr::Int(_) => "int",
            RStr::Lzf { .. } => "lzf",
        }
    }
}

pub fn rdb_str(input: Input<'_>) -> PResult<'_, RStr<'_>> {
    // Fast path: a short raw string (1-byte length) that is all there.
    let bytes = input.bytes();
    if let Some(&b) = bytes.first() {
        let n = b as usize;
        if b < 0x40 && n < bytes.len() {
            let body = Input::at(&bytes[1..=n], input.offset() + 1);
            return Ok((nom::Input::take_from(&input, n + 1), RStr::Raw(body)));
        }
    }
    let (rest, len) = rdb_len(input)?;
    match len {
        Len::Len(n) => {
            let Ok(n) = usize::try_from(n) else {
                return fail(input, format!("string length {n} is too large"));
            };
            let (rest, body) = take_bytes(rest, n, "a string")?;
            Ok((rest, RStr::Raw(body)))
        }
        Len::Encoded(0) => {
            let (rest, v) = nom::number::complete::le_i8(rest)?;
            Ok((rest, RStr::Int(i64::from(v))))
        }
        Len::Encoded(1) => {
            let (rest, v) = nom::number::complete::le_i16(rest)?;
            Ok((rest, RStr::Int(i64::from(v))))
        }
        Len::Encoded(2) => {
            let (rest, v) = nom::number::complete::le_i32(rest)?;
            Ok((rest, RStr::Int(i64::from(v))))
        }
        Len::Encoded(3) => {
            let (rest, clen) = length_usize(rest, "an LZF compressed length")?;
            let (rest, ulen) = length_usize(rest, "an LZF original length")?;
            let (rest, data) = take_bytes(rest, clen, "LZF data")?;
            Ok((rest, RStr::Lzf { data, len: ulen, at: input.offset() }))
        }
        Len::Encoded(e) => fail(input, format!("unknown string encoding {e}")),
    }
}

/// A string decoded to an element right away.
pub fn rdb_elem(input: Input<'_>) -> PResult<'_, Elem<'_>> {
    let (rest, s) = rdb_str(input)?;
    match s.to_elem() {
        Ok(e) => Ok((rest, e)),
        Err(e) => Err(nom::Err::Failure(e)),
    }
}

/// A text double (ZSET type 3): u8 length, ASCII; 253 nan, 254 +inf, 255 -inf.
pub fn text_double(input: Input<'_>) -> PResult<'_, f64> {
    let (rest, n) = u8_(input)?;
    match n {
        253 => Ok((rest, f64::NAN)),
        254 => Ok((rest, f64::INFINITY)),
        255 => Ok((rest, f64::NEG_INFINITY)),
        n => {
            let (rest, t) = take_bytes(rest, n as usize, "a text double")?;
            match parse_double(t.bytes()) {
                Some(v) => Ok((rest, v)),
                None => fail(input, format!("invalid double {:?}", String::from_utf8_lossy(t.bytes()))),
            }
        }
    }
}

/// A binary double, IEEE-754 LE.
pub fn binary_double(input: Input<'_>) -> PResult<'_, f64> {
    let (rest, bits) = nom::number::complete::le_u64(input)?;
    Ok((rest, f64::from_bits(bits)))
}

/// Parse a score as Redis's strtod would: decimal or exponent, inf/-inf, case-insensitive.
pub fn parse_double(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_blob_keeps_its_bytes_while_others_are_decompressed() {
        let texts: Vec<Vec<u8>> = (0..6u8)
            .map(|i| (0..300 + 40 * usize::from(i)).map(|k| b'a' + (k % (3 + usize::from(i))) as u8).collect())
            .collect();
        let comp: Vec<Vec<u8>> = texts.iter().map(|t| lzf::compress(t, t.len()).unwrap()).collect();
        let rstr = |i: usize| RStr::Lzf { data: Input::new(&comp[i]), len: texts[i].len(), at: 0 };
        // Held: each later blob must not reuse its buffer.
        let held = rstr(0).to_blob().unwrap();
        for i in 1..texts.len() {
            let b = rstr(i).to_blob().unwrap();
            assert_eq!(b.data(), texts[i].as_slice());
            assert_eq!(held.data(), texts[0].as_slice(), "after blob {i}");
        }
        // Not held: buffers are reused, longer and shorter, and hold the right bytes.
        for i in [5, 1, 4, 0, 3, 3, 2] {
            assert_eq!(rstr(i).to_blob().unwrap().data(), texts[i].as_slice(), "blob {i}");
        }
        // A failed decompression leaves nothing wrong behind.
        let bad = RStr::Lzf { data: Input::new(&comp[2][..comp[2].len() - 1]), len: texts[2].len(), at: 0 };
        assert!(bad.to_blob().is_err());
        assert_eq!(rstr(2).to_blob().unwrap().data(), texts[2].as_slice());
    }

    fn len(b: &[u8]) -> Len {
        let (rest, l) = rdb_len(Input::new(b)).unwrap();
        assert!(rest.is_empty());
        l
    }

    #[test]
    fn length_forms() {
        assert_eq!(len(&[0x05]), Len::Len(5));
        assert_eq!(len(&[0x41, 0x02]), Len::Len(0x102));
        assert_eq!(len(&[0x80, 0, 1, 0, 0]), Len::Len(65536));
        assert_eq!(len(&[0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), Len::Len(u64::MAX));
        assert_eq!(len(&[0xC3]), Len::Encoded(3));
        assert!(rdb_len(Input::new(&[0x85])).is_err());
    }

    #[test]
    fn string_forms() {
        let (_, s) = rdb_str(Input::new(&[0x03, b'a', b'b', b'c'])).unwrap();
        assert_eq!(s.to_elem().unwrap(), Elem::borrowed(b"abc"));
        let (_, s) = rdb_str(Input::new(&[0xC0, 0xFE])).unwrap();
        assert_eq!(s.to_elem().unwrap(), Elem::Int(-2));
        let (_, s) = rdb_str(Input::new(&[0xC1, 0x39, 0x30])).unwrap();
        assert_eq!(s.to_elem().unwrap(), Elem::Int(12345));
        let (_, s) = rdb_str(Input::new(&[0xC2, 0xFF, 0xFF, 0xFF, 0x7F])).unwrap();
        assert_eq!(s.to_elem().unwrap(), Elem::Int(i64::from(i32::MAX)));
        let text = b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let c = ::lzf::compress(text).unwrap();
        let mut b = vec![0xC3, c.len() as u8, text.len() as u8];
        b.extend_from_slice(&c);
        let (rest, s) = rdb_str(Input::new(&b)).unwrap();
        assert!(rest.is_empty());
        assert_eq!(s.to_elem().unwrap().to_bytes().as_ref(), text);
    }

    #[test]
    fn truncated_string_reports_offset() {
        let e = rdb_str(Input::at(&[0x05, b'a'], 77)).unwrap_err();
        let e = crate::format::input::finish(e, "x");
        assert_eq!(e.offset, 78);
    }

    #[test]
    fn doubles() {
        let (_, v) = text_double(Input::new(&[3, b'1', b'.', b'5'])).unwrap();
        assert_eq!(v, 1.5);
        let (_, v) = text_double(Input::new(&[254])).unwrap();
        assert_eq!(v, f64::INFINITY);
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"2.5000000000000001"), Some(2.5));
        assert_eq!(parse_double(b" 1"), None);
    }
}
