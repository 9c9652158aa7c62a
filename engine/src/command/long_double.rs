//! The `long double` arithmetic of INCRBYFLOAT and HINCRBYFLOAT. Redis on x86-64 adds in
//! the x87 80-bit format (64-bit significand) and prints with `%.17Lf`, so `0.1 + 0.2` is
//! `0.3` there, not the `0.30000000000000004` of f64. This emulates that format exactly:
//! parsing as glibc's strtold (correctly rounded, hex floats, inf/nan), one correctly
//! rounded addition, and exact decimal printing, on a small arbitrary-precision integer.

use std::cmp::Ordering;

/// Least binary exponent of a significand unit (subnormals): 2^-16445.
const MIN_EXP: i64 = -16445;
/// Largest unbiased exponent of a finite value.
const MAX_UNBIASED: i64 = 16383;
/// Redis's MAX_LONG_DOUBLE_CHARS: longer inputs are refused.
const MAX_CHARS: usize = 5 * 1024;

/// An x87 extended value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LongDouble {
    /// `mant * 2^exp`; `mant` has its top bit set unless the value is subnormal or zero.
    Finite {
        neg: bool,
        mant: u64,
        exp: i64,
    },
    Inf {
        neg: bool,
    },
    NaN,
}

impl LongDouble {
    pub const ZERO: LongDouble = LongDouble::Finite { neg: false, mant: 0, exp: 0 };

    pub fn is_finite(&self) -> bool {
        matches!(self, LongDouble::Finite { .. })
    }

    /// A double widened to long double (exact, as C's conversion is).
    pub fn from_f64(d: f64) -> LongDouble {
        if d.is_nan() {
            return LongDouble::NaN;
        }
        let neg = d.is_sign_negative();
        if d.is_infinite() {
            return LongDouble::Inf { neg };
        }
        let bits = d.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i64;
        let frac = bits & ((1 << 52) - 1);
        let (mant53, exp) = if biased == 0 { (frac, -1074) } else { (frac | 1 << 52, biased - 1075) };
        if mant53 == 0 {
            return LongDouble::Finite { neg, mant: 0, exp: 0 };
        }
        let shift = i64::from(mant53.leading_zeros());
        LongDouble::Finite { neg, mant: mant53 << shift, exp: exp - shift }
    }

    /// The nearest double (a timeout: Redis reads it as a long double, then scales it).
    pub fn to_f64(self) -> f64 {
        match self {
            LongDouble::Finite { neg, mant, exp } => {
                let v = (mant as f64) * 2f64.powi(exp.clamp(-2200, 2200) as i32);
                if neg {
                    -v
                } else {
                    v
                }
            }
            LongDouble::Inf { neg: true } => f64::NEG_INFINITY,
            LongDouble::Inf { neg: false } => f64::INFINITY,
            LongDouble::NaN => f64::NAN,
        }
    }

    /// Redis's string2ld: strtold over the whole argument, refusing leading spaces, NaN,
    /// and results that overflow or underflow to zero.
    pub fn parse(b: &[u8]) -> Option<LongDouble> {
        if b.is_empty() || b.len() >= MAX_CHARS || b[0].is_ascii_whitespace() || b[0] == 0x0b {
            return None;
        }
        // strtold would stop at a NUL short of the whole argument: refused.
        if b.contains(&0) {
            return None;
        }
        let s = b;
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let lower = body.to_ascii_lowercase();
        let v = if lower == b"inf" || lower == b"infinity" {
            LongDouble::Inf { neg }
        } else if lower == b"nan" || (lower.starts_with(b"nan(") && lower.ends_with(b")")) {
            return None;
        } else if lower.starts_with(b"0x") {
            parse_hex(neg, &lower[2..])?
        } else {
            parse_decimal(neg, body)?
        };
        Some(v)
    }
}

impl std::ops::Add for LongDouble {
    type Output = LongDouble;

    /// `self + other`, correctly rounded to nearest-even.
    fn add(self, other: LongDouble) -> LongDouble {
        use LongDouble::*;
        match (self, other) {
            (NaN, _) | (_, NaN) => NaN,
            (Inf { neg: a }, Inf { neg: b }) if a != b => NaN,
            (Inf { neg }, _) | (_, Inf { neg }) => Inf { neg },
            (Finite { neg: na, mant: ma, exp: ea }, Finite { neg: nb, mant: mb, exp: eb }) => {
                if mb == 0 {
                    return if ma == 0 { Finite { neg: na && nb, mant: 0, exp: 0 } } else { self };
                }
                if ma == 0 {
                    return other;
                }
                let e = ea.min(eb);
                let a = Big::from_u64(ma).shl((ea - e) as u64);
                let b = Big::from_u64(mb).shl((eb - e) as u64);
                if na == nb {
                    round(na, &a.add(&b), e, false)
                } else {
                    match a.cmp(&b) {
                        Ordering::Equal => LongDouble::ZERO,
                        Ordering::Greater => round(na, &a.sub(&b), e, false),
                        Ordering::Less => round(nb, &b.sub(&a), e, false),
                    }
                }
            }
        }
    }
}

impl LongDouble {
    /// Redis's ld2string in human mode: `%.17Lf` without trailing zeros (and "-0" as "0").
    pub fn to_human(self) -> String {
        let (neg, mant, exp) = match self {
            LongDouble::Finite { neg, mant, exp } => (neg, mant, exp),
            LongDouble::Inf { neg } => return if neg { "-inf".into() } else { "inf".into() },
            LongDouble::NaN => return "nan".into(),
        };
        let mut scaled = Big::from_u64(mant);
        scaled.mul_pow10(17);
        let units = if exp >= 0 {
            scaled.shl(exp as u64)
        } else {
            let shift = (-exp) as u64;
            let q = scaled.shr(shift);
            let half = scaled.bit(shift - 1);
            let sticky = scaled.any_below(shift - 1);
            if half && (sticky || q.bit(0)) {
                q.add(&Big::from_u64(1))
            } else {
                q
            }
        };
        let digits = units.to_decimal();
        let digits = format!("{digits:0>18}");
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let mut out = String::with_capacity(digits.len() + 2);
        if neg {
            out.push('-');
        }
        out.push_str(int);
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        if out == "-0" {
            out = "0".into();
        }
        out
    }
}

/// Round the exact value `n * 2^e` (plus a little more when `sticky`) to the format.
fn round(neg: bool, n: &Big, e: i64, sticky: bool) -> LongDouble {
    let bits = n.bits() as i64;
    if bits == 0 {
        return LongDouble::Finite { neg, mant: 0, exp: 0 };
    }
    let mut shift = bits - 64;
    if e + shift < MIN_EXP {
        shift = MIN_EXP - e;
    }
    let (mut mant, mut exp) = if shift <= 0 {
        (n.shl((-shift) as u64).low_u64(), e + shift)
    } else {
        let s = shift as u64;
        let q = n.shr(s).low_u64();
        let half = n.bit(s - 1);
        let rest = sticky || n.any_below(s - 1);
        let up = half && (rest || q & 1 == 1);
        match q.checked_add(u64::from(up)) {
            Some(m) => (m, e + shift),
            None => (1 << 63, e + shift + 1),
        }
    };
    if mant == 0 {
        exp = 0;
    } else if exp + 63 > MAX_UNBIASED {
        return LongDouble::Inf { neg };
    }
    if mant != 0 && mant.leading_zeros() > 0 && exp > MIN_EXP {
        // Only subnormals keep a short significand; normalise the rest.
        let z = i64::from(mant.leading_zeros()).min(exp - MIN_EXP);
        mant <<= z;
        exp -= z;
    }
    LongDouble::Finite { neg, mant, exp }
}

/// `digits[.digits][e[+-]digits]`, the whole string.
fn parse_decimal(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let mut n = Big::default();
    let (mut i, mut digits, mut dexp) = (0, 0usize, 0i64);
    let mut seen_point = false;
    while i < s.len() {
        match s[i] {
            c @ b'0'..=b'9' => {
                n.mul_small(10);
                n.add_small(u32::from(c - b'0'));
                digits += 1;
                if seen_point {
                    dexp -= 1;
                }
            }
            b'.' if !seen_point => seen_point = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if i < s.len() {
        if s[i] != b'e' && s[i] != b'E' {
            return None;
        }
        i += 1;
        let (eneg, rest) = match s.get(i) {
            Some(b'-') => (true, &s[i + 1..]),
            Some(b'+') => (false, &s[i + 1..]),
            _ => (false, &s[i..]),
        };
        if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut x: i64 = 0;
        for &c in rest {
            x = (x * 10 + i64::from(c - b'0')).min(1_000_000);
        }
        dexp += if eneg { -x } else { x };
    }
    if n.is_zero() {
        return Some(LongDouble::Finite { neg, mant: 0, exp: 0 });
    }
    let magnitude = dexp + n.to_decimal().len() as i64;
    let v = if magnitude > 4940 {
        LongDouble::Inf { neg }
    } else if magnitude < -4960 {
        LongDouble::Finite { neg, mant: 0, exp: 0 }
    } else if dexp >= 0 {
        n.mul_pow10(dexp as u32);
        round(neg, &n, 0, false)
    } else {
        let mut p = Big::from_u64(1);
        p.mul_pow10((-dexp) as u32);
        // Enough quotient bits for 64 significant ones, a rounding bit and a spare.
        let s = (p.bits() as i64 - n.bits() as i64 + 66).max(0) as u64;
        let (q, rem_nonzero) = n.shl(s).div_rem_nonzero(&p);
        round(neg, &q, -(s as i64), rem_nonzero)
    };
    // strtold reports overflow and underflow to zero as errors; Redis refuses them.
    match v {
        LongDouble::Inf { .. } => None,
        LongDouble::Finite { mant: 0, .. } => None,
        _ => Some(v),
    }
}

/// The hex float after `0x`: `hexdigits[.hexdigits][p[+-]digits]`.
fn parse_hex(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let mut n = Big::default();
    let (mut i, mut digits, mut bexp) = (0, 0usize, 0i64);
    let mut seen_point = false;
    while i < s.len() {
        let c = s[i];
        if let Some(d) = (c as char).to_digit(16) {
            n.mul_small(16);
            n.add_small(d);
            digits += 1;
            if seen_point {
                bexp -= 4;
            }
        } else if c == b'.' && !seen_point {
            seen_point = true;
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if i < s.len() {
        if s[i] != b'p' {
            return None;
        }
        i += 1;
        let (eneg, rest) = match s.get(i) {
            Some(b'-') => (true, &s[i + 1..]),
            Some(b'+') => (false, &s[i + 1..]),
            _ => (false, &s[i..]),
        };
        if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut x: i64 = 0;
        for &c in rest {
            x = (x * 10 + i64::from(c - b'0')).min(1_000_000);
        }
        bexp += if eneg { -x } else { x };
    }
    if n.is_zero() {
        return Some(LongDouble::Finite { neg, mant: 0, exp: 0 });
    }
    match round(neg, &n, bexp, false) {
        LongDouble::Finite { mant: 0, .. } | LongDouble::Inf { .. } => None,
        v => Some(v),
    }
}

/// A non-negative integer, little-endian 32-bit limbs, no high zero limbs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(x: u64) -> Big {
        let mut b = Big(vec![x as u32, (x >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> u64 {
        match self.0.last() {
            Some(&top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
            None => 0,
        }
    }

    fn bit(&self, i: u64) -> bool {
        self.0.get((i / 32) as usize).is_some_and(|l| l >> (i % 32) & 1 == 1)
    }

    /// Whether any bit below position `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let (limb, bit) = ((i / 32) as usize, i % 32);
        self.0.iter().take(limb.min(self.0.len())).any(|&l| l != 0)
            || (bit > 0 && self.0.get(limb).is_some_and(|&l| l & ((1u32 << bit) - 1) != 0))
    }

    fn low_u64(&self) -> u64 {
        let l = |i: usize| u64::from(self.0.get(i).copied().unwrap_or(0));
        l(0) | (l(1) << 32)
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; limbs];
        let mut carry = 0u32;
        for &l in &self.0 {
            if bits == 0 {
                out.push(l);
            } else {
                out.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
        }
        out.push(carry);
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        if limbs >= self.0.len() {
            return Big::default();
        }
        let src = &self.0[limbs..];
        let mut out = Vec::with_capacity(src.len());
        for (i, &l) in src.iter().enumerate() {
            let hi = src.get(i + 1).copied().unwrap_or(0);
            out.push(if bits == 0 { l } else { (l >> bits) | (hi << (32 - bits)) });
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn add_small(&mut self, a: u32) {
        let mut carry = u64::from(a);
        for l in &mut self.0 {
            if carry == 0 {
                return;
            }
            let v = u64::from(*l) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn mul_pow10(&mut self, mut k: u32) {
        while k >= 9 {
            self.mul_small(1_000_000_000);
            k -= 9;
        }
        self.mul_small(10u32.pow(k));
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0.len().cmp(&o.0.len()).then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn add(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len().max(o.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(o.0.len()) {
            let v =
                u64::from(self.0.get(i).copied().unwrap_or(0)) + u64::from(o.0.get(i).copied().unwrap_or(0)) + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        out.push(carry as u32);
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self - o`, for `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for (i, &l) in self.0.iter().enumerate() {
            let mut v = i64::from(l) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = i64::from(v < 0);
            if v < 0 {
                v += 1 << 32;
            }
            out.push(v as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// The quotient `self / d` (which must be small: at most ~70 bits) and whether a
    /// remainder is left.
    fn div_rem_nonzero(&self, d: &Big) -> (Big, bool) {
        let mut rem = self.clone();
        let mut q = Big::default();
        if self.cmp(d) == Ordering::Less {
            return (q, !rem.is_zero());
        }
        let top = self.bits() - d.bits();
        for i in (0..=top).rev() {
            let t = d.shl(i);
            if rem.cmp(&t) != Ordering::Less {
                rem = rem.sub(&t);
                q = q.add(&Big::from_u64(1).shl(i));
            }
        }
        (q, !rem.is_zero())
    }

    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = (rem << 32) | u64::from(*l);
            *l = (v / u64::from(d)) as u32;
            rem = v % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_small(1_000_000_000));
        }
        let mut s = chunks.pop().map_or_else(|| "0".to_string(), |c| c.to_string());
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> String {
        let x = LongDouble::parse(a.as_bytes()).expect("a");
        let y = LongDouble::parse(b.as_bytes()).expect("b");
        (x + y).to_human()
    }

    #[test]
    fn sums_print_as_redis_on_x86_64() {
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("10.5", "0.1"), "10.6");
        assert_eq!(incr("5.0e3", "2.0e2"), "5200");
        assert_eq!(incr("0", "3"), "3");
        assert_eq!(incr("1", "-1"), "0");
        assert_eq!(incr("-0.5", "0.25"), "-0.25");
        assert_eq!(incr("1e-20", "0"), "0");
        assert_eq!(incr("-1e-20", "0"), "0");
        assert_eq!(incr("0x10", "0x1p-1"), "16.5");
        assert_eq!(incr("9223372036854775807", "1"), "9223372036854775808");
        // Values printed by Redis 7.0.15 on x86-64.
        assert_eq!(incr("1.5", "1e30"), "1000000000000000000024696061952");
        assert_eq!(incr("3.0", "0.1"), "3.1");
        assert_eq!(incr("1.1", "2.2"), "3.3");
        assert_eq!(incr("123.456", "-0.001"), "123.455");
        assert_eq!(incr("0.1", "0.7"), "0.8");
        assert_eq!(incr("1e17", "0.3"), "100000000000000000.296875");
        assert!(incr("1e4000", "1").starts_with("999999999999999999996546387309962378493249258350695763130150833304326194330634235548182164186550927986276445207312367354"));
    }

    #[test]
    fn parse_refuses_what_string2ld_refuses() {
        for bad in ["", " 1", "1 ", "abc", "1e", "1e+", "nan", "-nan", "1e99999", "1e-99999", "0x", "1.2.3", "."] {
            assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(LongDouble::parse(b"inf"), Some(LongDouble::Inf { neg: false }));
        assert_eq!(LongDouble::parse(b"-Infinity"), Some(LongDouble::Inf { neg: true }));
        assert!(LongDouble::parse(b"1e4000").is_some_and(|v| v.is_finite()));
        assert_eq!(LongDouble::parse(b"1\0junk"), None);
        assert_eq!(LongDouble::parse(b"1\0"), None);
        assert_eq!(LongDouble::parse(b"+.5").map(|v| v.to_human()), Some("0.5".into()));
        assert_eq!(LongDouble::parse(b"5.").map(|v| v.to_human()), Some("5".into()));
    }
}
