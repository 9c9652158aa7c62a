//! The digits fpconv_dtoa (Redis 7.2+ and Valkey) prints for a double: Florian Loitsch's
//! Grisu2 ("Printing Floating-Point Numbers Quickly and Accurately with Integers", 2010)
//! with fpconv's choices — 64-bit cached powers of ten every 8 decades from 10^-348, the
//! target exponent window [-60, -32], and its last-digit rounding. Grisu2 is not always
//! shortest (about one double in a thousand gets a 17th digit that 16 would have done),
//! so a shortest-digits printer does not give Redis's bytes.

/// A 64-bit significand and a binary exponent: `frac * 2^exp`.
#[derive(Clone, Copy)]
struct Fp {
    frac: u64,
    exp: i32,
}

const FRAC_MASK: u64 = 0x000F_FFFF_FFFF_FFFF;
const HIDDEN_BIT: u64 = 0x0010_0000_0000_0000;
const EXP_BIAS: i32 = 1023 + 52;

/// 10^k for k = -348, -340, ..., 340: significands rounded to nearest (generated with exact
/// rationals; the same values every Grisu implementation uses).
const CACHED_POWERS: [(u64, i32); 87] = [
    (0xfa8fd5a0081c0288, -1220), // 10^-348
    (0xbaaee17fa23ebf76, -1193), // 10^-340
    (0x8b16fb203055ac76, -1166), // 10^-332
    (0xcf42894a5dce35ea, -1140), // 10^-324
    (0x9a6bb0aa55653b2d, -1113), // 10^-316
    (0xe61acf033d1a45df, -1087), // 10^-308
    (0xab70fe17c79ac6ca, -1060), // 10^-300
    (0xff77b1fcbebcdc4f, -1034), // 10^-292
    (0xbe5691ef416bd60c, -1007), // 10^-284
    (0x8dd01fad907ffc3c, -980),  // 10^-276
    (0xd3515c2831559a83, -954),  // 10^-268
    (0x9d71ac8fada6c9b5, -927),  // 10^-260
    (0xea9c227723ee8bcb, -901),  // 10^-252
    (0xaecc49914078536d, -874),  // 10^-244
    (0x823c12795db6ce57, -847),  // 10^-236
    (0xc21094364dfb5637, -821),  // 10^-228
    (0x9096ea6f3848984f, -794),  // 10^-220
    (0xd77485cb25823ac7, -768),  // 10^-212
    (0xa086cfcd97bf97f4, -741),  // 10^-204
    (0xef340a98172aace5, -715),  // 10^-196
    (0xb23867fb2a35b28e, -688),  // 10^-188
    (0x84c8d4dfd2c63f3b, -661),  // 10^-180
    (0xc5dd44271ad3cdba, -635),  // 10^-172
    (0x936b9fcebb25c996, -608),  // 10^-164
    (0xdbac6c247d62a584, -582),  // 10^-156
    (0xa3ab66580d5fdaf6, -555),  // 10^-148
    (0xf3e2f893dec3f126, -529),  // 10^-140
    (0xb5b5ada8aaff80b8, -502),  // 10^-132
    (0x87625f056c7c4a8b, -475),  // 10^-124
    (0xc9bcff6034c13053, -449),  // 10^-116
    (0x964e858c91ba2655, -422),  // 10^-108
    (0xdff9772470297ebd, -396),  // 10^-100
    (0xa6dfbd9fb8e5b88f, -369),  // 10^-92
    (0xf8a95fcf88747d94, -343),  // 10^-84
    (0xb94470938fa89bcf, -316),  // 10^-76
    (0x8a08f0f8bf0f156b, -289),  // 10^-68
    (0xcdb02555653131b6, -263),  // 10^-60
    (0x993fe2c6d07b7fac, -236),  // 10^-52
    (0xe45c10c42a2b3b06, -210),  // 10^-44
    (0xaa242499697392d3, -183),  // 10^-36
    (0xfd87b5f28300ca0e, -157),  // 10^-28
    (0xbce5086492111aeb, -130),  // 10^-20
    (0x8cbccc096f5088cc, -103),  // 10^-12
    (0xd1b71758e219652c, -77),   // 10^-4
    (0x9c40000000000000, -50),   // 10^4
    (0xe8d4a51000000000, -24),   // 10^12
    (0xad78ebc5ac620000, 3),     // 10^20
    (0x813f3978f8940984, 30),    // 10^28
    (0xc097ce7bc90715b3, 56),    // 10^36
    (0x8f7e32ce7bea5c70, 83),    // 10^44
    (0xd5d238a4abe98068, 109),   // 10^52
    (0x9f4f2726179a2245, 136),   // 10^60
    (0xed63a231d4c4fb27, 162),   // 10^68
    (0xb0de65388cc8ada8, 189),   // 10^76
    (0x83c7088e1aab65db, 216),   // 10^84
    (0xc45d1df942711d9a, 242),   // 10^92
    (0x924d692ca61be758, 269),   // 10^100
    (0xda01ee641a708dea, 295),   // 10^108
    (0xa26da3999aef774a, 322),   // 10^116
    (0xf209787bb47d6b85, 348),   // 10^124
    (0xb454e4a179dd1877, 375),   // 10^132
    (0x865b86925b9bc5c2, 402),   // 10^140
    (0xc83553c5c8965d3d, 428),   // 10^148
    (0x952ab45cfa97a0b3, 455),   // 10^156
    (0xde469fbd99a05fe3, 481),   // 10^164
    (0xa59bc234db398c25, 508),   // 10^172
    (0xf6c69a72a3989f5c, 534),   // 10^180
    (0xb7dcbf5354e9bece, 561),   // 10^188
    (0x88fcf317f22241e2, 588),   // 10^196
    (0xcc20ce9bd35c78a5, 614),   // 10^204
    (0x98165af37b2153df, 641),   // 10^212
    (0xe2a0b5dc971f303a, 667),   // 10^220
    (0xa8d9d1535ce3b396, 694),   // 10^228
    (0xfb9b7cd9a4a7443c, 720),   // 10^236
    (0xbb764c4ca7a44410, 747),   // 10^244
    (0x8bab8eefb6409c1a, 774),   // 10^252
    (0xd01fef10a657842c, 800),   // 10^260
    (0x9b10a4e5e9913129, 827),   // 10^268
    (0xe7109bfba19c0c9d, 853),   // 10^276
    (0xac2820d9623bf429, 880),   // 10^284
    (0x80444b5e7aa7cf85, 907),   // 10^292
    (0xbf21e44003acdd2d, 933),   // 10^300
    (0x8e679c2f5e44ff8f, 960),   // 10^308
    (0xd433179d9c8cb841, 986),   // 10^316
    (0x9e19db92b4e31ba9, 1013),  // 10^324
    (0xeb96bf6ebadf77d9, 1039),  // 10^332
    (0xaf87023b9bf0ee6b, 1066),  // 10^340
];
const FIRST_POWER: i32 = -348;
const POWER_STEP: i32 = 8;
/// The window the scaled upper boundary's exponent is brought into.
const EXP_MIN: i32 = -60;
const EXP_MAX: i32 = -32;

impl Fp {
    fn of(d: f64) -> Fp {
        let bits = d.to_bits();
        let frac = bits & FRAC_MASK;
        let exp = ((bits >> 52) & 0x7ff) as i32;
        if exp != 0 {
            Fp { frac: frac + HIDDEN_BIT, exp: exp - EXP_BIAS }
        } else {
            Fp { frac, exp: 1 - EXP_BIAS }
        }
    }

    /// Shifted so the top bit of 64 is set.
    fn normalized(mut self) -> Fp {
        while self.frac & HIDDEN_BIT == 0 {
            self.frac <<= 1;
            self.exp -= 1;
        }
        self.frac <<= 11;
        self.exp -= 11;
        self
    }

    /// The product's high 64 bits, rounded half up on bit 31 of the low part.
    fn times(self, o: Fp) -> Fp {
        let lo = 0xFFFF_FFFFu64;
        let (ah, al, bh, bl) = (self.frac >> 32, self.frac & lo, o.frac >> 32, o.frac & lo);
        let (ah_bl, al_bh, al_bl, ah_bh) = (ah * bl, al * bh, al * bl, ah * bh);
        let mid = (ah_bl & lo) + (al_bh & lo) + (al_bl >> 32) + (1 << 31);
        Fp { frac: ah_bh + (ah_bl >> 32) + (al_bh >> 32) + (mid >> 32), exp: self.exp + o.exp + 64 }
    }
}

/// The boundaries halfway to the neighbouring doubles, at a common exponent, the upper
/// one normalized.
fn boundaries(fp: Fp) -> (Fp, Fp) {
    let mut upper = Fp { frac: (fp.frac << 1) + 1, exp: fp.exp - 1 };
    while upper.frac & (HIDDEN_BIT << 1) == 0 {
        upper.frac <<= 1;
        upper.exp -= 1;
    }
    upper.frac <<= 10;
    upper.exp -= 10;
    // Below a power of two the lower neighbour is half as far.
    let shift = if fp.frac == HIDDEN_BIT { 2 } else { 1 };
    let lower = Fp { frac: ((fp.frac << shift) - 1) << ((fp.exp - shift) - upper.exp), exp: upper.exp };
    (lower, upper)
}

/// The cached power that brings `exp` into the window, and its decimal exponent.
fn cached_power(exp: i32) -> (Fp, i32) {
    let approx = (f64::from(-(exp + 87)) * 0.301_029_995_663_981_14) as i32;
    let mut idx = (approx - FIRST_POWER) / POWER_STEP;
    loop {
        let Some(&(frac, pexp)) = CACHED_POWERS.get(idx as usize) else {
            // Unreachable for doubles: every binary exponent has a power in the table.
            return (Fp { frac: 1 << 63, exp: -63 }, 0);
        };
        let current = exp + pexp + 64;
        if current < EXP_MIN {
            idx += 1;
        } else if current > EXP_MAX {
            idx -= 1;
        } else {
            return (Fp { frac, exp: pexp }, FIRST_POWER + idx * POWER_STEP);
        }
    }
}

/// Move the last digit down while that brings it nearer `frac` within the bounds.
fn round_last(digits: &mut [u8], delta: u64, mut rem: u64, kappa: u64, frac: u64) {
    let Some(last) = digits.last_mut() else { return };
    while rem < frac
        && delta.wrapping_sub(rem) >= kappa
        && (rem.wrapping_add(kappa) < frac || frac.wrapping_sub(rem) > rem.wrapping_add(kappa).wrapping_sub(frac))
    {
        *last = last.wrapping_sub(1);
        rem = rem.wrapping_add(kappa);
    }
}

const TENS: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 18;
    loop {
        t[i] = t[i + 1] * 10;
        if i == 0 {
            break t;
        }
        i -= 1;
    }
};

/// The digits between the boundaries, and K, the power of ten of the last digit.
fn generate(w: Fp, upper: Fp, lower: Fp, mut k: i32) -> (Vec<u8>, i32) {
    let wfrac = upper.frac.wrapping_sub(w.frac);
    let mut delta = upper.frac.wrapping_sub(lower.frac);
    let shift = -upper.exp as u32;
    let one = 1u64 << shift;
    let mut part1 = upper.frac >> shift;
    let mut part2 = upper.frac & (one - 1);
    let mut digits = Vec::with_capacity(18);
    let mut kappa = 10;
    // The integral part: 10^9 down to 10^0.
    for &div in &TENS[10..] {
        let digit = part1 / div;
        if digit != 0 || !digits.is_empty() {
            digits.push(b'0' + digit as u8);
        }
        part1 -= digit * div;
        kappa -= 1;
        let rem = (part1 << shift) + part2;
        if rem <= delta {
            k += kappa;
            round_last(&mut digits, delta, rem, div << shift, wfrac);
            return (digits, k);
        }
    }
    // The fraction, one decimal at a time.
    let mut unit = 18;
    loop {
        part2 = part2.wrapping_mul(10);
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let digit = part2 >> shift;
        if digit != 0 || !digits.is_empty() {
            digits.push(b'0' + digit as u8);
        }
        part2 &= one - 1;
        if part2 < delta || unit == 0 {
            k += kappa;
            round_last(&mut digits, delta, part2, one, wfrac.wrapping_mul(TENS[unit]));
            return (digits, k);
        }
        unit -= 1;
    }
}

/// Grisu2's digits of a finite, non-zero double (its sign ignored) and the power of ten
/// of the last one.
pub fn grisu2(d: f64) -> (Vec<u8>, i32) {
    let fp = Fp::of(d.abs());
    let (lower, upper) = boundaries(fp);
    let w = fp.normalized();
    let (cached, k) = cached_power(upper.exp);
    let (w, mut upper, mut lower) = (w.times(cached), upper.times(cached), lower.times(cached));
    lower.frac += 1;
    upper.frac -= 1;
    generate(w, upper, lower, -k)
}

#[cfg(test)]
mod tests {
    use super::super::double::fpconv_dtoa;

    #[test]
    fn digits_as_redis_7_4_prints_them() {
        // ZSCOREs real Redis 7.4.1 replied with (GEOSEARCHSTORE ... STOREDIST): Grisu2 gives
        // 17 digits where 16 (49.32766313230346, ...) read back the same.
        for text in ["49.327663132303456", "2.0109665394744898", "0.07535929339681641", "6.308898093865654e+5"] {
            let d: f64 = text.parse().unwrap_or(f64::NAN);
            assert_eq!(fpconv_dtoa(d), text);
        }
        for (d, text) in [(0.1, "0.1"), (1e17, "1e+17"), (1.5e-7, "1.5e-7"), (-2.5e300, "-2.5e+300")] {
            assert_eq!(fpconv_dtoa(d), text);
        }
        assert_eq!(fpconv_dtoa(f64::from_bits(1)), "5e-324");
        assert_eq!(fpconv_dtoa(f64::MAX), "1.7976931348623157e+308");
    }
}
