//! `rdbtool restore FILE... --to redis://host:port`: write a snapshot's keys into a running
//! Redis or Valkey, standalone or a cluster.
//!
//! Each key goes as one `RESTORE key ttl payload ABSTTL REPLACE [IDLETIME s|FREQ f]`, its
//! payload encoded for the oldest master's version (what that version cannot hold is
//! listed as lost). A key with more elements than `--big-key-elements` (or one too big to
//! decode in a batch) is written instead as batches of RPUSH/SADD/ZADD/HSET/XADD under a
//! temporary name in the same slot and RENAMEd over the key, so no single command blocks
//! the server for long. Function libraries go to every master (FUNCTION LOAD REPLACE).
//!
//! Commands are pipelined per node, a reader thread per connection; the workers of the
//! [`Pipeline`] decode and encode in parallel. A cluster's topology comes from CLUSTER
//! SLOTS; MOVED updates it (and a refresh follows), ASK sends the key to the importing
//! node behind ASKING, TRYAGAIN / CLUSTERDOWN / LOADING / a lost connection are retried
//! with back-off. Every key's commands are idempotent as a whole (RESTORE ... REPLACE; a
//! batched key starts by deleting its temporary name), so a retried key ends the same.

mod link;
mod topology;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::format::crc::hash_slot;
use ferrokv::format::rdb::{
    dump_payload, escape_key, Encoder, Family, KeyRecord, LogicalType, RdbReader, Record, Target,
};
use ferrokv::logical::Logical;
use ferrokv::persist::feed::put_multibulk;

use crate::dump::{self, Expired, Filter};
use crate::net::{parse_url, Access, TlsArgs};
use crate::out::{Out, ToolError};
use crate::pipeline::{Batch, Pipeline, Stage};
pub use link::{read_reply, Reply};
use link::{Link, Message};
pub use topology::Topology;

/// Arguments of `rdbtool restore`.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// RDB files, jsonl dumps (`rdbtool dump`) or AOFs (a file, a manifest or a directory),
    /// restored in order.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The target: redis://[user:password@]host:port (any node of a cluster); rediss://
    /// for TLS.
    #[arg(long)]
    pub to: String,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Only this database. A cluster has only database 0: a file with keys elsewhere is
    /// refused unless --db names the database to restore (its keys go into database 0).
    #[arg(long)]
    pub db: Option<u64>,
    /// Only keys matching this Redis glob pattern.
    #[arg(long)]
    pub key: Option<String>,
    /// Only these types (string, list, set, zset, hash, stream, module); repeat or comma-separate.
    #[arg(long = "type", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Keys already expired at --now are left out (as Redis leaves them out when it loads a
    /// file); `keep` sends them (the server then deletes any key of that name).
    #[arg(long, value_enum, default_value = "skip")]
    pub expired: ExpiredArg,
    /// The time, in unix ms, that --expired compares with (default: now).
    #[arg(long)]
    pub now: Option<i64>,
    /// At most this many keys a second.
    #[arg(long)]
    pub rate: Option<u64>,
    /// Read, encode and route everything, send nothing; the summary says what would go where.
    #[arg(long)]
    pub dry_run: bool,
    /// A key with more elements than this is written in batches of commands under a
    /// temporary name and renamed, instead of one RESTORE (which blocks the server while
    /// it loads: about 60 ms for a 300,000-member set on Redis 7.0).
    #[arg(long, default_value_t = 500_000)]
    pub big_key_elements: usize,
    /// A key whose serialized value is larger than this is written in batches too.
    #[arg(long, default_value_t = 64 << 20)]
    pub big_key_bytes: usize,
    /// How many times a key is retried (TRYAGAIN, CLUSTERDOWN, LOADING, a lost link) before
    /// it counts as failed.
    #[arg(long, default_value_t = 40)]
    pub retries: u32,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ExpiredArg {
    Skip,
    Keep,
}

/// Commands in flight per connection before the sender waits for replies.
const WINDOW: usize = 16 * 1024;
/// Failed keys named one by one in the summary.
const NAMED_FAILURES: usize = 20;
const BACKOFF_FIRST: Duration = Duration::from_millis(20);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Where a job's commands go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// The master of the job's slot.
    Slot,
    /// One node (a function library to every master).
    Node(String),
    /// The node importing the slot, each command behind ASKING.
    Ask(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobKind {
    /// One key (RESTORE, or SET for a string), or strings of one slot together (MSET).
    Key,
    /// A key written as batches under a temporary name.
    Batched,
    Function,
    /// Removing a batched key's temporary name after it failed.
    Cleanup,
}

/// A key's commands (or a library's), resent whole when retried.
#[derive(Debug, Clone)]
struct Job {
    kind: JobKind,
    db: u64,
    key: Vec<u8>,
    slot: u16,
    route: Route,
    commands: Vec<Vec<u8>>,
    bytes: u64,
    attempts: u32,
    /// The temporary name of a batched key.
    temp: Option<Vec<u8>>,
    /// Keys the job writes (more than one: an MSET, split into SETs where needed).
    keys: u64,
}

/// How a job's replies went (the most telling one wins).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Ok,
    Failed(String),
    Retry(String),
    Moved(u16, String),
    Ask(String),
}

impl Outcome {
    fn of(reply: &Reply) -> Outcome {
        let Reply::Error(e) = reply else { return Outcome::Ok };
        let mut words = e.split(' ');
        let kind = words.next().unwrap_or("");
        match kind {
            "MOVED" | "ASK" => {
                let slot = words.next().and_then(|s| s.parse::<u16>().ok());
                let addr = words.next().map(str::to_string);
                match (kind, slot, addr) {
                    ("MOVED", Some(s), Some(a)) => Outcome::Moved(s, a),
                    ("ASK", Some(_), Some(a)) => Outcome::Ask(a),
                    _ => Outcome::Failed(e.clone()),
                }
            }
            "TRYAGAIN" | "CLUSTERDOWN" | "LOADING" | "MASTERDOWN" | "BUSY" | "READONLY" => Outcome::Retry(e.clone()),
            _ => Outcome::Failed(e.clone()),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::Failed(_) => 1,
            Outcome::Retry(_) => 2,
            Outcome::Ask(_) | Outcome::Moved(..) => 3,
        }
    }
}

/// A job whose replies are awaited.
struct Running {
    job: Job,
    link: usize,
    left: u64,
    outcome: Outcome,
}

/// What restore did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub keys: u64,
    /// Keys written in batches under a temporary name.
    pub batched: u64,
    pub functions: u64,
    /// Bytes of commands sent (or, in a dry run, that would be).
    pub bytes: u64,
    pub filtered: u64,
    pub expired: u64,
    pub retries: u64,
    pub moved: u64,
    pub ask: u64,
    pub refreshes: u64,
    /// Keys refused, by the first word of the error.
    pub errors: BTreeMap<String, u64>,
    /// The first failed keys: db, key, error.
    pub failures: Vec<(u64, Vec<u8>, String)>,
    /// What the target's version could not hold, per key.
    pub losses: Vec<String>,
    /// Keys per master address.
    pub per_node: BTreeMap<String, u64>,
    pub target: String,
    pub cluster: bool,
    pub seconds: f64,
}

impl Summary {
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// Writes a big key's commands to a socket; returns how many.
type StreamKey<'w> = dyn FnMut(&mut dyn Write) -> Result<u64, ToolError> + 'w;

/// Keys and values of strings going as MSETs.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The connections and the jobs in flight.
struct Dispatcher {
    access: Access,
    topo: Topology,
    seeds: Vec<String>,
    links: Vec<Option<Link>>,
    by_addr: HashMap<String, usize>,
    generation: u64,
    tx: Sender<Message>,
    rx: Receiver<Message>,
    running: HashMap<u64, Running>,
    next_id: u64,
    /// Jobs to resend, with when.
    retry: VecDeque<(Instant, Job)>,
    stale: bool,
    last_refresh: Option<Instant>,
    retries: u32,
    dry_run: bool,
    /// A streamed big key's outcome (it is not requeued: its commands are gone).
    streamed: HashMap<u64, Outcome>,
    sum: Summary,
    rate: Option<(u64, Instant)>,
    sent_keys: u64,
}

impl Dispatcher {
    fn new(addr: String, access: Access, topo: Topology, retries: u32, dry_run: bool, rate: Option<u64>) -> Self {
        let (tx, rx) = channel();
        let mut sum = Summary { target: addr.clone(), cluster: topo.cluster, ..Default::default() };
        for m in &topo.masters {
            sum.per_node.insert(m.clone(), 0);
        }
        Dispatcher {
            access,
            topo,
            seeds: vec![addr],
            links: Vec::new(),
            by_addr: HashMap::new(),
            generation: 0,
            tx,
            rx,
            running: HashMap::new(),
            next_id: 0,
            retry: VecDeque::new(),
            stale: false,
            last_refresh: None,
            retries,
            dry_run,
            streamed: HashMap::new(),
            sum,
            rate: rate.map(|r| (r.max(1), Instant::now())),
            sent_keys: 0,
        }
    }

    /// The open link to `addr`, connecting if needed.
    fn link(&mut self, addr: &str) -> io::Result<usize> {
        let i = match self.by_addr.get(addr) {
            Some(&i) => i,
            None => {
                self.links.push(None);
                self.by_addr.insert(addr.to_string(), self.links.len() - 1);
                self.links.len() - 1
            }
        };
        if self.links[i].is_none() {
            self.generation += 1;
            self.links[i] = Some(Link::open(addr, &self.access, i, self.generation, self.tx.clone())?);
        }
        Ok(i)
    }

    fn address(&self, job: &Job) -> Option<String> {
        match &job.route {
            Route::Slot => self.topo.node_of(job.slot).map(str::to_string),
            Route::Node(a) | Route::Ask(a) => Some(a.clone()),
        }
    }

    /// Wait while `--rate` says the next key is early.
    fn pace(&mut self) -> Result<(), ToolError> {
        let Some((rate, start)) = self.rate else { return Ok(()) };
        loop {
            let due = start + Duration::from_secs_f64(self.sent_keys as f64 / rate as f64);
            let now = Instant::now();
            if now >= due {
                return Ok(());
            }
            self.flush_all();
            self.wait(due - now)?;
        }
    }

    /// Send a job (or, in a dry run, count it).
    fn submit(&mut self, job: Job) -> Result<(), ToolError> {
        if job.kind == JobKind::Key || job.kind == JobKind::Batched {
            self.pace()?;
            self.sent_keys += job.keys;
        }
        if self.dry_run {
            let addr = self.address(&job).unwrap_or_default();
            self.account(&job, &addr);
            return Ok(());
        }
        self.send(job, None)
    }

    fn account(&mut self, job: &Job, addr: &str) {
        match job.kind {
            JobKind::Key | JobKind::Batched => {
                self.sum.keys += job.keys;
                if job.kind == JobKind::Batched {
                    self.sum.batched += 1;
                }
                *self.sum.per_node.entry(addr.to_string()).or_default() += job.keys;
            }
            JobKind::Function => self.sum.functions += 1,
            JobKind::Cleanup => {}
        }
        self.sum.bytes += job.bytes;
    }

    /// Write `job` to its node; `stream` writes a big key's commands straight to the
    /// socket instead of `job.commands` (and returns how many).
    fn send(&mut self, job: Job, stream: Option<&mut StreamKey<'_>>) -> Result<(), ToolError> {
        let Some(addr) = self.address(&job) else {
            self.stale = true;
            let slot = job.slot;
            return self.requeue(job, Outcome::Retry(format!("CLUSTERDOWN no master serves slot {slot}")));
        };
        let i = match self.link(&addr) {
            Ok(i) => i,
            Err(e) => {
                self.stale = true;
                return self.requeue(job, Outcome::Retry(format!("connecting to {addr}: {e}")));
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        let cluster = self.topo.cluster;
        let Some(link) = self.links[i].as_mut() else { return Ok(()) };
        let mut head = Vec::new();
        let mut count = 0u64;
        if !cluster && job.kind != JobKind::Function && link.db != Some(job.db) {
            put_multibulk(&mut head, &[b"SELECT".as_slice(), job.db.to_string().as_bytes()]);
            count += 1;
            link.db = Some(job.db);
        }
        let asking = matches!(job.route, Route::Ask(_));
        let mut io_result = link.writer().write_all(&head);
        if io_result.is_ok() {
            if let Some(stream) = stream {
                match stream(link.writer()) {
                    Ok(n) => count += n,
                    Err(ToolError::Io(e)) => io_result = Err(e),
                    Err(other) => return Err(other),
                }
            } else {
                for c in &job.commands {
                    if asking {
                        if let Err(e) = link.writer().write_all(b"*1\r\n$6\r\nASKING\r\n") {
                            io_result = Err(e);
                            break;
                        }
                        count += 1;
                    }
                    if let Err(e) = link.writer().write_all(c) {
                        io_result = Err(e);
                        break;
                    }
                    count += 1;
                }
            }
        }
        for _ in 0..count {
            link.pending.push_back(link::Pending { job: id });
        }
        let full = link.pending.len() >= WINDOW;
        self.running.insert(id, Running { job, link: i, left: count, outcome: Outcome::Ok });
        if let Err(e) = io_result {
            self.link_lost(i, &e.to_string())?;
            return Ok(());
        }
        if full {
            self.flush(i);
            while self.links.get(i).and_then(Option::as_ref).is_some_and(|l| l.pending.len() >= WINDOW / 2) {
                self.wait(Duration::from_secs(1))?;
            }
        }
        Ok(())
    }

    fn flush(&mut self, i: usize) {
        if let Some(Some(l)) = self.links.get_mut(i) {
            if let Err(e) = l.flush() {
                let e = e.to_string();
                let _ = self.link_lost(i, &e);
            }
        }
    }

    fn flush_all(&mut self) {
        for i in 0..self.links.len() {
            self.flush(i);
        }
    }

    /// A link broke: every job waiting on it is retried.
    fn link_lost(&mut self, i: usize, why: &str) -> Result<(), ToolError> {
        let Some(mut link) = self.links[i].take() else { return Ok(()) };
        link.close();
        self.stale = true;
        let ids: Vec<u64> = self.running.iter().filter(|(_, r)| r.link == i).map(|(&id, _)| id).collect();
        for id in ids {
            if let Some(r) = self.running.remove(&id) {
                self.finish(id, r.job, Outcome::Retry(format!("link to {} lost: {why}", link.addr)))?;
            }
        }
        Ok(())
    }

    /// Handle replies for up to `timeout`, then whatever else has come.
    fn wait(&mut self, timeout: Duration) -> Result<(), ToolError> {
        match self.rx.recv_timeout(timeout) {
            Ok(m) => self.on_message(m)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(ToolError::Usage("internal: reply channel closed".into()))
            }
        }
        while let Ok(m) = self.rx.try_recv() {
            self.on_message(m)?;
        }
        Ok(())
    }

    fn on_message(&mut self, (i, generation, reply): Message) -> Result<(), ToolError> {
        let Some(link) = self.links.get_mut(i).and_then(Option::as_mut) else { return Ok(()) };
        if link.generation != generation {
            return Ok(());
        }
        let reply = match reply {
            Ok(r) => r,
            Err(e) => return self.link_lost(i, &e.to_string()),
        };
        let Some(p) = link.pending.pop_front() else {
            return self.link_lost(i, "a reply nothing was waiting for");
        };
        let Some(r) = self.running.get_mut(&p.job) else { return Ok(()) };
        let o = Outcome::of(&reply);
        if o.rank() > r.outcome.rank() {
            r.outcome = o;
        }
        r.left -= 1;
        if r.left == 0 {
            if let Some(r) = self.running.remove(&p.job) {
                let addr = self.links[i].as_ref().map(|l| l.addr.clone()).unwrap_or_default();
                if r.outcome == Outcome::Ok {
                    self.account(&r.job, &addr);
                }
                self.finish(p.job, r.job, r.outcome)?;
            }
        }
        Ok(())
    }

    /// A job's replies are all in (or its link is gone).
    fn finish(&mut self, id: u64, job: Job, outcome: Outcome) -> Result<(), ToolError> {
        if job.commands.is_empty() && job.kind == JobKind::Batched {
            // A streamed big key: its caller decides.
            self.streamed.insert(id, outcome);
            return Ok(());
        }
        match outcome {
            Outcome::Ok => Ok(()),
            o => self.requeue(job, o),
        }
    }

    /// Try `job` again after what `outcome` says, or count it failed.
    fn requeue(&mut self, mut job: Job, outcome: Outcome) -> Result<(), ToolError> {
        if job.keys > 1 && outcome != Outcome::Ok && !matches!(outcome, Outcome::Moved(..)) {
            // One SET a key: a slot being migrated takes no multi-key command until it is
            // done, and a refusal (an ACL's key patterns) may concern only some of the keys.
            let fresh = matches!(outcome, Outcome::Failed(_));
            let commands = std::mem::take(&mut job.commands);
            let mset = commands.first().map(Vec::as_slice).unwrap_or_default();
            let argv =
                ferrokv::format::aof::CommandReader::command_at(mset, 0).map(|(argv, _)| argv).unwrap_or_default();
            for pair in argv.get(1..).unwrap_or_default().chunks_exact(2) {
                let single = Job {
                    commands: vec![set_command(pair[0], pair[1])],
                    keys: 1,
                    key: pair[0].to_vec(),
                    ..job.clone()
                };
                if fresh {
                    self.retry.push_back((Instant::now(), single));
                } else {
                    self.requeue(single, outcome.clone())?;
                }
            }
            return Ok(());
        }
        let mut delay = Duration::ZERO;
        match outcome {
            Outcome::Ok => return Ok(()),
            Outcome::Failed(e) => return self.failed(job, e),
            Outcome::Moved(slot, addr) => {
                self.sum.moved += 1;
                self.topo.moved(slot, &addr);
                self.stale = true;
                job.route = match job.route {
                    Route::Node(_) => Route::Node(addr),
                    _ => Route::Slot,
                };
            }
            Outcome::Ask(addr) => {
                self.sum.ask += 1;
                job.route = Route::Ask(addr);
            }
            Outcome::Retry(e) => {
                if e.starts_with("READONLY") {
                    self.stale = true;
                }
                if job.attempts >= self.retries {
                    return self.failed(job, e);
                }
                let shift = job.attempts.min(6);
                delay = (BACKOFF_FIRST * (1 << shift)).min(BACKOFF_MAX);
                if matches!(job.route, Route::Ask(_)) {
                    job.route = Route::Slot;
                }
            }
        }
        job.attempts += 1;
        self.sum.retries += 1;
        if job.attempts > self.retries + 8 {
            return self.failed(job, "too many redirections".into());
        }
        self.retry.push_back((Instant::now() + delay, job));
        Ok(())
    }

    fn failed(&mut self, job: Job, error: String) -> Result<(), ToolError> {
        if job.kind == JobKind::Cleanup {
            return Ok(());
        }
        let kind = error.split(' ').next().unwrap_or("ERR").to_string();
        *self.sum.errors.entry(kind).or_default() += job.keys;
        if self.sum.failures.len() < NAMED_FAILURES {
            self.sum.failures.push((job.db, job.key.clone(), error));
        }
        if let Some(temp) = job.temp {
            let mut c = Vec::new();
            put_multibulk(&mut c, &[b"DEL".as_slice(), &temp]);
            let cleanup =
                Job { kind: JobKind::Cleanup, commands: vec![c], temp: None, attempts: self.retries, keys: 0, ..job };
            self.retry.push_back((Instant::now(), cleanup));
        }
        Ok(())
    }

    /// Resend the retries that are due (after a topology refresh if one is needed).
    fn resend_due(&mut self) -> Result<(), ToolError> {
        if self.retry.is_empty() {
            return Ok(());
        }
        self.refresh_if_stale();
        let now = Instant::now();
        let due: Vec<Job> = {
            let (due, later): (Vec<_>, Vec<_>) = self.retry.drain(..).partition(|(t, _)| *t <= now);
            self.retry = later.into_iter().collect();
            due.into_iter().map(|(_, j)| j).collect()
        };
        for job in due {
            self.send(job, None)?;
        }
        self.flush_all();
        Ok(())
    }

    fn refresh_if_stale(&mut self) {
        if !self.stale || !self.topo.cluster {
            return;
        }
        if self.last_refresh.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) {
            return;
        }
        self.last_refresh = Some(Instant::now());
        let mut seeds = self.topo.masters.clone();
        seeds.extend(self.seeds.iter().cloned());
        if let Ok(t) = Topology::discover(&seeds, &self.access) {
            self.topo = t;
            self.stale = false;
            self.sum.refreshes += 1;
        }
    }

    /// Everything sent, every retry done.
    fn drain(&mut self) -> Result<(), ToolError> {
        loop {
            self.flush_all();
            self.resend_due()?;
            if self.running.is_empty() && self.retry.is_empty() {
                return Ok(());
            }
            let next_retry = self.retry.iter().map(|(t, _)| *t).min();
            let wait = match next_retry {
                Some(t) if self.running.is_empty() => t.saturating_duration_since(Instant::now()),
                Some(t) => t.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)),
                None => Duration::from_secs(1),
            };
            self.wait(wait.max(Duration::from_millis(1)))?;
        }
    }
}

/// A name in `slot` for a batched key while it is built (the slot's, so RENAME stays on
/// one node; any name in a standalone server).
fn temp_name(slot: u16, cluster: bool) -> Vec<u8> {
    let pid = std::process::id();
    for n in 0u32.. {
        let name = format!("__ferrokv_restore:{pid}:{n}").into_bytes();
        if !cluster || hash_slot(&name) == slot {
            return name;
        }
    }
    Vec::new()
}

/// What the workers need to turn a batch into jobs.
struct Encode<'f> {
    filter: &'f Filter,
    target: Target,
    cluster: bool,
    big_elements: usize,
    big_bytes: usize,
    /// Payloads without LZF: the server loads them faster, and loopback or a LAN carries
    /// the bytes for less than compressing them costs.
    encoder: Encoder,
    /// The file's RDB version, when its values can be sent as they are.
    raw_version: Option<u32>,
    file_version: u32,
    /// Each value type's byte in the file's dialect, by `ValueType::code`.
    type_bytes: Vec<Option<u8>>,
}

/// A batch's jobs and what was left out or lost.
#[derive(Default)]
struct Encoded {
    jobs: Vec<Job>,
    /// Strings without a TTL, by database and slot, to go as MSETs.
    strings: BTreeMap<(u64, u16), Pairs>,
    filtered: u64,
    expired: u64,
    losses: Vec<String>,
}

impl Encode<'_> {
    /// Whether `k` is restored; counts it when not.
    fn wants(&self, k: &KeyRecord<'_>, out: &mut Encoded) -> bool {
        if !self.filter.selects(k) {
            out.filtered += 1;
            return false;
        }
        if self.filter.skips_expired(k) {
            out.expired += 1;
            return false;
        }
        true
    }

    /// The value's own bytes as the payload, when the target reads the file's encodings
    /// (its RDB version is the file's or later) and a deep check finds every element sound
    /// (Redis checks only a blob's header when it loads a payload: damage must not reach it).
    fn raw_restore(&self, k: &KeyRecord<'_>, key: &[u8]) -> Option<Vec<u8>> {
        let version = self.raw_version?;
        let type_byte = (*self.type_bytes.get(usize::from(k.value.vtype.code()))?)?;
        match crate::verify::check_value(k, version) {
            Ok(c) if c.warning.is_none() => {}
            _ => return None,
        }
        let body = &k.value.body;
        let len = k.end.checked_sub(body.offset())?;
        let value = body.bytes().get(..len)?;
        let version = (version as u16).to_le_bytes();
        let mut crc = ferrokv::format::crc::Crc64::new();
        crc.update(&[type_byte]);
        crc.update(value);
        crc.update(&version);
        let crc = crc.finish().to_le_bytes();
        Some(restore_command(k, key, &[&[type_byte], value, &version, &crc]))
    }

    /// Whether commands can rebuild `k` exactly (so it may be written in batches).
    fn can_batch(&self, k: &KeyRecord<'_>) -> Result<bool, ToolError> {
        Ok(!matches!(k.value.logical(), LogicalType::String | LogicalType::Module) && !dump::needs_restore(k)?)
    }

    /// Whether `k`, which commands can carry, is too big for one RESTORE.
    /// (The caller has seen [`Encode::can_batch`]: for a zset it reads every score.)
    fn is_big(&self, k: &KeyRecord<'_>) -> Result<bool, ToolError> {
        if k.value.body.len() > self.big_bytes {
            return Ok(true);
        }
        // Every element takes at least a byte, and LZF packs at most about 90 into one:
        // a small value need not be counted.
        if k.value.body.len().saturating_mul(100) < self.big_elements {
            return Ok(false);
        }
        let e = dump::ctx(k);
        let v = &k.value;
        let count = match v.logical() {
            LogicalType::List => v.list().map_err(&e)?.count(),
            LogicalType::Set => v.set().map_err(&e)?.count(),
            LogicalType::Zset => v.zset().map_err(&e)?.count(),
            LogicalType::Hash => v.hash().map_err(&e)?.count(),
            LogicalType::Stream => v.stream().map_err(&e)?.entries().count(),
            LogicalType::String | LogicalType::Module => 1,
        };
        Ok(count > self.big_elements)
    }

    fn job(&self, k: &KeyRecord<'_>, out: &mut Encoded) -> Result<(), ToolError> {
        if !self.wants(k, out) {
            return Ok(());
        }
        let key = k.key.to_bytes().into_owned();
        let slot = if self.cluster { hash_slot(&key) } else { 0 };
        if k.value.logical() == LogicalType::String && k.idle.is_none() && k.freq.is_none() {
            // A string is what SET makes of its bytes (the same encoding as RESTORE's), and
            // strings without a TTL go many to a command.
            let value = k.value.string().and_then(|v| v.to_elem()).map_err(dump::ctx(k))?.to_bytes().into_owned();
            match k.expire_ms {
                None => out.strings.entry((k.db, slot)).or_default().push((key, value)),
                Some(ms) => {
                    let mut c = Vec::with_capacity(key.len() + value.len() + 64);
                    put_multibulk(&mut c, &[b"SET".as_slice(), &key, &value, b"PXAT", ms.to_string().as_bytes()]);
                    out.jobs.push(Job::key(k.db, key, slot, c));
                }
            }
            return Ok(());
        }
        let can_batch = self.can_batch(k)?;
        if !can_batch || !self.is_big(k)? {
            if let Some(command) = self.raw_restore(k, &key) {
                out.jobs.push(Job::key(k.db, key, slot, command));
                return Ok(());
            }
        }
        let logical = if can_batch && k.value.body.len() > self.big_bytes {
            None
        } else {
            Some(Logical::from_record(k).map_err(dump::ctx(k))?)
        };
        let logical = match logical {
            Some(l) if !(can_batch && l.len() > self.big_elements) => l,
            _ => {
                let temp = temp_name(slot, self.cluster);
                let mut o = Out::memory();
                let mut commands = vec![del(&temp)];
                dump::key_commands(&mut o, k, &temp, self.target, self.filter)?;
                split_commands(&o.buf, &mut commands);
                commands.push(rename(&temp, &key));
                let bytes = commands.iter().map(|c| c.len() as u64).sum();
                out.jobs.push(Job::batched(k.db, key, slot, temp, commands, bytes));
                return Ok(());
            }
        };
        let mut losses = Vec::new();
        let payload = dump_payload(&self.encoder, &logical, &mut losses);
        for l in losses {
            out.losses.push(format!("db {} key '{}': {}", k.db, escape_key(&key), l.what));
        }
        let command = restore_command(k, &key, &[&payload]);
        out.jobs.push(Job::key(k.db, key, slot, command));
        Ok(())
    }
}

/// Strings per MSET.
const PAIRS_PER_MSET: usize = 128;

impl Encoded {
    /// The gathered strings as MSETs (a lone string as SET).
    fn strings_to_jobs(&mut self) {
        for ((db, slot), pairs) in std::mem::take(&mut self.strings) {
            let mut rest = pairs.into_iter().peekable();
            while rest.peek().is_some() {
                let chunk: Vec<(Vec<u8>, Vec<u8>)> = rest.by_ref().take(PAIRS_PER_MSET).collect();
                if chunk.len() == 1 {
                    let (key, value) = chunk.into_iter().next().unwrap_or_default();
                    let c = set_command(&key, &value);
                    self.jobs.push(Job::key(db, key, slot, c));
                    continue;
                }
                let mut args: Vec<&[u8]> = Vec::with_capacity(1 + 2 * chunk.len());
                args.push(b"MSET");
                for (k, v) in &chunk {
                    args.push(k);
                    args.push(v);
                }
                let mut c = Vec::new();
                put_multibulk(&mut c, &args);
                let mut job = Job::key(db, chunk[0].0.clone(), slot, c);
                job.keys = chunk.len() as u64;
                self.jobs.push(job);
            }
        }
    }
}

/// Counts what is written (a dry run's size of a big key's commands).
struct ByteCount(u64);

impl Write for ByteCount {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Job {
    /// A key written in batches under `temp` (`commands` empty: streamed from its record).
    fn batched(db: u64, key: Vec<u8>, slot: u16, temp: Vec<u8>, commands: Vec<Vec<u8>>, bytes: u64) -> Job {
        Job {
            kind: JobKind::Batched,
            db,
            key,
            slot,
            route: Route::Slot,
            commands,
            bytes,
            attempts: 0,
            temp: Some(temp),
            keys: 1,
        }
    }

    /// A job of one command writing one key of `slot`.
    fn key(db: u64, key: Vec<u8>, slot: u16, command: Vec<u8>) -> Job {
        Job {
            kind: JobKind::Key,
            db,
            key,
            slot,
            route: Route::Slot,
            bytes: command.len() as u64,
            commands: vec![command],
            attempts: 0,
            temp: None,
            keys: 1,
        }
    }
}

fn set_command(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(key.len() + value.len() + 32);
    put_multibulk(&mut c, &[b"SET".as_slice(), key, value]);
    c
}

fn del(name: &[u8]) -> Vec<u8> {
    let mut c = Vec::new();
    put_multibulk(&mut c, &[b"DEL".as_slice(), name]);
    c
}

fn rename(from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut c = Vec::new();
    put_multibulk(&mut c, &[b"RENAME".as_slice(), from, to]);
    c
}

/// `RESTORE key ttl payload ABSTTL REPLACE`, with the key's idle time or frequency.
fn restore_command(k: &KeyRecord<'_>, key: &[u8], payload: &[&[u8]]) -> Vec<u8> {
    let ttl = k.expire_ms.unwrap_or(0).to_string();
    let hint = match (k.idle, k.freq) {
        (Some(s), _) => Some((b"IDLETIME".as_slice(), s.to_string())),
        (None, Some(f)) => Some((b"FREQ".as_slice(), f.to_string())),
        (None, None) => None,
    };
    let len: usize = payload.iter().map(|p| p.len()).sum();
    let mut c = Vec::with_capacity(len + key.len() + 96);
    let bulk = |c: &mut Vec<u8>, parts: &[&[u8]]| {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        c.push(b'$');
        c.extend_from_slice(n.to_string().as_bytes());
        c.extend_from_slice(b"\r\n");
        for p in parts {
            c.extend_from_slice(p);
        }
        c.extend_from_slice(b"\r\n");
    };
    c.extend_from_slice(if hint.is_some() { b"*8\r\n" } else { b"*6\r\n" });
    bulk(&mut c, &[b"RESTORE"]);
    bulk(&mut c, &[key]);
    bulk(&mut c, &[ttl.as_bytes()]);
    bulk(&mut c, payload);
    bulk(&mut c, &[b"ABSTTL"]);
    bulk(&mut c, &[b"REPLACE"]);
    if let Some((word, n)) = &hint {
        bulk(&mut c, &[word]);
        bulk(&mut c, &[n.as_bytes()]);
    }
    c
}

/// Cut a buffer of whole multibulk commands (as `put_multibulk` writes them) into one
/// buffer per command.
fn split_commands(buf: &[u8], out: &mut Vec<Vec<u8>>) {
    for c in ferrokv::format::aof::CommandReader::new(buf).map_while(Result::ok) {
        out.push(buf[c.offset..c.end].to_vec());
    }
}

/// The restore's side of the pipeline: jobs sent in file order, big keys streamed.
struct RestoreStage<'s, 'f, 'a> {
    sender: &'s mut Dispatcher,
    encode: &'s Encode<'f>,
    filter: &'s Filter,
    progress: crate::progress::Progress,
    release: &'s dyn Fn(usize),
    error: Option<ToolError>,
    /// Function libraries are restored (no filter asks for keys only).
    functions: bool,
    /// Big keys written straight to a socket, by job: the record is kept (the file stays
    /// mapped) to write the key again if it must be retried.
    streaming: HashMap<u64, (KeyRecord<'a>, Job)>,
    /// Big keys to write again, and when.
    waiting: Vec<(Instant, KeyRecord<'a>, Job)>,
}

impl<'a> RestoreStage<'_, '_, 'a> {
    /// Write a big key's commands (DEL temp, the batches, RENAME temp key) to its node.
    fn stream(&mut self, k: &KeyRecord<'a>, job: Job) -> Result<(), ToolError> {
        let id = self.sender.next_id;
        let (target, filter) = (self.encode.target, self.filter);
        let (temp, key) = (job.temp.clone().unwrap_or_default(), job.key.clone());
        let mut bytes = 0u64;
        let mut write = |w: &mut dyn Write| -> Result<u64, ToolError> {
            let mut o = Out::new(w);
            o.buf.extend_from_slice(&del(&temp));
            let n = dump::key_commands(&mut o, k, &temp, target, filter)?;
            o.buf.extend_from_slice(&rename(&temp, &key));
            bytes += o.buf.len() as u64;
            o.finish()?;
            Ok(n + 2)
        };
        self.sender.send(job.clone(), Some(&mut write))?;
        if let Some(r) = self.sender.running.get_mut(&id) {
            r.job.bytes = bytes;
        }
        self.streaming.insert(id, (k.clone(), job));
        Ok(())
    }

    /// Take the outcomes of streamed keys; write again those due for a retry.
    fn settle(&mut self) -> Result<(), ToolError> {
        let outcomes: Vec<(u64, Outcome)> = self.sender.streamed.drain().collect();
        for (id, outcome) in outcomes {
            let Some((k, mut job)) = self.streaming.remove(&id) else { continue };
            let delay = match outcome {
                Outcome::Ok => continue,
                Outcome::Failed(e) => {
                    self.sender.failed(job, e)?;
                    continue;
                }
                Outcome::Moved(slot, addr) => {
                    self.sender.sum.moved += 1;
                    self.sender.topo.moved(slot, &addr);
                    self.sender.stale = true;
                    Duration::ZERO
                }
                // A streamed key is not sent behind ASKING: the migration is waited out.
                Outcome::Ask(_) | Outcome::Retry(_) => {
                    if job.attempts >= self.sender.retries {
                        self.sender.failed(job, "TRYAGAIN the key's slot stayed unavailable".into())?;
                        continue;
                    }
                    (BACKOFF_FIRST * (1 << job.attempts.min(6))).min(BACKOFF_MAX)
                }
            };
            job.attempts += 1;
            self.sender.sum.retries += 1;
            self.waiting.push((Instant::now() + delay, k, job));
        }
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting).into_iter().partition(|w| w.0 <= now);
        self.waiting = later;
        if !due.is_empty() {
            self.sender.refresh_if_stale();
        }
        for (_, k, job) in due {
            self.stream(&k, job)?;
        }
        Ok(())
    }

    /// Wait until every key sent has landed or failed.
    fn finish(&mut self) -> Result<(), ToolError> {
        loop {
            self.sender.drain()?;
            self.settle()?;
            if self.streaming.is_empty() && self.waiting.is_empty() {
                return Ok(());
            }
            if self.sender.running.is_empty() {
                if let Some(t) = self.waiting.iter().map(|w| w.0).min() {
                    std::thread::sleep(t.saturating_duration_since(Instant::now()));
                }
            }
        }
    }
}

impl<'a> Stage<'a, Encoded> for RestoreStage<'_, '_, 'a> {
    fn record(&mut self, rec: &Record<'a>) {
        let code = match rec {
            Record::Function { code, .. } | Record::FunctionPreGa { code, .. } => code.to_bytes(),
            _ => return,
        };
        if !self.functions {
            return;
        }
        if self.sender.topo.version == ServerVersion::Redis62 {
            self.sender.sum.losses.push(format!(
                "function library '{}': the target ({}) has no functions",
                library_name(&code),
                self.sender.topo.versions.first().cloned().unwrap_or_default()
            ));
            return;
        }
        let mut c = Vec::new();
        put_multibulk(&mut c, &[b"FUNCTION".as_slice(), b"LOAD", b"REPLACE", &code]);
        for m in self.sender.topo.masters.clone() {
            let job = Job {
                kind: JobKind::Function,
                db: 0,
                key: library_name(&code).into_bytes(),
                slot: 0,
                route: Route::Node(m),
                bytes: c.len() as u64,
                commands: vec![c.clone()],
                attempts: 0,
                temp: None,
                keys: 0,
            };
            if let Err(e) = self.sender.submit(job) {
                self.error.get_or_insert(e);
            }
        }
    }

    fn batch(&mut self, out: Encoded) -> Result<(), ToolError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.sender.sum.filtered += out.filtered;
        self.sender.sum.expired += out.expired;
        self.sender.sum.losses.extend(out.losses);
        for job in out.jobs {
            self.sender.submit(job)?;
        }
        self.sender.flush_all();
        while let Ok(m) = self.sender.rx.try_recv() {
            self.sender.on_message(m)?;
        }
        self.sender.resend_due()?;
        self.settle()
    }

    fn big_key(&mut self, rec: &Record<'a>, _prev_db: Option<u64>) -> Result<(), ToolError> {
        let Record::Key(k) = rec else { return Ok(()) };
        let mut enc = Encoded::default();
        if !self.encode.wants(k, &mut enc) {
            return self.batch(enc);
        }
        if !(self.encode.can_batch(k)? && self.encode.is_big(k)?) {
            self.encode.job(k, &mut enc)?;
            enc.strings_to_jobs();
            return self.batch(enc);
        }
        // Checked whole first: a value found corrupt halfway through would leave its
        // temporary key and a broken pipeline behind.
        crate::verify::check_value(k, self.encode.file_version).map_err(dump::ctx(k))?;
        let key = k.key.to_bytes().into_owned();
        let cluster = self.encode.cluster;
        let slot = if cluster { hash_slot(&key) } else { 0 };
        let temp = temp_name(slot, cluster);
        let (target, filter) = (self.encode.target, self.filter);
        if self.sender.dry_run {
            let mut count = ByteCount(0);
            let mut o = Out::new(&mut count);
            dump::key_commands(&mut o, k, &temp, target, filter)?;
            o.finish()?;
            return self.sender.submit(Job::batched(k.db, key, slot, temp, Vec::new(), count.0));
        }
        self.sender.pace()?;
        self.sender.sent_keys += 1;
        let job = Job::batched(k.db, key, slot, temp, Vec::new(), 0);
        self.stream(k, job)?;
        self.settle()
    }

    fn done(&mut self, offset: usize) {
        (self.release)(offset);
    }

    fn progress(&mut self, offset: usize) {
        self.progress.set(offset as u64);
    }
}

/// A library's name from its `#!lua name=...` line.
fn library_name(code: &[u8]) -> String {
    let first = code.split(|&b| b == b'\n').next().unwrap_or_default();
    let first = String::from_utf8_lossy(first);
    first.split_whitespace().find_map(|w| w.strip_prefix("name=")).unwrap_or("?").to_string()
}

/// Options beyond the files and the target.
pub struct Options {
    pub filter: Filter,
    pub rate: Option<u64>,
    pub dry_run: bool,
    pub big_key_elements: usize,
    pub big_key_bytes: usize,
    pub retries: u32,
    pub tls: TlsArgs,
}

/// The databases holding keys, and the target refused before anything is written when a
/// cluster would get keys of a database other than the one `--db` names.
fn check_databases(data: &[u8], name: &str, db: Option<u64>) -> Result<(), ToolError> {
    for rec in RdbReader::new(data)? {
        if let Record::Key(k) = rec? {
            if db.is_none() && k.db != 0 {
                return Err(ToolError::Usage(format!(
                    "{name}: db {} key '{}' (offset {}): a cluster has only database 0; --db {} restores that database's keys into it",
                    k.db,
                    escape_key(&k.key.to_bytes()),
                    k.offset,
                    k.db
                )));
            }
        }
    }
    Ok(())
}

/// Why a restore stopped: what it did until then, the file (or target) and the error.
#[derive(Debug)]
pub struct Stopped {
    pub summary: Summary,
    pub name: String,
    pub error: ToolError,
}

fn stopped(summary: Summary, name: &str, error: ToolError) -> Box<Stopped> {
    Box::new(Stopped { summary, name: name.to_string(), error })
}

/// Restore `files` (name, mapped file) into the target at `url`.
pub fn restore(
    files: &[(String, &ferrokv::Source)],
    url: &str,
    opts: &Options,
    pipeline: &Pipeline,
) -> Result<Summary, Box<Stopped>> {
    let started = Instant::now();
    let fail = |e: ToolError| stopped(Summary::default(), url, e);
    let (addr, access) = parse_url(url, &opts.tls).map_err(|e| fail(ToolError::Usage(e)))?;
    let topo = Topology::discover(std::slice::from_ref(&addr), &access)
        .map_err(|e| fail(ToolError::Usage(format!("cannot reach the target: {e}"))))?;
    if topo.cluster {
        for (name, src) in files {
            check_databases(src, name, opts.filter.db).map_err(|e| stopped(Summary::default(), name, e))?;
        }
    }
    let target = ferrokv::config::rdb_target_of(topo.version);
    let mut filter = opts.filter.clone();
    let mut sender = Dispatcher::new(addr, access, topo, opts.retries, opts.dry_run, opts.rate);
    for (name, src) in files {
        let data: &[u8] = src;
        let release = |off| src.release_before(off);
        let reader = match RdbReader::new(data) {
            Ok(r) => r,
            Err(e) => return Err(stopped(sender.sum, name, e.into())),
        };
        let cluster = sender.topo.cluster;
        let dialect = reader.dialect();
        let raw_version = (dialect.version <= target.version()
            && (dialect.family == Family::Redis || dialect.version <= 11))
            .then_some(dialect.version);
        if cluster && filter.db.is_none() {
            filter.db = Some(0);
        }
        let encode = Encode {
            filter: &filter,
            target,
            cluster,
            big_elements: opts.big_key_elements,
            big_bytes: opts.big_key_bytes,
            encoder: {
                let mut e = Encoder::new(target);
                e.limits.compression = false;
                e
            },
            raw_version,
            file_version: dialect.version,
            type_bytes: {
                let mut t = vec![None; 256];
                for b in 0..=255u8 {
                    if let Some(v) = dialect.value_type(b) {
                        t[usize::from(v.code())] = Some(b);
                    }
                }
                t
            },
        };
        let work = |batch: &Batch<'_>| -> Result<Encoded, ToolError> {
            let mut out = Encoded::default();
            for rec in &batch.records {
                if let Record::Key(k) = rec {
                    encode.job(k, &mut out)?;
                }
            }
            out.strings_to_jobs();
            Ok(out)
        };
        let result = {
            let mut stage = RestoreStage {
                sender: &mut sender,
                encode: &encode,
                filter: &filter,
                progress: crate::progress::Progress::new(data.len() as u64),
                release: &release,
                error: None,
                functions: opts.filter.db.is_none() && opts.filter.key.is_none() && opts.filter.types.is_empty(),
                streaming: HashMap::new(),
                waiting: Vec::new(),
            };
            let r = pipeline.run(reader, work, &mut stage);
            stage.progress.finish();
            // What was sent before an error still lands (and is counted).
            let finished = stage.finish();
            r.and_then(|()| stage.error.take().map_or(Ok(()), Err)).and(finished)
        };
        if let Err(e) = result {
            sender.sum.seconds = started.elapsed().as_secs_f64();
            return Err(stopped(sender.sum, name, e));
        }
    }
    for l in sender.links.iter_mut().flatten() {
        l.close();
    }
    sender.sum.seconds = started.elapsed().as_secs_f64();
    Ok(sender.sum)
}

/// The summary as text.
pub fn summary_text(s: &Summary, dry_run: bool) -> String {
    let mut t = String::new();
    let verb = if dry_run { "would restore" } else { "restored" };
    let rate = if s.seconds > 0.0 { s.keys as f64 / s.seconds } else { 0.0 };
    t.push_str(&format!(
        "{verb} {} keys ({} in batches) and {} function loads into {} ({}), {} bytes, in {:.2} s ({:.0} keys/s)\n",
        s.keys,
        s.batched,
        s.functions,
        s.target,
        if s.cluster { "cluster" } else { "standalone" },
        s.bytes,
        s.seconds,
        rate
    ));
    for (node, n) in &s.per_node {
        t.push_str(&format!("  {node}: {n} keys\n"));
    }
    if s.filtered + s.expired > 0 {
        t.push_str(&format!("left out: {} by the filters, {} already expired\n", s.filtered, s.expired));
    }
    if s.retries + s.moved + s.ask > 0 {
        t.push_str(&format!(
            "retries: {} (MOVED {}, ASK {}), topology refreshed {} times\n",
            s.retries, s.moved, s.ask, s.refreshes
        ));
    }
    for (kind, n) in &s.errors {
        t.push_str(&format!("FAILED: {n} keys refused with {kind}\n"));
    }
    for (db, key, e) in &s.failures {
        t.push_str(&format!("  db {db} key '{}': {e}\n", escape_key(key)));
    }
    for l in s.losses.iter().take(NAMED_FAILURES) {
        t.push_str(&format!("lost: {l}\n"));
    }
    if s.losses.len() > NAMED_FAILURES {
        t.push_str(&format!("lost: ... {} more\n", s.losses.len() - NAMED_FAILURES));
    }
    t
}

/// The summary as JSON.
pub fn summary_json(s: &Summary, dry_run: bool) -> serde_json::Value {
    serde_json::json!({
        "target": s.target,
        "cluster": s.cluster,
        "dry_run": dry_run,
        "keys": s.keys,
        "batched_keys": s.batched,
        "function_loads": s.functions,
        "bytes": s.bytes,
        "seconds": s.seconds,
        "keys_per_second": if s.seconds > 0.0 { s.keys as f64 / s.seconds } else { 0.0 },
        "per_node": s.per_node,
        "filtered": s.filtered,
        "expired": s.expired,
        "retries": s.retries,
        "moved": s.moved,
        "ask": s.ask,
        "topology_refreshes": s.refreshes,
        "errors": s.errors,
        "failures": s.failures.iter().map(|(db, k, e)| serde_json::json!({"db": db, "key": escape_key(k), "error": e})).collect::<Vec<_>>(),
        "losses": s.losses,
    })
}

/// Exit code when some keys were refused by the target.
pub const PARTIAL: u8 = 4;

/// An input as an RDB: an RDB file as it is; a jsonl dump (`rdbtool dump`) or an AOF (a
/// file, a manifest or a multi-part directory), replayed, as a temporary RDB.
fn open_input(path: &std::path::Path) -> Result<(ferrokv::Source, Option<crate::out::TempPath>), ToolError> {
    let name = path.display();
    let aof = |path: &std::path::Path| -> Result<(ferrokv::Source, Option<crate::out::TempPath>), ToolError> {
        let input = crate::replay::Input { aof: path.to_path_buf(), rdb: None };
        let replayed = crate::replay::Replay::run(&input, &crate::replay::Options::default())?;
        let temp = crate::out::TempPath::new("restore-aof");
        replayed.write_rdb(&temp.0)?;
        Ok((ferrokv::Source::open(&temp.0)?, Some(temp)))
    };
    if path.is_dir() {
        return aof(path);
    }
    let src = ferrokv::Source::open(path).map_err(|e| ToolError::Usage(format!("cannot read {name}: {e}")))?;
    if src.starts_with(b"REDIS") || src.starts_with(b"VALKEY") {
        return Ok((src, None));
    }
    if src.starts_with(b"{") {
        let (temp, staged) = crate::convert::stage_jsonl_as_rdb(&src, crate::now_ms() / 1000)?;
        return Ok((staged, Some(temp)));
    }
    if src.starts_with(b"*") || src.starts_with(b"#") || src.starts_with(b"file ") {
        return aof(path);
    }
    Err(ToolError::Usage(format!("{name}: not an RDB, a jsonl dump, an AOF or an AOF directory")))
}

/// `rdbtool restore` as the binary runs it.
pub fn run_cli(args: &RestoreArgs, w: &mut dyn Write) -> Result<u8, (String, ToolError)> {
    let mut types = Vec::new();
    for t in &args.types {
        match LogicalType::from_name(t) {
            Some(x) => types.push(x),
            None => return Err((t.clone(), ToolError::Usage(format!("unknown type '{t}'")))),
        }
    }
    let filter = Filter {
        db: args.db,
        key: args.key.clone().map(String::into_bytes),
        types,
        expired: match args.expired {
            ExpiredArg::Skip => Expired::Skip,
            ExpiredArg::Keep => Expired::Keep,
        },
        now_ms: args.now.unwrap_or_else(crate::now_ms),
    };
    let mut sources = Vec::new();
    let mut staged = Vec::new();
    for f in &args.files {
        let name = f.display().to_string();
        let (src, temp) = open_input(f).map_err(|e| (name.clone(), e))?;
        staged.extend(temp);
        sources.push((name, src));
    }
    let files: Vec<(String, &ferrokv::Source)> = sources.iter().map(|(n, s)| (n.clone(), s)).collect();
    let opts = Options {
        filter,
        rate: args.rate,
        dry_run: args.dry_run,
        big_key_elements: args.big_key_elements,
        big_key_bytes: args.big_key_bytes,
        retries: args.retries,
        tls: args.tls.clone(),
    };
    let print = |s: &Summary, w: &mut dyn Write| -> io::Result<()> {
        if args.json {
            writeln!(w, "{}", summary_json(s, args.dry_run))
        } else {
            w.write_all(summary_text(s, args.dry_run).as_bytes())
        }
    };
    match restore(&files, &args.to, &opts, &Pipeline::default()) {
        Ok(s) => {
            print(&s, w).map_err(|e| (args.to.clone(), e.into()))?;
            Ok(if s.failed() > 0 { PARTIAL } else { crate::exit::OK })
        }
        Err(stop) => {
            let Stopped { summary, name, error } = *stop;
            if summary.keys > 0 || !summary.errors.is_empty() {
                let _ = print(&summary, w);
            }
            Err((name, error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_share_the_keys_slot() {
        for key in [&b"user:1"[..], b"{tag}x", b"a}b{", b""] {
            let slot = hash_slot(key);
            assert_eq!(hash_slot(&temp_name(slot, true)), slot);
        }
    }

    #[test]
    fn outcomes_from_replies() {
        assert_eq!(Outcome::of(&Reply::Status("OK".into())), Outcome::Ok);
        assert_eq!(
            Outcome::of(&Reply::Error("MOVED 12 10.0.0.1:7001".into())),
            Outcome::Moved(12, "10.0.0.1:7001".into())
        );
        assert_eq!(Outcome::of(&Reply::Error("ASK 12 10.0.0.1:7001".into())), Outcome::Ask("10.0.0.1:7001".into()));
        assert!(matches!(Outcome::of(&Reply::Error("TRYAGAIN Multiple keys".into())), Outcome::Retry(_)));
        assert!(matches!(Outcome::of(&Reply::Error("ERR Bad data format".into())), Outcome::Failed(_)));
    }

    #[test]
    fn library_names() {
        assert_eq!(library_name(b"#!lua name=mylib\nredis.register_function('f', f)"), "mylib");
        assert_eq!(library_name(b"garbage"), "?");
    }
}
