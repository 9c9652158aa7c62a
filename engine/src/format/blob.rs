//! `Elem` (one element of a collection) and `Blob` (the bytes of an encoded container,
//! either borrowed from the mapped file or owned after LZF decompression).

use std::borrow::Cow;
use std::fmt;

use super::input::FormatError;

/// One element as stored: bytes, or an integer that stands for its decimal text.
#[derive(Clone, PartialEq, Eq)]
pub enum Elem<'a> {
    Bytes(Cow<'a, [u8]>),
    Int(i64),
}

impl<'a> Elem<'a> {
    pub fn borrowed(b: &'a [u8]) -> Self {
        Elem::Bytes(Cow::Borrowed(b))
    }

    /// The element's bytes (integers as decimal text).
    pub fn to_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Elem::Bytes(b) => Cow::Borrowed(b.as_ref()),
            Elem::Int(i) => Cow::Owned(i.to_string().into_bytes()),
        }
    }

    /// Append the element's bytes to `out` without an intermediate allocation for bytes.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            Elem::Bytes(b) => out.extend_from_slice(b),
            Elem::Int(i) => {
                let mut buf = itoa_buf();
                out.extend_from_slice(fmt_i64(*i, &mut buf));
            }
        }
    }

    /// Call `f` with the element's bytes, an integer formatted on the stack (no allocation).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Elem::Bytes(b) => f(b),
            Elem::Int(i) => {
                let mut buf = itoa_buf();
                f(fmt_i64(*i, &mut buf))
            }
        }
    }

    pub fn into_owned(self) -> Elem<'static> {
        match self {
            Elem::Bytes(b) => Elem::Bytes(Cow::Owned(b.into_owned())),
            Elem::Int(i) => Elem::Int(i),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Elem::Bytes(b) => b.len(),
            Elem::Int(i) => {
                let mut buf = itoa_buf();
                fmt_i64(*i, &mut buf).len()
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element read as an integer, if it is one or its text is a canonical integer.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Elem::Int(i) => Some(*i),
            Elem::Bytes(b) => parse_canonical_i64(b),
        }
    }
}

impl fmt::Debug for Elem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elem::Int(i) => write!(f, "Int({i})"),
            Elem::Bytes(b) => write!(f, "Bytes({:?})", String::from_utf8_lossy(b)),
        }
    }
}

/// A stack buffer big enough for any i64 in decimal.
pub fn itoa_buf() -> [u8; 20] {
    [0u8; 20]
}

/// Format `v` in decimal into `buf` and return the used tail.
pub fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    // itoa writes two digits a step; the longest i64 ("-9223372036854775808") is 20 bytes.
    let mut digits = itoa::Buffer::new();
    let text = digits.format(v).as_bytes();
    let start = buf.len() - text.len();
    buf[start..].copy_from_slice(text);
    &buf[start..]
}

/// Where C's strtol/strtoull/atoi start reading a number: leading isspace() bytes
/// skipped, then one optional sign. Whether it was `-`, and the bytes after it.
pub fn c_number_start(b: &[u8]) -> (bool, &[u8]) {
    let i = b.iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)).count();
    match b.get(i) {
        Some(b'-') => (true, &b[i + 1..]),
        Some(b'+') => (false, &b[i + 1..]),
        _ => (false, &b[i..]),
    }
}

/// Redis's strict string-to-integer rule: optional '-', no leading zeros, no '+', no spaces.
pub fn parse_canonical_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let (neg, digits) = if b[0] == b'-' { (true, &b[1..]) } else { (false, b) };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        v = if neg { v.checked_mul(10)?.checked_sub(d)? } else { v.checked_mul(10)?.checked_add(d)? };
    }
    Some(v)
}

/// One step of a reader that stops for good at its end or its first error: turns
/// `read()`'s `Result<Option<T>>` into an iterator item and records when to stop.
pub fn fused<T>(done: &mut bool, r: Result<Option<T>, FormatError>) -> Option<Result<T, FormatError>> {
    match r {
        Ok(Some(x)) => Some(Ok(x)),
        Ok(None) => {
            *done = true;
            None
        }
        Err(e) => {
            *done = true;
            Some(Err(e))
        }
    }
}

/// A builder of a flat container (listpack or ziplist): the encoder picks one per target
/// and fills it the same way.
pub trait FlatWriter: Default {
    /// Append an element (canonical integers become integer entries).
    fn push(&mut self, b: &[u8]);
    /// Bytes so far, without the terminator.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool;
    /// Roughly what pushing `b` would add, for node-size limits.
    fn entry_size(b: &[u8]) -> usize;
    fn finish(self) -> Vec<u8>;
}

/// The bytes of an encoded container (listpack, ziplist, intset, zipmap).
///
/// Borrowed blobs come straight from the mapped file; owned ones were LZF-decompressed,
/// and their offsets are reported relative to the compressed string that held them.
#[derive(Clone)]
pub enum Blob<'a> {
    Borrowed { data: &'a [u8], offset: usize },
    Owned { data: std::rc::Rc<Vec<u8>>, offset: usize },
}

impl<'a> Blob<'a> {
    pub fn data(&self) -> &[u8] {
        match self {
            Blob::Borrowed { data, .. } => data,
            Blob::Owned { data, .. } => data,
        }
    }

    pub fn offset(&self) -> usize {
        match self {
            Blob::Borrowed { offset, .. } | Blob::Owned { offset, .. } => *offset,
        }
    }

    /// An error at byte `pos` of this blob.
    pub fn error(&self, pos: usize, what: impl fmt::Display) -> FormatError {
        match self {
            Blob::Borrowed { offset, .. } => FormatError::new(offset + pos, what.to_string()),
            Blob::Owned { offset, .. } => {
                FormatError::new(*offset, format!("{what} (at byte {pos} of the LZF-decompressed blob)"))
            }
        }
    }

    /// The element bytes `start..end`, borrowed from the file when possible.
    pub fn elem(&self, start: usize, end: usize) -> Elem<'a> {
        match self {
            Blob::Borrowed { data, .. } => Elem::Bytes(Cow::Borrowed(&data[start..end])),
            Blob::Owned { data, .. } => Elem::Bytes(Cow::Owned(data[start..end].to_vec())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers() {
        assert_eq!(parse_canonical_i64(b"0"), Some(0));
        assert_eq!(parse_canonical_i64(b"-12"), Some(-12));
        assert_eq!(parse_canonical_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_canonical_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [&b"007"[..], b"+1", b"-0", b" 1", b"", b"-", b"9223372036854775808", b"1a"] {
            assert_eq!(parse_canonical_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn formats_integers() {
        let mut b = itoa_buf();
        assert_eq!(fmt_i64(i64::MIN, &mut b), b"-9223372036854775808");
        let mut b = itoa_buf();
        assert_eq!(fmt_i64(0, &mut b), b"0");
        let mut b = itoa_buf();
        assert_eq!(fmt_i64(42, &mut b), b"42");
    }
}
