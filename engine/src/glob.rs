//! Redis's glob matching (KEYS, SCAN MATCH, PSUBSCRIBE, CONFIG GET, FUNCTION LIST
//! LIBRARYNAME): `*`, `?`, `[abc]`, `[^a-z]`, `\x`, with every corner of Redis's
//! stringmatchlen: an unterminated `[` class ends with the pattern, a range's bounds are
//! compared as signed chars and may come in either order, a `-` right before `]` makes
//! `]` the range's end, and a read past the pattern's end sees the C string's NUL.

/// Whether `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    let mut skip_longer = false;
    match_at(pattern, s, false, &mut skip_longer, 0)
}

/// [`matches`] ignoring ASCII case.
pub fn matches_nocase(pattern: &[u8], s: &[u8]) -> bool {
    let mut skip_longer = false;
    match_at(pattern, s, true, &mut skip_longer, 0)
}

/// The byte at `i`, or the NUL terminator past the end.
fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

fn lower(c: i32) -> i32 {
    if (i32::from(b'A')..=i32::from(b'Z')).contains(&c) {
        c + 32
    } else {
        c
    }
}

/// A C `char`'s value: bytes above 0x7f are negative.
fn signed(b: u8) -> i32 {
    i32::from(b as i8)
}

fn same(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        lower(signed(a)) == lower(signed(b))
    } else {
        a == b
    }
}

/// Stars nested deeper than this match nothing: each takes a frame of the stack, and a
/// pattern of a million stars would overflow it (Redis 6.2.16, 7.2.6 and 7.4.1 stop at
/// the same depth; 7.0.15, without the limit, could crash).
const MAX_NESTING: usize = 1000;

/// `skip_longer`: a `*` found no match for the rest of the pattern anywhere in the rest of
/// the string, so earlier stars need not try longer spans (Redis's skipLongerMatches).
fn match_at(pattern: &[u8], s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: usize) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    let (mut p, mut i) = (0usize, 0usize);
    // Redis counts lengths down and may step back one before the pattern's end.
    let mut plen = pattern.len() as isize;
    while plen > 0 && i < s.len() {
        match pattern[p] {
            b'*' => {
                while plen > 0 && at(pattern, p + 1) == b'*' {
                    p += 1;
                    plen -= 1;
                }
                if plen == 1 {
                    return true;
                }
                let rest = &pattern[p + 1..];
                while i < s.len() {
                    if match_at(rest, &s[i..], nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    i += 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => i += 1,
            b'[' => {
                p += 1;
                plen -= 1;
                let negate = at(pattern, p) == b'^';
                if negate {
                    p += 1;
                    plen -= 1;
                }
                let c = s[i];
                let mut hit = false;
                loop {
                    let ch = at(pattern, p);
                    if ch == b'\\' && plen >= 2 {
                        p += 1;
                        plen -= 1;
                        hit |= at(pattern, p) == c;
                    } else if ch == b']' {
                        break;
                    } else if plen == 0 {
                        p -= 1;
                        plen += 1;
                        break;
                    } else if plen >= 3 && at(pattern, p + 1) == b'-' {
                        let (mut lo, mut hi) = (signed(ch), signed(at(pattern, p + 2)));
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        let mut v = signed(c);
                        if nocase {
                            (lo, hi, v) = (lower(lo), lower(hi), lower(v));
                        }
                        p += 2;
                        plen -= 2;
                        hit |= (lo..=hi).contains(&v);
                    } else {
                        hit |= same(ch, c, nocase);
                    }
                    p += 1;
                    plen -= 1;
                }
                if hit == negate {
                    return false;
                }
                i += 1;
            }
            first => {
                let want = if first == b'\\' && plen >= 2 {
                    p += 1;
                    plen -= 1;
                    pattern[p]
                } else {
                    first
                };
                if !same(want, s[i], nocase) {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
        plen -= 1;
        if i == s.len() {
            while at(pattern, p) == b'*' {
                p += 1;
                plen -= 1;
            }
            break;
        }
    }
    plen == 0 && i == s.len()
}

#[cfg(test)]
mod tests {
    use super::{matches, matches_nocase};

    #[test]
    fn stars_nested_past_the_limit_match_nothing() {
        // Redis 7.4.1's regression test: 50,000 `*?` against 50,000 bytes, no match and no
        // overflow; within the limit the same shape matches.
        let key = vec![b'a'; 50_000];
        assert!(!matches(&b"*?".repeat(50_000), &key));
        assert!(!matches(&b"*?".repeat(1_000_000), &key));
        assert!(matches(&b"*?".repeat(1_000), &key));
        assert!(!matches(&b"*?".repeat(1_001), &key));
    }

    #[test]
    fn redis_glob() {
        // Redis's matcher says no here; KEYS and SCAN take `*` alone as "every key".
        assert!(!matches(b"*", b""));
        assert!(matches(b"user:*", b"user:42"));
        assert!(!matches(b"user:*", b"usr:42"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-c]llo", b"hbllo"));
        assert!(matches(b"h[c-a]llo", b"hbllo"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
        assert!(matches(b"*a*b*c", b"xxaxxbxxc"));
        assert!(!matches(b"*a*b*c", b"xxaxxbxx"));
        assert!(!matches(b"", b"a"));
        assert!(matches(b"", b""));
        assert!(matches(b"a**", b"a"));
    }

    /// The corners issue #20 found differing: Redis's answers (KEYS on a real 7.0).
    #[test]
    fn unterminated_classes_and_trailing_dashes() {
        // `[a` is a class holding `a` that ends with the pattern.
        assert!(matches(b"[a", b"a"));
        assert!(!matches(b"[a", b"b"));
        // `[a-]`: the range a..] (swapped: ]..a), so `]`, `^`, `_`, `` ` ``, `a` match.
        for c in [b"]", b"^", b"_", b"`", b"a"] {
            assert!(matches(b"[a-]", c), "{c:?}");
        }
        assert!(!matches(b"[a-]", b"-"));
        assert!(!matches(b"[a-]", b"b"));
        // A lone backslash at the end matches itself.
        assert!(matches(b"a\\", b"a\\"));
    }

    #[test]
    fn nocase() {
        assert!(matches_nocase(b"MyLib*", b"mylibrary"));
        assert!(matches_nocase(b"[A-C]x", b"bX"));
        assert!(!matches(b"[A-C]x", b"bx"));
    }
}
