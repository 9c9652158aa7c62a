//! Clients blocked in XREAD / XREADGROUP (Redis 7.0's BLOCKED_STREAM): when one of
//! their keys is ready, each is served in the order it blocked, with the answer Redis
//! 7.0 gives (blocked.c, serveClientsBlockedOnStreamKey and
//! unblockDeletedStreamReadgroupClients):
//!
//! - XREAD: served once the stream has entries after the ID it waits for (`$` was
//!   resolved when it blocked). A deleted key, or one that is no longer a stream, keeps
//!   it waiting.
//! - XREADGROUP `>`: served once the stream has entries after its group's last ID; the
//!   group gone answers `-NOGROUP`, the key deleted or no longer a stream `-UNBLOCKED`.
//!
//! Serving runs the command's non-blocking form on that one key through the engine
//! (`XREAD COUNT n STREAMS key id`, `XREADGROUP GROUP g c COUNT n [NOACK] STREAMS key >`),
//! so the reply, the events and what reaches the AOF (XCLAIM ... / XGROUP SETID /
//! XGROUP CREATECONSUMER) are those of a served XREADGROUP. COUNT is the client's, or 1000
//! when it gave none (Redis's XREAD_BLOCKED_DEFAULT_COUNT).

use ferrokv::command::catalog::ServerVersion;
use ferrokv::format::rdb::StreamId;
use ferrokv::value::Value;
use ferrokv::Reply;

use crate::blocking::{Op, StreamRead};
use crate::server::Server;

/// What a blocked stream reader gets when its key is ready.
enum Outcome {
    Wait,
    Error(&'static str),
    Serve(Vec<Vec<u8>>),
}

impl Server {
    /// Serve (or fail) the XREAD / XREADGROUP clients blocked on a ready key.
    pub fn serve_stream_waiters(&mut self, db: usize, key: &[u8]) {
        let ids = self.blocking.waiters(db, key);
        if ids.is_empty() {
            return;
        }
        if self.key_is_expired(db, key) && self.engine.config().version.behaves_as() < ServerVersion::Redis72 {
            // Deleted as a read would, so the XREADGROUP clients learn it is gone (7.2 on,
            // a reader's own command finds it expired: stream_outcome).
            self.expire_now(db, key);
        }
        for id in ids {
            let outcome = match self.clients.get(&id).and_then(|c| c.blocked.as_ref()) {
                Some(b) => match &b.op {
                    Op::Stream(read) => {
                        let at = b.keys.iter().position(|k| k.as_slice() == key);
                        let plus = at.and_then(|i| read.last_entry.get(i).copied()).unwrap_or(false);
                        let after = at.and_then(|i| read.after.get(i).copied()).flatten();
                        self.stream_outcome(db, key, read, after, plus)
                    }
                    _ => Outcome::Wait,
                },
                None => Outcome::Wait,
            };
            if matches!(outcome, Outcome::Wait) {
                continue;
            }
            let Some(mut c) = self.clients.remove(&id) else { continue };
            match outcome {
                Outcome::Wait => {}
                Outcome::Error(text) => {
                    let e = Reply::error(text.to_string());
                    self.unblock(&mut c);
                    self.count_unblock_error(&e);
                    self.count_failed_call(&c.last_cmd);
                    c.reply(&e);
                    self.woken.insert(id);
                }
                Outcome::Serve(argv) => {
                    let r = self.engine.execute(&mut c.session, &argv);
                    self.touch_modified(&mut c);
                    self.deliver_events(Some(&mut c));
                    if !matches!(r, Reply::NilArray) {
                        self.unblock_served(&mut c);
                        if r.is_error() {
                            self.count_unblock_error(&r);
                            self.count_failed_call(&c.last_cmd);
                        }
                        c.reply(&r);
                        self.woken.insert(id);
                    }
                }
            }
            self.clients.insert(id, c);
        }
    }

    /// Decide what a blocked reader gets from `key` as it is now (`plus`: XREAD `+`).
    fn stream_outcome(&self, db: usize, key: &[u8], read: &StreamRead, after: Option<StreamId>, plus: bool) -> Outcome {
        let count = read.count.to_string().into_bytes();
        let arg = |s: &str| s.as_bytes().to_vec();
        let group_read = |group: &[u8], consumer: &[u8]| {
            let mut argv =
                vec![arg("XREADGROUP"), arg("GROUP"), group.to_vec(), consumer.to_vec(), arg("COUNT"), count.clone()];
            if read.noack {
                argv.push(arg("NOACK"));
            }
            argv.extend([arg("STREAMS"), key.to_vec(), arg(">")]);
            argv
        };
        // From 7.2 a reader whose key or group went away runs its command again, which
        // answers the error (NOGROUP, WRONGTYPE) as it would have at first.
        let rerun = self.engine.config().version.behaves_as() >= ServerVersion::Redis72;
        let live = || !self.key_is_expired(db, key);
        let stream = match self.engine.keyspace().dbs.get(db).and_then(|d| d.get(key)).map(|s| &s.value) {
            Some(Value::Stream(s)) if live() => s,
            _ => {
                return match &read.group {
                    // XREAD waits for the key to come back; XREADGROUP's group is gone with it.
                    None => Outcome::Wait,
                    Some((group, consumer)) if rerun => Outcome::Serve(group_read(group, consumer)),
                    Some(_) => Outcome::Error("UNBLOCKED the stream key no longer exists"),
                };
            }
        };
        let last = stream.last_entry().map(|(id, _)| id);
        match &read.group {
            Some((group, consumer)) => {
                let Some(g) = stream.groups.get(group.as_slice()) else {
                    if rerun {
                        return Outcome::Serve(group_read(group, consumer));
                    }
                    return Outcome::Error("NOGROUP the consumer group this client was blocked on no longer exists");
                };
                if last.is_none_or(|l| l <= g.last_id) {
                    return Outcome::Wait;
                }
                Outcome::Serve(group_read(group, consumer))
            }
            None => {
                let after = after.unwrap_or(StreamId { ms: 0, seq: 0 });
                if last.is_none_or(|l| l <= after) {
                    return Outcome::Wait;
                }
                let from = if plus { arg("+") } else { after.to_string().into_bytes() };
                Outcome::Serve(vec![arg("XREAD"), arg("COUNT"), count, arg("STREAMS"), key.to_vec(), from])
            }
        }
    }

    /// An error reply ending a wait, in INFO's error counters.
    pub fn count_unblock_error(&mut self, e: &Reply) {
        let Reply::Error(text) = e else { return };
        self.stats.error_replies += 1;
        self.stats.count_error(text);
    }

    /// The blocked command of `c` failed (commandstats' failed_calls): served with an
    /// error, or ended by CLIENT UNBLOCK (even TIMEOUT, as Redis 7.0 counts it).
    pub fn count_failed_call(&mut self, last_cmd: &str) {
        if let Some(found) = crate::cmd::lookup(last_cmd.as_bytes()) {
            self.stats.commands.entry(crate::stats::StatKey::command(found.name)).or_default().failed += 1;
        }
    }
}
