//! Intset (RDB type 11).
//!
//! # Format
//! ```text
//! u32 encoding LE (2, 4 or 8: element width) | u32 length LE | length x intN LE
//! ```
//! Elements must be sorted ascending and unique; the iterator checks both.

use super::blob::Blob;
use super::input::FormatError;

pub struct IntsetIter<'a> {
    blob: Blob<'a>,
    width: usize,
    len: usize,
    i: usize,
    prev: Option<i64>,
}

impl<'a> IntsetIter<'a> {
    pub fn new(blob: Blob<'a>) -> Result<Self, FormatError> {
        let data = blob.data();
        if data.len() < 8 {
            return Err(blob.error(0, format!("intset too short ({} bytes)", data.len())));
        }
        let width = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if !matches!(width, 2 | 4 | 8) {
            return Err(blob.error(0, format!("invalid intset encoding {width}")));
        }
        let len = u32::from_le_bytes([data[4], data[5], data[6], data[7]]) as usize;
        let expect = len.checked_mul(width).and_then(|b| b.checked_add(8));
        if expect != Some(data.len()) {
            return Err(blob.error(
                4,
                format!(
                    "intset of {len} x {width}-byte elements needs {} bytes, blob has {}",
                    8 + len.saturating_mul(width),
                    data.len()
                ),
            ));
        }
        if len == 0 {
            return Err(blob.error(4, "empty intset"));
        }
        Ok(IntsetIter { blob, width, len, i: 0, prev: None })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The elements as stored, order and uniqueness unchecked (what a loader converting
    /// the set reads).
    pub fn unordered(&self) -> impl Iterator<Item = i64> + '_ {
        let data = self.blob.data();
        (0..self.len).map(move |i| {
            let d = &data[8 + i * self.width..8 + (i + 1) * self.width];
            match self.width {
                2 => i64::from(i16::from_le_bytes([d[0], d[1]])),
                4 => i64::from(i32::from_le_bytes([d[0], d[1], d[2], d[3]])),
                _ => i64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]),
            }
        })
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Iterator for IntsetIter<'_> {
    type Item = Result<i64, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.i >= self.len {
            return None;
        }
        let at = 8 + self.i * self.width;
        let d = &self.blob.data()[at..at + self.width];
        let v = match self.width {
            2 => i64::from(i16::from_le_bytes([d[0], d[1]])),
            4 => i64::from(i32::from_le_bytes([d[0], d[1], d[2], d[3]])),
            _ => i64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]),
        };
        self.i += 1;
        if let Some(p) = self.prev {
            if v <= p {
                self.i = self.len;
                let what = if v == p { "duplicate intset element" } else { "intset elements out of order" };
                return Some(Err(self.blob.error(at, format!("{what} ({p} then {v})"))));
            }
        }
        self.prev = Some(v);
        Some(Ok(v))
    }
}

/// Encode sorted, unique members with the smallest width that holds them all.
pub fn encode_intset(sorted: &[i64]) -> Vec<u8> {
    let width: usize = if sorted.iter().all(|v| i16::try_from(*v).is_ok()) {
        2
    } else if sorted.iter().all(|v| i32::try_from(*v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = (width as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    for v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set16(vals: &[i16]) -> Vec<u8> {
        let mut v = 2u32.to_le_bytes().to_vec();
        v.extend_from_slice(&(vals.len() as u32).to_le_bytes());
        for x in vals {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }

    #[test]
    fn reads_sorted_members() {
        let d = set16(&[-5, 1, 300]);
        let v: Vec<i64> =
            IntsetIter::new(Blob::Borrowed { data: &d, offset: 0 }).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(v, vec![-5, 1, 300]);
    }

    #[test]
    fn rejects_unsorted_and_duplicates() {
        for vals in [&[3i16, 2][..], &[2, 2]] {
            let d = set16(vals);
            let r: Result<Vec<i64>, _> = IntsetIter::new(Blob::Borrowed { data: &d, offset: 10 }).unwrap().collect();
            assert_eq!(r.unwrap_err().offset, 10 + 10);
        }
    }

    #[test]
    fn encoder_round_trips_each_width() {
        for vals in [vec![-5i64, 1, 300], vec![-70000, 5], vec![i64::MIN, 0, i64::MAX]] {
            let d = encode_intset(&vals);
            let back: Vec<i64> =
                IntsetIter::new(Blob::Borrowed { data: &d, offset: 0 }).unwrap().collect::<Result<_, _>>().unwrap();
            assert_eq!(back, vals);
        }
    }

    #[test]
    fn rejects_bad_length() {
        let mut d = set16(&[1, 2]);
        d.pop();
        assert!(IntsetIter::new(Blob::Borrowed { data: &d, offset: 0 }).is_err());
    }
}
