//! The library API: an engine over a data directory, run command by command.
//!
//! [`Engine::open`] loads the data directory as Redis 7.0 does at startup (the AOF
//! directory when `appendonly` is on, else the RDB file) and opens the AOF for writing;
//! [`Engine::execute`] runs a command and appends what it propagates; [`Engine::save`],
//! [`Engine::rewrite_aof`] and [`Engine::close`] are SAVE, BGREWRITEAOF (here
//! synchronous, or split in three steps for a background thread) and shutdown.
//! See docs/library.md.
//!
//! ```
//! use ferrokv::{Config, Engine, Session, Reply};
//! let mut engine = Engine::in_memory(Config::default());
//! let mut s = Session::default();
//! let argv = |a: &[&str]| a.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
//! assert_eq!(engine.execute(&mut s, &argv(&["SET", "k", "v"])), Reply::ok());
//! assert_eq!(engine.execute(&mut s, &argv(&["GET", "k"])), Reply::bulk(b"v"));
//! ```

use crate::command::{self, Argv, Command, Ctx, Effects, ExpireMode, Reply, Stats};
use crate::config::Config;
use crate::keyspace::{Clock, CycleReport, ExpireCycle, Keyspace, SnapshotWalker};
use crate::persist::feed::NO_DB;
use crate::persist::load::{self, Replayer};
use crate::persist::{self, AofEvent, Failure, PersistError, Persistence, RewriteJob, RewrittenBase};
use crate::value::Value;

/// Per-client state the engine needs: the selected database, and whether its lookups
/// touch keys (CLIENT NO-TOUCH: they do not, but for TOUCH itself).
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub db: usize,
    pub no_touch: bool,
    /// Bytes of output past which the server closes this client (its class's hard
    /// `client-output-buffer-limit`), 0 for none: a reply surely past it need not be built
    /// whole.
    pub reply_limit: u64,
}

/// The engine: a keyspace, the commands and persistence. Its fields are the crate's; callers
/// outside it go through the methods below.
pub struct Engine {
    pub(crate) ks: Keyspace,
    pub(crate) cfg: Config,
    pub(crate) clock: Clock,
    pub(crate) stats: Stats,
    /// How lookups treat expired keys (Master unless replaying).
    pub(crate) mode: ExpireMode,
    pub(crate) rng: fastrand::Rng,
    pub(crate) cycle: ExpireCycle,
    /// Effects of the commands run since the last flush.
    pub(crate) fx: Effects,
    pub(crate) persist: Persistence,
    /// A unit flushed since [`Engine::take_unacknowledged`] did not reach the disk under
    /// `appendfsync always`: the MISCONF error to answer instead of the command's reply.
    unacknowledged: Option<String>,
}

impl Engine {
    /// The databases and the function libraries.
    pub fn keyspace(&self) -> &Keyspace {
        &self.ks
    }

    /// The keyspace to change directly (a server's eviction, DEBUG, a replica's new
    /// dataset): what changes here is not propagated.
    pub fn keyspace_mut(&mut self) -> &mut Keyspace {
        &mut self.ks
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// CONFIG SET: the parameters the engine reads on every use take effect at once.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.cfg
    }

    /// The clock commands read (a server's cached time, or a test's virtual one).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// The engine's time now, in unix ms.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Counters INFO reports (dirty, expired and evicted keys, hits and misses).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// How lookups treat expired keys.
    pub fn mode(&self) -> ExpireMode {
        self.mode
    }

    /// Loading keeps expired keys (an AOF replays as written); a replica hides them but
    /// waits for its master's DEL.
    pub fn set_mode(&mut self, mode: ExpireMode) {
        self.mode = mode;
    }

    /// What the commands run since the last flush did: propagation, events, modified keys.
    pub fn effects(&self) -> &Effects {
        &self.fx
    }

    pub fn effects_mut(&mut self) -> &mut Effects {
        &mut self.fx
    }

    /// The AOF, the replication feed and the warnings of loading.
    pub fn persistence(&self) -> &Persistence {
        &self.persist
    }

    pub fn persistence_mut(&mut self) -> &mut Persistence {
        &mut self.persist
    }

    /// The active expire cycle's state (its effort and statistics).
    pub fn expire_cycle(&self) -> &ExpireCycle {
        &self.cycle
    }

    pub fn expire_cycle_mut(&mut self) -> &mut ExpireCycle {
        &mut self.cycle
    }

    /// The engine's random source (RANDOMKEY, SPOP, SRANDMEMBER ...).
    pub fn rng_mut(&mut self) -> &mut fastrand::Rng {
        &mut self.rng
    }

    /// The keyspace, the engine given up (a dataset read aside).
    pub fn into_keyspace(self) -> Keyspace {
        self.ks
    }

    /// Redis's expireIfNeeded for one key, at the engine's time: true when it is expired
    /// (on a master now deleted, its DEL propagated and flushed, `expired` fired).
    pub fn expire_if_needed(&mut self, db: usize, key: &[u8]) -> bool {
        let now = self.clock.now_ms();
        let mut ctx =
            Ctx::new(&mut self.ks, &self.cfg, db, now, self.mode, &mut self.rng, &mut self.stats, &mut self.fx);
        let expired = ctx.expire_if_needed_in(db, key);
        self.flush();
        expired
    }

    /// A key the caller removed for maxmemory: WATCH and blocked clients see it modified,
    /// `evicted` fires, and DEL (UNLINK when `lazy`) propagates alone, flushed now (never
    /// inside a MULTI, as Redis's propagate_no_multi).
    pub fn note_evicted(&mut self, db: usize, key: &[u8], lazy: bool) {
        if self.fx.track_modified {
            self.fx.modified.push((db, crate::value::sds(key)));
        }
        if self.fx.track_events {
            self.fx.events.push(command::Event {
                class: command::notify::EVICTED,
                name: "evicted",
                db,
                key: key.to_vec(),
            });
        }
        let del: &[u8] = if lazy { b"UNLINK" } else { b"DEL" };
        self.fx.propagate.push((db, vec![del.to_vec(), key.to_vec()]));
        self.flush();
    }

    /// An engine with no files: nothing is loaded or written.
    pub fn in_memory(cfg: Config) -> Engine {
        Engine::with_clock(cfg, Clock::System)
    }

    pub fn with_clock(cfg: Config, clock: Clock) -> Engine {
        Engine {
            ks: Keyspace::new(cfg.databases),
            cycle: ExpireCycle::new(cfg.hz),
            cfg,
            clock,
            stats: Stats::default(),
            mode: ExpireMode::Master,
            rng: fastrand::Rng::new(),
            fx: Effects::default(),
            persist: Persistence::none(),
            unacknowledged: None,
        }
    }

    /// Open the data directory `cfg.dir`: load it as Redis 7.0 does at startup and, with
    /// `appendonly` on, open the AOF for appending (creating the AOF directory with a base
    /// and an incr file when there is none).
    pub fn open(cfg: Config, clock: Clock) -> Result<Engine, PersistError> {
        Engine::open_watched(cfg, clock, &mut |_| {})
    }

    /// [`Engine::open`] for a host: its `progress` is called with the bytes read every
    /// 16 KiB or so while loading (a server answers its clients meanwhile, as Redis does
    /// while it loads), and it runs the logged commands it claims (scripts).
    pub fn open_watched(cfg: Config, clock: Clock, host: &mut dyn LoadHost) -> Result<Engine, PersistError> {
        let mut e = Engine::with_clock(cfg, clock);
        e.load_at_startup(host)?;
        Ok(e)
    }

    /// Load what the configuration says (Redis 7.0's loadDataFromDisk, keys never expiring
    /// while loading) and open the AOF for writing when it is on.
    fn load_at_startup(&mut self, host: &mut dyn LoadHost) -> Result<(), PersistError> {
        let cfg = self.cfg.clone();
        self.persist.warnings.extend(load::remove_stale_temp_files(&cfg));
        self.mode = ExpireMode::Loading;
        let loaded = if cfg.appendonly {
            load::load_aof(&cfg, &mut Watched { engine: self, host })
        } else {
            load::load_dump(&cfg, &mut self.ks, self.clock.now_ms(), &mut |bytes| host.progress(bytes)).map(
                |(counts, empty_keys)| {
                    // Redis's lines: each empty key skipped, then the totals.
                    for key in empty_keys.iter().take(1000) {
                        self.persist
                            .warnings
                            .push(format!("rdbLoadObject skipping empty key: {}", String::from_utf8_lossy(key)));
                    }
                    let mut done =
                        format!("Done loading RDB, keys loaded: {}, keys expired: {}", counts.loaded, counts.expired);
                    if counts.empty_skipped > 0 {
                        done.push_str(&format!(", empty keys skipped: {}", counts.empty_skipped));
                    }
                    self.persist.warnings.push(format!("{done}."));
                    self.persist.rdb_load = counts;
                    None
                },
            )
        };
        self.mode = ExpireMode::Master;
        self.fx = Default::default();
        self.stats = Stats::default();
        let manifest = loaded?;
        if cfg.appendonly {
            let aof = persist::Aof::open_on_start(&cfg, manifest.unwrap_or_default(), &self.ks, self.clock.now_ms())?;
            self.persist.aof = Some(aof);
        }
        Ok(())
    }

    /// DEBUG LOADAOF: the dataset the AOF directory's files hold, replayed into a fresh
    /// keyspace (nothing is opened for writing). None when the manifest names no file.
    pub fn load_aof_files(cfg: &Config, host: &mut dyn LoadHost) -> Result<Option<Keyspace>, PersistError> {
        let mut e = Engine::with_clock(cfg.clone(), Clock::System);
        e.mode = ExpireMode::Loading;
        if cfg.aof_is_single_file() {
            let found = load::load_single_aof(cfg, &mut Watched { engine: &mut e, host })?;
            return Ok(found.then_some(e.ks));
        }
        let m = load::read_manifest(cfg)?;
        if m.base.is_none() && m.incr.is_empty() {
            return Ok(None);
        }
        load::load_aof_dir(cfg, &mut Watched { engine: &mut e, host })?;
        Ok(Some(e.ks))
    }

    /// SAVE: write an RDB snapshot to `dir/dbfilename` (temp file, fsync, rename).
    pub fn save(&mut self) -> Result<(), PersistError> {
        self.save_following(None)
    }

    /// [`Engine::save`], the snapshot naming the replication stream its data follows.
    pub fn save_following(&mut self, repl: Option<&persist::snapshot::ReplAux>) -> Result<(), PersistError> {
        persist::snapshot::save(&self.ks, &self.cfg, self.clock.now_ms(), repl)?;
        self.stats.dirty = 0;
        Ok(())
    }

    /// BGREWRITEAOF, run to the end on this thread.
    pub fn rewrite_aof(&mut self) -> Result<(), PersistError> {
        let job = self.start_rewrite()?;
        let built = job.run();
        self.finish_rewrite(built)
    }

    /// Start a rewrite: later writes go to a new incr file; the job owns a copy of the
    /// keyspace as it is now and may run on another thread ([`RewriteJob::run`]). With
    /// the AOF off (or closed) the rewrite still writes a base and a manifest naming it,
    /// as BGREWRITEAOF does in Redis.
    pub fn start_rewrite(&mut self) -> Result<RewriteJob, PersistError> {
        self.flush();
        let now = self.clock.now_ms();
        if self.persist.aof.is_none() {
            let manifest = persist::load::read_manifest(&self.cfg)?;
            self.persist.aof = Some(persist::Aof::detached(&self.cfg, manifest, now)?);
        }
        match &mut self.persist.aof {
            Some(aof) => aof.start_rewrite(&self.ks, now),
            None => Err(PersistError::State("no AOF".into())),
        }
    }

    /// [`Engine::start_rewrite`] without copying the keyspace now: the returned walker
    /// copies it while the caller keeps running commands (drive it with
    /// [`SnapshotWalker::step`] between them; see [`crate::keyspace::snapshot`]).
    pub fn start_rewrite_live(&mut self) -> Result<(RewriteJob, SnapshotWalker), PersistError> {
        self.flush();
        let now = self.clock.now_ms();
        if self.persist.aof.is_none() {
            let manifest = persist::load::read_manifest(&self.cfg)?;
            self.persist.aof = Some(persist::Aof::detached(&self.cfg, manifest, now)?);
        }
        match &mut self.persist.aof {
            Some(aof) => aof.start_rewrite_live(&mut self.ks, now),
            None => Err(PersistError::State("no AOF".into())),
        }
    }

    /// Install the base a rewrite job built (or clean up after it failed).
    pub fn finish_rewrite(&mut self, built: Result<RewrittenBase, PersistError>) -> Result<(), PersistError> {
        let Some(aof) = &mut self.persist.aof else {
            return Err(PersistError::State("no rewrite was started".into()));
        };
        let r = aof.finish_rewrite(built);
        if !aof.is_open() && !aof.is_enabling() {
            self.persist.aof = None;
        }
        r
    }

    /// DEBUG DIGEST: Redis's SHA1 digest of the dataset, as 40 hex digits.
    pub fn digest(&self) -> String {
        crate::digest::hex(&crate::digest::dataset_digest(&self.ks, self.cfg.version))
    }

    /// Timer work: the everysec fsync of the AOF when it is due, and the retry of a
    /// failed write.
    pub fn cron(&mut self) {
        let now = self.clock.now_ms();
        if let Some(aof) = &mut self.persist.aof {
            aof.cron(now);
        }
    }

    /// Changes of the AOF's write status since the last call (failed, recovered), for
    /// the log.
    pub fn take_aof_events(&mut self) -> Vec<AofEvent> {
        self.persist.aof.as_mut().map(|a| a.take_events()).unwrap_or_default()
    }

    /// The AOF write or fsync failure writes must be refused for (until the timer's
    /// retry succeeds), if any.
    pub fn aof_failure(&self) -> Option<&Failure> {
        self.persist.aof.as_ref().and_then(|a| a.failure())
    }

    /// The error to answer instead of the reply of the command just run, when what it
    /// propagated is not on disk under `appendfsync always` (the write is applied in
    /// memory and stays buffered for the retry, but it was not made durable).
    pub fn take_unacknowledged(&mut self) -> Option<String> {
        self.unacknowledged.take()
    }

    /// Shut down: flush pending propagation, write what the AOF still buffers, fsync and
    /// close it. Commands still run afterwards but are no longer logged. On an error the
    /// AOF stays open (closing it would lose what it buffers).
    pub fn close(&mut self) -> Result<(), PersistError> {
        self.settle_aof()?;
        let now = self.clock.now_ms();
        if let Some(aof) = &mut self.persist.aof {
            aof.close(now)?;
        }
        self.persist.aof = None;
        Ok(())
    }

    /// Flush pending propagation and make everything the AOF buffers durable (write and
    /// fsync), or say why it cannot be.
    pub fn settle_aof(&mut self) -> Result<(), PersistError> {
        self.flush();
        let now = self.clock.now_ms();
        match &mut self.persist.aof {
            Some(aof) => aof.settle(now),
            None => Ok(()),
        }
    }

    /// Run one command and write what it propagates. The unit of atomicity: several
    /// propagated commands are wrapped in MULTI/EXEC, as Redis 7.0 does.
    pub fn execute(&mut self, sess: &mut Session, argv: &[Vec<u8>]) -> Reply {
        self.execute_with(sess, argv, None)
    }

    /// [`Engine::execute`] for a command the caller already looked up.
    pub fn execute_spec(&mut self, sess: &mut Session, spec: &'static Command, argv: &[Vec<u8>]) -> Reply {
        self.execute_with(sess, argv, Some(spec))
    }

    fn execute_with(&mut self, sess: &mut Session, argv: &[Vec<u8>], spec: Option<&'static Command>) -> Reply {
        // With no AOF and no replica nothing reads what this command propagates: skip
        // building it.
        let unlogged = !self.persist.is_read();
        self.fx.propagation_off = unlogged;
        let r = self.call_with(sess, argv, spec);
        self.fx.propagation_off = false;
        if unlogged {
            self.fx.propagate.clear();
            return r;
        }
        // A command that may touch any key (SCAN, RANDOMKEY: the keys they find expired)
        // propagates each deletion alone, as active expiry does, not inside MULTI.
        let arbitrary = spec
            .or_else(|| argv.first().and_then(|name| command::table::lookup(name)))
            .is_some_and(|c| c.flags & command::flags::TOUCHES_ARBITRARY_KEYS != 0);
        if arbitrary && self.fx.propagate.len() > 1 {
            for op in std::mem::take(&mut self.fx.propagate) {
                self.fx.propagate.push(op);
                self.flush();
            }
        } else {
            self.flush();
        }
        r
    }

    /// Run a command whose effects nobody reads (replaying a log, as Redis's AOF client):
    /// no propagation is built, and events and modified keys are dropped.
    pub fn call_unlogged(&mut self, sess: &mut Session, argv: &[Vec<u8>]) -> Reply {
        self.fx.propagation_off = true;
        let r = self.call(sess, argv);
        self.fx.propagation_off = false;
        self.fx.propagate.clear();
        self.fx.events.clear();
        self.fx.modified.clear();
        self.fx.flushes.clear();
        r
    }

    /// Run one command without flushing its propagation (for MULTI/EXEC and scripts,
    /// whose commands propagate as one unit).
    pub fn call(&mut self, sess: &mut Session, argv: &[Vec<u8>]) -> Reply {
        self.call_with(sess, argv, None)
    }

    /// [`Engine::call`] for a command the caller already looked up.
    pub fn call_spec(&mut self, sess: &mut Session, spec: &'static Command, argv: &[Vec<u8>]) -> Reply {
        self.call_with(sess, argv, Some(spec))
    }

    fn call_with(&mut self, sess: &mut Session, argv: &[Vec<u8>], spec: Option<&'static Command>) -> Reply {
        let now = self.clock.now_ms();
        let mut ctx =
            Ctx::new(&mut self.ks, &self.cfg, sess.db, now, self.mode, &mut self.rng, &mut self.stats, &mut self.fx);
        ctx.reply_limit = sess.reply_limit;
        ctx.no_touch = sess.no_touch && !argv.first().is_some_and(|n| command::eq_ic(n, "touch"));
        let r = match spec {
            Some(spec) => command::execute_spec(&mut ctx, spec, argv),
            None => command::execute(&mut ctx, argv),
        };
        sess.db = ctx.db;
        r
    }

    /// Take the pending propagation as one unit (MULTI/EXEC around several commands) and
    /// hand it to the AOF. Returns what was written.
    pub fn flush(&mut self) {
        let _ = self.flush_collect();
    }

    /// [`Engine::flush`], returning the unit written.
    pub fn flush_collect(&mut self) -> Vec<(usize, Argv)> {
        let replicas_only = std::mem::take(&mut self.fx.replicas_only);
        let aof_only = std::mem::take(&mut self.fx.aof_only);
        let all = std::mem::take(&mut self.fx.propagate);
        // Each target's unit leaves out what only the other gets, and is wrapped on its
        // own (as Redis 7.0 writes it: one command left is not in a MULTI).
        let without = |skip: &[usize]| {
            (!skip.is_empty()).then(|| {
                let kept = all.iter().enumerate().filter(|(i, _)| !skip.contains(i));
                wrap_unit(kept.map(|(_, op)| op.clone()).collect(), self.cfg.dbless_multi())
            })
        };
        let for_aof = without(&replicas_only);
        let for_replicas = without(&aof_only);
        let ops = wrap_unit(all, self.cfg.dbless_multi());
        if !ops.is_empty() {
            let now = self.clock.now_ms();
            let aof = for_aof.as_deref().unwrap_or(&ops);
            if let Err(f) = self.persist.feed_split(aof, for_replicas.as_deref().unwrap_or(&ops), now) {
                self.unacknowledged = Some(f.refusal());
            }
        }
        ops
    }

    /// One active expiry cycle; each expired key propagates its DEL on its own.
    pub fn active_expire_cycle(&mut self) -> CycleReport {
        self.active_expire_cycle_collect().0
    }

    /// [`Engine::active_expire_cycle`], also returning what was written, unit by unit.
    pub fn active_expire_cycle_collect(&mut self) -> (CycleReport, Vec<Vec<(usize, Argv)>>) {
        let now = self.clock.now_ms();
        let mut units = self.expire_hash_fields(now);
        let mut gone = Vec::new();
        let cfg = &self.cfg;
        let rep = self.cycle.run(&mut self.ks, now, |db, slot, _| {
            crate::keyspace::lazyfree::free_expired(slot.value, cfg);
            gone.push((db, slot.key));
        });
        units.reserve(gone.len());
        for (db, key) in gone {
            let mut ctx =
                Ctx::new(&mut self.ks, &self.cfg, db, now, self.mode, &mut self.rng, &mut self.stats, &mut self.fx);
            ctx.expired_deleted(db, &key);
            units.push(self.flush_collect());
        }
        (rep, units)
    }
}

/// Hash fields the active cycle removes per second (Redis 7.4's
/// HFE_DB_BASE_ACTIVE_EXPIRE_FIELDS_PER_SEC), spread over the ticks.
const FIELDS_EXPIRED_PER_SEC: u32 = 10_000;

impl Engine {
    /// The field pass of the active cycle (Redis 7.4): the hashes registered at or
    /// before `now`, earliest first, lose their due fields, each HDEL its own unit; each
    /// hash fires one `hexpired` (and `del` if it empties) and is registered again under
    /// its next TTL.
    fn expire_hash_fields(&mut self, now: i64) -> Vec<Vec<(usize, Argv)>> {
        let mut units = Vec::new();
        if self.mode != ExpireMode::Master {
            return units;
        }
        let mut quota = (FIELDS_EXPIRED_PER_SEC / self.cfg.hz.max(1)).max(1) as usize;
        for db in 0..self.ks.dbs.len() {
            for key in self.ks.dbs[db].hashes_due(now, quota) {
                if quota == 0 {
                    return units;
                }
                let d = &mut self.ks.dbs[db];
                let Some(pos) = d.find(&key) else {
                    d.unregister_stale(&key);
                    continue;
                };
                let (removed, empty, next) = match &mut d.slot_mut(pos).value {
                    Value::Hash(h) if h.registered().is_some() => {
                        let removed = h.remove_due(now, quota);
                        (removed, h.is_empty(), h.min_field_ttl())
                    }
                    _ => {
                        d.unregister_stale(&key);
                        continue;
                    }
                };
                quota -= removed.len();
                if empty {
                    d.remove_at(pos);
                } else {
                    d.set_hash_registered(pos, next);
                }
                if removed.is_empty() {
                    continue;
                }
                let mut ctx =
                    Ctx::new(&mut self.ks, &self.cfg, db, now, self.mode, &mut self.rng, &mut self.stats, &mut self.fx);
                ctx.stats.expired_subkeys += removed.len() as u64;
                ctx.notify(crate::command::notify::HASH, "hexpired", &key);
                if empty {
                    ctx.notify(crate::command::notify::GENERIC, "del", &key);
                }
                ctx.signal_modified(&key);
                for f in removed {
                    self.fx.propagate.push((db, vec![b"HDEL".to_vec(), key.to_vec(), f.to_vec()]));
                    units.push(self.flush_collect());
                }
            }
        }
        units
    }
}

/// Redis's propagatePendingCommands: one command goes alone, several go inside MULTI/EXEC.
/// Redis 7.0 sends MULTI in the first command's database (a SELECT before it); 7.2 on
/// sends MULTI and EXEC in none ([`NO_DB`]), so a SELECT comes inside the transaction.
pub fn wrap_unit(ops: Vec<(usize, Argv)>, dbless_multi: bool) -> Vec<(usize, Argv)> {
    if ops.len() <= 1 {
        return ops;
    }
    let (first, last) = if dbless_multi { (NO_DB, NO_DB) } else { (ops[0].0, ops[ops.len() - 1].0) };
    let mut out = Vec::with_capacity(ops.len() + 2);
    out.push((first, vec![b"MULTI".to_vec()]));
    out.extend(ops);
    out.push((last, vec![b"EXEC".to_vec()]));
    out
}

/// docs/library.md, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../docs/library.md")]
pub struct LibraryGuide;

/// What an engine's load asks of whoever loads it: to hear of its progress, and to run
/// the logged commands the engine does not run itself (EVAL and EVALSHA in an AOF written
/// by a Redis that logged scripts verbatim, before 7.0).
pub trait LoadHost {
    /// `bytes` more of the files were read.
    fn progress(&mut self, _bytes: u64) {}
    /// Whether the host runs logged commands named `name` (any case).
    fn runs(&self, _name: &[u8]) -> bool {
        false
    }
    /// Run one such command on `engine`, the engine being loaded, in database `db`; its
    /// reply is discarded and nothing it does is logged again.
    fn run(&mut self, _engine: &mut Engine, _db: usize, _argv: &[Vec<u8>]) {}
}

/// A host that only hears of the progress.
impl<F: FnMut(u64)> LoadHost for F {
    fn progress(&mut self, bytes: u64) {
        self(bytes);
    }
}

/// An AOF's commands run on the engine being loaded (persist/load.rs replays them), with
/// its host beside it.
struct Watched<'a> {
    engine: &'a mut Engine,
    host: &'a mut dyn LoadHost,
}

impl Replayer for Watched<'_> {
    fn keyspace(&mut self) -> &mut Keyspace {
        &mut self.engine.ks
    }

    fn runs(&self, name: &[u8]) -> bool {
        self.host.runs(name)
    }

    fn run(&mut self, db: usize, argv: &[Vec<u8>]) {
        if command::lookup(&argv[0]).is_none() && self.host.runs(&argv[0]) {
            self.engine.fx.propagation_off = true;
            self.host.run(self.engine, db, argv);
            self.engine.fx = Effects::default();
        } else {
            self.engine.run(db, argv);
        }
    }

    fn warn(&mut self, what: String) {
        self.engine.warn(what);
    }

    fn progress(&mut self, bytes: u64) {
        self.host.progress(bytes);
    }

    fn key_load_delay_us(&self) -> i32 {
        self.engine.cfg.key_load_delay_us
    }
}

impl Replayer for Engine {
    fn keyspace(&mut self) -> &mut Keyspace {
        &mut self.ks
    }

    fn run(&mut self, db: usize, argv: &[Vec<u8>]) {
        let _ = self.call_unlogged(&mut Session { db, ..Default::default() }, argv);
    }

    fn warn(&mut self, what: String) {
        self.persist.warnings.push(what);
    }
}
