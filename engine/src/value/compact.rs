//! Byte strings of up to 22 bytes kept in place: keys and short string values.

use super::{sds, Sds};

/// Bytes kept inline.
const INLINE: usize = 22;

/// Bytes in 24: up to 22 inline, longer ones in one heap block of their exact length. A
/// key and a short string value are kept so (an `Sds` keeps 16 inline in as many bytes,
/// with room to grow that neither needs).
#[derive(Clone)]
pub enum CompactBytes {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl CompactBytes {
    pub fn new(b: &[u8]) -> CompactBytes {
        if b.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..b.len()].copy_from_slice(b);
            CompactBytes::Inline { len: b.len() as u8, bytes }
        } else {
            CompactBytes::Heap(b.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            CompactBytes::Inline { len, bytes } => &bytes[..usize::from(*len)],
            CompactBytes::Heap(b) => b,
        }
    }

    pub fn to_sds(&self) -> Sds {
        sds(self.as_slice())
    }
}

impl std::ops::Deref for CompactBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for CompactBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for CompactBytes {
    fn eq(&self, other: &CompactBytes) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for CompactBytes {}

impl std::fmt::Debug for CompactBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_up_to_22_bytes() {
        assert_eq!(std::mem::size_of::<CompactBytes>(), 24);
        for n in [0, 1, 21, 22, 23, 300] {
            let b: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let k = CompactBytes::new(&b);
            assert_eq!(k.as_slice(), &b[..]);
            assert_eq!(matches!(k, CompactBytes::Inline { .. }), n <= INLINE, "{n}");
        }
    }
}
