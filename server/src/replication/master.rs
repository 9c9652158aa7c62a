//! The master side: SYNC/PSYNC, REPLCONF, WAIT/WAITAOF and feeding the stream.

use std::time::{Duration, Instant};

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::keyspace::Keyspace;
use ferrokv::persist::replication::ReplicationFeed;
use ferrokv::Reply;

use super::state::{Attached, LinkState};
use crate::blocking::Op;
use crate::client::Client;
use crate::log::log;
use crate::server::Server;

/// SYNC / PSYNC replid offset: a full resync. PSYNC is answered `+FULLRESYNC replid offset`
/// first; then the snapshot as `$len` and the bytes (no CRLF after them), then the stream.
pub fn sync(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if c.replica {
        // Redis ignores SYNC from a client that is already a replica.
        c.raw_reply = true;
        return Reply::ok();
    }
    if s.link.as_ref().is_some_and(|l| !l.is_up()) {
        return Reply::err("NOMASTERLINK Can't SYNC while not connected with my master");
    }
    let now = s.engine.now_ms();
    // REPLCONF rdb-filter-only: no keys, and the functions only when asked for.
    let filtered = c.rdb_filter.map(|functions| {
        let mut ks = Keyspace::new(s.engine.keyspace().dbs.len());
        if functions {
            ks.functions = s.engine.keyspace().functions.clone();
        }
        ks
    });
    let ks = filtered.as_ref().unwrap_or(s.engine.keyspace());
    let rdb = match ferrokv::persist::snapshot::write_rdb(Vec::new(), ks, s.engine.config(), now, false) {
        Ok(b) => b,
        Err(e) => return Reply::error(format!("ERR cannot build the snapshot for the replica: {e}")),
    };
    let start = s.link.as_ref().map_or(0, |l| l.offset);
    let feed = s.engine.persistence_mut().replication.get_or_insert_with(|| ReplicationFeed::starting_at(start));
    // What was fed before this point is in the snapshot.
    feed.take();
    feed.restart_select();
    let offset = feed.offset();
    if eq_ic(&a[0], "psync") {
        c.out.extend_from_slice(format!("+FULLRESYNC {} {offset}\r\n", s.run_id).as_bytes());
    }
    c.out.extend_from_slice(format!("${}\r\n", rdb.len()).as_bytes());
    c.out.extend_from_slice(&rdb);
    c.raw_reply = true;
    // A master does not answer its replica's commands (REPLCONF ACK).
    c.reply_off = true;
    c.replica = true;
    let addr = c.addr.as_ref().map(|a| a.host()).unwrap_or_default();
    s.replicas.attached.push(Attached { id: c.id, addr: addr.clone(), port: c.replica_port, ack: 0, fack: 0 });
    log(&format!(
        "Replica {addr}:{} asks for synchronization; full resync with {} bytes of snapshot",
        c.replica_port,
        rdb.len()
    ));
    Reply::ok()
}

/// REPLCONF option value ...: what a replica says about itself (listening-port, capa),
/// its acknowledgements (ACK offset), and a master's request for one (GETACK).
pub fn replconf(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len().is_multiple_of(2) {
        return Reply::err("ERR syntax error");
    }
    let opt = a[1].to_ascii_lowercase();
    match opt.as_slice() {
        b"ack" if c.replica => {
            c.raw_reply = true;
            let ack = parse_i64(&a[2]).unwrap_or(0).max(0) as u64;
            let fack = (a.len() >= 5 && eq_ic(&a[3], "fack")).then(|| parse_i64(&a[4]).unwrap_or(0).max(0) as u64);
            if let Some(r) = s.replicas.attached.iter_mut().find(|r| r.id == c.id) {
                r.ack = r.ack.max(ack);
                if let Some(f) = fack {
                    r.fack = r.fack.max(f);
                }
            }
            s.serve_waits();
            Reply::ok()
        }
        b"getack" if c.master => {
            c.raw_reply = true;
            if let Some(link) = &s.link {
                write_ack(&mut c.out, link.offset);
            }
            Reply::ok()
        }
        b"rdb-filter-only" => {
            // Redis's include filters: none (an RDB without keys or functions) or
            // `functions`.
            let mut functions = false;
            for f in String::from_utf8_lossy(&a[2]).split_whitespace() {
                if f.eq_ignore_ascii_case("functions") {
                    functions = true;
                } else {
                    return Reply::error(format!("ERR Unsupported rdb-filter-only option: {f}"));
                }
            }
            c.rdb_filter = Some(functions);
            Reply::ok()
        }
        b"listening-port" => {
            match parse_i64(&a[2]).filter(|p| (0..=65535).contains(p)) {
                Some(p) => c.replica_port = p as u16,
                None => {
                    return Reply::error(format!(
                        "ERR Unrecognized REPLCONF option: {}",
                        String::from_utf8_lossy(&a[1])
                    ))
                }
            }
            Reply::ok()
        }
        _ if c.replica || c.master => {
            c.raw_reply = true;
            Reply::ok()
        }
        _ => Reply::ok(),
    }
}

pub(super) fn write_ack(out: &mut Vec<u8>, offset: u64) {
    let off = offset.to_string();
    ferrokv::persist::feed::put_multibulk(out, &[b"REPLCONF".as_slice(), b"ACK", off.as_bytes()]);
}

/// WAIT numreplicas timeout: how many replicas acknowledged every write made before it,
/// blocking until `numreplicas` did or the timeout (milliseconds, 0 for none) passed.
pub fn wait(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if s.link.is_some() {
        return Reply::err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let Some(wanted) = parse_i64(&a[1]) else {
        return Reply::not_integer();
    };
    let timeout = match parse_i64(&a[2]) {
        None => return Reply::err("ERR timeout is not an integer or out of range"),
        Some(t) if t < 0 => return Reply::err("ERR timeout is negative"),
        Some(t) => t as u64,
    };
    // Everything propagated so far, this client's writes among it.
    s.feed_replicas();
    let offset = s.engine.persistence().replication.as_ref().map_or(0, |f| f.offset());
    let acked = s.replicas.acked(offset);
    if acked as i64 >= wanted || c.in_exec || c.deny_blocking {
        return Reply::Int(acked as i64);
    }
    s.replicas.want_acks = true;
    let deadline = (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout));
    s.park(c, Op::Wait { offset, replicas: wanted.max(0) as usize }, Vec::new(), deadline);
    Reply::Nil
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2): `[local, replicas]`, how many AOFs
/// fsynced every write made before it: ours at once (the fsync happens here), the
/// replicas' as their acknowledgements say, waiting up to the timeout for `numreplicas`.
pub fn waitaof(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if s.link.is_some() {
        return Reply::err("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.");
    }
    let (Some(local), Some(wanted)) = (parse_i64(&a[1]), parse_i64(&a[2])) else {
        return Reply::not_integer();
    };
    let timeout = match parse_i64(&a[3]) {
        None => return Reply::err("ERR timeout is not an integer or out of range"),
        Some(t) if t < 0 => return Reply::err("ERR timeout is negative"),
        Some(t) => t as u64,
    };
    let aof_on = s.engine.persistence().aof.as_ref().is_some_and(|f| f.is_open());
    if local > 0 && !aof_on {
        return Reply::err("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
    }
    let now = s.engine.now_ms();
    let synced = aof_on && s.engine.persistence_mut().aof.as_mut().is_some_and(|f| f.fsync(now));
    s.feed_replicas();
    let offset = s.engine.persistence().replication.as_ref().map_or(0, |f| f.offset());
    let fsynced = s.replicas.fsynced(offset);
    let done = (local <= 0 || synced) && fsynced as i64 >= wanted;
    if done || c.in_exec || c.deny_blocking || (local > 0 && !synced) {
        return waitaof_reply(synced, fsynced);
    }
    s.replicas.want_acks = true;
    let deadline = (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout));
    s.park(c, Op::WaitAof { offset, local: synced, replicas: wanted.max(0) as usize }, Vec::new(), deadline);
    Reply::Nil
}

pub fn waitaof_reply(local: bool, replicas: usize) -> Reply {
    Reply::Array(vec![Reply::Int(i64::from(local)), Reply::Int(replicas as i64)])
}

impl Server {
    /// Hand the commands propagated since the last call to every replica.
    pub fn feed_replicas(&mut self) {
        let Some(feed) = self.engine.persistence_mut().replication.as_mut() else { return };
        if std::mem::take(&mut self.replicas.want_acks) {
            feed.getack();
        }
        let bytes = feed.take();
        if bytes.is_empty() {
            return;
        }
        for r in &self.replicas.attached {
            let Some(c) = self.clients.get_mut(&r.id) else { continue };
            c.out.extend_from_slice(&bytes);
            if !c.write_deferred {
                c.write_deferred = true;
                self.deferred_writes.push(r.id);
            }
        }
    }

    /// From the cron: a PING in the stream every repl-ping-replica-period seconds, so
    /// replicas see the master alive while no write comes.
    pub fn ping_replicas(&mut self) {
        if self.replicas.is_empty() {
            return;
        }
        let period = self.cfg.get("repl-ping-replica-period").and_then(|p| p.parse().ok()).unwrap_or(10u64);
        let last = *self.replicas.last_ping.get_or_insert_with(Instant::now);
        if last.elapsed().as_secs() >= period {
            self.replicas.last_ping = Some(Instant::now());
            if let Some(feed) = self.engine.persistence_mut().replication.as_mut() {
                feed.ping();
            }
        }
    }

    /// Answer the WAITs whose replicas acknowledged enough.
    fn serve_waits(&mut self) {
        let done: Vec<(u64, Reply)> = self
            .clients
            .values()
            .filter_map(|c| match c.blocked.as_ref().map(|b| &b.op) {
                Some(Op::Wait { offset, replicas }) => {
                    let n = self.replicas.acked(*offset);
                    (n >= *replicas).then_some((c.id, Reply::Int(n as i64)))
                }
                Some(Op::WaitAof { offset, local, replicas }) => {
                    let n = self.replicas.fsynced(*offset);
                    (n >= *replicas).then(|| (c.id, waitaof_reply(*local, n)))
                }
                _ => None,
            })
            .collect();
        for (id, reply) in done {
            self.end_wait(id, Some(reply));
        }
    }

    /// A connection is gone: a replica stops being fed (with none left the stream
    /// stops); our master's means a new full resync.
    pub fn forget_replica(&mut self, c: &Client) {
        if c.master {
            if let Some(link) = &mut self.link {
                if matches!(link.state, LinkState::Up { id } if id == c.id) {
                    log("Connection with master lost.");
                    link.state = LinkState::Connect { retry_at: Instant::now() };
                }
            }
        }
        if !c.replica {
            return;
        }
        self.replicas.attached.retain(|r| r.id != c.id);
        if self.replicas.is_empty() && self.link.is_none() {
            self.engine.persistence_mut().replication = None;
        }
        log(&format!("Connection with replica {} lost.", c.addr.as_ref().map(|a| a.to_string()).unwrap_or_default()));
    }
}
