//! The bytes Redis 7.0 appends to its AOF for propagated commands (feedAppendOnlyFile):
//! a `#TS:` annotation when enabled and the second changed, a SELECT when the database
//! differs from the last one written, then the command as a RESP multibulk.

use crate::command::Argv;

/// The database of a propagated command that says none (7.2's MULTI and EXEC): no SELECT
/// goes before it.
pub const NO_DB: usize = usize::MAX;

#[derive(Debug, Clone)]
pub struct AofFeed {
    /// Database of the last command written; None at the start of a file.
    selected: Option<usize>,
    /// Unix seconds of the last `#TS:` annotation.
    last_ts: i64,
    pub timestamps: bool,
}

impl AofFeed {
    pub fn new(timestamps: bool) -> AofFeed {
        AofFeed { selected: None, last_ts: 0, timestamps }
    }

    /// The database of the last command written.
    pub fn selected(&self) -> Option<usize> {
        self.selected
    }

    /// Start a new file: the next command is preceded by a SELECT.
    pub fn reset(&mut self) {
        self.selected = None;
    }

    /// Append the bytes of one propagated command run in `db` at `now_ms`.
    pub fn command(&mut self, out: &mut Vec<u8>, db: usize, argv: &[Vec<u8>], now_ms: i64) {
        if self.timestamps {
            let secs = now_ms.div_euclid(1000);
            if self.last_ts < secs {
                out.extend_from_slice(format!("#TS:{secs}\r\n").as_bytes());
                self.last_ts = secs;
            }
        }
        if db != NO_DB && self.selected != Some(db) {
            let d = db.to_string();
            out.extend_from_slice(format!("*2\r\n$6\r\nSELECT\r\n${}\r\n{d}\r\n", d.len()).as_bytes());
            self.selected = Some(db);
        }
        put_multibulk(out, argv);
    }

    /// Append a unit of propagated commands.
    pub fn unit(&mut self, out: &mut Vec<u8>, ops: &[(usize, Argv)], now_ms: i64) {
        for (db, argv) in ops {
            self.command(out, *db, argv, now_ms);
        }
    }
}

/// A command as a RESP multibulk, as Redis writes it to the AOF.
pub fn put_multibulk<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    put_multibulk_header(out, argv.len());
    for a in argv {
        put_bulk(out, a.as_ref());
    }
}

/// `*n\r\n`: a multibulk of `n` arguments follows.
pub fn put_multibulk_header(out: &mut Vec<u8>, n: usize) {
    put_header(out, b'*', n);
}

/// One argument: `$len\r\nbytes\r\n`.
pub fn put_bulk(out: &mut Vec<u8>, a: &[u8]) {
    out.reserve(a.len() + 16);
    put_header(out, b'$', a.len());
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// `{mark}{n}\r\n`. Counts under 100 (nearly all of a dump's) are written as one
/// fixed-size copy: this runs for every argument of every command.
#[inline]
fn put_header(out: &mut Vec<u8>, mark: u8, n: usize) {
    let digit = |d: usize| b'0' + (d % 10) as u8;
    if n < 10 {
        out.extend_from_slice(&[mark, digit(n), b'\r', b'\n']);
    } else if n < 100 {
        out.extend_from_slice(&[mark, digit(n / 10), digit(n), b'\r', b'\n']);
    } else {
        out.push(mark);
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_only_when_the_database_changes() {
        let mut f = AofFeed::new(false);
        let mut out = Vec::new();
        let set = vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()];
        f.command(&mut out, 0, &set, 0);
        f.command(&mut out, 0, &set, 0);
        f.command(&mut out, 3, &set, 0);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("SELECT").count(), 2);
        assert!(text.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n"));
    }

    #[test]
    fn headers_spell_every_count_in_decimal() {
        for n in (0..1100).chain([65_535, usize::MAX]) {
            let mut out = b"x".to_vec();
            put_multibulk_header(&mut out, n);
            assert_eq!(out, format!("x*{n}\r\n").into_bytes());
            if n < 1100 {
                let arg = vec![b'a'; n];
                out.clear();
                put_bulk(&mut out, &arg);
                assert_eq!(out, [format!("${n}\r\n").as_bytes(), &arg, b"\r\n"].concat());
            }
        }
    }
}
