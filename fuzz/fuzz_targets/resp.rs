//! Arbitrary bytes as a client's input to the server's request parser, read in pieces of
//! arbitrary sizes: no panic, the position only moves forward, and the commands (or the
//! protocol error) are the same as when the whole input is parsed at once.
#![no_main]

use ferrokv_server::resp::{Limits, Parsed, Parser};
use libfuzzer_sys::fuzz_target;

/// Parse `data` arriving `step` bytes at a time; the commands, then the error if any.
fn parse_in_pieces(data: &[u8], step: usize, lim: Limits) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
    let mut parser = Parser::default();
    let mut buf = Vec::new();
    let mut pos = 0;
    let mut out = Vec::new();
    let mut fed = 0;
    loop {
        let before = pos;
        match parser.parse(&buf, &mut pos, lim) {
            Parsed::Command(argv) => {
                assert!(pos >= before && pos <= buf.len());
                out.push(argv.iter().map(|a| a.to_vec()).collect());
                parser.recycle(argv);
            }
            Parsed::Error(e) => return (out, Some(e)),
            Parsed::Incomplete => {
                assert!(pos >= before && pos <= buf.len());
                if fed == data.len() {
                    return (out, None);
                }
                let next = (fed + step).min(data.len());
                buf.extend_from_slice(&data[fed..next]);
                fed = next;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let lim = Limits { proto_max_bulk_len: 512 * 1024 * 1024, unauthenticated: first & 1 == 1 };
    let whole = parse_in_pieces(rest, rest.len().max(1), lim);
    let pieces = parse_in_pieces(rest, usize::from(first >> 1).max(1), lim);
    assert_eq!(whole, pieces);
});
