//! LZF decompression with the checks RDB needs.
//!
//! The RDB stores both lengths, so the output must be exactly `original_len` bytes. A
//! corrupt `original_len` must not make us allocate gigabytes: LZF expands at most about
//! 88x (a 3-byte back-reference yields 264 bytes), so larger claims are rejected first.

/// Largest ratio of decompressed to compressed size that liblzf can produce.
const MAX_EXPANSION: usize = 88;

/// Why LZF decompression failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LzfError {
    Empty,
    ImplausibleLength { compressed: usize, original: usize },
    Corrupt,
    WrongLength { expected: usize },
}

impl std::fmt::Display for LzfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LzfError::Empty => write!(f, "empty LZF data"),
            LzfError::ImplausibleLength { compressed, original } => write!(
                f,
                "LZF string claims {original} bytes from {compressed} compressed bytes, more than LZF can expand"
            ),
            LzfError::Corrupt => write!(f, "corrupt LZF data"),
            LzfError::WrongLength { expected } => {
                write!(f, "LZF data does not decompress to the stated {expected} bytes")
            }
        }
    }
}

pub fn decompress(data: &[u8], original_len: usize) -> Result<Vec<u8>, LzfError> {
    let mut out = Vec::new();
    decompress_into(data, original_len, &mut out)?;
    Ok(out)
}

/// Where a decoded LZF stream goes: into a buffer, or only counted.
trait Sink {
    fn len(&self) -> usize;
    fn literal(&mut self, bytes: &[u8]);
    /// Copy `len` bytes starting `back` bytes before the end (`back <= self.len()`).
    fn back_ref(&mut self, back: usize, len: usize);
}

/// Counts bytes without producing them: validation only.
struct Count(usize);

impl Sink for Count {
    fn len(&self) -> usize {
        self.0
    }
    fn literal(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
    fn back_ref(&mut self, _: usize, len: usize) {
        self.0 += len;
    }
}

impl Sink for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn literal(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    fn back_ref(&mut self, back: usize, len: usize) {
        let from = Vec::len(self) - back;
        if back >= len {
            self.extend_from_within(from..from + len);
            return;
        }
        // Overlapping: the run repeats with period `back`. Copy whole periods from
        // `from`; each copy doubles what is available, and every shift is a multiple of
        // the period, so this equals the byte-by-byte copy.
        let mut remaining = len;
        while remaining > 0 {
            let n = remaining.min(Vec::len(self) - from);
            self.extend_from_within(from..from + n);
            remaining -= n;
        }
    }
}

/// Walk an LZF stream into `out`, checking every bound on the way.
fn run<S: Sink>(data: &[u8], original_len: usize, out: &mut S) -> Result<(), LzfError> {
    if data.is_empty() {
        return Err(LzfError::Empty);
    }
    if original_len > data.len().saturating_mul(MAX_EXPANSION) {
        return Err(LzfError::ImplausibleLength { compressed: data.len(), original: original_len });
    }
    let too_long = LzfError::WrongLength { expected: original_len };
    let mut i = 0;
    while i < data.len() {
        let ctrl = data[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let Some(lit) = data.get(i..i + run) else { return Err(LzfError::Corrupt) };
            if out.len() + run > original_len {
                return Err(too_long);
            }
            out.literal(lit);
            i += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                let Some(&extra) = data.get(i) else { return Err(LzfError::Corrupt) };
                len += extra as usize;
                i += 1;
            }
            let Some(&low) = data.get(i) else { return Err(LzfError::Corrupt) };
            i += 1;
            let back = ((ctrl & 0x1F) << 8) + low as usize + 1;
            let len = len + 2;
            if back > out.len() {
                return Err(LzfError::Corrupt);
            }
            if out.len() + len > original_len {
                return Err(too_long);
            }
            out.back_ref(back, len);
        }
    }
    if out.len() != original_len {
        return Err(too_long);
    }
    Ok(())
}

/// Check that `data` is a well-formed LZF stream producing exactly `original_len` bytes,
/// without producing them (every bound is checked as in decompression). Used by verify.
pub fn validate(data: &[u8], original_len: usize) -> Result<(), LzfError> {
    run(data, original_len, &mut Count(0))
}

/// Decompress into `out` (cleared first), so callers can reuse one buffer.
///
/// Written here rather than calling the `lzf` crate: it reuses the caller's buffer (no
/// allocation and zero-fill per string) and copies literal runs and back-references in
/// blocks; `benches/codecs.rs` compares both, and the tests check they give the same bytes.
pub fn decompress_into(data: &[u8], original_len: usize, out: &mut Vec<u8>) -> Result<(), LzfError> {
    out.clear();
    if original_len <= data.len().saturating_mul(MAX_EXPANSION) {
        out.reserve(original_len);
    }
    run(data, original_len, out)
}

/// Compress `input` as liblzf does (3-byte hash matches, back-references up to 8 KiB
/// behind and 264 bytes long, literal runs of up to 32), or `None` when the output would
/// exceed `max_out` bytes. Written here because the `lzf` crate's compressor panics on
/// some inputs (an index out of bounds in lzf 1.0.0, met on real Redis data).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = 264;
    let n = input.len();
    if n == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(max_out.min(n + n / 32 + 1));
    // The hash table grows with the input up to 16 K entries: a fixed 64 KB table, zeroed
    // on every call, cost more than compressing the short strings most values are.
    let hlog = (usize::BITS - n.leading_zeros()).clamp(8, 14);
    let mut table = vec![0u32; 1 << hlog];
    let hash = |i: usize| -> usize {
        let v = u32::from(input[i]) << 16 | u32::from(input[i + 1]) << 8 | u32::from(input[i + 2]);
        (v.wrapping_mul(2_654_435_761) >> (32 - hlog)) as usize
    };
    // Literal runs are written in chunks of up to 32 bytes behind a length byte.
    let flush = |out: &mut Vec<u8>, lit: &[u8]| -> bool {
        for chunk in lit.chunks(32) {
            if out.len() + 1 + chunk.len() > max_out {
                return false;
            }
            out.push((chunk.len() - 1) as u8);
            out.extend_from_slice(chunk);
        }
        true
    };
    let (mut i, mut lit_start) = (0usize, 0usize);
    while i + 2 < n {
        let h = hash(i);
        let candidate = table[h] as usize;
        table[h] = (i + 1) as u32;
        if candidate > 0 {
            let r = candidate - 1;
            let off = i - r - 1;
            if off < MAX_OFF && input[r..r + 3] == input[i..i + 3] {
                let max_len = MAX_REF.min(n - i);
                let mut len = 3;
                while len < max_len && input[r + len] == input[i + len] {
                    len += 1;
                }
                if !flush(&mut out, &input[lit_start..i]) {
                    return None;
                }
                let l = len - 2;
                let need = if l < 7 { 2 } else { 3 };
                if out.len() + need > max_out {
                    return None;
                }
                if l < 7 {
                    out.push(((l as u8) << 5) | (off >> 8) as u8);
                } else {
                    out.push((7 << 5) | (off >> 8) as u8);
                    out.push((l - 7) as u8);
                }
                out.push((off & 0xFF) as u8);
                // Index the positions the match covers, so later data can refer to them.
                let end = i + len;
                let mut k = i + 1;
                while k < end && k + 2 < n {
                    table[hash(k)] = (k + 1) as u32;
                    k += 1;
                }
                i = end;
                lit_start = i;
                continue;
            }
        }
        i += 1;
    }
    if !flush(&mut out, &input[lit_start..]) {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length_checks() {
        let text = b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabcabcabc";
        let c = lzf::compress(text).unwrap();
        assert_eq!(decompress(&c, text.len()).unwrap(), text.to_vec());
        assert!(decompress(&c, text.len() + 1).is_err());
        assert!(decompress(&c, text.len() - 1).is_err());
        assert!(matches!(decompress(&c, usize::MAX / 2), Err(LzfError::ImplausibleLength { .. })));
        assert_eq!(decompress(&[], 3), Err(LzfError::Empty));
    }

    #[test]
    fn compressor_round_trips_through_both_decoders() {
        let mut x: u32 = 99;
        let mut cases: Vec<Vec<u8>> =
            vec![b"a".to_vec(), b"abc".to_vec(), vec![0; 100_000], b"abcabcabcabcabcabcabcabc".to_vec()];
        for size in [10usize, 100, 1000, 40_000] {
            let mut v = Vec::new();
            while v.len() < size {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                if x.is_multiple_of(5) && v.len() > 10 {
                    let from = v.len() - 1 - (x >> 8) as usize % v.len().min(9000);
                    let run = 3 + (x >> 20) as usize % 300;
                    for k in 0..run {
                        let b = v[from + k % (v.len() - from)];
                        v.push(b);
                    }
                } else {
                    v.push((x >> 24) as u8 % 7 + b'a');
                }
            }
            cases.push(v);
        }
        for c in &cases {
            let comp = compress(c, c.len() + c.len() / 32 + 8).unwrap();
            assert_eq!(decompress(&comp, c.len()).unwrap(), *c);
            assert_eq!(::lzf::decompress(&comp, c.len()).unwrap(), *c);
            // A tight budget is refused, not overrun.
            if comp.len() > 1 {
                assert!(compress(c, comp.len() - 1).is_none_or(|v| v.len() < comp.len()));
            }
        }
    }

    #[test]
    fn agrees_with_the_reference_crate() {
        // Text with long and short repeats, overlapping back-references, binary noise.
        let mut x: u32 = 7;
        let mut data = Vec::new();
        for i in 0..50_000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            match i % 7 {
                0 => data.extend_from_slice(b"hello hello hello "),
                1 => data.push((x >> 16) as u8),
                2 => data.extend(std::iter::repeat_n(b'z', (x % 300) as usize)),
                _ => {
                    let n = data.len();
                    data.extend_from_within(n.saturating_sub(40)..);
                }
            }
        }
        let c = ::lzf::compress(&data).unwrap();
        assert_eq!(decompress(&c, data.len()).unwrap(), data);
        assert_eq!(validate(&c, data.len()), Ok(()));
        assert!(validate(&c, data.len() + 1).is_err());
        assert_eq!(::lzf::decompress(&c, data.len()).unwrap(), data);
        // Every truncation fails without panicking.
        for cut in [0, 1, 2, c.len() / 2, c.len() - 1] {
            assert!(decompress(&c[..cut], data.len()).is_err());
            assert!(validate(&c[..cut], data.len()).is_err());
        }
    }
}
