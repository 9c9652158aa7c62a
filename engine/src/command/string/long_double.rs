//! INCRBYFLOAT's arithmetic: Redis 7.0 on x86-64 adds in C's `long double` (x87 80-bit:
//! a 64-bit mantissa, round to nearest even) and prints `%.17Lf` with the trailing zeros
//! trimmed. The results differ from f64's (10.5 + 0.1 prints "10.6", not
//! "10.59999999999999964"), so this module does the same arithmetic exactly, on small
//! big integers: correctly rounded parsing, addition, and exact decimal printing.

use std::cmp::Ordering;

/// The longest text Redis reads as a long double (MAX_LONG_DOUBLE_CHARS - 1).
const MAX_CHARS: usize = 5 * 1024 - 1;
/// Largest binary exponent of a normalized 64-bit mantissa (the value stays below 2^16384).
const MAX_EXP: i32 = 16384 - 64;
/// Smallest one that is still normal (2^-16382).
const MIN_EXP: i32 = -16382 - 63;

/// A finite x87 extended value: `mant * 2^exp`, `mant` normalized (top bit set) or 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i32,
}

impl LongDouble {
    pub const ZERO: LongDouble = LongDouble { neg: false, mant: 0, exp: 0 };

    pub fn from_i64(v: i64) -> LongDouble {
        let m = v.unsigned_abs();
        if m == 0 {
            return LongDouble::ZERO;
        }
        let lz = m.leading_zeros();
        LongDouble { neg: v < 0, mant: m << lz, exp: -(lz as i32) }
    }

    /// Whether the text is one strtold reads as an infinity ("inf", "-Infinity", ...).
    pub fn is_infinity(b: &[u8]) -> bool {
        let unsigned = b.strip_prefix(b"-").or_else(|| b.strip_prefix(b"+")).unwrap_or(b);
        unsigned.eq_ignore_ascii_case(b"inf") || unsigned.eq_ignore_ascii_case(b"infinity")
    }

    /// strtold over the whole text, as Redis's string2ld accepts it: no leading space, no
    /// NaN, no overflow to infinity or underflow to zero. Infinities (see
    /// [`LongDouble::is_infinity`]) are refused here; hex floats are read.
    pub fn parse(b: &[u8]) -> Option<LongDouble> {
        if b.is_empty() || b.len() > MAX_CHARS {
            return None;
        }
        let (neg, rest) = match b[0] {
            b'-' => (true, &b[1..]),
            b'+' => (false, &b[1..]),
            _ => (false, b),
        };
        if rest.len() > 2 && rest[0] == b'0' && matches!(rest[1], b'x' | b'X') {
            return parse_hex(neg, &rest[2..]);
        }
        let mut digits = Big::zero();
        let mut ndigits: i64 = 0;
        let mut exp10: i64 = 0;
        let mut seen_digit = false;
        let mut seen_point = false;
        let mut i = 0;
        while i < rest.len() {
            match rest[i] {
                c @ b'0'..=b'9' => {
                    seen_digit = true;
                    if ndigits > 0 || c != b'0' {
                        digits.mul_small(10);
                        digits.add_small(u32::from(c - b'0'));
                        ndigits += 1;
                    }
                    if seen_point {
                        exp10 -= 1;
                    }
                }
                b'.' if !seen_point => seen_point = true,
                _ => break,
            }
            i += 1;
        }
        if !seen_digit {
            return None;
        }
        if i < rest.len() {
            if !matches!(rest[i], b'e' | b'E') {
                return None;
            }
            let e = &rest[i + 1..];
            let (eneg, edigits) = match e.first() {
                Some(b'-') => (true, &e[1..]),
                Some(b'+') => (false, &e[1..]),
                _ => (false, e),
            };
            if edigits.is_empty() || !edigits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let mut ev: i64 = 0;
            for d in edigits {
                ev = (ev * 10 + i64::from(d - b'0')).min(1 << 40);
            }
            exp10 += if eneg { -ev } else { ev };
        }
        if digits.is_zero() {
            return Some(LongDouble { neg, ..LongDouble::ZERO });
        }
        // Decimal exponent of the leading digit: outside the range, strtold overflows or
        // underflows (ERANGE), and Redis refuses the value.
        let lead = ndigits - 1 + exp10;
        if !(-4950..=4932).contains(&lead) {
            return None;
        }
        let v = if exp10 >= 0 {
            for _ in 0..exp10 {
                digits.mul_small(10);
            }
            round(neg, digits, 0, false)
        } else {
            let k = -exp10;
            // Enough extra bits that the quotient has at least 67.
            let den_bits = (k as f64 * std::f64::consts::LOG2_10).ceil() as i64 + 1;
            let s = (68 + den_bits - digits.bits() as i64).max(0);
            digits.shl(s as usize);
            let mut sticky = false;
            let mut left = k;
            while left > 0 {
                let step = left.min(9);
                sticky |= digits.div_small(10u32.pow(step as u32)) != 0;
                left -= step;
            }
            round(neg, digits, -(s as i32), sticky)
        };
        v.filter(|v| v.mant != 0)
    }

    /// The sum, rounded to nearest even; None when it is infinite.
    pub fn add(&self, other: &LongDouble) -> Option<LongDouble> {
        if self.mant == 0 {
            return Some(*other);
        }
        if other.mant == 0 {
            return Some(*self);
        }
        let emin = self.exp.min(other.exp);
        let mut a = Big::from_u64(self.mant);
        a.shl((self.exp - emin) as usize);
        let mut b = Big::from_u64(other.mant);
        b.shl((other.exp - emin) as usize);
        let (neg, sum) = if self.neg == other.neg {
            a.add(&b);
            (self.neg, a)
        } else {
            match a.cmp(&b) {
                Ordering::Equal => return Some(LongDouble::ZERO),
                Ordering::Greater => {
                    a.sub(&b);
                    (self.neg, a)
                }
                Ordering::Less => {
                    b.sub(&a);
                    (other.neg, b)
                }
            }
        };
        round(neg, sum, emin, false)
    }

    /// `%.17Lf` with trailing zeros (and a trailing '.') removed, "-0" as "0".
    pub fn to_human(self) -> Vec<u8> {
        let mut n = Big::from_u64(self.mant);
        for _ in 0..17 {
            n.mul_small(10);
        }
        if self.exp >= 0 {
            n.shl(self.exp as usize);
        } else {
            let shift = (-self.exp) as usize;
            let half = n.bit(shift - 1);
            let below = n.any_below(shift - 1);
            n.shr(shift);
            if half && (below || n.bit(0)) {
                n.add_small(1);
            }
        }
        let mut digits = n.to_decimal();
        while digits.len() < 18 {
            digits.insert(0, b'0');
        }
        let point = digits.len() - 17;
        let mut out = Vec::with_capacity(digits.len() + 2);
        if self.neg {
            out.push(b'-');
        }
        out.extend_from_slice(&digits[..point]);
        let frac = &digits[point..];
        let kept = frac.iter().rposition(|&d| d != b'0').map_or(0, |p| p + 1);
        if kept > 0 {
            out.push(b'.');
            out.extend_from_slice(&frac[..kept]);
        }
        if out == b"-0" {
            out.remove(0);
        }
        out
    }
}

/// The part of a hex float after "0x": hex digits with an optional point, then an
/// optional binary exponent `p[+-]digits`.
fn parse_hex(neg: bool, b: &[u8]) -> Option<LongDouble> {
    let mut digits = Big::zero();
    let mut exp2: i64 = 0;
    let (mut seen_digit, mut seen_point) = (false, false);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' if !seen_point => seen_point = true,
            c if c.is_ascii_hexdigit() => {
                seen_digit = true;
                digits.mul_small(16);
                digits.add_small((c as char).to_digit(16)?);
                if seen_point {
                    exp2 -= 4;
                }
            }
            _ => break,
        }
        i += 1;
    }
    if !seen_digit {
        return None;
    }
    if i < b.len() {
        if !matches!(b[i], b'p' | b'P') {
            return None;
        }
        let e = &b[i + 1..];
        let (eneg, edigits) = match e.first() {
            Some(b'-') => (true, &e[1..]),
            Some(b'+') => (false, &e[1..]),
            _ => (false, e),
        };
        if edigits.is_empty() || !edigits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut ev: i64 = 0;
        for d in edigits {
            ev = (ev * 10 + i64::from(d - b'0')).min(1 << 40);
        }
        exp2 += if eneg { -ev } else { ev };
    }
    if digits.is_zero() {
        return Some(LongDouble { neg, ..LongDouble::ZERO });
    }
    let exp2 = i32::try_from(exp2.clamp(-(1 << 20), 1 << 20)).ok()?;
    round(neg, digits, exp2, false).filter(|v| v.mant != 0)
}

/// `big * 2^exp2` (with `sticky`: plus something below its last bit) rounded to a 64-bit
/// mantissa, nearest even; None when it overflows or falls below the normal range.
fn round(neg: bool, mut big: Big, exp2: i32, sticky: bool) -> Option<LongDouble> {
    let bits = big.bits();
    if bits == 0 {
        return Some(LongDouble { neg, ..LongDouble::ZERO });
    }
    let (mant, exp) = if bits <= 64 {
        let m = big.low_u64();
        let lz = m.leading_zeros();
        (m << lz, exp2 - lz as i32)
    } else {
        let shift = bits - 64;
        let half = big.bit(shift - 1);
        let below = sticky || big.any_below(shift - 1);
        big.shr(shift);
        let top = big.low_u64();
        let exp = exp2 + shift as i32;
        if half && (below || top & 1 == 1) {
            match top.checked_add(1) {
                Some(t) => (t, exp),
                None => (1 << 63, exp + 1),
            }
        } else {
            (top, exp)
        }
    };
    (MIN_EXP..=MAX_EXP).contains(&exp).then_some(LongDouble { neg, mant, exp })
}

/// An unsigned big integer, 32-bit limbs, least significant first, no high zero limbs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn zero() -> Big {
        Big(Vec::new())
    }

    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
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

    fn bits(&self) -> usize {
        match self.0.last() {
            Some(&top) => self.0.len() * 32 - top.leading_zeros() as usize,
            None => 0,
        }
    }

    fn bit(&self, i: usize) -> bool {
        self.0.get(i / 32).is_some_and(|l| l >> (i % 32) & 1 == 1)
    }

    /// Whether any bit below position `i` is set.
    fn any_below(&self, i: usize) -> bool {
        let (whole, part) = (i / 32, i % 32);
        self.0.iter().take(whole).any(|&l| l != 0)
            || (part > 0 && self.0.get(whole).is_some_and(|&l| l & ((1u32 << part) - 1) != 0))
    }

    fn low_u64(&self) -> u64 {
        let lo = u64::from(self.0.first().copied().unwrap_or(0));
        let hi = u64::from(self.0.get(1).copied().unwrap_or(0));
        lo | hi << 32
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
                break;
            }
            let v = u64::from(*l) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    /// Divide in place; the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = rem << 32 | u64::from(*l);
            *l = (v / u64::from(d)) as u32;
            rem = v % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn shl(&mut self, n: usize) {
        if self.is_zero() {
            return;
        }
        let (whole, part) = (n / 32, n % 32);
        if part > 0 {
            let mut carry = 0u32;
            for l in &mut self.0 {
                let v = *l;
                *l = v << part | carry;
                carry = v >> (32 - part);
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
        self.0.splice(0..0, std::iter::repeat_n(0, whole));
    }

    fn shr(&mut self, n: usize) {
        let (whole, part) = (n / 32, n % 32);
        if whole >= self.0.len() {
            self.0.clear();
            return;
        }
        self.0.drain(..whole);
        if part > 0 {
            let len = self.0.len();
            for i in 0..len {
                let hi = if i + 1 < len { self.0[i + 1] << (32 - part) } else { 0 };
                self.0[i] = self.0[i] >> part | hi;
            }
        }
        self.trim();
    }

    fn add(&mut self, o: &Big) {
        if self.0.len() < o.0.len() {
            self.0.resize(o.0.len(), 0);
        }
        let mut carry = 0u64;
        for (i, l) in self.0.iter_mut().enumerate() {
            let v = u64::from(*l) + u64::from(o.0.get(i).copied().unwrap_or(0)) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    /// Subtract a smaller or equal number.
    fn sub(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for (i, l) in self.0.iter_mut().enumerate() {
            let mut v = i64::from(*l) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            *l = v as u32;
        }
        self.trim();
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0.len().cmp(&o.0.len()).then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn to_decimal(&self) -> Vec<u8> {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_small(1_000_000_000));
        }
        let mut out = chunks.pop().map_or_else(|| b"0".to_vec(), |c| c.to_string().into_bytes());
        for c in chunks.iter().rev() {
            out.extend_from_slice(format!("{c:09}").as_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> String {
        let x = LongDouble::parse(a.as_bytes()).unwrap();
        let y = LongDouble::parse(b.as_bytes()).unwrap();
        String::from_utf8(x.add(&y).unwrap().to_human()).unwrap()
    }

    #[test]
    fn sums_print_as_redis_on_x86_64() {
        assert_eq!(incr("10.5", "0.1"), "10.6");
        assert_eq!(incr("1", "5.0e3"), "5001");
        assert_eq!(incr("0", "3.0e3"), "3000");
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("-1.5", "1.5"), "0");
        assert_eq!(incr("-0.1", "0"), "-0.1");
        assert_eq!(incr("1e30", "0"), "1000000000000000000024696061952");
        assert_eq!(incr("123456789.123456789", "0"), "123456789.12345678899873747");
        assert_eq!(incr("1.5", "1e-18"), "1.5");
        assert_eq!(incr("0.00000000000000000001", "0"), "0");
        assert_eq!(incr("-0.00000000000000000001", "0"), "0");
        assert_eq!(incr("3", "-0.5"), "2.5");
    }

    #[test]
    fn refuses_what_string2ld_refuses() {
        for bad in ["", " 1", "1 ", "abc", "1e", "nan", "1e99999", "1e-99999", "--1", "1..2", "0x", "0xg", "inf"] {
            assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad}");
        }
        assert!(LongDouble::parse(b".5").is_some());
        assert!(LongDouble::parse(b"5.").is_some());
        assert!(LongDouble::parse(b"-0").is_some());
        assert_eq!(LongDouble::parse(b"0x10"), LongDouble::parse(b"16"));
        assert_eq!(LongDouble::parse(b"-0x1.8p1"), LongDouble::parse(b"-3"));
    }
}
