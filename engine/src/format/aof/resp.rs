//! The RESP part of an AOF file: commands as Redis's AOF writes them, with `#` annotation
//! lines (Redis 7.0's `#TS:<unix seconds>` when aof-timestamp-enabled is on) between them.
//!
//! ```text
//! command    = "*" argc CRLF ( "$" len CRLF bytes CRLF ){argc}
//! annotation = "#" text LF
//! ```
//! Header lines end with `\n`, a `\r` before it is dropped (as Redis's fgets-based loader
//! reads them); argument bytes must be followed by CRLF.
//!
//! [`CommandReader`] yields one [`Command`] at a time, borrowing its arguments from the
//! input, with the database selected by earlier SELECTs of the same file and the last
//! timestamp annotation. The data ending inside a command is told apart from bytes that
//! are not RESP ([`AofError::Truncated`] and [`AofError::Malformed`]), as a loader
//! tolerates the first at the end of the last file only.

use std::fmt;

use nom::bytes::streaming::{take, take_till};

use crate::format::blob::parse_canonical_i64;
use crate::format::input::{fail, u8_, FormatError, Input, PResult};

/// One logged command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command<'a> {
    /// Offset of its `*` in the file.
    pub offset: usize,
    /// Offset just past its last CRLF.
    pub end: usize,
    /// The database it runs in (SELECT commands before it in the same file).
    pub db: u64,
    /// The last `#TS:` annotation before it in the same file (unix seconds).
    pub ts: Option<i64>,
    /// Name first; never empty.
    pub argv: Vec<&'a [u8]>,
}

impl Command<'_> {
    pub fn name(&self) -> &[u8] {
        self.argv[0]
    }

    /// Whether the command is `name` (ASCII case-insensitive).
    pub fn is(&self, name: &str) -> bool {
        self.argv[0].eq_ignore_ascii_case(name.as_bytes())
    }

    /// The arguments as owned vectors.
    pub fn to_argv(&self) -> Vec<Vec<u8>> {
        self.argv.iter().map(|a| a.to_vec()).collect()
    }
}

/// Why reading stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AofError {
    /// The data ends inside the command that starts at `start`.
    Truncated { start: usize, what: String },
    /// The bytes at `offset`, inside the item starting at `start`, are not an AOF command.
    Malformed { start: usize, offset: usize, what: String },
}

impl AofError {
    /// Where the command (or line) being read starts: what precedes it is whole.
    pub fn start(&self) -> usize {
        match self {
            AofError::Truncated { start, .. } | AofError::Malformed { start, .. } => *start,
        }
    }

    /// Where exactly the problem is.
    pub fn offset(&self) -> usize {
        match self {
            AofError::Truncated { start, .. } => *start,
            AofError::Malformed { offset, .. } => *offset,
        }
    }

    pub fn what(&self) -> &str {
        match self {
            AofError::Truncated { what, .. } | AofError::Malformed { what, .. } => what,
        }
    }

    pub fn is_truncated(&self) -> bool {
        matches!(self, AofError::Truncated { .. })
    }
}

impl fmt::Display for AofError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "offset {}: {}", self.offset(), self.what())
    }
}

impl std::error::Error for AofError {}

/// Whether an AOF file starts with an RDB preamble (aof-use-rdb-preamble, or an RDB base).
pub fn has_rdb_preamble(data: &[u8]) -> bool {
    data.starts_with(b"REDIS")
}

/// What one step of the reader found.
enum Item<'a> {
    Command(Vec<&'a [u8]>),
    /// An annotation line; `Some` for a well-formed `#TS:`.
    Annotation(Option<i64>),
    /// An annotation without its newline at the very end: the file ends cleanly.
    LastAnnotation,
}

/// One header line without its `\n` (and `\r`), and what follows it.
fn line(i: Input<'_>) -> PResult<'_, Input<'_>> {
    let (rest, l) = take_till(|c| c == b'\n')(i)?;
    let (rest, _) = u8_(rest)?;
    let l = match l.bytes().last() {
        Some(b'\r') => nom::Input::take(&l, l.len() - 1),
        _ => l,
    };
    Ok((rest, l))
}

/// The number after a `*` or `$`, which must be a plain decimal integer.
fn number(l: Input<'_>) -> Option<i64> {
    parse_canonical_i64(l.bytes().get(1..)?)
}

fn shown(l: Input<'_>) -> String {
    let b = l.bytes();
    String::from_utf8_lossy(&b[..b.len().min(64)]).into_owned()
}

/// A `<prefix><count>\r\n` header in canonical form (no sign, no leading zero, at most 18
/// digits) at the start of `b`: (count, header length). Anything else is left to the
/// general parser, which also words the errors.
#[inline]
fn fast_header(b: &[u8], prefix: u8) -> Option<(usize, usize)> {
    if b.first() != Some(&prefix) {
        return None;
    }
    let mut n = 0u64;
    let mut j = 1;
    while let Some(&d) = b.get(j) {
        if !d.is_ascii_digit() || j > 18 {
            break;
        }
        n = n * 10 + u64::from(d - b'0');
        j += 1;
    }
    let canonical = j > 1 && (b[1] != b'0' || j == 2);
    let n = usize::try_from(n).ok()?;
    (canonical && b.get(j..j + 2) == Some(b"\r\n")).then_some((n, j + 2))
}

/// The common case of [`argument`]: a whole canonical `$len\r\n<bytes>\r\n` at the start of
/// `b`: (the bytes, the length of the whole).
#[inline]
fn fast_argument(b: &[u8]) -> Option<(&[u8], usize)> {
    let (len, head) = fast_header(b, b'$')?;
    let end = head.checked_add(len)?;
    (b.get(end..end.checked_add(2)?) == Some(b"\r\n")).then(|| (&b[head..end], end + 2))
}

/// One argument: `$len`, the bytes, CRLF.
fn argument(i: Input<'_>) -> PResult<'_, &[u8]> {
    if let Some((arg, used)) = fast_argument(i.bytes()) {
        return Ok((nom::Input::take_from(&i, used), arg));
    }
    let (rest, head) = line(i)?;
    if head.bytes().first() != Some(&b'$') {
        let found = i.bytes().first().copied().unwrap_or(0);
        return fail(i, format!("expected '$' (an argument), found byte 0x{found:02x}"));
    }
    let len = match number(head) {
        Some(n) if n >= 0 => n as u64,
        _ => return fail(i, format!("invalid argument length '{}'", shown(head))),
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let (rest, bytes) = take(len)(rest)?;
    let (after, crlf) = take(2usize)(rest)?;
    if crlf.bytes() != b"\r\n" {
        return fail(rest, "argument not followed by CRLF");
    }
    Ok((after, bytes.bytes()))
}

/// A command or an annotation line.
fn item(i: Input<'_>) -> PResult<'_, Item<'_>> {
    if let Some((argc, used)) = fast_header(i.bytes(), b'*').filter(|&(n, _)| n >= 1) {
        return arguments(nom::Input::take_from(&i, used), argc as u64);
    }
    let (rest, head) = match line(i) {
        Ok(r) => r,
        // The last line without a newline: an annotation ends the file cleanly.
        Err(nom::Err::Incomplete(n)) => {
            return match i.bytes().first() {
                Some(b'#') => Ok((nom::Input::take_from(&i, i.len()), Item::LastAnnotation)),
                Some(b'*') => Err(nom::Err::Incomplete(n)),
                Some(&b) => fail(i, format!("expected '*' (a command), found byte 0x{b:02x}")),
                None => Err(nom::Err::Incomplete(n)),
            };
        }
        Err(e) => return Err(e),
    };
    match head.bytes().first() {
        Some(b'#') => {
            let ts = head.bytes().strip_prefix(b"#TS:").and_then(parse_canonical_i64);
            return Ok((rest, Item::Annotation(ts)));
        }
        Some(b'*') => {}
        Some(&b) => return fail(i, format!("expected '*' (a command), found byte 0x{b:02x}")),
        None => return fail(i, "expected '*' (a command), found an empty line"),
    }
    let argc = match number(head) {
        Some(n) if n >= 1 => n as u64,
        _ => return fail(i, format!("invalid argument count '{}'", shown(head))),
    };
    arguments(rest, argc)
}

/// The `argc` arguments of a command whose header has been read.
fn arguments(mut rest: Input<'_>, argc: u64) -> PResult<'_, Item<'_>> {
    let mut argv = Vec::with_capacity(argc.min(1024) as usize);
    for _ in 0..argc {
        let (r, arg) = argument(rest)?;
        argv.push(arg);
        rest = r;
    }
    Ok((rest, Item::Command(argv)))
}

/// The commands of the RESP part of one AOF file.
#[derive(Debug, Clone)]
pub struct CommandReader<'a> {
    data: &'a [u8],
    pos: usize,
    db: u64,
    ts: Option<i64>,
    done: bool,
}

impl<'a> CommandReader<'a> {
    /// Read `data` (a whole file) from its start.
    pub fn new(data: &'a [u8]) -> Self {
        CommandReader::at(data, 0)
    }

    /// Read `data` (a whole file, so offsets are the file's) from `pos`, e.g. the end of
    /// an RDB preamble.
    pub fn at(data: &'a [u8], pos: usize) -> Self {
        CommandReader { data, pos: pos.min(data.len()), db: 0, ts: None, done: false }
    }

    /// Offset of the next byte to read: after an error, where the last whole command ends.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// The database selected now.
    pub fn db(&self) -> u64 {
        self.db
    }

    /// The last timestamp annotation read.
    pub fn ts(&self) -> Option<i64> {
        self.ts
    }

    /// Go on reading from `pos` (after an error, to resynchronise past a bad region).
    pub fn resume_at(&mut self, pos: usize) {
        self.pos = pos.min(self.data.len());
        self.done = false;
    }

    /// Parse the command at `pos`, if a whole one starts there, without moving the
    /// reader: (its arguments, where it ends).
    pub fn command_at(data: &'a [u8], pos: usize) -> Option<(Vec<&'a [u8]>, usize)> {
        let input = Input::at(data.get(pos..)?, pos);
        if input.bytes().first() != Some(&b'*') {
            return None;
        }
        match item(input) {
            Ok((rest, Item::Command(argv))) => Some((argv, rest.offset())),
            _ => None,
        }
    }

    /// What can be read of a command at `pos` that may be damaged or cut: its argument
    /// count and the arguments that parse whole, in order. None when no `*<count>` line
    /// starts there.
    pub fn partial_at(data: &'a [u8], pos: usize) -> Option<(u64, Vec<&'a [u8]>)> {
        let input = Input::at(data.get(pos..)?, pos);
        let (mut rest, head) = line(input).ok()?;
        if head.bytes().first() != Some(&b'*') {
            return None;
        }
        let argc = u64::try_from(number(head)?).ok()?;
        let mut argv = Vec::new();
        while (argv.len() as u64) < argc {
            let Ok((r, arg)) = argument(rest) else { break };
            argv.push(arg);
            rest = r;
        }
        Some((argc, argv))
    }

    fn error(&self, start: usize, e: nom::Err<FormatError>) -> AofError {
        match e {
            nom::Err::Incomplete(_) => {
                AofError::Truncated { start, what: format!("the file ends inside the command at offset {start}") }
            }
            nom::Err::Error(e) | nom::Err::Failure(e) if e.what == "unexpected end of data" => {
                AofError::Truncated { start, what: format!("the file ends inside the command at offset {start}") }
            }
            nom::Err::Error(e) | nom::Err::Failure(e) => AofError::Malformed { start, offset: e.offset, what: e.what },
        }
    }
}

impl<'a> Iterator for CommandReader<'a> {
    type Item = Result<Command<'a>, AofError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done && self.pos < self.data.len() {
            let start = self.pos;
            let input = Input::at(&self.data[start..], start);
            let (rest, found) = match item(input) {
                Ok(r) => r,
                Err(e) => {
                    self.done = true;
                    return Some(Err(self.error(start, e)));
                }
            };
            self.pos = rest.offset();
            match found {
                Item::Annotation(ts) => {
                    if ts.is_some() {
                        self.ts = ts;
                    }
                }
                Item::LastAnnotation => {}
                Item::Command(argv) => {
                    let cmd = Command { offset: start, end: self.pos, db: self.db, ts: self.ts, argv };
                    if cmd.is("select") {
                        if let Some(db) = cmd.argv.get(1).and_then(|a| parse_canonical_i64(a)) {
                            self.db = u64::try_from(db).unwrap_or(u64::MAX);
                        }
                    }
                    return Some(Ok(cmd));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(data: &[u8]) -> (Vec<Vec<Vec<u8>>>, Option<AofError>) {
        let mut out = Vec::new();
        for r in CommandReader::new(data) {
            match r {
                Ok(c) => out.push(c.to_argv()),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }

    fn err(data: &[u8]) -> AofError {
        read_all(data).1.expect("an error")
    }

    #[test]
    fn commands_annotations_and_cut_ends() {
        let (cmds, end) = read_all(b"#TS:1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n#TS:2");
        assert_eq!(cmds, vec![vec![b"GET".to_vec(), b"k".to_vec()]]);
        assert_eq!(end, None);
        assert!(err(b"*2\r\n$3\r\nGET\r\n$1\r\n").is_truncated());
        assert!(err(b"*2\r\n$3\r\nGET\r\n$5\r\nk").is_truncated());
        assert_eq!(
            err(b"*2\r\n$3\r\nGEX\r\n$1\r\nk\r\n*1"),
            AofError::Truncated { start: 20, what: "the file ends inside the command at offset 20".into() }
        );
        assert!(matches!(err(b"*1\r\n$3\r\nGETxx"), AofError::Malformed { start: 0, offset: 11, .. }));
        assert!(matches!(err(b"*1\r\n%3\r\n"), AofError::Malformed { offset: 4, .. }));
        assert!(matches!(err(b"x"), AofError::Malformed { offset: 0, .. }));
        assert!(err(b"*2").is_truncated());
        assert!(matches!(err(b"x\r\n"), AofError::Malformed { offset: 0, .. }));
        assert!(matches!(err(b"*0\r\n"), AofError::Malformed { offset: 0, .. }));
        assert!(matches!(err(b"*1\r\n$-1\r\n"), AofError::Malformed { offset: 4, .. }));
        assert!(err(b"*1\r\n$99999999999999\r\nab\r\n").is_truncated());
        assert!(err(b"*1\r\n$99999999999999999999999\r\nab\r\n").offset() == 4);
    }

    #[test]
    fn headers_outside_the_fast_path_read_as_before() {
        // LF-only headers are accepted (fgets), leading zeros and signs are not.
        let (cmds, end) = read_all(b"*2\n$3\nGET\r\n$1\r\nk\r\n");
        assert_eq!((cmds, end), (vec![vec![b"GET".to_vec(), b"k".to_vec()]], None));
        assert!(matches!(err(b"*1\r\n$03\r\nGET\r\n"), AofError::Malformed { offset: 4, .. }));
        assert!(matches!(err(b"*01\r\n$3\r\nGET\r\n"), AofError::Malformed { offset: 0, .. }));
        assert!(matches!(err(b"*1\r\n$+3\r\nGET\r\n"), AofError::Malformed { offset: 4, .. }));
        let (cmds, _) = read_all(b"*1\r\n$0\r\n\r\n");
        assert_eq!(cmds, vec![vec![Vec::<u8>::new()]]);
        // 19 digits and more go through the general parser.
        assert!(err(b"*1\r\n$1000000000000000000\r\nab\r\n").is_truncated());
        assert_eq!(fast_header(b"$123456789012345678\r\n", b'$'), Some((123_456_789_012_345_678, 21)));
        assert_eq!(fast_header(b"$1234567890123456789\r\n", b'$'), None);
        assert_eq!(fast_argument(b"$3\r\nGET\r\n*"), Some((&b"GET"[..], 9)));
        assert_eq!(fast_argument(b"$3\r\nGETx\r\n"), None);
    }

    #[test]
    fn db_ts_and_offsets_follow_the_file() {
        let data = b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n#TS:1700000000\r\n*1\r\n$4\r\nPING\r\n";
        let cmds: Vec<_> = CommandReader::new(data).collect::<Result<_, _>>().unwrap();
        assert_eq!((cmds[0].offset, cmds[0].db, cmds[0].ts), (0, 0, None));
        assert_eq!((cmds[1].offset, cmds[1].db, cmds[1].ts), (39, 3, Some(1_700_000_000)));
        assert_eq!(cmds[1].end, data.len());
        // Starting after a preamble keeps file offsets.
        let c = CommandReader::at(data, 39).next().unwrap().unwrap();
        assert_eq!((c.offset, c.argv), (39, vec![&b"PING"[..]]));
        assert_eq!(CommandReader::command_at(data, 39).map(|(_, end)| end), Some(data.len()));
        assert_eq!(CommandReader::command_at(data, 1), None);
        let (argc, argv) = CommandReader::partial_at(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$9\r\nv", 0).unwrap();
        assert_eq!((argc, argv), (3, vec![&b"SET"[..], &b"k"[..]]));
    }
}
