//! Hand-rolled JSON output for byte strings, fast enough to keep dump output I/O-bound.
//!
//! Bytes are written as a JSON string when they are valid UTF-8, otherwise as
//! `{"hex":"..."}`: lossless and binary safe (docs/json-schema.md).

use ferrokv::format::Elem;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Write `b` as a JSON string or a `{"hex": ...}` object.
pub fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Most values are ASCII with nothing to escape: one pass checks both, and they are
    // copied whole. The rest (escapes, other UTF-8, binary) take the general path.
    if clean_ascii(b) {
        out.reserve(b.len() + 2);
        out.push(b'"');
        out.extend_from_slice(b);
        out.push(b'"');
        return;
    }
    match std::str::from_utf8(b) {
        Ok(s) => string(out, s),
        Err(_) => {
            out.extend_from_slice(b"{\"hex\":\"");
            hex(out, b);
            out.extend_from_slice(b"\"}");
        }
    }
}

/// Every byte's two hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 15]];
        i += 1;
    }
    t
};

pub fn hex(out: &mut Vec<u8>, b: &[u8]) {
    let start = out.len();
    out.resize(start + b.len() * 2, 0);
    let dst = &mut out[start..];
    // Four bytes become eight digits at a time (SWAR); the table does the rest.
    let mut quads = b.chunks_exact(4);
    let mut pairs = dst.chunks_exact_mut(8);
    for (q, d) in (&mut quads).zip(&mut pairs) {
        d.copy_from_slice(&hex_quad(u32::from_le_bytes([q[0], q[1], q[2], q[3]])).to_le_bytes());
    }
    let done = b.len() - quads.remainder().len();
    for (pair, &c) in dst[done * 2..].chunks_exact_mut(2).zip(quads.remainder()) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(c)]);
    }
}

/// The lowercase hex digits of four bytes, in their order, as eight bytes (little-endian).
#[inline]
fn hex_quad(x: u32) -> u64 {
    // Each byte's nibbles, high first, spread to one byte each.
    let spread = |v: u32| {
        let v = u64::from(v);
        let v = (v | v << 16) & 0x0000_FFFF_0000_FFFF;
        (v | v << 8) & 0x00FF_00FF_00FF_00FF
    };
    let n = spread((x >> 4) & 0x0F0F_0F0F) | spread(x & 0x0F0F_0F0F) << 8;
    // Nibbles 10..15 get 'a' - '0' - 10 more than '0' + nibble (no byte carries into the next).
    let letters = ((n + 0x0606_0606_0606_0606) & 0x1010_1010_1010_1010) >> 4;
    n + 0x3030_3030_3030_3030 + letters * 39
}

/// Bytes that need escaping inside a JSON string.
const ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t[0x7F] = true;
    t
};

/// True when any byte of the 8 in `w` is < 0x20, '"', '\\' or 0x7F (SWAR).
#[inline]
fn word_needs_escape(w: u64) -> bool {
    escape_bits(w) != 0
}

/// Non-zero exactly when a byte of the 8 in `w` is < 0x20, '"', '\\' or 0x7F (SWAR: each
/// test is exact as a whole, not byte by byte).
#[inline]
fn escape_bits(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let lt_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    lt_space | has_zero(w ^ (ONES * 0x22)) | has_zero(w ^ (ONES * 0x5C)) | has_zero(w ^ (ONES * 0x7F))
}

/// Non-zero exactly when a byte of the 8 in `w` is not ASCII a JSON string holds as it is.
#[inline]
fn word_unclean(w: u64) -> u64 {
    (w & 0x8080_8080_8080_8080) | escape_bits(w)
}

/// True when every byte is ASCII that a JSON string holds as it is.
#[inline]
fn clean_ascii(b: &[u8]) -> bool {
    let word = |w: &[u8]| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
    if b.len() < 8 {
        // Padded with a clean byte.
        let mut w = [b'a'; 8];
        w[..b.len()].copy_from_slice(b);
        return word_unclean(word(&w)) == 0;
    }
    // Four words a step with one branch; the last word may overlap the one before it.
    let mut blocks = b.chunks_exact(32);
    for k in &mut blocks {
        if word_unclean(word(&k[..8]))
            | word_unclean(word(&k[8..16]))
            | word_unclean(word(&k[16..24]))
            | word_unclean(word(&k[24..]))
            != 0
        {
            return false;
        }
    }
    let mut words = blocks.remainder().chunks_exact(8);
    if words.any(|w| word_unclean(word(w)) != 0) {
        return false;
    }
    word_unclean(word(&b[b.len() - 8..])) == 0
}

/// Write a JSON string, escaping quotes, backslashes and control characters.
pub fn string(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    out.reserve(b.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        // Skip 8 clean bytes at a time.
        if i + 8 <= b.len() {
            let w = u64::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]]);
            if !word_needs_escape(w) {
                i += 8;
                continue;
            }
        }
        let c = b[i];
        if !ESCAPE[c as usize] {
            i += 1;
            continue;
        }
        out.extend_from_slice(&b[start..i]);
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
            }
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

/// An element: integers are written as strings of their decimal text (values are bytes).
pub fn elem(out: &mut Vec<u8>, e: &Elem<'_>) {
    match e {
        Elem::Bytes(b) => bytes(out, b),
        Elem::Int(i) => {
            out.push(b'"');
            int(out, *i);
            out.push(b'"');
        }
    }
}

pub fn int(out: &mut Vec<u8>, v: i64) {
    let mut buf = ferrokv::format::blob::itoa_buf();
    out.extend_from_slice(ferrokv::format::blob::fmt_i64(v, &mut buf));
}

pub fn uint(out: &mut Vec<u8>, v: u64) {
    match i64::try_from(v) {
        Ok(i) => int(out, i),
        Err(_) => out.extend_from_slice(v.to_string().as_bytes()),
    }
}

/// A score as text that parses back to the same double (as Redis's d2string writes it).
pub use ferrokv::format::rdb::score_text;

/// A score as a JSON string of its [`score_text`] (which never needs escaping).
pub fn score(out: &mut Vec<u8>, f: f64) {
    out.push(b'"');
    ferrokv::format::rdb::score_text_into(out, f);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(b: &[u8]) -> String {
        let mut v = Vec::new();
        bytes(&mut v, b);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn escapes_and_hex() {
        assert_eq!(s(b"a\"b\\c\n\x01"), r#""a\"b\\c\n\u0001""#);
        assert_eq!(s(b"\xff\x00"), r#"{"hex":"ff00"}"#);
        assert_eq!(s("é".as_bytes()), "\"é\"");
        let parsed: serde_json::Value = serde_json::from_str(&s(b"x\x7f\x1fy")).unwrap();
        assert_eq!(parsed, serde_json::json!("x\u{7f}\u{1f}y"));
        // Every byte value at every position of a 20-byte string round-trips.
        for c in 0u8..128 {
            for pos in 0..20 {
                let mut v = vec![b'a'; 20];
                v[pos] = c;
                let text = s(&v);
                let back: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(back.as_str().unwrap().as_bytes(), &v[..], "{c} at {pos}");
            }
        }
    }

    #[test]
    fn word_checks_and_hex_agree_with_byte_by_byte() {
        let unclean = |c: u8| c < 0x20 || c == b'"' || c == b'\\' || c >= 0x7F;
        for len in 0usize..80 {
            for c in 0..=255u8 {
                // Every position of a string shorter than a word (padded into one).
                let positions: Vec<usize> = if len < 8 { (0..len).collect() } else { vec![0, len / 2, len - 1] };
                for pos in positions.into_iter().chain((len == 0).then_some(0)) {
                    let mut v: Vec<u8> = (0..len).map(|i| b'A' + (i % 26) as u8).collect();
                    if len > 0 {
                        v[pos] = c;
                    }
                    assert_eq!(clean_ascii(&v), !v.iter().any(|&b| unclean(b)), "byte {c} at {pos} of {len}");
                    let mut h = Vec::new();
                    hex(&mut h, &v);
                    let want: String = v.iter().map(|b| format!("{b:02x}")).collect();
                    assert_eq!(h, want.as_bytes(), "hex of byte {c} at {pos} of {len}");
                }
            }
        }
    }

    #[test]
    fn scores_round_trip() {
        for f in [0.1, 1.0, -3.0, 1e-300, 1.7976931348623157e308, 2.5e16, 123456.789, -0.0] {
            let t = score_text(f);
            let back: f64 = t.parse().unwrap();
            assert_eq!(back.to_bits(), f.to_bits(), "{t}");
        }
        assert_eq!(score_text(3.0), "3");
        assert_eq!(score_text(f64::NEG_INFINITY), "-inf");
        for f in [0.1, 3.0, -0.0, f64::NAN, f64::INFINITY, 9.3e18, -2.5e-7] {
            let mut v = Vec::new();
            score(&mut v, f);
            assert_eq!(v, format!("\"{}\"", score_text(f)).into_bytes());
        }
    }

    #[test]
    fn non_ascii_anywhere_leaves_the_fast_path() {
        // A UTF-8 sequence, a stray high byte, a quote, a control byte or DEL at every
        // position of strings that end in a block, a word and single bytes.
        for len in [20, 71] {
            for pos in 0..len - 1 {
                let mut v = vec![b'a'; len];
                v[pos..pos + 2].copy_from_slice("é".as_bytes());
                assert_eq!(s(&v), format!("\"{}\"", String::from_utf8(v.clone()).unwrap()));
                v[pos] = 0xff;
                assert!(s(&v).starts_with("{\"hex\":"), "{pos}");
                for (c, esc) in [(b'"', "\\\""), (1, "\\u0001"), (0x7f, "\\u007f")] {
                    let mut v = vec![b'a'; len];
                    v[pos] = c;
                    let want = format!("\"{}{esc}{}\"", "a".repeat(pos), "a".repeat(len - pos - 1));
                    assert_eq!(s(&v), want, "{len} {pos}");
                }
            }
        }
    }
}
