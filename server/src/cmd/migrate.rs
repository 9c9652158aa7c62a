//! MIGRATE: keys DUMPed here, RESTOREd on another server over a connection kept for 10
//! seconds (Redis's migrate socket cache), deleted here once the target acknowledged them
//! (propagated as DEL), as Redis 7.0's migrateCommand. The I/O is synchronous, bounded by
//! the command's timeout, as in Redis.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::TcpStream;
use std::time::Duration;

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::Reply;

use crate::client::Client;
use crate::net::MigrateTarget;
use crate::server::Server;

/// One key to send: name, TTL in milliseconds (0: none), DUMP payload.
struct Outgoing {
    key: Vec<u8>,
    ttl: i64,
    payload: Vec<u8>,
}

/// How a round with the target went wrong.
struct SocketError {
    writing: bool,
    timed_out: bool,
}

impl SocketError {
    fn of(writing: bool, e: &std::io::Error) -> SocketError {
        SocketError { writing, timed_out: matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) }
    }
}

pub fn migrate(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<(Option<&[u8]>, &[u8])> = None;
    let (mut first_key, mut num_keys) = (3, 1);
    let mut j = 6;
    while j < a.len() {
        let more = a.len() - 1 - j;
        if eq_ic(&a[j], "copy") {
            copy = true;
        } else if eq_ic(&a[j], "replace") {
            replace = true;
        } else if eq_ic(&a[j], "auth") {
            if more < 1 {
                return Reply::syntax();
            }
            j += 1;
            auth = Some((None, &a[j]));
        } else if eq_ic(&a[j], "auth2") {
            if more < 2 {
                return Reply::syntax();
            }
            auth = Some((Some(&a[j + 1]), &a[j + 2]));
            j += 2;
        } else if eq_ic(&a[j], "keys") {
            if !a[3].is_empty() {
                return Reply::err(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                );
            }
            first_key = j + 1;
            num_keys = a.len() - j - 1;
            break;
        } else {
            return Reply::syntax();
        }
        j += 1;
    }
    let (Some(timeout), Some(db)) = (parse_i64(&a[5]), parse_i64(&a[4])) else {
        return Reply::err("ERR value is not an integer or out of range");
    };
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout.unsigned_abs() });
    let keys = collect(s, c, &a[first_key..first_key + num_keys]);
    if keys.is_empty() {
        return Reply::simple("NOKEY");
    }
    let host = String::from_utf8_lossy(&a[1]).into_owned();
    let port = String::from_utf8_lossy(&a[2]).into_owned();
    let mut may_retry = true;
    loop {
        let target = match s.migrate.get(&host, &port, timeout) {
            Ok(t) => t,
            Err(true) if may_retry => {
                may_retry = false;
                continue;
            }
            Err(true) => return Reply::err("IOERR error or timeout writing to target instance"),
            Err(false) => return Reply::err("IOERR error or timeout connecting to the client"),
        };
        match exchange(target, &keys, db, auth, replace, timeout) {
            Ok((acked, error)) => {
                if !copy && !acked.is_empty() {
                    delete(s, c, &acked);
                }
                return match error {
                    Some(e) => {
                        if let Some(t) = s.migrate.get_cached(&host, &port) {
                            t.db = None;
                        }
                        Reply::error(format!("ERR Target instance replied with error: {e}"))
                    }
                    None => {
                        if let Some(t) = s.migrate.get_cached(&host, &port) {
                            t.db = Some(db);
                        }
                        Reply::ok()
                    }
                };
            }
            Err((acked, err, nothing_read)) => {
                s.migrate.close(&host, &port);
                if !copy && !acked.is_empty() {
                    delete(s, c, &acked);
                }
                // Retry once on a fresh connection when nothing was processed (the cached
                // one may have been closed by the target), never after a timeout.
                if nothing_read && may_retry && !err.timed_out {
                    may_retry = false;
                    continue;
                }
                let what = if err.writing { "writing" } else { "reading" };
                return Reply::error(format!("IOERR error or timeout {what} to target instance"));
            }
        }
    }
}

/// The keys that exist, with their TTL and payload (expired ones are not sent).
fn collect(s: &mut Server, c: &mut Client, names: &[Vec<u8>]) -> Vec<Outgoing> {
    let mut out = Vec::new();
    for key in names {
        let Reply::Bulk(payload) = s.engine.call(&mut c.session, &[b"DUMP".to_vec(), key.clone()]) else {
            continue;
        };
        let ttl = match s.engine.call(&mut c.session, &[b"PTTL".to_vec(), key.clone()]) {
            Reply::Int(-1) => 0,
            Reply::Int(t) if t >= 0 => t.max(1),
            _ => continue,
        };
        out.push(Outgoing { key: key.clone(), ttl, payload });
    }
    out
}

type Acked = Vec<Vec<u8>>;

/// Send AUTH, SELECT and the RESTOREs, read the replies. Ok: the keys the target took and
/// the first error it answered; Err: the keys taken before the connection failed, how it
/// failed, and whether no reply at all was read.
fn exchange(
    target: &mut MigrateTarget,
    keys: &[Outgoing],
    db: i64,
    auth: Option<(Option<&[u8]>, &[u8])>,
    replace: bool,
    timeout: Duration,
) -> Result<(Acked, Option<String>), (Acked, SocketError, bool)> {
    let mut cmd = Vec::new();
    if let Some((user, pass)) = auth {
        let mut argv = vec![b"AUTH".to_vec()];
        argv.extend(user.map(<[u8]>::to_vec));
        argv.push(pass.to_vec());
        ferrokv::persist::feed::put_multibulk(&mut cmd, &argv);
    }
    let select = target.db != Some(db);
    if select {
        ferrokv::persist::feed::put_multibulk(&mut cmd, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
    }
    for k in keys {
        let mut argv = vec![b"RESTORE".to_vec(), k.key.clone(), k.ttl.to_string().into_bytes(), k.payload.clone()];
        if replace {
            argv.push(b"REPLACE".to_vec());
        }
        ferrokv::persist::feed::put_multibulk(&mut cmd, &argv);
    }
    let sock = target.conn.get_mut();
    let _ = sock.set_write_timeout(Some(timeout));
    let _ = sock.set_read_timeout(Some(timeout));
    for chunk in cmd.chunks(64 * 1024) {
        if let Err(e) = sock.write_all(chunk) {
            return Err((Vec::new(), SocketError::of(true, &e), true));
        }
    }
    let mut line = String::new();
    let mut read = |conn: &mut BufReader<TcpStream>| -> Result<String, std::io::Error> {
        line.clear();
        match conn.read_line(&mut line) {
            Ok(0) => Err(ErrorKind::UnexpectedEof.into()),
            Ok(_) => Ok(line.trim_end_matches(['\r', '\n']).to_string()),
            Err(e) => Err(e),
        }
    };
    // An error to AUTH or SELECT fails every key; a RESTORE's error only its own.
    let mut first_error = None;
    let mut setup_failed = false;
    for asked in [auth.is_some(), select] {
        if asked {
            match read(&mut target.conn) {
                Ok(reply) => {
                    if let Some(e) = reply.strip_prefix('-') {
                        first_error.get_or_insert_with(|| e.to_string());
                        setup_failed = true;
                    }
                }
                Err(e) => return Err((Vec::new(), SocketError::of(false, &e), true)),
            }
        }
    }
    let mut acked = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        match read(&mut target.conn) {
            Ok(reply) => match reply.strip_prefix('-') {
                Some(e) => {
                    first_error.get_or_insert_with(|| e.to_string());
                }
                None if !setup_failed => acked.push(k.key.clone()),
                None => {}
            },
            // The target's error was the answer; a later failure does not replace it.
            Err(_) if first_error.is_some() => return Ok((acked, first_error)),
            Err(e) => return Err((acked, SocketError::of(false, &e), i == 0)),
        }
    }
    Ok((acked, first_error))
}

/// Delete the keys the target took, as one DEL (what MIGRATE propagates).
fn delete(s: &mut Server, c: &mut Client, keys: &[Vec<u8>]) {
    let mut argv = vec![b"DEL".to_vec()];
    argv.extend(keys.iter().cloned());
    if c.in_exec {
        s.engine.call(&mut c.session, &argv);
    } else {
        s.engine.execute(&mut c.session, &argv);
    }
}
