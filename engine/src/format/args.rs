//! Redis's sdssplitargs: how redis-cli, inline commands, redis.conf and the AOF manifest
//! split a line into arguments. One implementation for all of them.

/// A string quoted as Redis's sdscatrepr quotes it (what [`split_args`] reads back): in
/// double quotes, with `\\ \" \n \r \t \a \b` escapes and other bytes outside printable
/// ASCII as `\xNN`.
pub fn repr(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len() + 2);
    repr_into(&mut out, b);
    out
}

/// [`repr`] appended to `out`.
pub fn repr_into(out: &mut String, b: &[u8]) {
    out.push('"');
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(c as char),
            _ => {
                let _ = std::fmt::Write::write_fmt(out, format_args!("\\x{c:02x}"));
            }
        }
    }
    out.push('"');
}

/// C's isspace: what sdssplitargs skips between arguments and accepts after a quote.
fn c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Split a line as Redis's sdssplitargs does: C's white space (vertical tab and form feed
/// too) between arguments, but only a space, tab, CR or LF ends an unquoted one;
/// "double quotes" take \n \r \t \b \a \\ \" and \xHH escapes; 'single quotes' take \';
/// a closing quote must be followed by white space or the end; a NUL ends the line, as it
/// ends a C string. None for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = line.split(|&c| c == 0).next().unwrap_or_default();
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && c_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut arg = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                let c = *line.get(i)?;
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && hex(line[i + 2]).is_some()
                    && hex(line[i + 3]).is_some()
                {
                    arg.push(hex(line[i + 2])? * 16 + hex(line[i + 3])?);
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    arg.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !c_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    arg.push(c);
                }
            } else if in_single {
                let c = *line.get(i)?;
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    arg.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !c_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    arg.push(c);
                }
            } else {
                match line.get(i) {
                    None => break,
                    Some(b' ' | b'\t' | b'\n' | b'\r') => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(&c) => arg.push(c),
                }
            }
            i += 1;
        }
        out.push(arg);
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escapes_and_errors() {
        let v = |s: &str| split_args(s.as_bytes());
        assert_eq!(v("a  b"), Some(vec![b"a".to_vec(), b"b".to_vec()]));
        assert_eq!(v(r#""a b\x41\n" 'c\'d'"#), Some(vec![b"a bA\n".to_vec(), b"c'd".to_vec()]));
        assert_eq!(v(r#""unbalanced"#), None);
        assert_eq!(v(r#""closed"x"#), None);
        assert_eq!(v(""), Some(vec![]));
        // A form feed or vertical tab separates nothing inside an argument, but is skipped
        // between them; a NUL ends the line.
        assert_eq!(v("seq 2\x0ctype i"), Some(vec![b"seq".to_vec(), b"2\x0ctype".to_vec(), b"i".to_vec()]));
        assert_eq!(v("a \x0b\x0c b"), Some(vec![b"a".to_vec(), b"b".to_vec()]));
        assert_eq!(v("a\0 b"), Some(vec![b"a".to_vec()]));
    }
}
