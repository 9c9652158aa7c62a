//! `replay PATH`: rebuild a dataset from an AOF (file, manifest or multi-part directory),
//! optionally after an RDB, through the engine's command layer on a virtual clock driven by
//! the data, and check that expirations reached the log as DEL/UNLINK/HDEL.
//!
//! The clock: `#TS:<secs>` annotations (aof-timestamp-enabled) say a command ran at or after
//! that second, in the AOF of the server that ran it. In a file made from a replication
//! stream (a replica's own AOF, a directory `aoftool capture` wrote: its base has the
//! `repl-id` of the stream) they are when the command was received, which may be seconds
//! after the master ran it (a link catching up): there they only bound the time from above.
//! An expiry-shaped deletion (a single-key DEL/UNLINK of a key with a TTL, an HDEL of a
//! field with a TTL) that could have been an expiry at that time says the clock had passed
//! that TTL; without annotations (or with receive times) this is the only evidence of time.
//! The clock never goes back.
//!
//! The expiry check: a master deletes a logically expired key (or hash field) before any
//! command touches it, and logs the DEL/UNLINK (HDEL). So a command on a key whose TTL the
//! clock has certainly passed, found with no deletion in between, is a violation: the log
//! diverged from the master. The engine replays in loading mode (nothing expires by
//! itself), so such a key is still there and its TTL is the one the log gave it.
//!
//! Point in time: with `until`, the replay stops at the first `#TS:` annotation after it
//! (as `redis-check-aof --truncate-to-timestamp` cuts, without touching the files), so the
//! state is the dataset as it was then, to the second of the annotations.
//!
//! Also used by `aof-rewrite` ([`Replay::run`] without checks).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::{self, eq_ic, ExpireMode};
use ferrokv::format::aof::{has_rdb_preamble, AofSet, Command, CommandReader};
use ferrokv::format::rdb::{escape_key, head_aux, head_aux_int};
use ferrokv::keyspace::Clock;
use ferrokv::persist::load::{load_rdb, load_rdb_keeping};
use ferrokv::persist::snapshot::write_rdb;
use ferrokv::value::Value;
use ferrokv::{Config, Engine, Session, Source};

use crate::aof::check::{base_version, rdb_server_version};
use crate::out::ToolError;

/// What to replay: an AOF (file, manifest or directory; a plain RDB file also works), and
/// optionally an RDB loaded before it.
#[derive(Debug, Clone)]
pub struct Input {
    pub aof: PathBuf,
    pub rdb: Option<PathBuf>,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub check_expiry: bool,
    /// A point in time (unix ms): the replay stops at the first `#TS:` annotation after it,
    /// and the clock is there at the end: keys and fields whose TTL passed by then are
    /// listed as pending, then left out of the final state.
    pub until: Option<i64>,
    /// The `#TS:` annotations are when a replica received the commands (see the module's
    /// documentation); set by itself for a log whose base came from a replication stream.
    pub stamps_received: bool,
    /// Load only these keys of the base RDB (an offline rewrite streams the rest through).
    pub base_keys: Option<std::sync::Arc<KeySet>>,
}

/// Keys by database.
#[derive(Debug, Default)]
pub struct KeySet {
    dbs: HashMap<usize, HashSet<Vec<u8>>>,
}

impl KeySet {
    pub fn insert(&mut self, db: usize, key: &[u8]) {
        let keys = self.dbs.entry(db).or_default();
        if !keys.contains(key) {
            keys.insert(key.to_vec());
        }
    }

    pub fn contains(&self, db: usize, key: &[u8]) -> bool {
        self.dbs.get(&db).is_some_and(|keys| keys.contains(key))
    }

    pub fn len(&self) -> usize {
        self.dbs.values().map(HashSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The arguments of `argv` that are keys (the command table's key specs; the field-TTL
/// commands the engine may not know take their key first).
pub fn command_keys(argv: &[Vec<u8>]) -> Vec<usize> {
    match command::lookup(&argv[0]) {
        Some(spec) => spec.key_positions(argv),
        None if argv.len() > 1 && FIELDS_CLAUSE.iter().any(|c| eq_ic(&argv[0], c)) => vec![1],
        None => Vec::new(),
    }
}

/// Where a replay with `until` stopped: the first command annotated after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub file: String,
    pub offset: usize,
    /// Its `#TS:` (unix seconds).
    pub ts: i64,
    /// A MULTI block was open there, and was not applied.
    pub in_multi: bool,
}

/// A command on an expired key (or field) that the log did not delete first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub file: String,
    pub offset: usize,
    pub db: usize,
    pub key: Vec<u8>,
    pub field: Option<Vec<u8>>,
    pub expire_ms: i64,
    pub clock_ms: i64,
    /// Where the clock came from (`#TS:` or the deletion that proved it).
    pub clock_source: String,
    pub command: String,
}

/// A key or field whose TTL passed by `--until` that the log never deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub db: usize,
    pub key: Vec<u8>,
    pub field: Option<Vec<u8>>,
    pub expire_ms: i64,
}

/// Counts for the summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Commands run through the engine (MULTI, EXEC and SELECT not counted).
    pub commands: u64,
    /// Commands the engine does not know, by name (not applied).
    pub skipped: BTreeMap<String, u64>,
    /// Keys in the final state, per type.
    pub keys_per_type: BTreeMap<&'static str, u64>,
    /// Expired keys the log deleted with DEL, with UNLINK.
    pub expired_by_del: u64,
    pub expired_by_unlink: u64,
    /// Of those, keys written again in the same transaction (a write to an expired key).
    pub expired_then_overwritten: u64,
    /// Expired hash fields the log deleted with HDEL.
    pub expired_fields_by_hdel: u64,
    /// Touches of already-reported expired keys (one violation per key and TTL).
    pub repeated_violations: u64,
    pub warnings: Vec<String>,
}

/// The result of a replay.
pub struct Replay {
    pub engine: Engine,
    pub summary: Summary,
    pub violations: Vec<Violation>,
    pub pending: Vec<Pending>,
    /// The clock at the end (unix ms), if the data said anything about time.
    pub clock_ms: Option<i64>,
    /// The point in time asked for (unix ms).
    pub until: Option<i64>,
    /// Where `until` stopped the replay; None when the log ends first.
    pub stopped: Option<Stopped>,
    /// Whether the log has `#TS:` annotations at all (without them `until` cannot stop it).
    pub annotated: bool,
}

/// One command waiting for its EXEC.
struct Queued {
    offset: usize,
    db: usize,
    argv: Vec<Vec<u8>>,
}

struct Replayer<'o> {
    e: Engine,
    sess: Session,
    opts: &'o Options,
    /// The last `#TS:` annotation's second (ms): the time is at least that, unless the
    /// stamps are receive times, and at most its end.
    ts_ms: Option<i64>,
    /// The stamps are receive times ([`Options::stamps_received`], or a base from a stream).
    stamps_received: bool,
    /// Lower bound of the time proved by expiry-shaped deletions, and which one.
    evidence: Option<(i64, String)>,
    /// Hash field TTLs as the log set them, for the expiry check.
    field_ttls: HashMap<(usize, Vec<u8>), HashMap<Vec<u8>, i64>>,
    /// (db, key, field, TTL) already reported: one violation each.
    reported: HashSet<Reported>,
    /// An expired key deleted inside the current MULTI block: written again next?
    deleted_in_multi: Option<(usize, Vec<u8>)>,
    summary: Summary,
    violations: Vec<Violation>,
    file: String,
    stopped: Option<Stopped>,
    annotated: bool,
}

type Reported = (usize, Vec<u8>, Option<Vec<u8>>, i64);

/// Hash commands with a `FIELDS numfields field ...` clause (Redis 7.4 field TTLs).
const FIELDS_CLAUSE: &[&str] = &[
    "hexpire",
    "hpexpire",
    "hexpireat",
    "hpexpireat",
    "hpersist",
    "httl",
    "hpttl",
    "hexpiretime",
    "hpexpiretime",
    "hgetdel",
    "hgetex",
];

/// The version of the server that wrote `input`, as its RDB part names it (version and `redis-ver`/`valkey-ver`); a single-file AOF without one was
/// written by a Redis before 7.0 (6.2); None when nothing says (a multi-part AOF with a RESP
/// base: 7.0 or later).
pub fn input_version(input: &Input) -> Option<ServerVersion> {
    if let Ok(set) = AofSet::open(&input.aof) {
        if let Some(v) = base_version(&set) {
            return Some(v);
        }
        if set.manifest.is_none() && set.parts.len() == 1 && !looks_like_rdb(&input.aof) {
            return Some(ServerVersion::Redis62);
        }
    }
    [Some(&input.aof), input.rdb.as_ref()]
        .into_iter()
        .flatten()
        .find_map(|p| Source::open(p).ok().and_then(|src| rdb_server_version(&src)))
}

fn looks_like_rdb(path: &Path) -> bool {
    Source::open(path).is_ok_and(|src| src.starts_with(b"REDIS") || src.starts_with(b"VALKEY"))
}

impl Replay {
    /// Replay `input` into a fresh engine that behaves as the input's writer (a zset's -0
    /// score, see [`input_version`]).
    pub fn run(input: &Input, opts: &Options) -> Result<Replay, ToolError> {
        let mut cfg = Config::default();
        if let Some(v) = input_version(input) {
            cfg.set_version(v);
        }
        let mut e = Engine::with_clock(cfg, Clock::virtual_at(crate::now_ms()));
        e.set_mode(ExpireMode::Loading);
        let mut r = Replayer {
            e,
            sess: Session::default(),
            opts,
            ts_ms: None,
            stamps_received: opts.stamps_received,
            evidence: None,
            field_ttls: HashMap::new(),
            reported: HashSet::new(),
            deleted_in_multi: None,
            summary: Summary::default(),
            violations: Vec::new(),
            file: String::new(),
            stopped: None,
            annotated: false,
        };
        if let Some(rdb) = &input.rdb {
            r.file(rdb, true, false)?;
        }
        let set = AofSet::open(&input.aof).map_err(|err| ToolError::Usage(err.to_string()))?;
        if let Some(p) = set.missing().first() {
            return Err(ToolError::Usage(format!("{}: named in the manifest but missing", p.path.display())));
        }
        let n = set.parts.len();
        for (i, part) in set.parts.iter().enumerate() {
            r.file(&part.path, i + 1 == n, i == 0)?;
            if r.stopped.is_some() {
                break;
            }
        }
        Ok(r.finish())
    }

    /// Write the final state as an RDB file (Redis 7.0's format).
    pub fn write_rdb(&self, path: &Path) -> Result<(), ToolError> {
        let now = self.clock_ms.unwrap_or_else(crate::now_ms);
        let file = File::create(path).map_err(|err| ToolError::Usage(format!("{}: {err}", path.display())))?;
        let w = write_rdb(
            BufWriter::with_capacity(1 << 20, file),
            self.engine.keyspace(),
            self.engine.config(),
            now,
            false,
        )
        .map_err(|err| ToolError::Usage(format!("{}: {err}", path.display())))?;
        w.into_inner().map_err(|err| ToolError::Usage(format!("{}: {}", path.display(), err.error())))?;
        Ok(())
    }

    /// The summary (and violations, pending keys) as text.
    pub fn report_text(&self) -> String {
        let mut s = String::new();
        for v in &self.violations {
            let _ = writeln!(s, "{}", violation_text(v));
        }
        for p in &self.pending {
            let what = match &p.field {
                Some(f) => format!("field '{}' of key '{}'", escape_key(f), escape_key(&p.key)),
                None => format!("key '{}'", escape_key(&p.key)),
            };
            let _ = writeln!(s, "pending: db {} {what}: expired at {} but never deleted", p.db, p.expire_ms);
        }
        for w in &self.summary.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        let m = &self.summary;
        let _ = writeln!(s, "commands replayed: {}", m.commands);
        for (name, n) in &m.skipped {
            let _ = writeln!(s, "commands skipped (unknown to the engine): {name} x{n}");
        }
        let types: Vec<String> = m.keys_per_type.iter().map(|(t, n)| format!("{t} {n}")).collect();
        let total: u64 = m.keys_per_type.values().sum();
        let _ = writeln!(s, "keys: {total}{}{}", if types.is_empty() { "" } else { " (" }, types.join(", "));
        if !types.is_empty() {
            s.pop();
            s.push_str(")\n");
        }
        let _ = writeln!(
            s,
            "expired keys seen: {} (DEL {}, UNLINK {}; overwritten after the deletion {}); expired hash fields: {} (HDEL)",
            m.expired_by_del + m.expired_by_unlink,
            m.expired_by_del,
            m.expired_by_unlink,
            m.expired_then_overwritten,
            m.expired_fields_by_hdel
        );
        if self.violations.is_empty() {
            s.push_str("violations: 0\n");
        } else {
            let _ = writeln!(
                s,
                "violations: {} (and {} further touches of those keys)",
                self.violations.len(),
                m.repeated_violations
            );
        }
        if self.pending.is_empty() {
            s.push_str("pending: 0\n");
        } else {
            let _ = writeln!(s, "pending: {}", self.pending.len());
        }
        if let Some(c) = self.clock_ms {
            let _ = writeln!(s, "clock at the end: {c}");
        }
        if let Some(line) = self.until_text() {
            s.push_str(&line);
            s.push('\n');
        }
        s
    }

    /// Where `--until` left the replay, when it was given.
    pub fn until_text(&self) -> Option<String> {
        self.until?;
        Some(match &self.stopped {
            Some(st) => format!(
                "stopped at --until: file {} offset {}, the first command after it (#TS:{}){}",
                st.file,
                st.offset,
                st.ts,
                if st.in_multi { "; the MULTI block open there was not applied" } else { "" }
            ),
            None if self.annotated => "--until: the log ends before it; replayed whole".to_string(),
            None => "--until: the log has no #TS: annotations, so it cannot stop at a time; replayed whole".to_string(),
        })
    }
}

/// One violation as a line: file, offset, key, expiry and clock.
pub fn violation_text(v: &Violation) -> String {
    let what = match &v.field {
        Some(f) => format!("field '{}' of key '{}'", escape_key(f), escape_key(&v.key)),
        None => format!("key '{}'", escape_key(&v.key)),
    };
    format!(
        "violation: file {} offset {}: {} on db {} {what} expired at {} but not deleted first (clock {} from {})",
        v.file, v.offset, v.command, v.db, v.expire_ms, v.clock_ms, v.clock_source
    )
}

impl Replayer<'_> {
    /// The time the data proves, and where it comes from.
    fn clock(&self) -> Option<(i64, String)> {
        let ts = self.ts_ms.filter(|_| !self.stamps_received).map(|t| (t, format!("#TS:{}", t / 1000)));
        match (ts, &self.evidence) {
            (Some(t), Some(ev)) => Some(if ev.0 > t.0 { ev.clone() } else { t }),
            (t, ev) => t.or_else(|| ev.clone()),
        }
    }

    fn sync_engine_clock(&self) {
        if let Some((c, _)) = self.clock() {
            self.e.clock().set_ms(c);
        }
    }

    /// Replay one file: an RDB part when it starts with one, then its commands; `base` for
    /// the log's first file.
    fn file(&mut self, path: &Path, last: bool, base: bool) -> Result<(), ToolError> {
        self.file = path.display().to_string();
        let src = Source::open(path).map_err(|err| ToolError::Usage(format!("{}: cannot read: {err}", self.file)))?;
        let data: &[u8] = &src;
        let mut pos = 0;
        if has_rdb_preamble(data) || data.starts_with(b"VALKEY") {
            // A base made from a replication stream (a replica's full sync): the log's
            // stamps are receive times.
            self.stamps_received |= base && head_aux(data, b"repl-id").is_some();
            if let (Some(until), Some(ctime)) = (self.opts.until, head_aux_int(data, b"ctime")) {
                if until < ctime.saturating_mul(1000) {
                    return Err(ToolError::Usage(format!(
                        "{}: --until {until} ms is before this RDB was written (ctime {ctime}): the log cannot go \
                         back past it",
                        self.file
                    )));
                }
            }
            let limits = self.e.config().limits;
            let loaded = match (&self.opts.base_keys, base) {
                (Some(keys), true) => {
                    let keep = |db: usize, key: &[u8]| keys.contains(db, key);
                    load_rdb_keeping(self.e.keyspace_mut(), &src, path, &limits, &keep)
                }
                _ => load_rdb(self.e.keyspace_mut(), &src, path, &limits, None),
            };
            pos = loaded.map_err(|err| ToolError::Usage(err.to_string()))?;
        }
        let mut multi: Option<Vec<Queued>> = None;
        for cmd in CommandReader::at(data, pos) {
            let cmd = match cmd {
                Ok(cmd) => cmd,
                Err(err) if err.is_truncated() && last => {
                    let dropped = if multi.is_some() { " (and the unfinished MULTI block before it)" } else { "" };
                    self.summary.warnings.push(format!(
                        "{}: offset {}: {}; the rest of the file is ignored{dropped}",
                        self.file,
                        err.start(),
                        err.what()
                    ));
                    return Ok(());
                }
                Err(err) => return Err(ToolError::Usage(format!("{}: {err}", self.file))),
            };
            if let Some(ts) = cmd.ts {
                self.annotated = true;
                if self.opts.until.is_some_and(|u| ts.saturating_mul(1000) > u) {
                    let in_multi = multi.is_some();
                    self.stopped = Some(Stopped { file: self.file.clone(), offset: cmd.offset, ts, in_multi });
                    return Ok(());
                }
            }
            self.annotation(&cmd);
            if cmd.is("multi") {
                multi = Some(Vec::new());
            } else if cmd.is("exec") {
                for q in multi.take().unwrap_or_default() {
                    self.command(q.offset, q.db, &q.argv);
                }
                self.deleted_in_multi = None;
            } else if cmd.is("select") {
                // The reader tracks the database of each command.
            } else if let Some(q) = &mut multi {
                q.push(Queued { offset: cmd.offset, db: cmd.db as usize, argv: cmd.to_argv() });
            } else {
                self.command(cmd.offset, cmd.db as usize, &cmd.to_argv());
                self.deleted_in_multi = None;
            }
            // Queued and replayed commands are copies: the pages behind are done with.
            src.release_before(cmd.end);
        }
        if multi.is_some() {
            self.summary
                .warnings
                .push(format!("{}: the file ends inside a MULTI block, which was not applied", self.file));
        }
        Ok(())
    }

    fn annotation(&mut self, cmd: &Command<'_>) {
        if let Some(ts) = cmd.ts {
            let ms = ts.saturating_mul(1000);
            if self.ts_ms.is_none_or(|t| ms > t) {
                self.ts_ms = Some(ms);
                self.sync_engine_clock();
            }
        }
    }

    /// The latest time the current command may have run at, by the annotations: the
    /// end of its `#TS:` second (unbounded without annotations).
    fn latest_possible(&self) -> i64 {
        self.ts_ms.map_or(i64::MAX, |t| t.saturating_add(999))
    }

    fn raise_evidence(&mut self, expire_ms: i64, what: String, offset: usize) {
        let at = expire_ms.saturating_add(1);
        if self.evidence.as_ref().is_none_or(|(t, _)| at > *t) {
            self.evidence = Some((at, format!("{what} at file {} offset {offset}", self.file)));
            self.sync_engine_clock();
        }
    }

    fn command(&mut self, offset: usize, db: usize, argv: &[Vec<u8>]) {
        if db >= self.e.keyspace().dbs.len() {
            self.summary.warnings.push(format!("{}: offset {offset}: database {db} does not exist", self.file));
            return;
        }
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
        if name == "script" {
            // SCRIPT LOAD / FLUSH (Redis 6.2 logs them whenever a client sends them) fill
            // or empty the script cache, which is not data: nothing to replay.
            self.summary.commands += 1;
            return;
        }
        if name == "function" {
            // Libraries are data: kept, rewritten and compared with the keys. Redis's loader
            // logs a FUNCTION command that fails and goes on.
            let max = ferrokv::format::rdb::REDIS_MAX_VERSION as u16;
            if let Err(what) = self.e.keyspace_mut().functions.replay(argv, max) {
                self.summary.warnings.push(format!("{}: offset {offset}: FUNCTION failed: {what}", self.file));
            }
            self.summary.commands += 1;
            return;
        }
        let spec = command::lookup(&argv[0]);
        let keys = command_keys(argv);
        if self.opts.check_expiry {
            self.check(offset, db, &name, argv, &keys);
        }
        match spec {
            Some(_) => {
                self.sess.db = db;
                let _ = self.e.call_unlogged(&mut self.sess, argv);
                self.summary.commands += 1;
            }
            None => *self.summary.skipped.entry(name.clone()).or_default() += 1,
        }
        self.track_fields(db, &name, argv, &keys);
    }

    /// Before `argv` runs: is anything it touches expired without having been deleted?
    fn check(&mut self, offset: usize, db: usize, name: &str, argv: &[Vec<u8>], keys: &[usize]) {
        let is_del = name == "del" || name == "unlink";
        let mut touched_after_delete = false;
        for &k in keys {
            let key = &argv[k];
            if let Some((d, dk)) = &self.deleted_in_multi {
                touched_after_delete |= *d == db && dk == key;
            }
            let Some(expire) = self.e.keyspace().db(db).get_with_expire(key).and_then(|(_, t)| t) else { continue };
            if is_del {
                // A single-key deletion at a time the TTL may have passed: an expiry.
                if keys.len() == 1 && self.latest_possible() > expire {
                    if name == "del" {
                        self.summary.expired_by_del += 1;
                    } else {
                        self.summary.expired_by_unlink += 1;
                    }
                    self.raise_evidence(expire, format!("{} of '{}'", name.to_uppercase(), escape_key(key)), offset);
                    self.deleted_in_multi = Some((db, key.clone()));
                }
                continue;
            }
            self.violation_if_expired(offset, db, name, key, None, expire);
        }
        if touched_after_delete && !is_del {
            self.summary.expired_then_overwritten += 1;
            self.deleted_in_multi = None;
        }
        // Hash fields with TTLs.
        let Some(&k) = keys.first() else { return };
        let fields = touched_fields(name, argv);
        if fields.is_empty() {
            return;
        }
        let key = argv[k].clone();
        let Some(ttls) = self.field_ttls.get(&(db, key.clone())) else { return };
        let hits: Vec<(Vec<u8>, i64)> =
            fields.iter().filter_map(|&i| ttls.get(&argv[i]).map(|&t| (argv[i].clone(), t))).collect();
        for (field, expire) in hits {
            if name == "hdel" {
                if self.latest_possible() > expire {
                    self.summary.expired_fields_by_hdel += 1;
                    let what = format!("HDEL of field '{}' of '{}'", escape_key(&field), escape_key(&key));
                    self.raise_evidence(expire, what, offset);
                }
                continue;
            }
            self.violation_if_expired(offset, db, name, &key, Some(field), expire);
        }
    }

    fn violation_if_expired(
        &mut self,
        offset: usize,
        db: usize,
        name: &str,
        key: &[u8],
        field: Option<Vec<u8>>,
        expire: i64,
    ) {
        let Some((clock, source)) = self.clock() else { return };
        // Redis: expired when now > when.
        if clock <= expire {
            return;
        }
        if !self.reported.insert((db, key.to_vec(), field.clone(), expire)) {
            self.summary.repeated_violations += 1;
            return;
        }
        self.violations.push(Violation {
            file: self.file.clone(),
            offset,
            db,
            key: key.to_vec(),
            field,
            expire_ms: expire,
            clock_ms: clock,
            clock_source: source,
            command: name.to_uppercase(),
        });
    }

    /// After `argv` ran: the hash field TTLs it set or cleared.
    fn track_fields(&mut self, db: usize, name: &str, argv: &[Vec<u8>], keys: &[usize]) {
        match name {
            "flushall" => {
                self.field_ttls.clear();
                return;
            }
            "flushdb" => {
                self.field_ttls.retain(|(d, _), _| *d != db);
                return;
            }
            _ => {}
        }
        let now = self.e.now_ms();
        if let Some(&k) = keys.first() {
            let fields = touched_fields(name, argv);
            let when = match name {
                "hpexpireat" => argv.get(2).and_then(|a| command::parse_i64(a)),
                "hexpireat" => argv.get(2).and_then(|a| command::parse_i64(a)).map(|s| s.saturating_mul(1000)),
                "hpexpire" => argv.get(2).and_then(|a| command::parse_i64(a)).map(|ms| now.saturating_add(ms)),
                "hexpire" => {
                    argv.get(2).and_then(|a| command::parse_i64(a)).map(|s| now.saturating_add(s.saturating_mul(1000)))
                }
                _ => None,
            };
            let id = (db, argv[k].clone());
            match (name, when) {
                (_, Some(t)) => {
                    let existing: Vec<Vec<u8>> = match self.e.keyspace().db(db).get(&argv[k]).map(|s| &s.value) {
                        Some(Value::Hash(h)) => {
                            fields.iter().filter(|&&i| h.get(&argv[i]).is_some()).map(|&i| argv[i].clone()).collect()
                        }
                        _ => Vec::new(),
                    };
                    if !existing.is_empty() {
                        let ttls = self.field_ttls.entry(id.clone()).or_default();
                        for f in existing {
                            ttls.insert(f, t);
                        }
                    }
                }
                ("hpersist" | "hdel" | "hset" | "hmset" | "hgetdel", _) => {
                    if let Some(ttls) = self.field_ttls.get_mut(&id) {
                        for &i in &fields {
                            ttls.remove(&argv[i]);
                        }
                    }
                }
                _ => {}
            }
        }
        // Keys gone or no longer hashes lose their field TTLs.
        for &k in keys {
            let id = (db, argv[k].clone());
            if self.field_ttls.contains_key(&id)
                && !matches!(self.e.keyspace().db(db).get(&argv[k]).map(|s| &s.value), Some(Value::Hash(_)))
            {
                self.field_ttls.remove(&id);
            }
        }
        if matches!(name, "swapdb" | "move" | "copy" | "rename" | "renamenx") {
            let ks = self.e.keyspace();
            self.field_ttls.retain(|(d, key), _| matches!(ks.db(*d).get(key).map(|s| &s.value), Some(Value::Hash(_))));
        }
    }

    fn finish(mut self) -> Replay {
        let mut pending = Vec::new();
        if let Some(until) = self.opts.until {
            self.e.clock().set_ms(until);
            for (db, d) in self.e.keyspace().dbs.iter().enumerate() {
                for (slot, expire) in d.iter() {
                    if let Some(t) = expire.filter(|&t| until > t) {
                        pending.push(Pending { db, key: slot.key.to_vec(), field: None, expire_ms: t });
                    }
                }
            }
            for ((db, key), ttls) in &self.field_ttls {
                let gone = pending.iter().any(|p| p.db == *db && p.key == *key);
                for (f, &t) in ttls {
                    if until > t && !gone {
                        pending.push(Pending { db: *db, key: key.clone(), field: Some(f.clone()), expire_ms: t });
                    }
                }
            }
            pending.sort_by(|a, b| (a.db, &a.key, &a.field).cmp(&(b.db, &b.key, &b.field)));
            // The state at --until: what a master would still hold then.
            for p in pending.iter().filter(|p| p.field.is_none()) {
                self.e.keyspace_mut().db_mut(p.db).remove(&p.key);
            }
        }
        for d in &self.e.keyspace().dbs {
            for slot in d.slots() {
                *self.summary.keys_per_type.entry(slot.value.type_name()).or_default() += 1;
            }
        }
        let clock_ms = self.opts.until.or_else(|| self.clock().map(|c| c.0));
        Replay {
            engine: self.e,
            summary: self.summary,
            violations: self.violations,
            pending,
            clock_ms,
            until: self.opts.until,
            stopped: self.stopped,
            annotated: self.annotated,
        }
    }
}

/// Argument positions of the hash fields a command addresses one by one.
fn touched_fields(name: &str, argv: &[Vec<u8>]) -> Vec<usize> {
    let n = argv.len();
    match name {
        "hget" | "hexists" | "hstrlen" | "hsetnx" | "hincrby" | "hincrbyfloat" if n > 2 => vec![2],
        "hmget" | "hdel" => (2..n).collect(),
        "hset" | "hmset" => (2..n).step_by(2).collect(),
        _ if FIELDS_CLAUSE.contains(&name) => match (2..n.saturating_sub(1)).find(|&i| eq_ic(&argv[i], "fields")) {
            Some(i) => (i + 2..n).collect(),
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(args: &[&str]) -> String {
        let mut s = format!("*{}\r\n", args.len());
        for a in args {
            s.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s
    }

    fn replay_text(name: &str, text: &str) -> Replay {
        let dir = std::env::temp_dir().join(format!("ferrokv-replay-unit-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.aof");
        std::fs::write(&path, text).unwrap();
        let opts = Options { check_expiry: true, ..Options::default() };
        let r = Replay::run(&Input { aof: path, rdb: None }, &opts).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    #[test]
    fn a_write_after_a_later_timestamp_without_del_is_a_violation() {
        let set = resp(&["SET", "k", "v", "PXAT", "100500"]);
        let write = resp(&["APPEND", "k", "x"]);
        let log = format!("#TS:100\r\n{set}#TS:101\r\n{write}");
        let r = replay_text("ts", &log);
        assert_eq!(r.violations.len(), 1);
        let v = &r.violations[0];
        assert_eq!((v.offset, v.expire_ms, v.clock_ms), (9 + set.len() + 9, 100_500, 101_000));
        assert_eq!((v.command.as_str(), v.key.as_slice()), ("APPEND", b"k".as_slice()));
        // Within the expiry's second the log cannot prove it: no violation.
        let r = replay_text("same-second", &format!("#TS:100\r\n{set}{write}"));
        assert!(r.violations.is_empty());
        // Deleted first (as a master does inside MULTI): fine, and counted.
        let del = resp(&["DEL", "k"]);
        let multi = format!("{}{del}{}{}", resp(&["MULTI"]), resp(&["SET", "k", "new"]), resp(&["EXEC"]));
        let r = replay_text("del", &format!("#TS:100\r\n{set}#TS:101\r\n{multi}"));
        assert!(r.violations.is_empty());
        assert_eq!((r.summary.expired_by_del, r.summary.expired_then_overwritten), (1, 1));
    }

    #[test]
    fn deletions_prove_the_clock_without_timestamps() {
        let log = [
            resp(&["SET", "a", "1", "PXAT", "1000"]),
            resp(&["SET", "b", "1", "PXAT", "2000"]),
            resp(&["UNLINK", "b"]),
            resp(&["INCR", "a"]),
            resp(&["INCR", "a"]),
        ]
        .concat();
        let r = replay_text("evidence", &log);
        assert_eq!(r.violations.len(), 1);
        assert_eq!(r.violations[0].clock_ms, 2001);
        assert!(r.violations[0].clock_source.starts_with("UNLINK of 'b'"), "{}", r.violations[0].clock_source);
        assert_eq!(r.summary.repeated_violations, 1);
    }

    #[test]
    fn hash_fields_with_ttls() {
        let log = [
            resp(&["HSET", "h", "f", "1", "g", "2", "keep", "3"]),
            resp(&["HPEXPIREAT", "h", "1000", "FIELDS", "2", "f", "g"]),
            resp(&["HDEL", "h", "f"]),
            resp(&["HGET", "h", "keep"]),
            resp(&["HSET", "h", "g", "9"]),
        ]
        .concat();
        let r = replay_text("fields", &log);
        assert_eq!(r.summary.expired_fields_by_hdel, 1);
        assert_eq!(r.violations.len(), 1);
        assert_eq!(r.violations[0].field.as_deref(), Some(b"g".as_slice()));
        // The engine runs it (Redis 7.4's field TTLs are kept).
        assert_eq!(r.summary.skipped.get("hpexpireat"), None);
    }

    #[test]
    fn fields_addressed_by_each_command() {
        let argv = |a: &[&str]| a.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
        assert_eq!(touched_fields("hset", &argv(&["HSET", "h", "a", "1", "b", "2"])), vec![2, 4]);
        assert_eq!(touched_fields("hpersist", &argv(&["HPERSIST", "h", "FIELDS", "2", "a", "b"])), vec![4, 5]);
        assert_eq!(touched_fields("hpexpire", &argv(&["HPEXPIRE", "h", "5", "NX", "FIELDS", "1", "a"])), vec![6]);
        assert!(touched_fields("hgetall", &argv(&["HGETALL", "h"])).is_empty());
        assert!(touched_fields("hpersist", &argv(&["HPERSIST", "h", "FIELDS"])).is_empty());
    }
}
