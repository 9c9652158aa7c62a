//! The AOF manifest of Redis 7.0's multi-part AOF: one line per file,
//! `file <name> seq <n> type <b|h|i>`, the base first, then history, then incr files in
//! sequence order. Names that need it are quoted as `sdscatrepr` quotes them.

use std::fmt::Write as _;

/// What a file in the AOF directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// The snapshot of the last rewrite (RDB or RESP).
    Base,
    /// A base or incr file superseded by a rewrite, waiting to be deleted.
    History,
    /// Commands written since a rewrite.
    Incr,
}

impl FileKind {
    pub fn letter(self) -> char {
        match self {
            FileKind::Base => 'b',
            FileKind::History => 'h',
            FileKind::Incr => 'i',
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofInfo {
    pub name: String,
    pub seq: i64,
    pub kind: FileKind,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<AofInfo>,
    pub history: Vec<AofInfo>,
    pub incr: Vec<AofInfo>,
    /// Sequence numbers of the last base and incr files named.
    pub base_seq: i64,
    pub incr_seq: i64,
}

/// File name of the manifest for `appendfilename`.
pub fn manifest_name(appendfilename: &str) -> String {
    format!("{appendfilename}.manifest")
}

/// The temp file the manifest is written to before its rename.
pub fn temp_manifest_name(appendfilename: &str) -> String {
    format!("temp-{appendfilename}.manifest")
}

/// Redis reads a manifest line into 1024 bytes, newline included.
const MAX_LINE: usize = 1024;

impl Manifest {
    /// The manifest text as Redis writes it.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for ai in self.base.iter().chain(&self.history).chain(&self.incr) {
            let name =
                if needs_repr(&ai.name) { crate::format::args::repr(ai.name.as_bytes()) } else { ai.name.clone() };
            let _ = writeln!(s, "file {name} seq {} type {}", ai.seq, ai.kind.letter());
        }
        s
    }

    /// Parse a manifest as Redis 7.0 does; the error is (line number, what is wrong, in
    /// Redis's words first).
    pub fn parse(text: &[u8]) -> Result<Manifest, (usize, String)> {
        let mut m = Manifest::default();
        let mut max_incr = 0;
        if text.is_empty() {
            return Err((0, "Found an empty AOF manifest".into()));
        }
        let mut rest = text;
        let mut lineno = 0;
        while !rest.is_empty() {
            lineno += 1;
            let (line, next) = match rest.iter().position(|&c| c == b'\n') {
                // Redis reads lines of at most 1024 bytes with their newline.
                Some(i) if i < MAX_LINE => (&rest[..i], &rest[i + 1..]),
                Some(_) => return Err((lineno, "The AOF manifest file contains too long line".into())),
                None => {
                    return Err((lineno, "The AOF manifest file contains too long line (no newline at the end)".into()))
                }
            };
            rest = next;
            if line.first() == Some(&b'#') {
                continue;
            }
            let bad = |what: &str| Err((lineno, what.to_string()));
            let text = String::from_utf8_lossy(line);
            let line = text.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
            if line.is_empty() {
                return bad("Invalid AOF manifest file format (an empty line)");
            }
            let Some(args) = split_args(line) else {
                return bad("Invalid AOF manifest file format (unbalanced quotes)");
            };
            if args.len() < 6 || args.len() % 2 != 0 {
                return bad("Invalid AOF manifest file format (expected file/seq/type pairs)");
            }
            let (mut name, mut seq, mut kind) = (None, 0i64, None);
            for pair in args.chunks(2) {
                let v = &pair[1];
                if pair[0].eq_ignore_ascii_case("file") {
                    if v.contains('/') || v.is_empty() || v == "." || v == ".." {
                        return bad("File can't be a path, just a filename");
                    }
                    name = Some(v.clone());
                } else if pair[0].eq_ignore_ascii_case("seq") {
                    seq = atoll(v);
                } else if pair[0].eq_ignore_ascii_case("type") {
                    kind = v.chars().next();
                }
            }
            let (Some(name), Some(kind)) = (name, kind) else {
                return bad("Invalid AOF manifest file format (missing file or type)");
            };
            if seq == 0 {
                return bad("Invalid AOF manifest file format (missing seq)");
            }
            match kind {
                'b' => {
                    if m.base.is_some() {
                        return bad("Found duplicate base file information");
                    }
                    m.base_seq = seq;
                    m.base = Some(AofInfo { name, seq, kind: FileKind::Base });
                }
                'h' => m.history.push(AofInfo { name, seq, kind: FileKind::History }),
                'i' => {
                    if seq <= max_incr {
                        return bad("Found a non-monotonic sequence number");
                    }
                    max_incr = seq;
                    m.incr_seq = seq;
                    m.incr.push(AofInfo { name, seq, kind: FileKind::Incr });
                }
                _ => return bad("Unknown AOF file type"),
            }
        }
        Ok(m)
    }

    /// Name a new base file, turning the current one into history.
    pub fn new_base(&mut self, appendfilename: &str, rdb: bool) -> String {
        if let Some(mut old) = self.base.take() {
            old.kind = FileKind::History;
            self.history.insert(0, old);
        }
        self.base_seq += 1;
        let name = format!("{appendfilename}.{}.base.{}", self.base_seq, if rdb { "rdb" } else { "aof" });
        self.base = Some(AofInfo { name: name.clone(), seq: self.base_seq, kind: FileKind::Base });
        name
    }

    /// Name a new incr file, appended to the incr list.
    pub fn new_incr(&mut self, appendfilename: &str) -> String {
        self.incr_seq += 1;
        let name = format!("{appendfilename}.{}.incr.aof", self.incr_seq);
        self.incr.push(AofInfo { name: name.clone(), seq: self.incr_seq, kind: FileKind::Incr });
        name
    }

    /// After a rewrite: every incr file but the one being written (when `keep_last`)
    /// becomes history.
    pub fn mark_rewritten_incr_as_history(&mut self, keep_last: bool) {
        let keep = usize::from(keep_last && !self.incr.is_empty());
        let n = self.incr.len() - keep;
        for mut ai in self.incr.drain(..n).rev() {
            ai.kind = FileKind::History;
            self.history.insert(0, ai);
        }
    }
}

/// C's atoll: optional sign and leading digits, 0 when none.
fn atoll(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for c in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// Whether sdscatrepr would be needed (sdsneedsrepr).
fn needs_repr(s: &str) -> bool {
    s.bytes().any(|c| matches!(c, b'\\' | b'"') || !(0x21..=0x7e).contains(&c))
}

/// A manifest line's words, split as Redis's sdssplitargs splits them.
fn split_args(line: &str) -> Option<Vec<String>> {
    let words = crate::format::args::split_args(line.as_bytes())?;
    Some(words.into_iter().map(|w| String::from_utf8_lossy(&w).into_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_in_redis_order() {
        let mut m = Manifest::default();
        m.new_base("appendonly.aof", true);
        m.new_incr("appendonly.aof");
        assert_eq!(
            m.to_text(),
            "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
        );
        m.new_incr("appendonly.aof");
        // Redis puts the old base at the head of the history, then the rewritten incr
        // files before it.
        m.new_base("appendonly.aof", false);
        m.mark_rewritten_incr_as_history(true);
        let text = m.to_text();
        assert_eq!(
            text,
            "file appendonly.aof.2.base.aof seq 2 type b\n\
             file appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.1.base.rdb seq 1 type h\n\
             file appendonly.aof.2.incr.aof seq 2 type i\n"
        );
        assert_eq!(Manifest::parse(text.as_bytes()), Ok(m));
    }

    #[test]
    fn quoted_names_and_errors() {
        let m = Manifest {
            base: Some(AofInfo { name: "my file\"x".into(), seq: 1, kind: FileKind::Base }),
            ..Default::default()
        };
        let text = m.to_text();
        assert_eq!(text, "file \"my file\\\"x\" seq 1 type b\n");
        assert_eq!(Manifest::parse(text.as_bytes()).unwrap().base.unwrap().name, "my file\"x");
        assert!(Manifest::parse(b"").is_err());
        assert_eq!(Manifest::parse(b"file a seq 1\n").unwrap_err().0, 1);
        assert!(Manifest::parse(b"file a/b seq 1 type b\n").is_err());
        assert!(Manifest::parse(b"file a seq 2 type i\nfile b seq 2 type i\n").is_err());
        assert!(Manifest::parse(b"file a seq 1 type b\nfile b seq 2 type b\n").is_err());
        assert!(Manifest::parse(b"file a seq 1 type x\n").is_err());
        assert!(Manifest::parse(b"# comment\nfile a seq 1 type i\n").is_ok());
    }
}
