//! XREAD / XREADGROUP as clients call them: the engine answers what is there now; with
//! BLOCK and nothing to answer the client blocks (crate::stream_wait serves it later).
//! Inside MULTI (and for clients that may not block) the null array stands, as in Redis;
//! scripts are refused BLOCK by the engine, as Redis 7.0 refuses it (7.4 answers them as a
//! timeout).

use std::time::{Duration, Instant};

use ferrokv::command::stream::{parse_read_id, parse_read_options};
use ferrokv::format::rdb::StreamId;
use ferrokv::value::stream::{id_decr, MIN_ID};
use ferrokv::value::Value;
use ferrokv::Reply;

use crate::blocking::Op;
use crate::blocking::{StreamRead, BLOCKED_DEFAULT_COUNT};
use crate::client::Client;
use crate::server::Server;

pub fn xread(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let r = if c.in_exec { s.engine.call(&mut c.session, a) } else { s.engine.execute(&mut c.session, a) };
    s.touch_modified(c);
    s.deliver_events(Some(c));
    if !matches!(r, Reply::NilArray) || c.in_exec || c.deny_blocking {
        return r;
    }
    // The engine accepted the arguments, so they parse; without BLOCK the null stands.
    let Ok(opts) = parse_read_options(a, false, s.engine.config().version) else { return r };
    let Some(ms) = opts.block_ms else { return r };
    let n = opts.streams(a.len());
    let db = c.session.db;
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(n);
    let mut after: Vec<Option<StreamId>> = Vec::with_capacity(n);
    let mut last_entry: Vec<bool> = Vec::with_capacity(n);
    for k in 0..n {
        let key = &a[opts.streams_arg + k];
        let id = &a[opts.streams_arg + n + k];
        // A key named twice waits for the ID given first (Redis's blockForKeys).
        if keys.contains(key) {
            continue;
        }
        let last_id = || match s.engine.keyspace().dbs.get(db).and_then(|d| d.get(key)).map(|s| &s.value) {
            Some(Value::Stream(st)) => Some(st.last_id),
            _ => None,
        };
        let gt = match id.as_slice() {
            b">" => None,
            b"$" => Some(last_id().unwrap_or(MIN_ID)),
            // Redis 7.4's last entry (the engine refuses `+` to older versions).
            b"+" => Some(last_id().and_then(id_decr).unwrap_or(MIN_ID)),
            other => match parse_read_id(other) {
                Some(id) => Some(id),
                None => return r,
            },
        };
        keys.push(key.clone());
        after.push(gt);
        last_entry.push(id.as_slice() == b"+");
    }
    let count = if opts.count == 0 { BLOCKED_DEFAULT_COUNT } else { opts.count };
    let read = StreamRead { group: opts.group, noack: opts.noack, count, after, last_entry };
    // BLOCK 0 waits forever; a deadline past what Instant holds too.
    let deadline = if ms == 0 { None } else { Instant::now().checked_add(Duration::from_millis(ms as u64)) };
    s.park(c, Op::Stream(Box::new(read)), keys, deadline);
    Reply::Nil
}
