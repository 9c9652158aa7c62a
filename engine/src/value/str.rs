//! Strings: "int", "embstr" or "raw", chosen as Redis 7.0 chooses.

use std::borrow::Cow;

use super::{sds, Sds};
use crate::format::blob::{fmt_i64, parse_canonical_i64};

/// Longest string Redis allocates together with its object header ("embstr").
pub const EMBSTR_MAX: usize = 44;

#[derive(Debug, Clone, PartialEq)]
pub enum Str {
    /// A canonical decimal integer, stored as a number.
    Int(i64),
    /// Up to 44 bytes, created whole (SET, INCRBYFLOAT).
    Emb(Sds),
    /// Longer strings, and any string modified in place (APPEND, SETRANGE, SETBIT).
    Raw(Vec<u8>),
}

impl Str {
    /// What SET and RDB loading store: an integer when the bytes are one, else embstr/raw.
    pub fn try_encode(b: &[u8]) -> Str {
        match parse_canonical_i64(b) {
            Some(i) => Str::Int(i),
            None => Str::plain(b),
        }
    }

    /// Same as [`Str::try_encode`]; named for the load path.
    pub fn from_loaded(b: &[u8]) -> Str {
        Str::try_encode(b)
    }

    /// A string object created from bytes without trying the integer encoding.
    pub fn plain(b: &[u8]) -> Str {
        if b.len() <= EMBSTR_MAX {
            Str::Emb(sds(b))
        } else {
            Str::Raw(b.to_vec())
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Str::Int(_) => "int",
            Str::Emb(_) => "embstr",
            Str::Raw(_) => "raw",
        }
    }

    pub fn as_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Str::Int(i) => {
                let mut buf = [0u8; 20];
                Cow::Owned(fmt_i64(*i, &mut buf).to_vec())
            }
            Str::Emb(s) => Cow::Borrowed(s),
            Str::Raw(v) => Cow::Borrowed(v),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.as_bytes().into_owned()
    }

    pub fn len(&self) -> usize {
        match self {
            Str::Int(i) => {
                let mut buf = [0u8; 20];
                fmt_i64(*i, &mut buf).len()
            }
            Str::Emb(s) => s.len(),
            Str::Raw(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value as a 64-bit integer, as INCR reads it.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Str::Int(i) => Some(*i),
            Str::Emb(s) => parse_canonical_i64(s),
            Str::Raw(v) => parse_canonical_i64(v),
        }
    }

    /// Turn into a "raw" string for in-place modification (APPEND, SETRANGE, SETBIT).
    pub fn make_raw(&mut self) -> &mut Vec<u8> {
        if !matches!(self, Str::Raw(_)) {
            *self = Str::Raw(self.to_vec());
        }
        match self {
            Str::Raw(v) => v,
            _ => unreachable!("made raw above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_follow_redis() {
        assert_eq!(Str::try_encode(b"123").encoding(), "int");
        assert_eq!(Str::try_encode(b"-9223372036854775808").encoding(), "int");
        assert_eq!(Str::try_encode(b"9223372036854775808").encoding(), "embstr");
        assert_eq!(Str::try_encode(b"007").encoding(), "embstr");
        assert_eq!(Str::try_encode(b"-0").encoding(), "embstr");
        assert_eq!(Str::try_encode(&[b'a'; 44]).encoding(), "embstr");
        assert_eq!(Str::try_encode(&[b'a'; 45]).encoding(), "raw");
        let mut s = Str::try_encode(b"12");
        s.make_raw().extend_from_slice(b"3");
        assert_eq!((s.encoding(), s.as_i64()), ("raw", Some(123)));
    }
}
