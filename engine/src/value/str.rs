//! Strings: "int", "embstr" or "raw", chosen as Redis 7.0 chooses.

use std::borrow::Cow;

use super::CompactBytes;
use crate::format::blob::{fmt_i64, parse_canonical_i64};

/// Longest string Redis allocates together with its object header ("embstr").
pub const EMBSTR_MAX: usize = 44;

/// 24 bytes, as a key: a value in the slot costs no more than its key.
#[derive(Debug, Clone)]
pub enum Str {
    /// A canonical decimal integer, stored as a number.
    Int(i64),
    /// Up to 44 bytes, created whole (SET, INCRBYFLOAT): up to 22 of them in place.
    Emb(CompactBytes),
    /// Longer strings, in a block of their exact length.
    Raw(Box<[u8]>),
    /// A "raw" string modified in place (APPEND, SETRANGE, SETBIT, PFADD), with room to
    /// grow.
    Grown(Box<Vec<u8>>),
}

impl PartialEq for Str {
    /// Same encoding (raw either way) and bytes.
    fn eq(&self, other: &Str) -> bool {
        match (self, other) {
            (Str::Int(a), Str::Int(b)) => a == b,
            (Str::Emb(a), Str::Emb(b)) => a == b,
            (Str::Raw(_) | Str::Grown(_), Str::Raw(_) | Str::Grown(_)) => self.as_bytes() == other.as_bytes(),
            _ => false,
        }
    }
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
            Str::Emb(CompactBytes::new(b))
        } else {
            Str::Raw(b.into())
        }
    }

    /// A "raw" string of these bytes, whatever their length (BITOP, a loaded long string).
    pub fn raw(mut b: Vec<u8>) -> Str {
        super::fit(&mut b);
        Str::Raw(b.into_boxed_slice())
    }

    /// A "raw" string that commands modifying in place go on growing (SETRANGE, SETBIT,
    /// BITFIELD and PFADD creating their key).
    pub fn grown(b: Vec<u8>) -> Str {
        Str::Grown(Box::new(b))
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Str::Int(_) => "int",
            Str::Emb(_) => "embstr",
            Str::Raw(_) | Str::Grown(_) => "raw",
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
            Str::Grown(v) => Cow::Borrowed(v),
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
            Str::Grown(v) => v.len(),
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
            Str::Grown(v) => parse_canonical_i64(v),
        }
    }

    /// Turn into a "raw" string for in-place modification (APPEND, SETRANGE, SETBIT).
    pub fn make_raw(&mut self) -> &mut Vec<u8> {
        match self {
            Str::Grown(_) => {}
            Str::Raw(b) => *self = Str::grown(std::mem::take(b).into_vec()),
            _ => *self = Str::grown(self.to_vec()),
        }
        match self {
            Str::Grown(v) => v,
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
        let mut long = Str::try_encode(&[b'a'; 45]);
        assert_eq!(long, Str::grown(vec![b'a'; 45]), "raw either way");
        long.make_raw().push(b'b');
        assert_eq!((long.encoding(), long.len()), ("raw", 46));
        assert_eq!(std::mem::size_of::<Str>(), 24);
        assert_eq!(std::mem::size_of::<super::super::Value>(), 24);
    }
}
