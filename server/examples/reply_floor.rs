//! The ceiling of redis-benchmark on this machine: a loop built like ferrokv-server's (mio,
//! one thread, one read and one write per turn) that parses each command with the server's
//! request parser and answers it without running it. bench/server.sh runs it beside both servers, so their rates can be
//! read against what the client and the kernel allow.
//!
//! Usage: `reply_floor PORT`. Replies have the size Redis's would have for redis-benchmark's
//! data (3-byte values): a bulk for GET and the pops, an integer for the pushes and INCR, an
//! array of as many bulks as asked for LRANGE, a two-element array for CONFIG (its start-up
//! query), `+OK` otherwise.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};

use ferrokv_server::resp::{Limits, Parsed, Parser};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX);

struct Conn {
    sock: TcpStream,
    parser: Parser,
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
                    conns.insert(next, Conn { sock, parser: Parser::default(), input: Vec::new(), output: Vec::new() });
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
    let lim = Limits { proto_max_bulk_len: 512 * 1024 * 1024, unauthenticated: false };
    let mut pos = 0;
    loop {
        match c.parser.parse(&c.input, &mut pos, lim) {
            Parsed::Command(argv) => {
                reply(&argv, &mut c.output);
                c.parser.recycle(argv);
            }
            Parsed::Incomplete => break,
            Parsed::Error(_) => return false,
        }
    }
    c.input.drain(..pos);
    // The replies are a few bytes a turn: a full socket is not a case this tool meets.
    let ok = c.sock.write_all(&c.output).is_ok();
    c.output.clear();
    ok
}

/// Append the stand-in reply for a command (see the module comment).
fn reply(args: &[Vec<u8>], out: &mut Vec<u8>) {
    const VALUE: &[u8] = b"$3\r\nxxx\r\n";
    let name = args.first().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
    match name.as_slice() {
        b"get" | b"lpop" | b"rpop" | b"spop" => out.extend_from_slice(VALUE),
        b"incr" | b"lpush" | b"rpush" | b"sadd" | b"hset" | b"zadd" => out.extend_from_slice(b":1\r\n"),
        b"config" => out.extend_from_slice(b"*2\r\n$0\r\n\r\n$0\r\n\r\n"),
        b"ping" => out.extend_from_slice(b"+PONG\r\n"),
        b"zpopmin" => {
            out.extend_from_slice(b"*2\r\n");
            out.extend_from_slice(VALUE);
            out.extend_from_slice(b"$1\r\n0\r\n");
        }
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
