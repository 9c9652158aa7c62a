//! The ceiling of redis-benchmark on this machine: a loop built like ferrokv-server's (mio,
//! one thread, one read and one write per turn) that parses each command and answers it
//! without running it. bench/server.sh runs it beside both servers, so their rates can be
//! read against what the client and the kernel allow.
//!
//! Usage: `reply_floor PORT`. Replies have the size Redis's would have for redis-benchmark's
//! data (3-byte values): a bulk for GET and the pops, an integer for the pushes and INCR, an
//! array of as many bulks as asked for LRANGE, a two-element array for CONFIG (its start-up
//! query), `+OK` otherwise.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX);

struct Conn {
    sock: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
}

fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1).and_then(|p| p.parse().ok()) {
        Some(p) => p,
        None => {
            eprintln!("usage: reply_floor PORT");
            std::process::exit(2);
        }
    };
    let mut poll = Poll::new()?;
    let mut listener = TcpListener::bind(([127, 0, 0, 1], port).into())?;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns: HashMap<usize, Conn> = HashMap::new();
    let mut next = 0usize;
    let mut events = Events::with_capacity(1024);
    loop {
        match poll.poll(&mut events, None) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            r => r?,
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                while let Ok((mut sock, _)) = listener.accept() {
                    sock.set_nodelay(true)?;
                    poll.registry().register(&mut sock, Token(next), Interest::READABLE)?;
                    conns.insert(next, Conn { sock, input: Vec::new(), output: Vec::new() });
                    next += 1;
                }
                continue;
            }
            let id = ev.token().0;
            let Some(c) = conns.get_mut(&id) else { continue };
            if !serve(c) {
                if let Some(mut c) = conns.remove(&id) {
                    let _ = poll.registry().deregister(&mut c.sock);
                }
            }
        }
    }
}

/// Read what is there, answer every complete command, write. False when the peer left.
fn serve(c: &mut Conn) -> bool {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match c.sock.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                c.input.extend_from_slice(&buf[..n]);
                if n < buf.len() {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    let mut pos = 0;
    let mut args = Vec::new();
    while let Some(end) = parse_command(&c.input[pos..], &mut args) {
        reply(&args, &mut c.output);
        pos += end;
    }
    c.input.drain(..pos);
    // The replies are a few bytes a turn: a full socket is not a case this tool meets.
    let ok = c.sock.write_all(&c.output).is_ok();
    c.output.clear();
    ok
}

/// Append the stand-in reply for a command (see the module comment).
fn reply(args: &[&[u8]], out: &mut Vec<u8>) {
    const VALUE: &[u8] = b"$3\r\nxxx\r\n";
    let name = args.first().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
    match name.as_slice() {
        b"get" | b"lpop" | b"rpop" | b"spop" => out.extend_from_slice(VALUE),
        b"incr" | b"lpush" | b"rpush" | b"sadd" | b"hset" | b"zadd" => out.extend_from_slice(b":1\r\n"),
        b"config" => out.extend_from_slice(b"*2\r\n$0\r\n\r\n$0\r\n\r\n"),
        b"lrange" => {
            let int = |i: usize| args.get(i).and_then(|a| std::str::from_utf8(a).ok()?.parse::<i64>().ok());
            let n = match (int(2), int(3)) {
                (Some(start), Some(stop)) if stop >= start && start >= 0 => stop - start + 1,
                _ => 0,
            };
            out.extend_from_slice(format!("*{n}\r\n").as_bytes());
            for _ in 0..n {
                out.extend_from_slice(VALUE);
            }
        }
        _ => out.extend_from_slice(b"+OK\r\n"),
    }
}

/// The length of the first complete command in `buf` (multibulk or inline), its arguments
/// in `args`; None while it is incomplete.
fn parse_command<'a>(buf: &'a [u8], args: &mut Vec<&'a [u8]>) -> Option<usize> {
    args.clear();
    let line_end = |from: usize| buf.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|i| from + i);
    if buf.first() != Some(&b'*') {
        let nl = buf.iter().position(|&b| b == b'\n')?;
        args.extend(buf[..nl].split(|b| b.is_ascii_whitespace()).filter(|a| !a.is_empty()));
        return Some(nl + 1);
    }
    let end = line_end(0)?;
    let count: usize = std::str::from_utf8(&buf[1..end]).ok()?.parse().ok()?;
    let mut pos = end + 2;
    for _ in 0..count {
        if buf.get(pos) != Some(&b'$') {
            return None;
        }
        let end = line_end(pos)?;
        let len: usize = std::str::from_utf8(&buf[pos + 1..end]).ok()?.parse().ok()?;
        let body = end + 2;
        if buf.len() < body + len + 2 {
            return None;
        }
        args.push(&buf[body..body + len]);
        pos = body + len + 2;
    }
    Some(pos)
}
