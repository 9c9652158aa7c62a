//! SLOWLOG GET [count] | LEN | RESET | HELP over crate::slowlog.

use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;

const HELP: &[&str] = &[
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
];

pub fn slowlog(s: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = a[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"help" if a.len() == 2 => Reply::help("SLOWLOG", HELP, crate::version::version()),
        b"reset" if a.len() == 2 => {
            s.slowlog.reset();
            Reply::ok()
        }
        b"len" if a.len() == 2 => Reply::Int(s.slowlog.len() as i64),
        b"get" if a.len() <= 3 => {
            let count = match a.get(2).map(|c| ferrokv::command::parse_i64(c)) {
                None => 10,
                Some(None) => return Reply::not_integer(),
                // Redis 6.2 reads any negative count as "all"; 7.0 only -1.
                Some(Some(n)) if n < 0 && (n == -1 || crate::version::version().is_redis62()) => usize::MAX,
                Some(Some(n)) if n < 0 => return Reply::err("ERR count should be greater than or equal to -1"),
                Some(Some(n)) => n as usize,
            };
            Reply::Array(
                s.slowlog
                    .newest(count)
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(e.id as i64),
                            Reply::Int(e.time),
                            Reply::Int(e.micros as i64),
                            Reply::Array(e.argv.iter().map(|x| Reply::Bulk(x.clone())).collect()),
                            Reply::Bulk(e.peer.clone().into_bytes()),
                            Reply::Bulk(e.name.clone()),
                        ])
                    })
                    .collect(),
            )
        }
        _ => Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
            String::from_utf8_lossy(&a[1][..a[1].len().min(128)])
        )),
    }
}
