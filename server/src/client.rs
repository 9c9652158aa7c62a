//! One connection: its socket, query buffer and parser, output buffer, and the state
//! the connection commands keep (name, protocol, auth, MULTI queue, watched keys).

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::Argv;
use ferrokv::{Reply, Session};

use crate::resp::Parser;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;
/// A query buffer with more room than this is shrunk when mostly empty (Redis's
/// PROTO_RESIZE_THRESHOLD).
const SHRINK_QUERY_ABOVE: usize = 32 * 1024;

pub struct Client {
    pub id: u64,
    pub(crate) sock: crate::net::Conn,
    pub addr: Option<crate::net::Peer>,
    pub laddr: Option<crate::net::Peer>,
    pub name: Option<Vec<u8>>,
    pub session: Session,
    /// RESP3 (after HELLO 3).
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user the connection runs as.
    pub user: Vec<u8>,
    pub query: Vec<u8>,
    /// Where parsing resumes in `query`.
    pub qpos: usize,
    pub parser: Parser,
    pub out: Vec<u8>,
    /// How much of `out` has been written.
    pub out_pos: usize,
    /// The queued commands while in MULTI.
    pub multi: Option<Vec<Argv>>,
    /// A command was refused while queueing: EXEC aborts.
    pub multi_error: bool,
    /// EXEC is running this client's queue (engine commands join one propagation unit).
    pub in_exec: bool,
    /// Watched keys: database, key, and whether it was already expired when watched.
    pub watched: Vec<(usize, Vec<u8>, bool)>,
    /// A watched key changed: EXEC fails.
    pub watch_dirty: bool,
    /// Close once the output is written (QUIT, protocol errors, CLIENT KILL).
    pub close_after_reply: bool,
    pub created: Instant,
    pub last_interaction: Instant,
    /// The last command run, as CLIENT LIST shows it (`cmd=`).
    pub last_cmd: std::borrow::Cow<'static, str>,
    /// Where socket reads land before joining `query`.
    chunk: Vec<u8>,
    /// The last read returned less than asked: the socket had nothing more then.
    pub drained: bool,
    /// Registered for writable events (only while output waits on a full socket).
    pub wants_write: bool,
    /// Its replies wait for the write pass after this loop round's events.
    pub write_deferred: bool,
    /// A replica's: the bytes of the replication buffer still to be sent to it, as last
    /// counted (CLIENT LIST's omem and the output limits count them, as Redis's).
    pub stream_owed: usize,
    /// Channels and patterns subscribed to (pub/sub).
    pub subs: crate::pubsub::ClientSubs,
    /// Waiting in a blocking command (BLPOP & co.).
    pub blocked: Option<crate::blocking::Blocked>,
    /// Since when the output buffer has been over the soft limit.
    pub obuf_soft_since: Option<Instant>,
    /// The room kept for replies, resized by the timer (CLIENT LIST `rbs`, `rbp`).
    pub reply_buf: crate::reply_buffer::ReplyBuffer,
    /// Over an output buffer limit: closed without writing what is left.
    pub close_asap: bool,
    /// The running command wrote its own reply into `out` (pub/sub notices) or has
    /// none yet (a blocked client).
    pub raw_reply: bool,
    /// Blocking commands answer at once instead of waiting (scripts).
    pub deny_blocking: bool,
    /// CLIENT REPLY OFF / SKIP: replies are dropped (pub/sub messages still go out).
    pub reply_off: bool,
    /// CLIENT NO-EVICT ON (flag `e`): exempt from client eviction, which this server does
    /// not do (maxmemory-clients is kept, not enforced), so only the flag is shown.
    pub no_evict: bool,
    /// Attached as a replica (SYNC/PSYNC): fed the replication stream.
    pub replica: bool,
    /// In MONITOR mode (crate::monitor).
    pub monitor: bool,
    /// CLIENT SETINFO LIB-NAME / LIB-VER (Redis 7.2).
    pub lib_name: Vec<u8>,
    pub lib_ver: Vec<u8>,
    /// The port a replica said it listens on (REPLCONF listening-port).
    pub replica_port: u16,
    /// REPLCONF rdb-filter-only: its full sync's RDB holds no keys, and the function
    /// libraries only when `Some(true)` (redis-cli --functions-rdb).
    pub rdb_filter: Option<bool>,
    /// REPLCONF capa eof: takes a full resync's RDB streamed, of unknown length.
    pub capa_eof: bool,
    /// The connection to our master when this server is a replica: its commands run
    /// unanswered and unchecked, as Redis runs its master client's.
    pub master: bool,
    /// The error a command of our master's stream answered (never sent; logged).
    pub unsent_error: Option<String>,
    /// A replica's command produced a reply (it is closed for it, as Redis does).
    pub replied_as_replica: bool,
    pub reply_skip: bool,
    pub reply_skip_next: bool,
    /// CLIENT TRACKING ON: its mode.
    pub tracking: Option<crate::tracking::ClientTracking>,
    /// The command that waits for CLIENT PAUSE to end.
    pub postponed: Option<ferrokv::command::Argv>,
    /// Push messages to this client from its own running command, held until the
    /// command's reply is written (Redis 7.2 on: a PUBLISH to itself inside MULTI or a
    /// script comes after EXEC's or EVAL's reply). Some only while such a command runs.
    pub pushes_after_reply: Option<Vec<u8>>,
}

/// What a read from the socket gave.
pub enum ReadOutcome {
    Data,
    WouldBlock,
    Closed,
}

impl Client {
    /// A client with no peer, as Redis's AOF client: the commands of a file run as its own
    /// (its socket's other end is closed at once; nothing is ever sent on it).
    pub(crate) fn detached(id: u64) -> std::io::Result<Client> {
        let (sock, _peer) = mio::net::UnixStream::pair()?;
        Ok(Client::new(id, crate::net::Conn::Unix(sock, "".into()), None, true))
    }

    pub(crate) fn new(id: u64, sock: crate::net::Conn, addr: Option<crate::net::Peer>, authenticated: bool) -> Client {
        let laddr = sock.local_addr();
        let now = Instant::now();
        Client {
            id,
            sock,
            addr,
            laddr,
            name: None,
            session: Session::default(),
            resp3: false,
            authenticated,
            user: b"default".to_vec(),
            query: Vec::new(),
            qpos: 0,
            parser: Parser::default(),
            out: Vec::new(),
            out_pos: 0,
            multi: None,
            multi_error: false,
            in_exec: false,
            watched: Vec::new(),
            watch_dirty: false,
            close_after_reply: false,
            created: now,
            last_interaction: now,
            last_cmd: "NULL".into(),
            chunk: Vec::new(),
            drained: false,
            wants_write: false,
            write_deferred: false,
            stream_owed: 0,
            subs: Default::default(),
            blocked: None,
            obuf_soft_since: None,
            reply_buf: Default::default(),
            close_asap: false,
            raw_reply: false,
            deny_blocking: false,
            reply_off: false,
            no_evict: false,
            replica: false,
            monitor: false,
            replica_port: 0,
            rdb_filter: None,
            capa_eof: false,
            lib_name: Vec::new(),
            lib_ver: Vec::new(),
            master: false,
            reply_skip: false,
            reply_skip_next: false,
            tracking: None,
            postponed: None,
            pushes_after_reply: None,
            unsent_error: None,
            replied_as_replica: false,
        }
    }

    /// Where a push message to this client goes: after the running command's reply when
    /// it is held for that, else the output buffer.
    pub fn push_out(&mut self) -> &mut Vec<u8> {
        match &mut self.pushes_after_reply {
            Some(held) => held,
            None => &mut self.out,
        }
    }

    pub fn reply(&mut self, r: &Reply) {
        if self.reply_off || self.reply_skip {
            if let (true, Reply::Error(e)) = (self.master || self.replica, r) {
                self.unsent_error = Some(e.to_string());
            }
            // A replica's link carries the stream only: a reply means it sent what it
            // should not have.
            self.replied_as_replica |= self.replica && self.reply_off;
            return;
        }
        r.write_resp_in(&mut self.out, self.resp3, crate::version::doubles());
    }

    /// Have this client written at the end of the loop round (`queue` is the server's
    /// list of deferred writes), once.
    pub fn defer_write(&mut self, queue: &mut Vec<u64>) {
        if !self.write_deferred {
            self.write_deferred = true;
            queue.push(self.id);
        }
    }

    /// Bytes waiting to be written.
    pub fn pending_out(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Read one chunk into the query buffer (after dropping what was parsed). Returns the
    /// bytes read through `n`.
    pub fn read_some(&mut self, n: &mut usize) -> ReadOutcome {
        if self.qpos > 0 {
            self.query.drain(..self.qpos);
            self.qpos = 0;
        }
        let big = self.parser.pending_bulk().filter(|&len| len + 2 > READ_CHUNK);
        let r = match big {
            // A big argument: read in place, the buffer growing with what arrives (doubling
            // up to the argument's size), so a length announced but not sent costs nothing.
            Some(len) => {
                let missing = (len + 2).saturating_sub(self.query.len());
                let want = missing.min(self.query.len().max(READ_CHUNK)).max(READ_CHUNK);
                let start = self.query.len();
                self.query.resize(start + want, 0);
                let r = self.sock.read(&mut self.query[start..]);
                self.query.truncate(start + *r.as_ref().unwrap_or(&0));
                r
            }
            // Usual commands: read into the reusable chunk (zeroed once, not per read) and
            // append what came.
            None => {
                if self.chunk.is_empty() {
                    self.chunk = vec![0; READ_CHUNK];
                }
                let r = self.sock.read(&mut self.chunk);
                if let Ok(k) = r {
                    self.query.extend_from_slice(&self.chunk[..k]);
                }
                r
            }
        };
        match r {
            Ok(0) => ReadOutcome::Closed,
            Ok(k) => {
                *n = k;
                // A short read emptied the socket: the next data brings a new event.
                self.drained = k < READ_CHUNK.min(big.unwrap_or(READ_CHUNK));
                ReadOutcome::Data
            }
            Err(e) => match e.kind() {
                ErrorKind::WouldBlock => ReadOutcome::WouldBlock,
                ErrorKind::Interrupted => ReadOutcome::Data,
                _ => ReadOutcome::Closed,
            },
        }
    }

    /// Write as much output as the socket takes. Err when the connection is gone.
    pub fn flush(&mut self, written: &mut usize) -> std::io::Result<()> {
        self.reply_buf.note(self.out.len() - self.out_pos);
        // TLS records of earlier replies first.
        self.sock.flush()?;
        while self.out_pos < self.out.len() {
            match self.sock.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(k) => {
                    self.out_pos += k;
                    *written += k;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
            // Do not keep a huge buffer around after a big reply.
            if self.out.capacity() > 1 << 20 {
                self.out.shrink_to(16 * 1024);
            }
        }
        Ok(())
    }

    /// The timer's turn for the reply buffer: its size follows Redis's rule, and the room
    /// kept between replies is cut down to it once everything was written (never grown
    /// ahead of a reply: a connection that has had none keeps none).
    pub fn resize_reply_buffer(
        &mut self,
        now: Instant,
        policy: crate::reply_buffer::Policy,
        stats: &mut crate::stats::ServerStats,
    ) {
        use crate::reply_buffer::Resize;
        match self.reply_buf.resize(now, self.pending_out(), policy) {
            Some(Resize::Shrink) => stats.reply_buffer_shrinks += 1,
            Some(Resize::Expand) => stats.reply_buffer_expands += 1,
            None => {}
        }
        let size = self.reply_buf.size;
        if self.pending_out() == 0 && self.out.capacity() > size {
            self.out = Vec::with_capacity(size);
            self.out_pos = 0;
        }
    }

    /// Give back query buffer room nothing needs (the timer calls it, as Redis's
    /// clientsCronResizeQueryBuffer): all of it after 2 idle seconds with nothing unparsed,
    /// and the room a big argument left once it has been parsed.
    pub fn trim_query_buffer(&mut self, now: Instant) {
        if self.parser.pending_bulk().is_some() {
            return;
        }
        if self.qpos == self.query.len() {
            self.query.clear();
            self.qpos = 0;
            if now.duration_since(self.last_interaction) >= Duration::from_secs(2) {
                self.query = Vec::new();
                self.chunk = Vec::new();
                return;
            }
        }
        if self.query.capacity() > SHRINK_QUERY_ABOVE && self.query.len() - self.qpos < self.query.capacity() / 2 {
            self.query.drain(..self.qpos);
            self.qpos = 0;
            self.query.shrink_to(READ_CHUNK);
        }
    }

    /// Drop the MULTI state and the watched keys' flags (the server unregisters the keys).
    pub fn reset_multi(&mut self) {
        self.multi = None;
        self.multi_error = false;
    }

    /// Flag letters as CLIENT LIST prints them.
    pub fn flags(&self) -> String {
        let mut f = String::new();
        if self.monitor {
            f.push('O');
        } else if self.replica {
            f.push('S');
        }
        if self.master {
            f.push('M');
        }
        if self.subs.active() {
            f.push('P');
        }
        if self.multi.is_some() {
            f.push('x');
        }
        if self.blocked.is_some() || self.postponed.is_some() {
            f.push('b');
        }
        if let Some(t) = &self.tracking {
            f.push('t');
            if t.broken_redirect {
                f.push('R');
            }
            if t.bcast {
                f.push('B');
            }
        }
        if self.watch_dirty {
            f.push('d');
        }
        if self.close_after_reply {
            f.push('c');
        }
        if self.close_asap {
            f.push('A');
        }
        if self.sock.is_unix() {
            f.push('U');
        }
        if self.no_evict {
            f.push('e');
        }
        if self.session.no_touch {
            f.push('T');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }

    /// One CLIENT LIST / CLIENT INFO line (without the newline). `executing`: this client
    /// runs the command asking, and its query buffer still holds what it has run since the
    /// last read (as Redis's does until the batch is processed).
    pub fn info_line(&self, now: Instant, executing: bool) -> String {
        let addr = self.addr.as_ref().map(|a| a.to_string()).unwrap_or_default();
        let laddr = self.laddr.as_ref().map(|a| a.to_string()).unwrap_or_default();
        let name = self.name.as_deref().map(|n| String::from_utf8_lossy(n).into_owned()).unwrap_or_default();
        let multi = self.multi.as_ref().map_or(-1, |q| q.len() as i64);
        let qbuf = if executing { self.query.len() } else { self.query.len() - self.qpos };
        // Redis 7.2 added the watched keys and the library a client names.
        let since_72 = crate::version::version().behaves_as() >= ServerVersion::Redis72;
        let watch = if since_72 { format!(" watch={}", self.watched.len()) } else { String::new() };
        let lib = if since_72 {
            format!(
                " lib-name={} lib-ver={}",
                String::from_utf8_lossy(&self.lib_name),
                String::from_utf8_lossy(&self.lib_ver)
            )
        } else {
            String::new()
        };
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={}{watch} \
             qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp={} obl={} oll=0 omem={} tot-mem={} events=r \
             cmd={} user={} redir={} resp={}{lib}",
            self.id,
            addr,
            laddr,
            self.fd(),
            name,
            now.duration_since(self.created).as_secs(),
            now.duration_since(self.last_interaction).as_secs(),
            self.flags(),
            self.session.db,
            self.subs.channels.len(),
            self.subs.patterns.len(),
            self.subs.shard.len(),
            multi,
            qbuf,
            // The read chunk is the query buffer's room for the next read (Redis reads
            // into the query buffer itself).
            self.query.capacity() - self.query.len() + self.chunk.len(),
            self.reply_buf.size,
            self.reply_buf.peak,
            self.pending_out(),
            // What the output limits are checked against (Redis's reply list bytes, or
            // for a replica the replication buffer it is owed).
            self.pending_out() + self.stream_owed,
            self.total_memory(),
            self.last_cmd,
            String::from_utf8_lossy(&self.user),
            self.tracking.as_ref().map_or(-1, |t| t.redirect as i64),
            if self.resp3 { 3 } else { 2 },
        )
    }

    /// The client's buffers (CLIENT LIST's `tot-mem`, INFO's mem_clients_normal).
    pub fn total_memory(&self) -> usize {
        self.query.capacity() + self.chunk.len() + self.out.capacity() + self.stream_owed
    }

    fn fd(&self) -> i32 {
        self.sock.fd()
    }
}
