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

/// Check that `data` is a well-formed LZF stream producing exactly `original_len` bytes,
/// without producing them: every literal and back-reference is bounds-checked exactly as
/// `decompress_into` would, but nothing is written. Used by verify on string values.
pub fn validate(data: &[u8], original_len: usize) -> Result<(), LzfError> {
    if data.is_empty() {
        return Err(LzfError::Empty);
    }
    if original_len > data.len().saturating_mul(MAX_EXPANSION) {
        return Err(LzfError::ImplausibleLength { compressed: data.len(), original: original_len });
    }
    let (mut i, mut produced) = (0usize, 0usize);
    while i < data.len() {
        let ctrl = data[i] as usize;
        i += 1;
        let len = if ctrl < 32 {
            let run = ctrl + 1;
            if i + run > data.len() {
                return Err(LzfError::Corrupt);
            }
            i += run;
            run
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                let Some(&extra) = data.get(i) else { return Err(LzfError::Corrupt) };
                len += extra as usize;
                i += 1;
            }
            let Some(&low) = data.get(i) else { return Err(LzfError::Corrupt) };
            i += 1;
            if ((ctrl & 0x1F) << 8) + low as usize + 1 > produced {
                return Err(LzfError::Corrupt);
            }
            len + 2
        };
        produced += len;
        if produced > original_len {
            return Err(LzfError::WrongLength { expected: original_len });
        }
    }
    if produced != original_len {
        return Err(LzfError::WrongLength { expected: original_len });
    }
    Ok(())
}

/// Decompress into `out` (cleared first), so callers can reuse one buffer.
///
/// Written here rather than calling the `lzf` crate because bulk copies for literal runs
/// and non-overlapping back-references make it several times faster on RDB data
/// (`benches/lzf.rs`); the tests check both give the same bytes.
pub fn decompress_into(data: &[u8], original_len: usize, out: &mut Vec<u8>) -> Result<(), LzfError> {
    out.clear();
    if data.is_empty() {
        return Err(LzfError::Empty);
    }
    if original_len > data.len().saturating_mul(MAX_EXPANSION) {
        return Err(LzfError::ImplausibleLength { compressed: data.len(), original: original_len });
    }
    out.reserve(original_len);
    let mut i = 0;
    while i < data.len() {
        let ctrl = data[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let Some(lit) = data.get(i..i + run) else { return Err(LzfError::Corrupt) };
            if out.len() + run > original_len {
                return Err(LzfError::WrongLength { expected: original_len });
            }
            out.extend_from_slice(lit);
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
                return Err(LzfError::WrongLength { expected: original_len });
            }
            let from = out.len() - back;
            if back >= len {
                out.extend_from_within(from..from + len);
            } else {
                // Overlapping: the copy reads bytes it has just written.
                for k in 0..len {
                    let b = out[from + k];
                    out.push(b);
                }
            }
        }
    }
    if out.len() != original_len {
        return Err(LzfError::WrongLength { expected: original_len });
    }
    Ok(())
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
