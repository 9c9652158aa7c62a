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
    if data.is_empty() {
        return Err(LzfError::Empty);
    }
    if original_len > data.len().saturating_mul(MAX_EXPANSION) {
        return Err(LzfError::ImplausibleLength { compressed: data.len(), original: original_len });
    }
    match lzf::decompress(data, original_len) {
        Ok(v) if v.len() == original_len => Ok(v),
        Ok(_) => Err(LzfError::WrongLength { expected: original_len }),
        Err(lzf::LzfError::BufferTooSmall) => Err(LzfError::WrongLength { expected: original_len }),
        Err(_) => Err(LzfError::Corrupt),
    }
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
}
