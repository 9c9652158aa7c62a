//! Replies, and their RESP2/RESP3 bytes.

use std::borrow::Cow;

/// A command's reply, independent of the protocol version.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `+text`
    Simple(Cow<'static, str>),
    /// `-text`; the text starts with its code (`ERR`, `WRONGTYPE`, ...).
    Error(Cow<'static, str>),
    Int(i64),
    Bulk(Vec<u8>),
    /// The null bulk string (`$-1` / `_`).
    Nil,
    /// The null array (`*-1` / `_`).
    NilArray,
    Array(Vec<Reply>),
    /// A RESP3 map; a flat array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Pairs (HRANDFIELD WITHVALUES, ZRANGE WITHSCORES): a flat array in RESP2, an
    /// array of two-element arrays in RESP3.
    Pairs(Vec<(Reply, Reply)>),
    /// A RESP3 map; in RESP2 an array of two-element arrays (XREAD's streams).
    KeyedArrays(Vec<(Reply, Reply)>),
    /// A RESP3 set; an array in RESP2.
    Set(Vec<Reply>),
    /// A RESP3 double; a bulk string in RESP2.
    Double(f64),
    /// A double as Redis's human long double text (GEOPOS's coordinates): the same text
    /// as a RESP3 double or a RESP2 bulk string.
    HumanDouble(String),
    /// A RESP3 boolean; 1/0 in RESP2.
    Bool(bool),
    /// A RESP3 verbatim string of plain text (INFO, CLIENT LIST); a bulk string in RESP2.
    Verbatim(Vec<u8>),
    /// A RESP3 big number (`(digits`); a bulk string in RESP2 (scripts return them).
    BigNumber(Vec<u8>),
    /// An array of bulk strings held as its RESP bytes (the same in RESP2 and RESP3): a
    /// range of a list or a hash's fields is written out with no allocation per element.
    /// Equal to the `Array` of `Bulk`s it stands for.
    BulkArray(BulkArray),
}

/// The elements of an array of bulk strings, encoded (`$len\r\nbytes\r\n` each).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BulkArray {
    resp: Vec<u8>,
    len: usize,
}

impl BulkArray {
    pub fn push(&mut self, b: &[u8]) {
        bulk(&mut self.resp, b);
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, decoded from the bytes `push` wrote.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut rest = self.resp.as_slice();
        std::iter::from_fn(move || {
            let nl = rest.iter().position(|&b| b == b'\n')?;
            let n: usize = std::str::from_utf8(&rest[1..nl - 1]).ok()?.parse().ok()?;
            let item = &rest[nl + 1..nl + 1 + n];
            rest = &rest[nl + 3 + n..];
            Some(item)
        })
    }
}

/// Replies are equal when they stand for the same thing: a `BulkArray` equals the
/// `Array` of `Bulk`s it holds.
impl PartialEq for Reply {
    fn eq(&self, other: &Reply) -> bool {
        use Reply::*;
        match (self, other) {
            (Simple(a), Simple(b)) | (Error(a), Error(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (Bulk(a), Bulk(b)) | (Verbatim(a), Verbatim(b)) | (BigNumber(a), BigNumber(b)) => a == b,
            (Nil, Nil) | (NilArray, NilArray) => true,
            (Array(a), Array(b)) | (Set(a), Set(b)) => a == b,
            (Map(a), Map(b)) | (Pairs(a), Pairs(b)) | (KeyedArrays(a), KeyedArrays(b)) => a == b,
            (Double(a), Double(b)) => a == b,
            (Bool(a), Bool(b)) => a == b,
            (BulkArray(a), BulkArray(b)) => a == b,
            (BulkArray(a), Array(v)) | (Array(v), BulkArray(a)) => {
                a.len == v.len() && a.iter().zip(v).all(|(x, r)| matches!(r, Bulk(y) if x == y.as_slice()))
            }
            _ => false,
        }
    }
}

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl Reply {
    pub fn ok() -> Reply {
        Reply::Simple(Cow::Borrowed("OK"))
    }

    pub fn simple(s: &'static str) -> Reply {
        Reply::Simple(Cow::Borrowed(s))
    }

    /// A HELP subcommand's reply, as Redis's addReplyHelp makes it: the usage line of
    /// `command`, `lines`, then the HELP entry (worded "Prints" before 7.2, "Print" after).
    pub fn help(command: &str, lines: &[&'static str], version: crate::command::catalog::ServerVersion) -> Reply {
        use crate::command::catalog::ServerVersion;
        let usage = format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
        let last = if version.behaves_as() >= ServerVersion::Redis72 {
            "    Print this help."
        } else {
            "    Prints this help."
        };
        let mut out = Vec::with_capacity(lines.len() + 3);
        out.push(Reply::Simple(usage.into()));
        out.extend(lines.iter().map(|l| Reply::simple(l)));
        out.push(Reply::simple("HELP"));
        out.push(Reply::simple(last));
        Reply::Array(out)
    }

    pub fn bulk(b: &[u8]) -> Reply {
        Reply::Bulk(b.to_vec())
    }

    /// An error with a static text (code included).
    pub fn err(s: &'static str) -> Reply {
        Reply::Error(Cow::Borrowed(s))
    }

    pub fn error(s: String) -> Reply {
        Reply::Error(Cow::Owned(s))
    }

    pub fn wrongtype() -> Reply {
        Reply::err(WRONGTYPE)
    }

    pub fn syntax() -> Reply {
        Reply::err("ERR syntax error")
    }

    pub fn not_integer() -> Reply {
        Reply::err("ERR value is not an integer or out of range")
    }

    pub fn not_float() -> Reply {
        Reply::err("ERR value is not a valid float")
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// An array of bulk strings.
    pub fn bulks<I, B>(items: I) -> Reply
    where
        I: IntoIterator<Item = B>,
        B: AsRef<[u8]>,
    {
        let mut a = BulkArray::default();
        for b in items {
            a.push(b.as_ref());
        }
        Reply::BulkArray(a)
    }

    /// Append the RESP bytes of this reply (`resp3` selects the protocol), doubles as
    /// Redis 7.0 writes them.
    pub fn write_resp(&self, out: &mut Vec<u8>, resp3: bool) {
        self.write_resp_in(out, resp3, Doubles::Redis70);
    }

    /// [`Reply::write_resp`] with doubles written in `doubles`' style.
    pub fn write_resp_in(&self, out: &mut Vec<u8>, resp3: bool, doubles: Doubles) {
        match self {
            Reply::Simple(s) => status_line(out, b'+', s),
            Reply::Error(s) => status_line(out, b'-', s),
            Reply::Int(i) => int_line(out, b':', *i),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
            Reply::NilArray => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
            Reply::Array(v) => {
                int_line(out, b'*', v.len() as i64);
                for r in v {
                    r.write_resp_in(out, resp3, doubles);
                }
            }
            Reply::BulkArray(a) => {
                int_line(out, b'*', a.len as i64);
                out.extend_from_slice(&a.resp);
            }
            Reply::Set(v) => {
                int_line(out, if resp3 { b'~' } else { b'*' }, v.len() as i64);
                for r in v {
                    r.write_resp_in(out, resp3, doubles);
                }
            }
            Reply::Map(v) => {
                if resp3 {
                    int_line(out, b'%', v.len() as i64);
                } else {
                    int_line(out, b'*', (v.len() * 2) as i64);
                }
                for (k, x) in v {
                    k.write_resp_in(out, resp3, doubles);
                    x.write_resp_in(out, resp3, doubles);
                }
            }
            Reply::KeyedArrays(v) => {
                int_line(out, if resp3 { b'%' } else { b'*' }, v.len() as i64);
                for (k, x) in v {
                    if !resp3 {
                        out.extend_from_slice(b"*2\r\n");
                    }
                    k.write_resp_in(out, resp3, doubles);
                    x.write_resp_in(out, resp3, doubles);
                }
            }
            Reply::Pairs(v) => {
                let n = if resp3 { v.len() } else { v.len() * 2 };
                int_line(out, b'*', n as i64);
                for (k, x) in v {
                    if resp3 {
                        out.extend_from_slice(b"*2\r\n");
                    }
                    k.write_resp_in(out, resp3, doubles);
                    x.write_resp_in(out, resp3, doubles);
                }
            }
            Reply::Double(d) => {
                let t = doubles.reply(*d);
                if resp3 {
                    line(out, b',', t.as_bytes());
                } else {
                    bulk(out, t.as_bytes());
                }
            }
            Reply::HumanDouble(t) => {
                if resp3 {
                    line(out, b',', t.as_bytes());
                } else {
                    bulk(out, t.as_bytes());
                }
            }
            Reply::Verbatim(b) => {
                if resp3 {
                    int_line(out, b'=', (b.len() + 4) as i64);
                    out.extend_from_slice(b"txt:");
                    out.extend_from_slice(b);
                    out.extend_from_slice(b"\r\n");
                } else {
                    bulk(out, b);
                }
            }
            Reply::BigNumber(b) => {
                if resp3 {
                    line(out, b'(', b);
                } else {
                    bulk(out, b);
                }
            }
            Reply::Bool(b) => {
                if resp3 {
                    out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
        }
    }

    /// RESP2 bytes (handy in tests).
    pub fn to_resp2(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write_resp(&mut v, false);
        v
    }
}

/// A line holding a number (lengths, counts, integers), formatted without allocating.
fn int_line(out: &mut Vec<u8>, tag: u8, n: i64) {
    line(out, tag, itoa::Buffer::new().format(n).as_bytes());
}

fn line(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// A status or error line. An error text that quotes arguments may hold CR or LF; like
/// Redis's formatted errors, they become spaces, so the reply stays one line.
fn status_line(out: &mut Vec<u8>, tag: u8, text: &str) {
    out.push(tag);
    out.extend(text.bytes().map(|c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    int_line(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

pub use crate::format::double::{fmt_double, fmt_g, Doubles};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_array_is_the_array_of_bulks_it_stands_for() {
        let items: [&[u8]; 5] = [b"", b"a", b"line\r\nbreak", &[0, 255, b'$', b'\n'], &[b'x'; 300]];
        let fast = Reply::bulks(items);
        let slow = Reply::Array(items.iter().map(|b| Reply::bulk(b)).collect());
        for resp3 in [false, true] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            fast.write_resp(&mut a, resp3);
            slow.write_resp(&mut b, resp3);
            assert_eq!(a, b);
        }
        assert_eq!(fast, slow);
        assert_eq!(slow, fast);
        let Reply::BulkArray(a) = &fast else { panic!("bulks builds a BulkArray") };
        assert_eq!(a.iter().collect::<Vec<_>>(), items);
        assert_ne!(Reply::bulks([b"a"]), Reply::Array(vec![Reply::Int(1)]));
        assert_eq!(Reply::bulks(Vec::<&[u8]>::new()).to_resp2(), b"*0\r\n");
    }

    #[test]
    fn doubles_print_as_printf_g17() {
        assert_eq!(fmt_double(1.1), "1.1000000000000001");
        assert_eq!(fmt_double(1.5), "1.5");
        assert_eq!(fmt_double(3.0), "3");
        assert_eq!(fmt_double(-0.0), "-0");
        assert_eq!(fmt_double(1e20), "1e+20");
        assert_eq!(fmt_double(1.0e-5), "1.0000000000000001e-05");
        assert_eq!(fmt_double(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(fmt_double(0.0001), "0.0001");
        assert_eq!(fmt_double(f64::INFINITY), "inf");
    }

    #[test]
    fn resp2_and_resp3() {
        let r = Reply::Map(vec![(Reply::bulk(b"a"), Reply::Double(1.5))]);
        assert_eq!(r.to_resp2(), b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n");
        let mut v = Vec::new();
        r.write_resp(&mut v, true);
        assert_eq!(v, b"%1\r\n$1\r\na\r\n,1.5\r\n");
    }

    #[test]
    fn pairs_are_flat_in_resp2_and_nested_in_resp3() {
        let r = Reply::Pairs(vec![(Reply::bulk(b"f"), Reply::bulk(b"v"))]);
        assert_eq!(r.to_resp2(), b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
        let mut v = Vec::new();
        r.write_resp(&mut v, true);
        assert_eq!(v, b"*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
    }
}
