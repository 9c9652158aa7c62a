//! `Input`: a byte slice that knows its offset in the file it came from.
//!
//! Every parser in `format` runs over `Input`, so an error anywhere, even deep inside a
//! listpack inside an RDB string, can name the absolute byte offset where it happened.

use std::fmt;
use std::iter::{Copied, Enumerate};
use std::slice::Iter;

use nom::error::{ErrorKind as NomErrorKind, ParseError};
use nom::{IResult, Needed};

/// A borrowed byte slice plus the absolute offset of its first byte.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Input<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Input<'a> {
    /// The whole buffer, starting at offset 0.
    pub fn new(bytes: &'a [u8]) -> Self {
        Input { bytes, offset: 0 }
    }

    /// A buffer whose first byte sits at `offset` of some outer file.
    pub fn at(bytes: &'a [u8], offset: usize) -> Self {
        Input { bytes, offset }
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes between `self` and a later position `rest` of the same buffer.
    pub fn until(&self, rest: &Input<'a>) -> Input<'a> {
        let n = rest.offset.saturating_sub(self.offset).min(self.bytes.len());
        Input { bytes: &self.bytes[..n], offset: self.offset }
    }
}

impl fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Input@{}[{} bytes]", self.offset, self.bytes.len())
    }
}

impl<'a> nom::Input for Input<'a> {
    type Item = u8;
    type Iter = Copied<Iter<'a, u8>>;
    type IterIndices = Enumerate<Self::Iter>;

    fn input_len(&self) -> usize {
        self.bytes.len()
    }

    fn take(&self, index: usize) -> Self {
        Input { bytes: &self.bytes[..index], offset: self.offset }
    }

    fn take_from(&self, index: usize) -> Self {
        Input { bytes: &self.bytes[index..], offset: self.offset + index }
    }

    fn take_split(&self, index: usize) -> (Self, Self) {
        (self.take_from(index), self.take(index))
    }

    fn position<P>(&self, predicate: P) -> Option<usize>
    where
        P: Fn(Self::Item) -> bool,
    {
        self.bytes.iter().position(|b| predicate(*b))
    }

    fn iter_elements(&self) -> Self::Iter {
        self.bytes.iter().copied()
    }

    fn iter_indices(&self) -> Self::IterIndices {
        self.iter_elements().enumerate()
    }

    fn slice_index(&self, count: usize) -> Result<usize, Needed> {
        if self.bytes.len() >= count {
            Ok(count)
        } else {
            Err(Needed::new(count - self.bytes.len()))
        }
    }
}

/// The kind of a decoding error, for callers that act on it without reading its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The data ends before what it announces (a cut file, a short read).
    Truncated,
    /// The bytes are not what the format allows there.
    Malformed,
    /// The trailing checksum does not match the data.
    Checksum,
    /// A format version or feature this reader does not know.
    Unsupported,
}

/// What went wrong while parsing, at which absolute offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub offset: usize,
    pub what: String,
    pub kind: ErrorKind,
}

impl FormatError {
    /// Malformed bytes at `offset`.
    pub fn new(offset: usize, what: impl Into<String>) -> Self {
        FormatError { offset, what: what.into(), kind: ErrorKind::Malformed }
    }

    /// The data ends at `offset`, inside `what`.
    pub fn truncated(offset: usize, what: impl Into<String>) -> Self {
        FormatError { offset, what: what.into(), kind: ErrorKind::Truncated }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "offset {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for FormatError {}

impl<'a> ParseError<Input<'a>> for FormatError {
    fn from_error_kind(input: Input<'a>, kind: NomErrorKind) -> Self {
        match kind {
            NomErrorKind::Eof | NomErrorKind::Complete => {
                FormatError::truncated(input.offset, "unexpected end of data")
            }
            other => FormatError::new(input.offset, format!("parse error ({})", other.description())),
        }
    }

    fn append(_: Input<'a>, _: NomErrorKind, other: Self) -> Self {
        other
    }
}

/// Result of a parser over `Input`.
pub type PResult<'a, T> = IResult<Input<'a>, T, FormatError>;

/// Build a hard parse failure at `input`'s offset.
pub fn fail<T>(input: Input<'_>, what: impl Into<String>) -> PResult<'_, T> {
    Err(nom::Err::Failure(FormatError::new(input.offset(), what)))
}

/// Turn a nom error into a `FormatError`, naming what was being read when input ran out.
pub fn finish(err: nom::Err<FormatError>, reading: &str) -> FormatError {
    match err {
        nom::Err::Incomplete(_) => FormatError::truncated(0, format!("unexpected end of data reading {reading}")),
        nom::Err::Error(mut e) | nom::Err::Failure(mut e) => {
            if e.kind == ErrorKind::Truncated && e.what == "unexpected end of data" {
                e.what = format!("unexpected end of data reading {reading}");
            }
            e
        }
    }
}

/// Take exactly `n` bytes, failing with a message that says what they were for.
pub fn take_bytes<'a>(input: Input<'a>, n: usize, reading: &str) -> PResult<'a, Input<'a>> {
    if input.len() < n {
        let what = format!("unexpected end of data reading {reading} ({n} bytes needed, {} left)", input.len());
        return Err(nom::Err::Failure(FormatError::truncated(input.offset(), what)));
    }
    Ok(nom::Input::take_split(&input, n))
}

pub fn u8_(input: Input<'_>) -> PResult<'_, u8> {
    nom::number::complete::u8(input)
}

pub fn le_u16(input: Input<'_>) -> PResult<'_, u16> {
    nom::number::complete::le_u16(input)
}

pub fn le_u32(input: Input<'_>) -> PResult<'_, u32> {
    nom::number::complete::le_u32(input)
}

pub fn le_u64(input: Input<'_>) -> PResult<'_, u64> {
    nom::number::complete::le_u64(input)
}

pub fn le_i64(input: Input<'_>) -> PResult<'_, i64> {
    nom::number::complete::le_i64(input)
}

pub fn be_u64(input: Input<'_>) -> PResult<'_, u64> {
    nom::number::complete::be_u64(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_the_cursor() {
        let data = [1u8, 2, 0, 3, 0, 0, 0];
        let i = Input::at(&data, 100);
        let (rest, a) = u8_(i).unwrap();
        assert_eq!(a, 1);
        assert_eq!(rest.offset(), 101);
        let (rest, b) = le_u16(rest).unwrap();
        assert_eq!(b, 2);
        let (rest, c) = le_u32(rest).unwrap();
        assert_eq!(c, 3);
        assert!(rest.is_empty());
        assert_eq!(rest.offset(), 107);
    }

    #[test]
    fn short_input_names_the_offset() {
        let data = [1u8, 2];
        let err = le_u32(Input::at(&data, 40)).unwrap_err();
        let e = finish(err, "a length");
        assert_eq!(e.offset, 40);
        assert!(e.what.contains("a length"), "{}", e.what);
    }
}
