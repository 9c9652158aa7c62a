//! DEBUG subcommands beyond admin.rs's: POPULATE, LOADAOF, and the ones accepted for
//! compatibility (QUICKLIST-PACKED-THRESHOLD, JMAP, CHANGE-REPL-ID).

use ferrokv::command::parse_i64;
use ferrokv::value::{Str, Value};
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;

/// DEBUG POPULATE count [prefix] [size]: `prefix:N` (default `key:N`) set to `value:N`,
/// padded with zero bytes (or cut) to `size`; existing keys are left alone. Nothing is
/// propagated, as in Redis.
pub fn populate(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if !(3..=5).contains(&a.len()) {
        return crate::cmd::sub_arity("debug", &a[1]);
    }
    let positive = |b: &[u8]| parse_i64(b).filter(|n| *n >= 0);
    let Some(count) = positive(&a[2]) else {
        return Reply::err("ERR value is out of range, must be positive");
    };
    let size = match a.get(4) {
        Some(b) => match positive(b) {
            Some(n) => n as usize,
            None => return Reply::err("ERR value is out of range, must be positive"),
        },
        None => 0,
    };
    let prefix: &[u8] = a.get(3).map_or(b"key", |p| p.as_slice());
    let lru = s.engine.clock.lru();
    let Some(db) = s.engine.ks.dbs.get_mut(c.session.db) else { return Reply::ok() };
    db.reserve(count as usize);
    let mut key = Vec::new();
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.extend_from_slice(format!(":{j}").as_bytes());
        let mut val = format!("value:{j}").into_bytes();
        if size > 0 {
            val.resize(size, 0);
        }
        db.add_new(&key, Value::Str(Str::plain(&val)), lru);
    }
    Reply::ok()
}
