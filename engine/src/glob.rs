//! Redis-style glob matching (`KEYS`/`SCAN MATCH`): `*`, `?`, `[abc]`, `[^a-z]`, `\x`.

pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    // Backtracking point for the most recent '*': (pattern index after it, string index).
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((ok, next)) = class(pattern, p, s[i]) {
                        if ok {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == s[i] {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if c == s[i] {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Match `c` against the class starting at `pattern[p] == '['`: (matched, index after `]`).
fn class(pattern: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    let mut k = p + 1;
    let negate = pattern.get(k) == Some(&b'^');
    if negate {
        k += 1;
    }
    let mut hit = false;
    loop {
        let &ch = pattern.get(k)?;
        if ch == b']' {
            break;
        }
        if ch == b'\\' && k + 1 < pattern.len() {
            hit |= pattern[k + 1] == c;
            k += 2;
        } else if k + 2 < pattern.len() && pattern[k + 1] == b'-' && pattern[k + 2] != b']' {
            let (a, b) = (ch.min(pattern[k + 2]), ch.max(pattern[k + 2]));
            hit |= (a..=b).contains(&c);
            k += 3;
        } else {
            hit |= ch == c;
            k += 1;
        }
    }
    Some((hit != negate, k + 1))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_glob() {
        assert!(matches(b"*", b""));
        assert!(matches(b"user:*", b"user:42"));
        assert!(!matches(b"user:*", b"usr:42"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-c]llo", b"hbllo"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
        assert!(matches(b"*a*b*c", b"xxaxxbxxc"));
        assert!(!matches(b"*a*b*c", b"xxaxxbxx"));
    }
}
