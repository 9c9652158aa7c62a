//! The request parser: RESP multibulk and inline commands, with Redis 7.0's limits and
//! protocol error texts. It keeps its place between reads so a large bulk arriving in
//! many pieces is not parsed again from its start.

use ferrokv::command::Argv;

/// Longest inline request, or count line, without its newline (Redis's PROTO_INLINE_MAX_SIZE).
pub const INLINE_MAX: usize = 64 * 1024;

/// What the parser found at the front of the buffer.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// A whole command (possibly empty: a blank inline line or `*0`).
    Command(Argv),
    /// More bytes are needed.
    Incomplete,
    /// A protocol error: reply with this text, then close the connection.
    Error(String),
}

/// Limits that depend on the server and the client.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub proto_max_bulk_len: i64,
    /// The client has not authenticated while a password is required.
    pub unauthenticated: bool,
}

impl Limits {
    /// Whether a bulk of up to 9 digits needs no limit check: the bulk length limit is
    /// above them and no unauthenticated limit applies.
    fn fits_unchecked(&self) -> bool {
        !self.unauthenticated && self.proto_max_bulk_len >= 999_999_999
    }
}

/// The common `$<1-9 digits>\r\n` bulk header at `pos`: its length and where the bulk
/// starts. None for anything else (incomplete, long or malformed: the general path).
#[inline]
fn short_bulk_len(buf: &[u8], pos: usize) -> Option<(usize, usize)> {
    let rest = buf.get(pos..)?;
    if rest.first() != Some(&b'$') {
        return None;
    }
    let mut n = 0usize;
    for (i, &b) in rest.iter().enumerate().skip(1).take(10) {
        match b {
            b'0'..=b'9' if i < 10 => n = n * 10 + usize::from(b - b'0'),
            // A leading zero ("$03") is not canonical: the general path refuses it.
            b'\r' if i > 1 && (i == 2 || rest[1] != b'0') => {
                return (rest.get(i + 1) == Some(&b'\n')).then_some((n, pos + i + 2));
            }
            _ => return None,
        }
    }
    None
}

/// Where the parser is inside a multibulk request.
#[derive(Debug, Default)]
pub struct Parser {
    /// Arguments still expected (0: at the start of a request).
    remaining: usize,
    /// Length of the bulk being read (None: its `$` line is next).
    bulk_len: Option<usize>,
    argv: Argv,
    /// Argument buffers of earlier commands, reused: most commands then parse with no
    /// allocation (and no free afterwards).
    pool: Vec<Vec<u8>>,
}

/// Buffers larger than this are not kept for reuse (a big value would pin its memory).
const POOLED_MAX: usize = 4096;
/// At most this many spare buffers.
const POOL_LEN: usize = 64;

impl Parser {
    /// Parse one request from `buf[*pos..]`, advancing `*pos` past what was consumed.
    pub fn parse(&mut self, buf: &[u8], pos: &mut usize, lim: Limits) -> Parsed {
        if self.remaining == 0 {
            let Some(&first) = buf.get(*pos) else {
                return Parsed::Incomplete;
            };
            if first != b'*' {
                return parse_inline(buf, pos);
            }
            let Some(line) = line_at(buf, *pos) else {
                if buf.len() - *pos > INLINE_MAX {
                    return Parsed::Error("ERR Protocol error: too big mbulk count string".into());
                }
                return Parsed::Incomplete;
            };
            let count = match ferrokv::command::parse_i64(&buf[*pos + 1..line]) {
                Some(n) if n <= i64::from(i32::MAX) => n,
                _ => return Parsed::Error("ERR Protocol error: invalid multibulk length".into()),
            };
            if count > 10 && lim.unauthenticated {
                return Parsed::Error("ERR Protocol error: unauthenticated multibulk length".into());
            }
            *pos = line + 2;
            if count <= 0 {
                return Parsed::Command(Vec::new());
            }
            self.remaining = count as usize;
            self.argv.clear();
            self.argv.reserve(self.remaining.min(1024));
            self.bulk_len = None;
        }
        while self.remaining > 0 {
            let len = match self.bulk_len {
                Some(n) => n,
                None => {
                    let short = if lim.fits_unchecked() { short_bulk_len(buf, *pos) } else { None };
                    let (n, next) = match short {
                        Some(found) => found,
                        None => match bulk_len_line(buf, *pos, lim) {
                            Ok(found) => found,
                            Err(p) => return p,
                        },
                    };
                    *pos = next;
                    self.bulk_len = Some(n);
                    n
                }
            };
            if buf.len() - *pos < len + 2 {
                return Parsed::Incomplete;
            }
            let arg = &buf[*pos..*pos + len];
            let arg = match self.pool.pop() {
                Some(mut b) => {
                    b.clear();
                    b.extend_from_slice(arg);
                    b
                }
                None => arg.to_vec(),
            };
            self.argv.push(arg);
            *pos += len + 2;
            self.bulk_len = None;
            self.remaining -= 1;
        }
        Parsed::Command(std::mem::take(&mut self.argv))
    }

    /// Take back a command's arguments once it has run, to parse later ones into.
    pub fn recycle(&mut self, mut argv: Argv) {
        for a in argv.drain(..) {
            if self.pool.len() >= POOL_LEN {
                break;
            }
            if a.capacity() <= POOLED_MAX {
                self.pool.push(a);
            }
        }
        if self.argv.capacity() == 0 && argv.capacity() <= POOL_LEN {
            self.argv = argv;
        }
    }

    /// Bytes the request being read still needs, when it is inside a large bulk (so the
    /// buffer can be grown once).
    pub fn pending_bulk(&self) -> Option<usize> {
        self.bulk_len
    }
}

/// A `$<len>` line at `pos` in full generality, with its limits and protocol errors: the
/// length and where the bulk starts.
fn bulk_len_line(buf: &[u8], pos: usize, lim: Limits) -> Result<(usize, usize), Parsed> {
    let Some(line) = line_at(buf, pos) else {
        if buf.len() - pos > INLINE_MAX {
            return Err(Parsed::Error("ERR Protocol error: too big bulk count string".into()));
        }
        return Err(Parsed::Incomplete);
    };
    if buf[pos] != b'$' {
        return Err(Parsed::Error(format!("ERR Protocol error: expected '$', got '{}'", char::from(buf[pos]))));
    }
    let n = match ferrokv::command::parse_i64(&buf[pos + 1..line]) {
        Some(n) if n >= 0 && n <= lim.proto_max_bulk_len => n,
        _ => return Err(Parsed::Error("ERR Protocol error: invalid bulk length".into())),
    };
    if n > 16384 && lim.unauthenticated {
        return Err(Parsed::Error("ERR Protocol error: unauthenticated bulk length".into()));
    }
    Ok((n as usize, line + 2))
}

/// The position of the `\r` ending the line that starts at `pos`, when the `\n` is there too.
fn line_at(buf: &[u8], pos: usize) -> Option<usize> {
    let cr = pos + memchr(b'\r', &buf[pos..])?;
    (cr + 1 < buf.len()).then_some(cr)
}

fn memchr(b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == b)
}

fn parse_inline(buf: &[u8], pos: &mut usize) -> Parsed {
    let rest = &buf[*pos..];
    let Some(nl) = memchr(b'\n', rest) else {
        if rest.len() > INLINE_MAX {
            return Parsed::Error("ERR Protocol error: too big inline request".into());
        }
        return Parsed::Incomplete;
    };
    let line = if nl > 0 && rest[nl - 1] == b'\r' { &rest[..nl - 1] } else { &rest[..nl] };
    match split_args(line) {
        Some(argv) => {
            *pos += nl + 1;
            Parsed::Command(argv)
        }
        None => Parsed::Error("ERR Protocol error: unbalanced quotes in request".into()),
    }
}

pub use ferrokv::format::args::split_args;

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: Limits = Limits { proto_max_bulk_len: 512 * 1024 * 1024, unauthenticated: false };

    fn all(input: &[u8]) -> Vec<Parsed> {
        let mut p = Parser::default();
        let mut pos = 0;
        let mut out = Vec::new();
        loop {
            let r = p.parse(input, &mut pos, LIM);
            let stop = !matches!(r, Parsed::Command(_));
            out.push(r);
            if stop {
                return out;
            }
        }
    }

    fn cmd(args: &[&str]) -> Parsed {
        Parsed::Command(args.iter().map(|a| a.as_bytes().to_vec()).collect())
    }

    #[test]
    fn multibulk_pipelined_and_split() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        assert_eq!(all(input), vec![cmd(&["GET", "k"]), cmd(&["PING"]), Parsed::Incomplete]);
        // Byte by byte: the parser resumes where it stopped.
        let mut p = Parser::default();
        let mut pos = 0;
        let mut got = Vec::new();
        for end in 1..=input.len() {
            while let Parsed::Command(a) = p.parse(&input[..end], &mut pos, LIM) {
                got.push(a);
            }
        }
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn short_bulk_headers_parse_as_the_general_path() {
        // The fast `$<digits>` path and the general one (taken under a bulk limit) agree.
        let slow = Limits { proto_max_bulk_len: 999_999_998, ..LIM };
        for input in [
            &b"*2\r\n$0\r\n\r\n$3\r\nabc\r\n"[..],
            b"*1\r\n$03\r\nabc\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$1\r",
            b"*1\r\n$12345678901\r\n",
            b"*1\r\n$1x\r\n",
        ] {
            let (mut fast_p, mut slow_p) = (Parser::default(), Parser::default());
            let (mut a, mut b) = (0, 0);
            assert_eq!(fast_p.parse(input, &mut a, LIM), slow_p.parse(input, &mut b, slow), "{input:?}");
            assert_eq!(a, b);
        }
    }

    #[test]
    fn inline_commands() {
        assert_eq!(
            all(b"set 'a b' \"c\\x41\\n\"\r\nping\n"),
            vec![cmd(&["set", "a b", "cA\n"]), cmd(&["ping"]), Parsed::Incomplete]
        );
        assert_eq!(all(b"\r\n")[0], cmd(&[]));
        assert_eq!(all(b"set \"a\"b\r\n")[0], Parsed::Error("ERR Protocol error: unbalanced quotes in request".into()));
        assert_eq!(all(b"set \"ab\r\n")[0], Parsed::Error("ERR Protocol error: unbalanced quotes in request".into()));
    }

    #[test]
    fn protocol_errors() {
        let e = |s: &str| Parsed::Error(s.into());
        assert_eq!(all(b"*abc\r\n")[0], e("ERR Protocol error: invalid multibulk length"));
        assert_eq!(all(b"*3000000000\r\n")[0], e("ERR Protocol error: invalid multibulk length"));
        assert_eq!(all(b"*1\r\n:3\r\n")[0], e("ERR Protocol error: expected '$', got ':'"));
        assert_eq!(all(b"*1\r\n$-3\r\n")[0], e("ERR Protocol error: invalid bulk length"));
        assert_eq!(all(b"*1\r\n$600000000\r\n")[0], e("ERR Protocol error: invalid bulk length"));
        assert_eq!(all(b"*-5\r\n*0\r\n")[..2], [cmd(&[]), cmd(&[])]);
        let mut p = Parser::default();
        let unauth = Limits { unauthenticated: true, ..LIM };
        assert_eq!(p.parse(b"*11\r\n", &mut 0, unauth), e("ERR Protocol error: unauthenticated multibulk length"));
        let big = vec![b'a'; INLINE_MAX + 1];
        assert_eq!(all(&big)[0], e("ERR Protocol error: too big inline request"));
    }
}
