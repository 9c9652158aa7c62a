//! Zipmap (RDB type 9, Redis 2.4 small hashes).
//!
//! # Format
//! ```text
//! u8 zmlen (>= 254: unknown) | { len key | key | len value | u8 free | value | free bytes }* | 0xFF
//! len = 1 byte if < 254, else 0xFE + u32 LE
//! ```

use super::blob::{Blob, Elem};
use super::input::FormatError;

const END: u8 = 0xFF;

pub struct ZipmapIter<'a> {
    blob: Blob<'a>,
    pos: usize,
    declared: Option<usize>,
    seen: usize,
    done: bool,
}

impl<'a> ZipmapIter<'a> {
    pub fn new(blob: Blob<'a>) -> Result<Self, FormatError> {
        let data = blob.data();
        if data.len() < 2 {
            return Err(blob.error(0, "zipmap too short"));
        }
        if data[data.len() - 1] != END {
            return Err(blob.error(data.len() - 1, "zipmap does not end with 0xFF"));
        }
        // 254 means "count by walking"; 255 is the end marker and never a valid count.
        let declared = match data[0] {
            n @ 0..=253 => Some(n as usize),
            254 => None,
            _ => return Err(blob.error(0, "invalid zipmap length byte 0xff")),
        };
        Ok(ZipmapIter { blob, pos: 1, declared, seen: 0, done: false })
    }

    fn len_at(&self, pos: usize) -> Result<(usize, usize), FormatError> {
        let data = self.blob.data();
        match data.get(pos) {
            Some(&b) if b < 254 => Ok((b as usize, 1)),
            Some(&254) if pos + 5 <= data.len() => {
                Ok((u32::from_le_bytes([data[pos + 1], data[pos + 2], data[pos + 3], data[pos + 4]]) as usize, 5))
            }
            _ => Err(self.blob.error(pos, "zipmap length runs past the end or is invalid")),
        }
    }

    fn read(&mut self) -> Result<Option<(Elem<'a>, Elem<'a>)>, FormatError> {
        let data = self.blob.data();
        let limit = data.len() - 1;
        if self.pos == limit {
            if let Some(n) = self.declared {
                if n != self.seen {
                    return Err(self
                        .blob
                        .error(0, format!("zipmap header declares {n} pairs but holds {}", self.seen)));
                }
            }
            return Ok(None);
        }
        let (klen, a) = self.len_at(self.pos)?;
        let kstart = self.pos + a;
        let kend = kstart.checked_add(klen).filter(|&e| e <= limit);
        let Some(kend) = kend else {
            return Err(self.blob.error(self.pos, format!("zipmap key of {klen} bytes runs past the end")));
        };
        let (vlen, b) = self.len_at(kend)?;
        let free_at = kend + b;
        let Some(&free) = data.get(free_at).filter(|_| free_at < limit) else {
            return Err(self.blob.error(free_at, "zipmap entry runs past the end"));
        };
        let vstart = free_at + 1;
        let vend = vstart.checked_add(vlen).filter(|&e| e <= limit);
        let Some(vend) = vend else {
            return Err(self.blob.error(kend, format!("zipmap value of {vlen} bytes runs past the end")));
        };
        let next = vend + free as usize;
        if next > limit {
            return Err(self.blob.error(free_at, format!("zipmap free space of {free} bytes runs past the end")));
        }
        self.pos = next;
        self.seen += 1;
        Ok(Some((self.blob.elem(kstart, kend), self.blob.elem(vstart, vend))))
    }
}

impl<'a> Iterator for ZipmapIter<'a> {
    type Item = Result<(Elem<'a>, Elem<'a>), FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.read();
        crate::format::blob::fused(&mut self.done, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pairs_and_skips_free_bytes() {
        let d = [2u8, 1, b'a', 2, 1, b'x', b'y', 0, 1, b'b', 1, 0, b'z', END];
        let v: Vec<_> =
            ZipmapIter::new(Blob::Borrowed { data: &d, offset: 0 }).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            v,
            vec![(Elem::borrowed(b"a"), Elem::borrowed(b"xy")), (Elem::borrowed(b"b"), Elem::borrowed(b"z"))]
        );
    }

    #[test]
    fn rejects_big_length() {
        let d = [1u8, 254, 0xFF, 0xFF, 0, 0, b'a', END];
        let r: Result<Vec<_>, _> = ZipmapIter::new(Blob::Borrowed { data: &d, offset: 0 }).unwrap().collect();
        assert!(r.is_err());
    }
}
