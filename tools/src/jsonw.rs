//! Hand-rolled JSON output for byte strings, fast enough to keep dump output I/O-bound.
//!
//! Bytes are written as a JSON string when they are valid UTF-8, otherwise as
//! `{"hex":"..."}`: lossless and binary safe (docs/json-schema.md).

use ferrokv::format::Elem;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Write `b` as a JSON string or a `{"hex": ...}` object.
pub fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    match std::str::from_utf8(b) {
        Ok(s) => string(out, s),
        Err(_) => {
            out.extend_from_slice(b"{\"hex\":\"");
            hex(out, b);
            out.extend_from_slice(b"\"}");
        }
    }
}

pub fn hex(out: &mut Vec<u8>, b: &[u8]) {
    out.reserve(b.len() * 2);
    for &c in b {
        out.push(HEX[(c >> 4) as usize]);
        out.push(HEX[(c & 15) as usize]);
    }
}

/// Write a JSON string, escaping quotes, backslashes and control characters.
pub fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1F | 0x7F => {
                out.extend_from_slice(&b[start..i]);
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
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
    out.extend_from_slice(v.to_string().as_bytes());
}

/// A score as text that parses back to the same double: integers without a fraction,
/// "inf"/"-inf"/"nan", "-0", otherwise the shortest round-trip form.
pub fn score_text(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else if f == 0.0 && f.is_sign_negative() {
        "-0".into()
    } else if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        format!("{}", f as i64)
    } else {
        format!("{f:?}")
    }
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
    }
}
