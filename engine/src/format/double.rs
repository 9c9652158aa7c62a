//! Doubles as each Redis version writes them (replies, files, DEBUG DIGEST): C's `%.17g`
//! (Redis 6.2 and 7.0) and fpconv_dtoa (Redis 7.2+): Grisu2's digits, which read back to
//! the same double (and are nearly always the shortest that do).

/// C's `%.{prec}g`.
pub fn fmt_g(d: f64, prec: usize) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{:.*e}", prec - 1, d);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        let mant = strip_zeros(mant);
        format!("{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Grisu2's digits of a finite, non-zero `d`, laid out as fpconv_dtoa lays them out:
/// plain up to six zeros past the digits, `0.000ddd` down to 1e-7 (or any exponent under
/// 4), else `d.ddde+X` with the exponent unpadded.
pub fn fpconv_layout(d: f64) -> String {
    let (digits, k) = super::grisu::grisu2(d);
    let mut digits = String::from_utf8_lossy(&digits).into_owned();
    let n = digits.len() as i32;
    // The power of ten of the first digit; `k` is the last's.
    let exp = k + n - 1;
    let sign = if d < 0.0 { "-" } else { "" };
    let e = exp.abs();
    if k >= 0 && e < n + 7 {
        return format!("{sign}{digits}{}", "0".repeat(k as usize));
    }
    if k < 0 && (k > -7 || e < 4) {
        let point = n + k;
        return if point <= 0 {
            format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
        } else {
            format!("{sign}{}.{}", &digits[..point as usize], &digits[point as usize..])
        };
    }
    // fpconv keeps at most 18 characters of digits and sign.
    digits.truncate(if d < 0.0 { 17 } else { 18 });
    let rest = if digits.len() > 1 { format!(".{}", &digits[1..]) } else { String::new() };
    format!("{sign}{}{rest}e{}{e}", &digits[..1], if exp < 0 { '-' } else { '+' })
}

/// fpconv_dtoa itself (Redis 7.2+'s DEBUG DIGEST of a score): a sign, then `0`, `inf`,
/// `nan` or [`fpconv_layout`]'s digits; integers get no special case (`1e+17`).
pub fn fpconv_dtoa(d: f64) -> String {
    let sign = if d.is_sign_negative() { "-" } else { "" };
    if d == 0.0 {
        format!("{sign}0")
    } else if d.is_nan() {
        format!("{sign}nan")
    } else if d.is_infinite() {
        format!("{sign}inf")
    } else {
        fpconv_layout(d)
    }
}

/// How a server version writes doubles: in replies (addReplyDouble), in listpack and
/// ziplist scores (d2string), and into DEBUG DIGEST. The one place those version facts live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Doubles {
    /// Redis 6.2: `%.17g`; d2string makes integers within ±2^52 integers.
    Redis62,
    /// Redis 7.0: `%.17g`; d2string makes integers within ±LLONG_MAX/2 integers.
    #[default]
    Redis70,
    /// Redis 7.2+ and Valkey: d2string as 7.0 but fpconv_dtoa for the rest, in replies
    /// too; DEBUG DIGEST fpconv_dtoa alone.
    Redis72,
}

/// C's `printf("%.17g")` with Redis's `inf` / `-inf`: Redis 7.0's replies and digest.
pub fn fmt_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d.is_nan() {
        return "nan".into();
    }
    fmt_g(d, 17)
}

/// The text of the doubles every writer spells the same: NaN, the infinities, the zeros.
fn special(d: f64) -> Option<&'static str> {
    if d.is_nan() {
        Some("nan")
    } else if d.is_infinite() {
        Some(if d > 0.0 { "inf" } else { "-inf" })
    } else if d == 0.0 {
        Some(if d.is_sign_negative() { "-0" } else { "0" })
    } else {
        None
    }
}

/// A score as the tools print it (JSON, RESP dumps): integer text when integral, else the
/// shortest text that reads back to the same double.
pub fn score_text(f: f64) -> String {
    let mut text = Vec::with_capacity(24);
    score_text_into(&mut text, f);
    // The text is ASCII, so nothing is replaced.
    String::from_utf8_lossy(&text).into_owned()
}

/// [`score_text`] appended to `out` (no allocation of its own: dumps print millions).
pub fn score_text_into(out: &mut Vec<u8>, f: f64) {
    if let Some(s) = special(f) {
        out.extend_from_slice(s.as_bytes());
    } else if f.fract() == 0.0 && f.abs() < 9.2e18 {
        let mut buf = crate::format::blob::itoa_buf();
        out.extend_from_slice(crate::format::blob::fmt_i64(f as i64, &mut buf));
    } else if (1e-4..1e16).contains(&f.abs()) {
        // Here (non-integers: every double from 2^53 up is one) zmij spells a number as
        // `{:?}` does, the same shortest digits in decimal, several times faster.
        let mut b = zmij::Buffer::new();
        out.extend_from_slice(b.format_finite(f).as_bytes());
    } else {
        // Below 1e-4 `{:?}` writes an exponent where zmij still writes 0.0000…, and from
        // 9.2e18 `e18` where zmij writes `e+18`.
        use std::io::Write;
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{f:?}");
    }
}

impl Doubles {
    /// A reply's double.
    pub fn reply(self, d: f64) -> String {
        match self {
            Doubles::Redis72 => self.listpack(d),
            _ => fmt_double(d),
        }
    }

    /// A zset score as DEBUG DIGEST mixes it in.
    pub fn digest(self, d: f64) -> String {
        match self {
            Doubles::Redis72 => fpconv_dtoa(d),
            _ => fmt_double(d),
        }
    }

    /// A score as d2string writes it into a listpack or ziplist.
    pub fn listpack(self, d: f64) -> String {
        if let Some(s) = special(d) {
            return s.into();
        }
        let integral = d.fract() == 0.0
            && match self {
                Doubles::Redis62 => d > -4_503_599_627_370_495.0 && d < 4_503_599_627_370_496.0,
                // (double)(LLONG_MAX / 2), both sides inclusive as double2ll tests them.
                _ => d.abs() <= (i64::MAX / 2) as f64,
            };
        if integral {
            return format!("{}", d as i64);
        }
        match self {
            Doubles::Redis72 => fpconv_layout(d),
            _ => fmt_g(d, 17),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `score_text` printed before ryu and zmij: `{:?}` for every non-integer.
    fn debug_text(f: f64) -> String {
        if let Some(s) = special(f) {
            s.to_string()
        } else if f.fract() == 0.0 && f.abs() < 9.2e18 {
            (f as i64).to_string()
        } else {
            format!("{f:?}")
        }
    }

    /// `score_text` reads back to `f` and has `{:?}`'s form and length: the same shortest
    /// digits, except that an exact tie between two of them goes to the even one (as
    /// Python's repr and JavaScript do), where `{:?}` rounds half up.
    fn same_as_debug(f: f64) -> Result<(), String> {
        let (t, d) = (score_text(f), debug_text(f));
        let back: f64 = t.parse().map_err(|_| format!("{t} does not parse"))?;
        let same = if f.is_nan() { back.is_nan() } else { back.to_bits() == f.to_bits() };
        let form = |s: &str| (s.len(), s.contains('e'), s.find('.'));
        if !same || form(&t) != form(&d) {
            return Err(format!("{t} where {{:?}} writes {d}"));
        }
        Ok(())
    }

    proptest::proptest! {
        /// zmij writes what ryu (which dumps used before) writes, digit for digit.
        #[test]
        fn score_text_spells_non_integers_as_ryu_does(bits: u64, mantissa: i64, exp in -30i32..30) {
            let decimal = mantissa as f64 * 10f64.powi(exp);
            for f in [f64::from_bits(bits), decimal, 1.0 / decimal, decimal + 0.5] {
                if f.is_finite() && f.fract() != 0.0 && f.abs() >= 1e-4 {
                    let mut ryu = ryu::Buffer::new();
                    proptest::prop_assert_eq!(score_text(f), ryu.format_finite(f));
                }
            }
        }

        #[test]
        fn score_text_is_shortest_and_reads_back(bits: u64, mantissa: i64, exp in -30i32..30) {
            let decimal = mantissa as f64 * 10f64.powi(exp);
            for f in [f64::from_bits(bits), decimal, 1.0 / decimal] {
                proptest::prop_assert_eq!(same_as_debug(f), Ok(()));
            }
        }
    }

    /// Scores as users have them (17-digit fractions from 1e-4 to 2^53), and every power
    /// of ten's neighbours: zmij's text is ryu's.
    #[test]
    fn score_text_spells_scores_as_ryu_does() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut checked = 0;
        for i in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
            let f = unit * 10f64.powi((i % 20) as i32 - 4);
            for f in [f, -f, 10f64.powi((i % 20) as i32 - 4).next_up(), 10f64.powi((i % 20) as i32 - 4).next_down()] {
                if f.fract() != 0.0 && f.abs() >= 1e-4 {
                    assert_eq!(score_text(f), ryu::Buffer::new().format_finite(f), "{f:e}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 400_000, "{checked}");
    }

    #[test]
    fn score_text_at_the_form_boundaries() {
        for f in [1e-4, 1.5e-4, 9.99e-5, 1e-5, 0.1, 1e15 + 0.5, 9.3e18, 1.7976931348623157e308, 5e-324, -2.5e-7] {
            assert_eq!(score_text(f), debug_text(f), "{f:e}");
            assert_eq!(score_text(-f), debug_text(-f), "{f:e}");
        }
        // A tie between two shortest spellings goes to the even digit.
        let tie: f64 = "992305179902504.25".parse().unwrap();
        assert_eq!(score_text(tie), "992305179902504.2");
        assert_eq!(format!("{tie:?}"), "992305179902504.3");
    }

    #[test]
    fn each_version_writes_scores_as_its_d2string() {
        let cases: [(f64, &str, &str, &str); 9] = [
            (0.1, "0.10000000000000001", "0.10000000000000001", "0.1"),
            (7.549434007497439, "7.5494340074974389", "7.5494340074974389", "7.549434007497439"),
            (3.0, "3", "3", "3"),
            (-0.0, "-0", "-0", "-0"),
            (1e17, "1e+17", "100000000000000000", "100000000000000000"),
            (5e18, "5e+18", "5e+18", "5e+18"),
            (1.5e-7, "1.4999999999999999e-07", "1.4999999999999999e-07", "1.5e-7"),
            (0.000123, "0.00012300000000000001", "0.00012300000000000001", "0.000123"),
            (-2.5e300, "-2.5000000000000001e+300", "-2.5000000000000001e+300", "-2.5e+300"),
        ];
        assert_eq!(fpconv_dtoa(1e17), "1e+17");
        assert_eq!(fpconv_dtoa(3.0), "3");
        assert_eq!(fpconv_dtoa(-0.0), "-0");
        assert_eq!(fpconv_dtoa(f64::NEG_INFINITY), "-inf");
        assert_eq!(fpconv_dtoa(0.1), "0.1");
        for (d, v62, v70, v72) in cases {
            assert_eq!(Doubles::Redis62.listpack(d), v62, "{d} 6.2");
            assert_eq!(Doubles::Redis70.listpack(d), v70, "{d} 7.0");
            assert_eq!(Doubles::Redis72.listpack(d), v72, "{d} 7.2");
        }
    }
}
