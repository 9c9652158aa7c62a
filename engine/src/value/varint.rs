//! Little-endian base-128 lengths (seven bits a byte, the high bit set on every byte but
//! the last), as packed list entries and hash pairs store them.

/// Bytes `n` takes.
pub fn len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// Write `n` at the start of `out` (at least `len(n)` long); the bytes written.
pub fn write(out: &mut [u8], mut n: usize) -> usize {
    let size = len(n);
    for (i, b) in out[..size].iter_mut().enumerate() {
        *b = (n & 0x7f) as u8 | if i + 1 < size { 0x80 } else { 0 };
        n >>= 7;
    }
    size
}

/// The number at the start of `buf` and the bytes it took.
pub fn read(buf: &[u8]) -> (usize, usize) {
    let (mut n, mut shift) = (0usize, 0);
    for (i, &b) in buf.iter().enumerate() {
        n |= usize::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
        shift += 7;
        if b & 0x80 == 0 {
            return (n, i + 1);
        }
    }
    (n, buf.len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips() {
        for n in [0, 1, 127, 128, 16383, 16384, 1 << 30, usize::MAX] {
            let mut b = [0u8; 10];
            let w = super::write(&mut b, n);
            assert_eq!(w, super::len(n));
            assert_eq!(super::read(&b), (n, w));
        }
    }
}
