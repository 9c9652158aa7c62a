//! The RESP part of an AOF file: commands as Redis's AOF writes them, with `#` annotation
//! lines (Redis 7.0's `#TS:<unix seconds>` when aof-timestamp-enabled is on) between them.
//!
//! ```text
//! command    = "*" argc CRLF ( "$" len CRLF bytes CRLF ){argc}
//! annotation = "#" text LF
//! ```
//! Files as Redis writes them are read on a fast path. Anything else is read the way
//! Redis's loader (loadSingleAppendOnlyFile) reads it, so what it loads loads here: a
//! header line is what `fgets` gives (up to a newline, at most 1023 bytes), its number is
//! what `atoi`/`strtol` make of the bytes after `*` or `$` (leading blanks, a sign, digits,
//! the rest ignored), and the two bytes after an argument are skipped whatever they are.
//! Such leniencies are reported in [`Command::anomaly`].
//!
//! [`CommandReader`] yields one [`Command`] at a time, borrowing its arguments from the
//! input, with the database selected by earlier SELECTs of the same file and the last
//! timestamp annotation. The data ending inside a command is told apart from bytes that
//! are not RESP ([`AofError::Truncated`] and [`AofError::Malformed`]), as a loader
//! tolerates the first at the end of the last file only.

use std::fmt;

use nom::bytes::streaming::take;

use crate::format::blob::parse_canonical_i64;
use crate::format::input::{fail, FormatError, Input, PResult};

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
    /// Something not as Redis writes it that Redis's loader reads anyway (a header with
    /// bytes after its number, an argument not followed by CRLF).
    pub anomaly: Option<String>,
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
#[non_exhaustive]
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
    Command(Vec<&'a [u8]>, Option<String>),
    /// An annotation line; `Some` for a well-formed `#TS:`.
    Annotation(Option<i64>),
    /// An annotation without its newline at the very end: the file ends cleanly.
    LastAnnotation,
}

/// The longest line Redis's loader reads at once (`fgets` into a 1024-byte buffer).
const LINE_MAX: usize = 1023;

/// An argument longer than this cannot be allocated (1 TiB: more than any machine it runs
/// on has; between the machine's memory and this, Redis aborts where this reads on).
const MAX_ALLOCATION: i64 = 1 << 40;

/// One header line as `fgets` reads it: up to and including a `\n`, at most
/// [`LINE_MAX`] bytes, or what is left at the end of the data. Incomplete at the end.
fn fgets(i: Input<'_>) -> PResult<'_, Input<'_>> {
    let b = i.bytes();
    if b.is_empty() {
        return Err(nom::Err::Incomplete(nom::Needed::new(1)));
    }
    let n = match b.iter().take(LINE_MAX).position(|&c| c == b'\n') {
        Some(nl) => nl + 1,
        None => b.len().min(LINE_MAX),
    };
    Ok((nom::Input::take_from(&i, n), nom::Input::take(&i, n)))
}

/// C's `strtol(s, NULL, 10)`: leading blanks, a sign, digits (saturating), the rest
/// ignored; 0 when there are no digits.
fn strtol(s: &[u8]) -> i64 {
    let (neg, digits) = crate::format::blob::c_number_start(s);
    let mut v: i64 = 0;
    for &c in digits.iter().take_while(|c| c.is_ascii_digit()) {
        let d = i64::from(c - b'0');
        v = if neg { v.saturating_mul(10).saturating_sub(d) } else { v.saturating_mul(10).saturating_add(d) };
    }
    v
}

/// Whether a header line is exactly `<prefix><canonical number>\r\n`.
fn canonical(l: &[u8]) -> bool {
    l.len() >= 3 && l.ends_with(b"\r\n") && parse_canonical_i64(&l[1..l.len() - 2]).is_some_and(|n| n >= 0)
}

fn shown(l: Input<'_>) -> String {
    let b = l.bytes();
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    let b = b.strip_suffix(b"\r").unwrap_or(b);
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

/// One argument: `$len`, the bytes, two more bytes (CRLF as written). A leniency Redis
/// reads past is noted in `anomaly`.
fn argument<'a>(i: Input<'a>, anomaly: &mut Option<String>) -> PResult<'a, &'a [u8]> {
    if let Some((arg, used)) = fast_argument(i.bytes()) {
        return Ok((nom::Input::take_from(&i, used), arg));
    }
    let (rest, head) = fgets(i)?;
    if head.bytes().first() != Some(&b'$') {
        let found = i.bytes().first().copied().unwrap_or(0);
        return fail(i, format!("expected '$' (an argument), found byte 0x{found:02x}"));
    }
    // Redis reads the length with strtol into an unsigned long and allocates that much
    // before reading: a negative or huge one is an allocation that fails (Redis aborts).
    let len = strtol(&head.bytes()[1..]);
    if !(0..=MAX_ALLOCATION).contains(&len) {
        return fail(i, format!("invalid argument length '{}'", shown(head)));
    }
    if !canonical(head.bytes()) && anomaly.is_none() {
        *anomaly = Some(format!("argument length line '{}' read as {len}", shown(head)));
    }
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let (rest, bytes) = take(len)(rest)?;
    let (after, crlf) = take(2usize)(rest)?;
    if crlf.bytes() != b"\r\n" && anomaly.is_none() {
        *anomaly = Some(format!("argument at offset {} not followed by CRLF (two bytes skipped)", bytes.offset()));
    }
    Ok((after, bytes.bytes()))
}

/// A command or an annotation line.
fn item(i: Input<'_>) -> PResult<'_, Item<'_>> {
    if let Some((argc, used)) = fast_header(i.bytes(), b'*').filter(|&(n, _)| n >= 1) {
        return arguments(nom::Input::take_from(&i, used), argc as u64, None);
    }
    let (rest, head) = fgets(i)?;
    let l = head.bytes();
    match l.first() {
        Some(b'#') => {
            let text = l.strip_suffix(b"\n").unwrap_or(l);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            let ts = text.strip_prefix(b"#TS:").and_then(parse_canonical_i64);
            // Without its newline at the very end, an annotation ends the file cleanly; a
            // longer one goes on as the next line, as fgets reads it.
            return Ok((
                rest,
                if rest.is_empty() && !l.ends_with(b"\n") { Item::LastAnnotation } else { Item::Annotation(ts) },
            ));
        }
        Some(b'*') => {}
        Some(&b) => return fail(i, format!("expected '*' (a command), found byte 0x{b:02x}")),
        None => return fail(i, "expected '*' (a command), found an empty line"),
    }
    // `*` alone at the very end: Redis's read error, an unexpected end of the file.
    if l.len() == 1 {
        return Err(nom::Err::Incomplete(nom::Needed::new(1)));
    }
    // atoi: strtol's value as a C int.
    let argc = strtol(&l[1..]) as i32;
    if argc < 1 {
        return fail(i, format!("invalid argument count '{}'", shown(head)));
    }
    let anomaly = (!canonical(l)).then(|| format!("argument count line '{}' read as {argc}", shown(head)));
    arguments(rest, argc as u64, anomaly)
}

/// The `argc` arguments of a command whose header has been read.
fn arguments(mut rest: Input<'_>, argc: u64, mut anomaly: Option<String>) -> PResult<'_, Item<'_>> {
    let mut argv = Vec::with_capacity(argc.min(1024) as usize);
    for _ in 0..argc {
        let (r, arg) = argument(rest, &mut anomaly)?;
        argv.push(arg);
        rest = r;
    }
    Ok((rest, Item::Command(argv, anomaly)))
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
            Ok((rest, Item::Command(argv, _))) => Some((argv, rest.offset())),
            _ => None,
        }
    }

    /// What can be read of a command at `pos` that may be damaged or cut: its argument
    /// count and the arguments that parse whole, in order. None when no `*<count>` line
    /// starts there.
    pub fn partial_at(data: &'a [u8], pos: usize) -> Option<(u64, Vec<&'a [u8]>)> {
        let input = Input::at(data.get(pos..)?, pos);
        let (mut rest, head) = fgets(input).ok()?;
        if head.bytes().first() != Some(&b'*') {
            return None;
        }
        let argc = u64::try_from(strtol(&head.bytes()[1..]) as i32).ok().filter(|&n| n >= 1)?;
        let mut argv = Vec::new();
        let mut anomaly = None;
        while (argv.len() as u64) < argc {
            let Ok((r, arg)) = argument(rest, &mut anomaly) else { break };
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
                Item::Command(argv, anomaly) => {
                    let cmd = Command { offset: start, end: self.pos, db: self.db, ts: self.ts, argv, anomaly };
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
        // The two bytes after an argument are skipped whatever they are, as Redis does.
        let lenient = CommandReader::new(b"*1\r\n$3\r\nGETxx").next().unwrap().unwrap();
        assert_eq!(lenient.argv, vec![&b"GET"[..]]);
        assert!(lenient.anomaly.is_some_and(|a| a.contains("not followed by CRLF")));
        assert!(matches!(err(b"*1\r\n%3\r\n"), AofError::Malformed { offset: 4, .. }));
        assert!(matches!(err(b"x"), AofError::Malformed { offset: 0, .. }));
        assert!(err(b"*2").is_truncated());
        assert!(matches!(err(b"x\r\n"), AofError::Malformed { offset: 0, .. }));
        assert!(matches!(err(b"*0\r\n"), AofError::Malformed { offset: 0, .. }));
        assert!(matches!(err(b"*1\r\n$-1\r\n"), AofError::Malformed { offset: 4, .. }));
        assert!(err(b"*1\r\n$99999999999\r\nab\r\n").is_truncated());
        assert!(err(b"*1\r\n$99999999999999999999999\r\nab\r\n").offset() == 4);
    }

    #[test]
    fn headers_outside_the_fast_path_read_as_redis_reads_them() {
        // LF-only headers, leading zeros, signs, blanks and trailing bytes after the number
        // are read as fgets + atoi/strtol read them, and noted.
        for data in [
            &b"*2\n$3\nGET\r\n$1\r\nk\r\n"[..],
            b"*2\r\n$03\r\nGET\r\n$1\r\nk\r\n",
            b"*02\r\n$+3\r\nGET\r\n$1x\r\nk\r\n",
            b"* 2\r\n$ 3\r\nGET\r\n$1\r\nk\r\n",
        ] {
            let c = CommandReader::new(data).next().unwrap().unwrap();
            assert_eq!(c.to_argv(), vec![b"GET".to_vec(), b"k".to_vec()], "{data:?}");
            assert!(c.anomaly.is_some(), "{data:?}");
        }
        // A length line with no digits reads as 0.
        let c = CommandReader::new(b"*1\r\n$x\r\n\r\n").next().unwrap().unwrap();
        assert_eq!(c.argv, vec![&b""[..]]);
        let (cmds, _) = read_all(b"*1\r\n$0\r\n\r\n");
        assert_eq!(cmds, vec![vec![Vec::<u8>::new()]]);
        // A length no allocation holds: Redis aborts.
        assert!(matches!(err(b"*1\r\n$1000000000000000000\r\nab\r\n"), AofError::Malformed { offset: 4, .. }));
        // A header longer than fgets reads at once is cut there.
        let mut long = b"*1".to_vec();
        long.extend(std::iter::repeat_n(b' ', 2000));
        long.extend_from_slice(b"\r\n$4\r\nPING\r\n");
        assert!(err(&long).is_truncated() || matches!(err(&long), AofError::Malformed { .. }));
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
