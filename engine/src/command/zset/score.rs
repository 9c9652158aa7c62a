//! Score arguments as Redis reads them: glibc's strtod (hex floats, inf) and
//! getDoubleFromObject's checks.

use crate::command::Reply;

/// A score argument as getDoubleFromObject reads it (strtod over the whole string, no
/// leading space, no NaN, and no overflow or underflow to zero); hex floats included.
pub fn parse_score(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b[0].is_ascii_whitespace() || b[0] == 0x0b {
        return None;
    }
    let v = strtod(b)?;
    let body = b.strip_prefix(b"-").or_else(|| b.strip_prefix(b"+")).unwrap_or(b);
    let word = body.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'i'));
    if v.is_infinite() && !word {
        return None;
    }
    if v == 0.0 {
        let hex = body.len() > 1 && body[0] == b'0' && (body[1] | 0x20) == b'x';
        let digits = if hex { &body[2..] } else { body };
        let mantissa = digits.split(|&c| if hex { (c | 0x20) == b'p' } else { (c | 0x20) == b'e' }).next();
        if mantissa.is_some_and(|m| m.iter().any(|c| c.is_ascii_hexdigit() && *c != b'0')) {
            return None;
        }
    }
    Some(v)
}

/// C's strtod applied to a whole string (leading white space skipped, nothing after the
/// number); the empty string reads as 0 as it does for zslParseRange. NaN is refused.
pub fn strtod(b: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return Some(0.0);
    }
    let t = {
        let at = b.iter().position(|c| !(c.is_ascii_whitespace() || *c == 0x0b)).unwrap_or(b.len());
        &b[at..]
    };
    let s = std::str::from_utf8(t).ok()?;
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let v = if body.len() > 1 && body.as_bytes()[0] == b'0' && (body.as_bytes()[1] | 0x20) == b'x' {
        hex_float(&body[2..])?
    } else {
        if body.starts_with(['+', '-']) || body.contains('_') {
            return None;
        }
        body.parse::<f64>().ok()?
    };
    let v = if neg { -v } else { v };
    (!v.is_nan()).then_some(v)
}

/// The part of a C hex float after `0x`: digits, an optional `.` and `p` exponent.
pub(super) fn hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = match s.find(['p', 'P']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    if let Some(e) = exp {
        let e: i32 = e.parse().ok()?;
        v *= 2f64.powi(e);
    }
    Some(v)
}

pub(super) fn arg_score(b: &[u8]) -> Result<f64, Reply> {
    parse_score(b).ok_or_else(Reply::not_float)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_strtod_with_redis_checks() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"0x10"), Some(16.0));
        assert_eq!(parse_score(b"0x1p3"), Some(8.0));
        assert_eq!(parse_score(b"1e400"), None);
        assert_eq!(parse_score(b"1e-400"), None);
        assert_eq!(parse_score(b"0e-400"), Some(0.0));
        assert_eq!(parse_score(b"nan"), None);
        assert_eq!(parse_score(b" 1"), None);
        assert_eq!(parse_score(b"1 "), None);
        assert_eq!(parse_score(b""), None);
        assert_eq!(parse_score(b"--1"), None);
        assert_eq!(strtod(b""), Some(0.0));
        assert_eq!(strtod(b" 2"), Some(2.0));
        assert_eq!(strtod(b"1e400"), Some(f64::INFINITY));
        assert_eq!(strtod(b"abc"), None);
    }
}
