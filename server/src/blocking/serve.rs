//! Serving blocked clients: running a woken client's non-blocking form, parking and
//! unblocking, deadlines.

use std::time::Instant;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::value::Value;
use ferrokv::Reply;

use super::{Blocked, Op};
use crate::client::Client;
use crate::server::Server;

/// A result of running the non-blocking form on one key.
enum Served {
    Reply(Reply),
    Nothing,
}

impl Server {
    /// Run `op` on `key` in `c`'s database through the engine. `argv_for_move` is the
    /// LMOVE argv to propagate when served at once (the client's own words).
    fn run_nonblocking(&mut self, c: &mut Client, op: &Op, key: &[u8], immediate: Option<&[Vec<u8>]>) -> Served {
        let db = c.session.db;
        let len_now = match self.engine.keyspace().dbs.get(db).and_then(|d| d.get(key)).map(|s| &s.value) {
            Some(v @ (Value::List(_) | Value::Zset(_))) => v.len() as i64,
            _ => 0,
        };
        let with_count = |name: &str, n: Option<i64>| {
            let mut v = vec![name.as_bytes().to_vec(), key.to_vec()];
            if let Some(n) = n {
                let n = if len_now > 0 { n.min(len_now) } else { n };
                v.push(n.to_string().into_bytes());
            }
            v
        };
        let argv: Vec<Vec<u8>> = match op {
            Op::Pop { left, count } => with_count(if *left { "LPOP" } else { "RPOP" }, *count),
            Op::ZPop { max, count } => with_count(if *max { "ZPOPMAX" } else { "ZPOPMIN" }, *count),
            // Served by crate::stream_wait and crate::replication, never here.
            Op::Stream(_) | Op::Wait { .. } | Op::WaitAof { .. } | Op::Flush { .. } | Op::Shutdown => {
                return Served::Nothing
            }
            Op::Move { dst, from_left, to_left, rpoplpush } => match immediate {
                Some(a) if *rpoplpush => vec![b"RPOPLPUSH".to_vec(), a[1].clone(), a[2].clone()],
                Some(a) => vec![b"LMOVE".to_vec(), a[1].clone(), a[2].clone(), a[3].clone(), a[4].clone()],
                None if *rpoplpush => vec![b"RPOPLPUSH".to_vec(), key.to_vec(), dst.clone()],
                None => {
                    let end = |l: bool| if l { b"left".to_vec() } else { b"right".to_vec() };
                    vec![b"LMOVE".to_vec(), key.to_vec(), dst.clone(), end(*from_left), end(*to_left)]
                }
            },
        };
        let r = if c.in_exec {
            self.engine.call(&mut c.session, &argv)
        } else {
            self.engine.execute(&mut c.session, &argv)
        };
        self.touch_modified(c);
        self.deliver_events(Some(c));
        let k = || Reply::Bulk(key.to_vec());
        match r {
            Reply::Error(_) => Served::Reply(r),
            Reply::Nil | Reply::NilArray => Served::Nothing,
            Reply::Array(v) if v.is_empty() => Served::Nothing,
            Reply::Bulk(item) => match op {
                Op::Move { .. } => Served::Reply(Reply::Bulk(item)),
                _ => Served::Reply(Reply::Array(vec![k(), Reply::Bulk(item)])),
            },
            Reply::Array(items) => match op {
                Op::ZPop { count: None, .. } => {
                    let mut v = vec![k()];
                    v.extend(items);
                    Served::Reply(Reply::Array(v))
                }
                Op::ZPop { count: Some(_), .. } => {
                    // ZPOPMIN with a count answers a flat array in RESP2 terms here; BZMPOP
                    // nests member/score pairs.
                    let mut pairs = Vec::new();
                    let mut it = items.into_iter();
                    while let (Some(m), Some(s)) = (it.next(), it.next()) {
                        pairs.push(Reply::Array(vec![m, s]));
                    }
                    Served::Reply(Reply::Array(vec![k(), Reply::Array(pairs)]))
                }
                _ => Served::Reply(Reply::Array(vec![k(), Reply::Array(items)])),
            },
            Reply::Pairs(pairs) => Served::Reply(Reply::Array(vec![
                k(),
                Reply::Array(pairs.into_iter().map(|(m, s)| Reply::Array(vec![m, s])).collect()),
            ])),
            other => Served::Reply(other),
        }
    }

    /// LMPOP / ZMPOP: the first key with data, or a null array.
    pub fn serve_now(&mut self, c: &mut Client, op: Op, keys: Vec<Vec<u8>>, argv: &[Vec<u8>]) -> Reply {
        for key in &keys {
            if let Served::Reply(r) = self.run_nonblocking(c, &op, key, Some(argv)) {
                return r;
            }
        }
        Reply::NilArray
    }

    /// The first attempt of a blocking command: serve from the first key that has data
    /// (or answer its error); otherwise block `c` (or, inside MULTI, answer the timeout).
    pub fn block_or_serve(
        &mut self,
        c: &mut Client,
        op: Op,
        keys: Vec<Vec<u8>>,
        deadline: Option<Instant>,
        argv: &[Vec<u8>],
    ) -> Reply {
        for key in &keys {
            if let Served::Reply(r) = self.run_nonblocking(c, &op, key, Some(argv)) {
                return r;
            }
        }
        if c.in_exec || c.deny_blocking {
            return op.timeout_reply(false);
        }
        self.park(c, op, keys, deadline);
        Reply::Nil
    }

    /// Block `c` on `keys` (each once, first blocked first) until `deadline`; its reply
    /// comes when it is served, times out or is unblocked.
    pub fn park(&mut self, c: &mut Client, op: Op, keys: Vec<Vec<u8>>, deadline: Option<Instant>) {
        let db = c.session.db;
        let keys = self.blocking.add(c.id, db, keys, deadline);
        if let Op::Flush { job } = op {
            self.blocking.flushes.push((c.id, job));
        }
        self.engine.effects_mut().track_modified = true;
        c.blocked = Some(Blocked { op, db, keys, deadline, argv: Vec::new(), micros: 0 });
        c.raw_reply = true;
    }

    /// Take `c` out of the blocked state (no reply).
    pub fn unblock(&mut self, c: &mut Client) {
        let Some(b) = c.blocked.take() else { return };
        self.blocking.remove(c.id, &b);
    }

    /// Unblock `c` because it was served: Redis logs a blocking command in the slow log
    /// then (with the time its first run took), not when it blocked.
    pub fn unblock_served(&mut self, c: &mut Client) {
        let Some(b) = c.blocked.take() else { return };
        self.blocking.remove(c.id, &b);
        self.note_slow(c, &b.argv, b.micros);
        // Its latency too (INFO latencystats), as Redis counts a blocked command then.
        if let Some(found) = b.argv.first().and_then(|name| crate::cmd::lookup(name)) {
            self.note_latency(found, &b.argv, std::time::Duration::from_micros(b.micros));
        }
    }

    /// Serve the clients waiting on keys that became ready, first blocked first,
    /// until no candidate is left (a served BLMOVE can make its destination ready).
    pub fn serve_ready_keys(&mut self) {
        if !self.blocking.has_ready() {
            return;
        }
        // The time may have moved during the command (DEBUG SLEEP in a transaction): a
        // key that expired meanwhile serves nobody, as Redis re-reads its clock here.
        self.refresh_time();
        while self.blocking.has_ready() {
            let ready = self.blocking.take_ready();
            for (db, key) in ready {
                self.serve_key(db, &key);
                self.serve_stream_waiters(db, &key);
            }
        }
    }

    fn serve_key(&mut self, db: usize, key: &[u8]) {
        let mut skipped: Vec<u64> = Vec::new();
        loop {
            let zset = match self.engine.keyspace().dbs.get(db).and_then(|d| d.get_with_expire(key)) {
                Some((_, t)) if t.is_some_and(|t| self.engine.now_ms() > t) => {
                    // Redis 7.0 deletes it here; 7.2 on leaves it to the next access.
                    if self.engine.config().version.behaves_as() < ServerVersion::Redis72 {
                        self.expire_now(db, key);
                    }
                    return;
                }
                Some((s, _)) => match &s.value {
                    Value::List(l) if !l.is_empty() => false,
                    Value::Zset(z) if !z.is_empty() => true,
                    _ => return,
                },
                None => return,
            };
            let Some(queue) = self.blocking.queue(db, key) else { return };
            let next = queue.iter().copied().find(|id| {
                !skipped.contains(id)
                    && self.clients.get(id).and_then(|c| c.blocked.as_ref()).is_some_and(|b| b.op.wants_zset() == zset)
            });
            let Some(id) = next else { return };
            let Some(mut c) = self.clients.remove(&id) else { return };
            let op = c.blocked.as_ref().map(|b| b.op.clone());
            let Some(op) = op else {
                self.clients.insert(id, c);
                return;
            };
            match self.run_nonblocking(&mut c, &op, key, None) {
                Served::Reply(r) => {
                    if r.is_error() {
                        self.stats.error_replies += 1;
                    }
                    self.unblock_served(&mut c);
                    c.reply(&r);
                    if c.tracking.is_some() {
                        self.tracking_send_pending(&mut c);
                    }
                    self.woken.insert(id);
                }
                Served::Nothing => skipped.push(id),
            }
            self.clients.insert(id, c);
        }
    }

    /// A ready key found expired is deleted as a read lookup would (its DEL propagated,
    /// `expired` fired), as Redis 7.0 does when it serves blocked clients.
    pub(crate) fn expire_now(&mut self, db: usize, key: &[u8]) {
        self.engine.expire_if_needed(db, key);
        self.touch_modified_here();
        self.deliver_events(None);
    }

    /// Answer the clients whose timeout passed.
    pub fn expire_blocked(&mut self) {
        let now = Instant::now();
        while let Some(id) = self.blocking.pop_expired(now) {
            self.end_wait(id, None);
        }
    }

    /// Answer the clients whose blocking FLUSHALL / FLUSHDB the lazyfree thread finished.
    /// True while some still wait (the loop then polls briefly).
    pub fn serve_flush_waits(&mut self) -> bool {
        if self.blocking.flushes.is_empty() {
            return false;
        }
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.blocking.flushes)
            .into_iter()
            .partition(|&(_, job)| ferrokv::keyspace::lazyfree::job_done(job));
        self.blocking.flushes = waiting;
        for (id, _) in done {
            // A client gone or unblocked meanwhile is not blocked any more: nothing to do.
            self.end_wait(id, Some(Reply::ok()));
        }
        !self.blocking.flushes.is_empty()
    }

    /// End the wait of client `id` with the timeout reply, or with `error`. False when
    /// it was not blocked.
    pub fn end_wait(&mut self, id: u64, error: Option<Reply>) -> bool {
        let Some(mut c) = self.clients.remove(&id) else { return false };
        let reply = match &c.blocked {
            Some(b) => error.unwrap_or_else(|| match b.op {
                // WAIT answers how many replicas acknowledged, even when it times out.
                Op::Wait { offset, .. } => Reply::Int(self.replicas.acked(offset) as i64),
                Op::WaitAof { offset, local, .. } => {
                    crate::replication::waitaof_reply(local, self.replicas.fsynced(offset))
                }
                // A flush has nothing to fail: Redis answers OK however its wait ends.
                Op::Flush { .. } => Reply::ok(),
                Op::Shutdown => Reply::err(crate::shutdown::SHUTDOWN_FAILED),
                _ => b.op.timeout_reply(true),
            }),
            None => {
                self.clients.insert(id, c);
                return false;
            }
        };
        self.unblock(&mut c);
        self.count_unblock_error(&reply);
        c.reply(&reply);
        self.clients.insert(id, c);
        self.woken.insert(id);
        true
    }
}

impl Server {
    /// After each command of a client: serve the clients its writes unblocked, deliver
    /// events left by server commands, and check the client's output buffer limit.
    pub fn after_command(&mut self, c: &mut Client) {
        // Not while a busy script lets other clients in: what it wrote so far is not to be
        // seen (its keys are served when it ends, after its own command).
        if self.blocking.is_active() && !self.scripts.busy() {
            if c.last_cmd == "swapdb" {
                self.blocking.all_ready();
            }
            self.serve_ready_keys();
        }
        self.deliver_events(Some(c));
        crate::obuf::enforce(&self.cfg.obuf_limits, c);
    }

    /// A client goes away: its subscriptions and its wait end.
    pub fn forget_client(&mut self, c: &mut Client) {
        self.pubsub_forget(c);
        self.unblock(c);
    }
}
