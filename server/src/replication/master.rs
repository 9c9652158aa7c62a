//! The master side: SYNC/PSYNC, REPLCONF, WAIT/WAITAOF and feeding the stream.

use std::time::Instant;

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::keyspace::Keyspace;
use ferrokv::persist::replication::ReplicationFeed;
use ferrokv::persist::snapshot::ReplAux;
use ferrokv::Reply;

use super::state::{Attached, LinkState, Transfer};
use crate::blocking::Op;
use crate::client::Client;
use crate::log::log;
use crate::server::Server;

/// SYNC / PSYNC replid offset. A PSYNC whose ID and offset this server's history still
/// covers continues: `+CONTINUE replid` and the bytes from that offset. Otherwise a full
/// resync: PSYNC is answered `+FULLRESYNC replid offset` first; then the snapshot as
/// `$len` and the bytes (no CRLF after them), then the stream.
pub fn sync(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if c.replica {
        // Redis ignores SYNC from a client that is already a replica.
        c.raw_reply = true;
        return Reply::ok();
    }
    if a.len() > 3 && eq_ic(&a[0], "psync") && eq_ic(&a[3], "failover") {
        // The master hands over to us: continue its history as the master.
        log(&format!("Failover request received for replid {}.", String::from_utf8_lossy(&a[1])));
        if s.link.is_none() {
            return Reply::err("ERR PSYNC FAILOVER can't be sent to a master.");
        }
        if !a[1].eq_ignore_ascii_case(s.replicas.history.replid().as_bytes()) {
            return Reply::err("ERR PSYNC FAILOVER replid must match my replid.");
        }
        s.become_master();
        log(&format!("MASTER MODE enabled (failover request from '{}')", c.info_line(Instant::now(), true)));
    }
    if s.replicas.failover.is_some() {
        return Reply::err("NOMASTERLINK Can't SYNC while failing over");
    }
    if s.link.as_ref().is_some_and(|l| !l.is_up()) {
        return Reply::err("NOMASTERLINK Can't SYNC while not connected with my master");
    }
    if c.pending_out() > 0 {
        return Reply::err("ERR SYNC and PSYNC are invalid with pending output");
    }
    let name = replica_name(c);
    log(&format!("Replica {name} asks for synchronization"));
    // Everything written so far is in the backlog (and with the other replicas), which
    // holds what repl-backlog-size says now (a CONFIG SET may have shrunk it since the
    // last cron).
    s.feed_replicas();
    s.follow_backlog_size();
    let psync = eq_ic(&a[0], "psync");
    if psync {
        let Some(from) = parse_i64(&a[2]) else {
            log(&format!("Replica {name} asks for synchronization but with a wrong offset"));
            return Reply::not_integer();
        };
        let replid = String::from_utf8_lossy(&a[1]);
        if replid == "?" {
            log(&format!("Full resync requested by replica {name}"));
        } else {
            match s.replicas.history.continues(&replid, from.max(0) as u64) {
                Ok(missed) => {
                    c.out.extend_from_slice(format!("+CONTINUE {}\r\n", s.replicas.history.replid()).as_bytes());
                    // What it missed follows from the replication buffer as it is written.
                    attach(s, c, Transfer::Online, from as u64);
                    s.stats.sync_partial_ok += 1;
                    log(&format!(
                        "Partial resynchronization request from {name} accepted. Sending {missed} bytes of backlog starting from offset {from}."
                    ));
                    return Reply::ok();
                }
                Err(why) if why.is_empty() => log(&format!(
                    "Unable to partial resync with replica {name} for lack of backlog (Replica request was: {from})."
                )),
                Err(why) => log(&format!("Partial resynchronization not accepted: {why}")),
            }
            s.stats.sync_partial_err += 1;
        }
    }
    s.stats.sync_full += 1;
    if s.link.is_none() {
        // A master's stream starts anew for a joining replica, with a SELECT.
        s.keep_backlog();
        if let Some(feed) = s.engine.persistence_mut().replication.as_mut() {
            feed.restart_select();
        }
    }
    // A replica's goes on from its master's: the snapshot names the database selected.
    let Some(aux) = s.repl_aux() else {
        return Reply::err("NOMASTERLINK Can't SYNC while not connected with my master");
    };
    // REPLCONF rdb-filter-only (redis-cli --functions-rdb, --replica): no keys, so the
    // snapshot is small and made at once.
    if let Some(functions) = c.rdb_filter {
        let mut ks = Keyspace::new(s.engine.keyspace().dbs.len());
        if functions {
            ks.functions = s.engine.keyspace().functions.clone();
        }
        let now = s.engine.now_ms();
        let src = ferrokv::persist::snapshot::Source::Keyspace(&ks);
        let rdb = match ferrokv::persist::snapshot::write_replication_rdb(Vec::new(), src, s.engine.config(), now, &aux)
        {
            Ok(b) => b,
            Err(e) => return Reply::error(format!("ERR cannot build the snapshot for the replica: {e}")),
        };
        if psync {
            c.out.extend_from_slice(
                format!("+FULLRESYNC {} {}\r\n", s.replicas.history.replid(), aux.offset).as_bytes(),
            );
        }
        c.out.extend_from_slice(format!("${}\r\n", rdb.len()).as_bytes());
        c.out.extend_from_slice(&rdb);
        attach(s, c, Transfer::Online, aux.offset + 1);
        log("Starting BGSAVE for SYNC with target: disk");
        log(&format!("Synchronization with replica {name} succeeded ({} bytes of snapshot)", rdb.len()));
        return Reply::ok();
    }
    attach(s, c, Transfer::Waiting, 0);
    s.queue_full_sync(c.id, c.capa_eof, psync);
    Reply::ok()
}

/// `c` is a replica from now on: fed the stream from offset `next` (unless Waiting), its
/// commands unanswered.
fn attach(s: &mut Server, c: &mut Client, transfer: Transfer, next: u64) {
    c.raw_reply = true;
    // A master does not answer its replica's commands (REPLCONF ACK).
    c.reply_off = true;
    c.replica = true;
    let addr = c.addr.as_ref().map(|a| a.host()).unwrap_or_default();
    s.replicas.attached.push(Attached {
        id: c.id,
        addr,
        port: c.replica_port,
        ack: 0,
        fack: 0,
        ack_at: Instant::now(),
        transfer,
        next,
    });
    s.replicas.history.alone_since = None;
}

/// How Redis names a replica in its log: the address it listens on.
pub(super) fn replica_name(c: &Client) -> String {
    let host = c.addr.as_ref().map(|a| a.host()).unwrap_or_default();
    format!("{host}:{}", c.replica_port)
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
                if r.transfer == Transfer::AwaitingAck {
                    // It loaded the streamed RDB: the stream follows from now (this
                    // client's turn writes it).
                    r.rdb_sent(false);
                }
                r.ack = r.ack.max(ack);
                r.ack_at = Instant::now();
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
        b"capa" => {
            // `capa eof capa psync2`: what the replica can take, in pairs.
            c.capa_eof |= a[1..].chunks(2).any(|p| eq_ic(&p[0], "capa") && eq_ic(&p[1], "eof"));
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
    let deadline = match crate::cmd::blocking::parse_ms_timeout(&a[2]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    // Everything propagated so far, this client's writes among it.
    s.feed_replicas();
    let offset = s.engine.persistence().replication.as_ref().map_or(0, |f| f.offset());
    let acked = s.replicas.acked(offset);
    if acked as i64 >= wanted || c.in_exec || c.deny_blocking {
        return Reply::Int(acked as i64);
    }
    s.replicas.want_acks = true;
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
    let deadline = match crate::cmd::blocking::parse_ms_timeout(&a[3]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let aof = s.engine.persistence().aof.as_ref();
    // An AOF being turned on counts as on: its local copy comes with its first rewrite.
    let enabling = aof.is_some_and(|f| f.is_enabling());
    let aof_on = aof.is_some_and(|f| f.is_open()) || enabling;
    if local > 0 && !aof_on {
        return Reply::err(WAITAOF_NO_AOF);
    }
    let now = s.engine.now_ms();
    // Under appendfsync no nothing is fsynced for it: a local copy is waited for in vain
    // (until the timeout, or the AOF turned off), as in Redis.
    let fsync_no = s.engine.config().appendfsync == ferrokv::config::Fsync::No;
    let synced =
        aof_on && !fsync_no && !enabling && s.engine.persistence_mut().aof.as_mut().is_some_and(|f| f.fsync(now));
    s.feed_replicas();
    let offset = s.repl_offset();
    let fsynced = s.replicas.fsynced(offset);
    let done = (local <= 0 || synced) && fsynced as i64 >= wanted;
    let fsync_failed = local > 0 && !synced && !fsync_no && !enabling;
    if done || c.in_exec || c.deny_blocking || fsync_failed {
        return waitaof_reply(synced, fsynced);
    }
    s.replicas.want_acks = true;
    let op = Op::WaitAof { offset, local: synced, need_local: local > 0 && !synced, replicas: wanted.max(0) as usize };
    s.park(c, op, Vec::new(), deadline);
    Reply::Nil
}

const WAITAOF_NO_AOF: &str = "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.";

pub fn waitaof_reply(local: bool, replicas: usize) -> Reply {
    Reply::Array(vec![Reply::Int(i64::from(local)), Reply::Int(replicas as i64)])
}

impl Server {
    /// Hand the commands propagated since the last call to the backlog and every
    /// replica.
    pub fn feed_replicas(&mut self) {
        let Some(feed) = self.engine.persistence_mut().replication.as_mut() else { return };
        if std::mem::take(&mut self.replicas.want_acks) {
            feed.getack();
        }
        let bytes = feed.take();
        self.send_to_replicas(&bytes);
    }

    /// Bytes of the stream (ours, or our master's as applied): into the replication
    /// buffer, which serves the backlog and every replica.
    pub(super) fn send_to_replicas(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let Some(b) = self.replicas.history.backlog.as_mut() else { return };
        let new_block = b.push(bytes);
        for r in &self.replicas.attached {
            // Waiting: its snapshot, when it starts, holds these writes. Sending: they
            // wait in the buffer until its RDB is sent.
            if r.transfer != Transfer::Online {
                continue;
            }
            if let Some(c) = self.clients.get_mut(&r.id) {
                c.defer_write(&mut self.deferred_writes);
            }
        }
        // As Redis, limits and trimming are looked at when the buffer grows by a block
        // (and every second), not on every write.
        if new_block {
            self.enforce_replica_limits();
            self.trim_replication_buffer();
        }
    }

    /// Before a replica's output is written: the next chunk of the stream it is owed,
    /// copied from the replication buffer once what it has was written. False when
    /// there was none; a replica owed bytes the buffer no longer holds is closed.
    pub(crate) fn stream_to_replica(&mut self, c: &mut Client) -> bool {
        const CHUNK: usize = 64 * 1024;
        if c.pending_out() > 0 || c.close_asap {
            return false;
        }
        let Some(r) = self.replicas.attached.iter_mut().find(|r| r.id == c.id) else { return false };
        let Some(b) = self.replicas.history.backlog.as_ref() else { return false };
        if r.transfer != Transfer::Online || r.next > b.end() {
            return false;
        }
        match b.copy_from(r.next, CHUNK, &mut c.out) {
            Some(n) => {
                r.next += n as u64;
                n > 0
            }
            None => {
                log(&format!("Replica {} is owed stream bytes no longer held: closing it.", replica_name(c)));
                c.close_asap = true;
                false
            }
        }
    }

    /// The first offset of the stream some replica has yet to be handed.
    fn stream_needed(&self) -> u64 {
        self.replicas.attached.iter().filter(|r| r.owed_stream()).map(|r| r.next).min().unwrap_or(u64::MAX)
    }

    /// Free the buffer's blocks that neither the backlog nor any replica needs.
    pub(super) fn trim_replication_buffer(&mut self) {
        let needed = self.stream_needed();
        if let Some(b) = self.replicas.history.backlog.as_mut() {
            b.trim(needed);
        }
    }

    /// Replicas' output buffer limits, counting the stream each is owed from the
    /// replication buffer (a hard limit under repl-backlog-size is taken as that size,
    /// as Redis does, so a partial resync the backlog allows is never cut).
    pub(crate) fn enforce_replica_limits(&mut self) {
        self.count_replicas_owed();
        let Some(b) = self.replicas.history.backlog.as_ref() else { return };
        let floor = b.size() as u64;
        let mut over = Vec::new();
        for r in self.replicas.attached.iter().filter(|r| r.owed_stream()) {
            let Some(c) = self.clients.get_mut(&r.id).filter(|c| !c.close_asap) else { continue };
            // Only the stream counts: what is in its output is at most one chunk of it,
            // or its RDB, which Redis does not count either.
            let used = c.stream_owed as u64;
            if crate::obuf::enforce_used(&self.cfg.obuf_limits, c, used, floor) {
                over.push(r.id);
            }
        }
        // Closed from the loop, as Redis closes them asynchronously: this may run in the
        // middle of a command.
        for id in over {
            self.close_replica_asap(id);
        }
    }

    /// Each replica's `stream_owed`: the replication buffer from its offset to the end.
    pub(crate) fn count_replicas_owed(&mut self) {
        let end = self.replicas.history.backlog.as_ref().map(|b| b.end());
        for r in &self.replicas.attached {
            if let Some(c) = self.clients.get_mut(&r.id) {
                c.stream_owed = match end {
                    Some(end) if r.owed_stream() => (end + 1).saturating_sub(r.next) as usize,
                    _ => 0,
                };
            }
        }
    }

    /// The replication buffer's memory (INFO's mem_total_replication_buffers).
    pub fn replication_buffer_mem(&self) -> usize {
        self.replicas.history.backlog.as_ref().map_or(0, |b| b.mem())
    }

    /// The replication buffer's memory as Redis's INFO splits it: the backlog's part and
    /// the replicas' (what is held beyond the backlog's size while replicas are
    /// attached).
    pub fn replication_buffer_split(&self) -> (usize, usize) {
        let Some(b) = self.replicas.history.backlog.as_ref() else { return (0, 0) };
        match b.mem().checked_sub(b.size()) {
            Some(excess) if excess > 0 && !self.replicas.attached.is_empty() => (b.size(), excess),
            _ => (b.mem(), 0),
        }
    }

    /// The replication buffer's memory beyond the backlog's size: held for replicas, so
    /// not counted against maxmemory (Redis's freeMemoryGetNotCountedMemory).
    pub fn replica_buffer_excess(&self) -> usize {
        self.replicas.history.backlog.as_ref().map_or(0, |b| b.mem().saturating_sub(b.size()))
    }

    /// What a snapshot saved now says of the stream its data follows (Redis's
    /// rdbPopulateSaveInfo): a master's with a backlog, a replica's with a master (or the
    /// state of a dropped link); nothing otherwise.
    pub fn repl_aux(&self) -> Option<ReplAux> {
        let stream_db = match &self.link {
            None => {
                self.replicas.history.backlog.as_ref()?;
                self.engine.persistence().replication.as_ref().and_then(|f| f.selected()).unwrap_or(0)
            }
            Some(link) => match link.state {
                LinkState::Up { id } => self.clients.get(&id).map_or(link.db, |c| c.session.db),
                _ if link.can_continue => link.db,
                _ => return None,
            },
        };
        Some(ReplAux { stream_db, replid: self.replicas.history.replid().to_string(), offset: self.repl_offset() })
    }

    /// The replication offset: the stream's bytes so far, as a master fed them or as a
    /// replica applied its master's.
    pub fn repl_offset(&self) -> u64 {
        match (&self.link, self.engine.persistence().replication.as_ref()) {
            (Some(link), _) => link.offset,
            (None, Some(feed)) => feed.offset(),
            (None, None) => self.replicas.resting_offset,
        }
    }

    /// A master about to serve a replica keeps a backlog, under a new replication ID
    /// when it had none, and counts the stream from its last offset.
    pub(super) fn keep_backlog(&mut self) {
        let offset = self.repl_offset();
        let size = self.backlog_size();
        if self.replicas.history.backlog.is_none() {
            self.replicas.history.renew();
            self.replicas.history.keep_backlog(size, offset);
            log(&format!(
                "Replication backlog created, my new replication IDs are '{}' and '{}'",
                self.replicas.history.replid, self.replicas.history.replid2
            ));
        }
        let p = self.engine.persistence_mut();
        if p.replication.is_none() {
            p.replication = Some(ReplicationFeed::starting_at(offset));
        }
    }

    /// The backlog takes the size repl-backlog-size says now (a smaller one drops the
    /// oldest history).
    fn follow_backlog_size(&mut self) {
        let size = self.backlog_size();
        let Some(b) = self.replicas.history.backlog.as_mut() else { return };
        if b.size() != size.max(16 * 1024) {
            b.resize(size);
        }
        self.trim_replication_buffer();
    }

    pub(super) fn backlog_size(&self) -> usize {
        self.cfg.get("repl-backlog-size").and_then(|v| crate::memory_value::parse_memory(&v)).unwrap_or(1 << 20)
            as usize
    }

    /// From the cron: follow repl-backlog-size, and free a master's backlog after
    /// repl-backlog-ttl seconds without replicas (its history ends: a new ID).
    pub fn backlog_cron(&mut self) {
        self.follow_backlog_size();
        // A soft output limit runs out with no new writes too.
        self.enforce_replica_limits();
        if self.replicas.history.backlog.is_none() {
            return;
        }
        if self.link.is_some() || !self.replicas.is_empty() {
            self.replicas.history.alone_since = None;
            return;
        }
        let ttl = self.cfg.get("repl-backlog-ttl").and_then(|t| t.parse::<u64>().ok()).unwrap_or(3600);
        let since = *self.replicas.history.alone_since.get_or_insert_with(Instant::now);
        if ttl > 0 && since.elapsed().as_secs() >= ttl {
            self.replicas.resting_offset = self.repl_offset();
            self.engine.persistence_mut().replication = None;
            self.replicas.history.backlog = None;
            self.replicas.history.alone_since = None;
            self.replicas.history.renew();
            log(&format!("Replication backlog freed after {ttl} seconds without connected replicas."));
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

    /// The AOF was turned off: WAITAOFs waiting for a local copy get Redis's error.
    pub fn end_local_aof_waits(&mut self) {
        for id in self.local_aof_waiters() {
            self.end_wait(id, Some(Reply::err(WAITAOF_NO_AOF)));
        }
    }

    /// The AOF's first rewrite is in place: WAITAOFs that waited for a local copy have it
    /// once the AOF is fsynced (not under appendfsync no).
    pub fn local_aof_ready(&mut self) {
        let waiting = self.local_aof_waiters();
        if waiting.is_empty() || self.engine.config().appendfsync == ferrokv::config::Fsync::No {
            return;
        }
        let now = self.engine.now_ms();
        if !self.engine.persistence_mut().aof.as_mut().is_some_and(|f| f.is_open() && f.fsync(now)) {
            return;
        }
        for id in waiting {
            if let Some(Op::WaitAof { local, need_local, .. }) =
                self.clients.get_mut(&id).and_then(|c| c.blocked.as_mut()).map(|b| &mut b.op)
            {
                *local = true;
                *need_local = false;
            }
        }
        self.serve_waits();
    }

    /// The clients whose WAITAOF waits for a local copy.
    fn local_aof_waiters(&self) -> Vec<u64> {
        let waits_local =
            |c: &Client| matches!(c.blocked.as_ref().map(|b| &b.op), Some(Op::WaitAof { need_local: true, .. }));
        self.clients.values().filter(|c| waits_local(c)).map(|c| c.id).collect()
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
                Some(Op::WaitAof { offset, local, need_local, replicas }) => {
                    let n = self.replicas.fsynced(*offset);
                    (n >= *replicas && !need_local).then(|| (c.id, waitaof_reply(*local, n)))
                }
                _ => None,
            })
            .collect();
        for (id, reply) in done {
            self.end_wait(id, Some(reply));
        }
    }

    /// A replica's command produced a reply (Redis's replicas send only REPLCONF ACK
    /// after their sync): logged as Redis logs it, and the replica closed.
    pub(crate) fn replica_replied(&mut self, c: &mut Client) {
        let name = c.last_cmd.to_string();
        if let Some(e) = c.unsent_error.take() {
            crate::log::warn(&format!(
                "== CRITICAL == This master is sending an error to its replica: '{e}' after processing the command '{name}'"
            ));
        }
        crate::log::warn(&format!(
            "Replica generated a reply to command '{name}', disconnecting it: {}",
            c.info_line(Instant::now(), false)
        ));
        c.close_asap = true;
    }

    /// A connection is gone: a replica stops being fed (with none left the stream
    /// stops); our master's means a new full resync.
    pub fn forget_replica(&mut self, c: &Client) {
        if c.master {
            if let Some(link) = &mut self.link {
                if matches!(link.state, LinkState::Up { id } if id == c.id) {
                    log("Connection with master lost.");
                    log("Caching the disconnected master state.");
                    // What ran of an unfinished MULTI is not applied: the stream goes on
                    // from before it.
                    link.unapplied.clear();
                    link.db = c.session.db;
                    link.can_continue = true;
                    link.state = LinkState::Connect { retry_at: Instant::now() };
                }
            }
        }
        if !c.replica {
            return;
        }
        self.replicas.attached.retain(|r| r.id != c.id);
        self.replicas.syncs.forget(c.id);
        // What only it still needed goes now.
        self.trim_replication_buffer();
        log(&format!("Connection with replica {} lost.", replica_name(c)));
    }
}
