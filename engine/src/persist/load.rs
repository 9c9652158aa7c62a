//! Startup loading, as Redis 7.0's loadDataFromDisk.
//!
//! - appendonly yes: the AOF directory through its manifest: the base (RDB or RESP), then
//!   the incr files in order, replayed through the command layer with keys never expiring
//!   while loading. A `dump.rdb` is not read in this mode (Redis 7.0 starts empty and
//!   writes a new base when the directory has no AOF). An old single-file AOF
//!   (`dir/appendfilename`) is moved into the directory as its base first.
//! - appendonly no: the RDB file, skipping keys already expired (as a master does).
//!
//! A command cut short at the end of the last file is tolerated when
//! `aof-load-truncated` is on: the file is truncated after the last whole command (or
//! before an unfinished MULTI block) and a warning is recorded.

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};

use super::aof::persist_manifest;
use super::{disk, AofFault, PersistError};
use crate::command::{self, eq_ic, Argv};
use crate::config::Config;
use crate::format::aof::manifest::{manifest_name, AofInfo, FileKind, Manifest};
use crate::format::aof::{has_rdb_preamble, AofError, CommandReader};
use crate::format::blob::Elem;
use crate::format::rdb::{IncrementalError, IncrementalReader, KeyRecord, RdbError, RdbReader, ReadOptions, Record};
use crate::keyspace::{Keyspace, LRU_MAX};
use crate::source::Source;
use crate::value::{FromRdbError, Limits, Value};

/// Temp files a save or rewrite of an earlier process left when it was killed mid-way
/// (`temp-<pid>.rdb`, `temp-replicas-<pid>.rdb`, `temp-rewriteaof-[bg-]<pid>.aof`), in the data and AOF directories:
/// removed; the returned warnings say so. Redis's BGSAVE runs in a child that outlives a
/// killed parent and finishes its rename, so Redis never leaves them; here the writer is a
/// thread, and dies with the process. A file of a process still running is left alone.
pub fn remove_stale_temp_files(cfg: &Config) -> Vec<String> {
    let mut removed = Vec::new();
    let dirs = [cfg.dir.clone(), cfg.dir.join(&cfg.appenddirname)];
    for dir in dirs {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(temp_file_pid) else { continue };
            let alive = pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists();
            if !alive && fs::remove_file(entry.path()).is_ok() {
                removed.push(format!(
                    "removed {}, left by a save or rewrite of process {pid} that did not finish",
                    entry.path().display()
                ));
            }
        }
    }
    removed
}

/// The pid in the name of a snapshot's or rewrite's temp file.
fn temp_file_pid(name: &str) -> Option<u32> {
    let digits = name
        .strip_prefix("temp-rewriteaof-bg-")
        .or_else(|| name.strip_prefix("temp-rewriteaof-"))
        .and_then(|r| r.strip_suffix(".aof"))
        .or_else(|| name.strip_prefix("temp-replicas-").and_then(|r| r.strip_suffix(".rdb")))
        .or_else(|| name.strip_prefix("temp-").and_then(|r| r.strip_suffix(".rdb")))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Keys an RDB load kept and skipped (INFO's rdb_last_load_keys_loaded / _expired).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadCounts {
    pub loaded: u64,
    pub expired: u64,
    pub empty_skipped: u64,
    /// The stream the file's data followed (its `repl-*` fields), when it says.
    pub repl: Option<super::snapshot::ReplAux>,
    /// The keys skipped as expired, by database (a master tells its replicas).
    pub expired_keys: Vec<(usize, Vec<u8>)>,
}

/// What a load reports, and slows down for, as it goes.
pub struct LoadWatch<'h> {
    /// Keys that expired before this time are skipped (a master loading its dump).
    pub skip_expired_before: Option<i64>,
    /// Keys skipped as expired.
    pub expired: u64,
    /// Called with the bytes read since its last call, every [`PROGRESS_EVERY`] bytes or
    /// so: the server answers its clients meanwhile (Redis's processEventsWhileBlocked).
    pub progress: &'h mut dyn FnMut(u64),
    /// `key-load-delay`: microseconds each key waits (negative: 1 µs once in -n keys), a
    /// testing aid that makes a load last.
    pub key_delay_us: i32,
    /// Keys skipped as empty collections (Redis logs each).
    pub empty_keys: Vec<Vec<u8>>,
    /// The keys skipped as expired, by database, when `skip_expired_before` is set.
    pub expired_keys: Vec<(usize, Vec<u8>)>,
    /// The file's `repl-stream-db`, `repl-id` and `repl-offset` fields as read.
    pub repl_fields: ReplFields,
    /// Only the keys this says yes to (database, key) are loaded; the rest are skipped
    /// undecoded (an offline rewrite holds only what its log touches).
    pub keep: Option<&'h KeepKey<'h>>,
}

/// Which keys a load keeps (see [`LoadWatch::keep`]).
pub type KeepKey<'a> = dyn Fn(usize, &[u8]) -> bool + Sync + 'a;

/// The replication fields of an RDB's header.
#[derive(Debug, Default)]
pub struct ReplFields {
    stream_db: Option<i64>,
    id: Option<String>,
    offset: Option<i64>,
}

impl ReplFields {
    fn read(&mut self, key: &[u8], value: &Elem<'_>) {
        let number = || crate::format::rdb::aux_int(value);
        match key {
            b"repl-stream-db" => self.stream_db = number(),
            b"repl-id" => self.id = Some(String::from_utf8_lossy(&value.to_bytes()).into_owned()),
            b"repl-offset" => self.offset = number(),
            _ => {}
        }
    }

    /// The database the stream had selected where the snapshot ends (`repl-stream-db`),
    /// 0 without one.
    pub fn stream_db(&self) -> usize {
        self.stream_db.and_then(|db| usize::try_from(db).ok()).unwrap_or(0)
    }

    /// All three, with a database and an offset that mean something (Redis ignores the
    /// fields otherwise).
    pub fn valid(&self) -> Option<super::snapshot::ReplAux> {
        let (db, id, offset) = (self.stream_db?, self.id.as_ref()?, self.offset?);
        Some(super::snapshot::ReplAux {
            stream_db: usize::try_from(db).ok()?,
            replid: id.clone(),
            offset: u64::try_from(offset).ok()?,
        })
    }
}

/// How often a load reports its progress, in bytes read (a call costs next to nothing;
/// the server decides when its clients get a turn).
pub const PROGRESS_EVERY: u64 = 16 * 1024;

impl LoadWatch<'_> {
    /// A watch that reports to nobody.
    pub fn quiet(progress: &mut dyn FnMut(u64)) -> LoadWatch<'_> {
        LoadWatch {
            skip_expired_before: None,
            expired: 0,
            progress,
            key_delay_us: 0,
            empty_keys: Vec::new(),
            expired_keys: Vec::new(),
            repl_fields: ReplFields::default(),
            keep: None,
        }
    }
}

/// appendonly no: `dir/dbfilename` into `ks`, keys expired at `now` skipped. Returns the
/// counts and the keys skipped as empty collections.
pub fn load_dump(
    cfg: &Config,
    ks: &mut Keyspace,
    now: i64,
    progress: &mut dyn FnMut(u64),
) -> Result<(LoadCounts, Vec<Vec<u8>>), PersistError> {
    let path = cfg.dir.join(&cfg.dbfilename);
    if !path.exists() {
        return Ok(Default::default());
    }
    let src = Source::open(&path).map_err(|err| PersistError::io(&path, "open", err))?;
    let before: usize = ks.dbs.iter().map(|d| d.len()).sum();
    let mut watch =
        LoadWatch { skip_expired_before: Some(now), key_delay_us: cfg.key_load_delay_us, ..LoadWatch::quiet(progress) };
    // Like Redis, bytes after the checksum are not looked at.
    load_rdb_watched(ks, &src, &path, &cfg.limits, &mut watch)?;
    let after: usize = ks.dbs.iter().map(|d| d.len()).sum();
    let counts = LoadCounts {
        loaded: (after - before.min(after)) as u64,
        expired: watch.expired,
        empty_skipped: watch.empty_keys.len() as u64,
        repl: watch.repl_fields.valid(),
        expired_keys: std::mem::take(&mut watch.expired_keys),
    };
    Ok((counts, watch.empty_keys))
}

/// A key decoded into an engine value, off the reading thread.
struct Decoded {
    offset: usize,
    db: u64,
    key: Vec<u8>,
    value: Value,
    expire_ms: Option<i64>,
    lru: u32,
}

/// Input bytes per batch handed to a decoding thread.
const BATCH_BYTES: usize = 1 << 20;
/// The most of the file a batch spans, skipped keys included.
const BATCH_SPAN: usize = 8 << 20;

/// Decoding threads besides the reading one: one per core beyond the first, or what
/// `FERROKV_THREADS=N` (N threads in all) asks. On the 2-core machine of docs/benchmarks.md
/// the second thread takes the 5.5 M-key bench file from 8.2-9.8 s to 5.2-5.5 s and the
/// 1.18 GB one from 4.1 s to 3.4 s (ferrokv-server, start to `loading:0`).
fn decode_threads() -> usize {
    crate::config::threads(crate::config::cores).saturating_sub(1).min(8)
}

fn decode_key(k: &KeyRecord<'_>, path: &Path, limits: &Limits) -> Result<Decoded, PersistError> {
    let key = k.key.to_bytes().to_vec();
    let unsupported = |what: String| PersistError::Unsupported {
        path: path.to_path_buf(),
        offset: k.offset,
        db: k.db,
        key: key.clone(),
        what,
    };
    if k.meta.is_some() {
        return Err(unsupported("key metadata is not supported".into()));
    }
    let value = match Value::from_rdb(&k.value, limits) {
        Ok(v) => v,
        Err(FromRdbError::Format(err)) => {
            return Err(PersistError::Rdb { path: path.to_path_buf(), source: RdbError::in_key(err, k) })
        }
        Err(FromRdbError::Unsupported(what)) => return Err(unsupported(what)),
    };
    let lru = k.idle.map_or(0, |idle| (LRU_MAX as u64).saturating_sub(idle.min(LRU_MAX as u64)) as u32);
    Ok(Decoded { offset: k.offset, db: k.db, key, value, expire_ms: k.expire_ms, lru })
}

/// Insert a decoded key; Ok(Some(key)) when it is skipped as an empty collection.
fn insert(ks: &mut Keyspace, d: Decoded, path: &Path) -> Result<Option<Vec<u8>>, PersistError> {
    if d.value.is_empty_collection() {
        // Redis skips an empty collection when loading (RDB_LOAD_ERR_EMPTY_KEY).
        return Ok(Some(d.key));
    }
    let db = &mut ks.dbs[d.db as usize];
    let Some(pos) = db.add_new(&d.key, d.value, d.lru) else {
        return Err(PersistError::Unsupported {
            path: path.to_path_buf(),
            offset: d.offset,
            db: d.db,
            key: d.key,
            what: "duplicate key".into(),
        });
    };
    if let Some(t) = d.expire_ms {
        db.set_expire_at(pos, t);
    }
    Ok(None)
}

type BatchResult = Result<Vec<Decoded>, PersistError>;

/// Batches being decoded, oldest first: the offset of their first key and where their
/// result arrives.
struct InFlight {
    queue: std::collections::VecDeque<(usize, Receiver<BatchResult>)>,
    /// Keys skipped as empty collections.
    empty: Vec<Vec<u8>>,
}

impl InFlight {
    /// Insert finished batches in file order; with `wait`, wait for all of them.
    fn drain(&mut self, ks: &mut Keyspace, src: &Source, path: &Path, wait: bool) -> Result<(), PersistError> {
        while let Some((_, rx)) = self.queue.front() {
            let result = if wait {
                rx.recv().map_err(|_| PersistError::State("a loading thread stopped".into()))?
            } else {
                match rx.try_recv() {
                    Ok(r) => r,
                    Err(TryRecvError::Empty) => return Ok(()),
                    Err(TryRecvError::Disconnected) => {
                        return Err(PersistError::State("a loading thread stopped".into()))
                    }
                }
            };
            self.queue.pop_front();
            for d in result? {
                self.empty.extend(insert(ks, d, path)?);
            }
            if let Some((first, _)) = self.queue.front() {
                src.release_before(*first);
            }
        }
        Ok(())
    }
}

/// Read the RDB at the start of `src` into `ks`; keys expired before `skip_expired_before`
/// are left out. Returns the offset just past the checksum.
///
/// This thread walks the records and inserts keys; with `FERROKV_THREADS` > 1, values are
/// decoded on other threads in batches of about 1 MiB of input, inserted in file order, so
/// the first error in the file is the one reported either way. Mapped pages already decoded are released as loading goes,
/// so the file does not add to the peak RSS.
pub fn load_rdb(
    ks: &mut Keyspace,
    src: &Source,
    path: &Path,
    limits: &Limits,
    skip_expired_before: Option<i64>,
) -> Result<usize, PersistError> {
    let mut none = |_| {};
    let mut watch = LoadWatch { skip_expired_before, ..LoadWatch::quiet(&mut none) };
    load_rdb_watched(ks, src, path, limits, &mut watch)
}

/// [`load_rdb`] of only the keys `keep` says yes to (function libraries are all loaded).
pub fn load_rdb_keeping(
    ks: &mut Keyspace,
    src: &Source,
    path: &Path,
    limits: &Limits,
    keep: &KeepKey<'_>,
) -> Result<usize, PersistError> {
    let mut none = |_| {};
    let mut watch = LoadWatch { keep: Some(keep), ..LoadWatch::quiet(&mut none) };
    load_rdb_watched(ks, src, path, limits, &mut watch)
}

/// [`load_rdb`], reporting to `watch`.
pub fn load_rdb_watched(
    ks: &mut Keyspace,
    src: &Source,
    path: &Path,
    limits: &Limits,
    watch: &mut LoadWatch<'_>,
) -> Result<usize, PersistError> {
    let threads = decode_threads();
    std::thread::scope(|scope| {
        let (job_tx, job_rx) = sync_channel::<(Vec<KeyRecord<'_>>, Sender<BatchResult>)>(threads * 2);
        let job_rx = Arc::new(Mutex::new(job_rx));
        for _ in 0..threads {
            let job_rx = Arc::clone(&job_rx);
            scope.spawn(move || loop {
                let job = match job_rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok((records, out)) = job else { return };
                let _ = out.send(records.iter().map(|k| decode_key(k, path, limits)).collect());
            });
        }
        let mut flight = InFlight { queue: Default::default(), empty: Vec::new() };
        let r = read_records(ks, src, path, limits, watch, threads, &job_tx, &mut flight);
        drop(job_tx);
        // Earlier keys' errors win over a later structural one.
        flight.drain(ks, src, path, true)?;
        watch.empty_keys.append(&mut flight.empty);
        r
    })
}

#[allow(clippy::too_many_arguments)]
fn read_records<'a>(
    ks: &mut Keyspace,
    src: &'a Source,
    path: &Path,
    limits: &Limits,
    watch: &mut LoadWatch<'_>,
    threads: usize,
    jobs: &SyncSender<(Vec<KeyRecord<'a>>, Sender<BatchResult>)>,
    flight: &mut InFlight,
) -> Result<usize, PersistError> {
    let rdb_err = |source| PersistError::Rdb { path: path.to_path_buf(), source };
    let reader = RdbReader::new(src).map_err(rdb_err)?;
    let mut batch: Vec<KeyRecord<'a>> = Vec::new();
    let mut batch_bytes = 0;
    let submit = |batch: &mut Vec<KeyRecord<'a>>, flight: &mut InFlight| -> Result<(), PersistError> {
        let Some(first) = batch.first().map(|k| k.offset) else { return Ok(()) };
        let (tx, rx) = channel();
        jobs.send((std::mem::take(batch), tx))
            .map_err(|_| PersistError::State("the loading threads stopped".into()))?;
        flight.queue.push_back((first, rx));
        Ok(())
    };
    let mut db = 0usize;
    let mut reported = 0usize;
    for rec in reader {
        match rec.map_err(rdb_err)? {
            Record::Key(k) => {
                report_progress(watch, &mut reported, k.end, false);
                let end = k.end;
                if admit_key(watch, &k) {
                    if threads == 0 {
                        src.release_before(k.offset);
                        flight.empty.extend(insert(ks, decode_key(&k, path, limits)?, path)?);
                        continue;
                    }
                    batch_bytes += k.end - k.offset;
                    batch.push(k);
                } else if flight.queue.is_empty() && batch.is_empty() {
                    src.release_before(k.offset);
                }
                // A batch goes when it holds enough, or spans enough of the file: a load
                // keeping few keys (aof-rewrite's streamed base) would otherwise hold one
                // open over much of the file, the skipped keys' pages resident until it
                // is decoded.
                if batch_bytes >= BATCH_BYTES || batch.first().is_some_and(|f| end - f.offset >= BATCH_SPAN) {
                    batch_bytes = 0;
                    submit(&mut batch, flight)?;
                    flight.drain(ks, src, path, false)?;
                }
            }
            Record::Eof { end, .. } => {
                submit(&mut batch, flight)?;
                report_progress(watch, &mut reported, end, true);
                return Ok(end);
            }
            other => apply_record(ks, other, path, watch, &mut db)?,
        }
    }
    Err(rdb_err(
        RdbError::at(src.len(), "the RDB ends without an EOF record").of_kind(crate::format::ErrorKind::Truncated),
    ))
}

/// Tell the watch how far the load got (`upto`), every PROGRESS_EVERY bytes, and at
/// the `end`.
fn report_progress(watch: &mut LoadWatch<'_>, reported: &mut usize, upto: usize, end: bool) {
    if end || upto.saturating_sub(*reported) >= PROGRESS_EVERY as usize {
        (watch.progress)(upto.saturating_sub(*reported) as u64);
        *reported = upto.max(*reported);
    }
}

/// Whether a key record is loaded: `key-load-delay` waited, then the watch's filter and
/// its expiry cut-off applied (a key skipped as expired is counted there).
fn admit_key(watch: &mut LoadWatch<'_>, k: &KeyRecord<'_>) -> bool {
    if watch.key_delay_us != 0 {
        super::snapshot::key_delay(watch.key_delay_us, None);
    }
    if watch.keep.is_some_and(|keep| !keep(k.db as usize, &k.key.to_bytes())) {
        return false;
    }
    if let (Some(t), Some(now)) = (k.expire_ms, watch.skip_expired_before) {
        if t < now {
            watch.expired += 1;
            watch.expired_keys.push((k.db as usize, k.key.to_bytes().into_owned()));
            return false;
        }
    }
    true
}

/// A record other than a key or the end: the database it selects (`db`), a size hint,
/// a function library, a replication field.
fn apply_record(
    ks: &mut Keyspace,
    rec: Record<'_>,
    path: &Path,
    watch: &mut LoadWatch<'_>,
    db: &mut usize,
) -> Result<(), PersistError> {
    let library_failed =
        |what: String| PersistError::State(format!("{}: Failed loading library, {what}", path.display()));
    match rec {
        Record::SelectDb { db: d, .. } => {
            *db = usize::try_from(d).unwrap_or(usize::MAX);
            if *db >= ks.dbs.len() {
                return Err(PersistError::State(format!(
                    "{}: the file selects database {d}, but the engine is configured with {} databases",
                    path.display(),
                    ks.dbs.len()
                )));
            }
        }
        Record::ResizeDb { db_size, expires_size } => {
            let d = &mut ks.dbs[*db];
            d.reserve(db_size.min(1 << 24) as usize);
            d.reserve_volatile(expires_size.min(db_size).min(1 << 24) as usize);
        }
        Record::Function { code, .. } => ks.functions.load(code.to_bytes().into_owned()).map_err(library_failed)?,
        Record::FunctionPreGa { name, engine, code, .. } => {
            // Redis 7.0 still converts the release candidates' record to a library.
            let mut lib = format!(
                "#!{} name={}\n",
                String::from_utf8_lossy(&engine.to_bytes()),
                String::from_utf8_lossy(&name.to_bytes())
            )
            .into_bytes();
            lib.extend_from_slice(&code.to_bytes());
            ks.functions.load(lib).map_err(library_failed)?;
        }
        Record::ModuleAux(_) => {
            return Err(PersistError::State(format!(
                "{}: the file holds module data; modules are not supported",
                path.display()
            )))
        }
        Record::Aux { key, value } => watch.repl_fields.read(&key.to_bytes(), &value),
        Record::SlotInfo { .. } | Record::SlotImport { .. } | Record::Key(_) | Record::Eof { .. } => {}
    }
    Ok(())
}

/// An RDB read from `src` as it comes (a master's socket: Redis's diskless load) into
/// `ks`, each key decoded on this thread; `name` is what errors name. Returns the reader,
/// positioned just after the RDB: its unread bytes and source are what followed.
pub fn load_rdb_from<R: std::io::Read>(
    ks: &mut Keyspace,
    src: R,
    name: &Path,
    limits: &Limits,
    watch: &mut LoadWatch<'_>,
) -> Result<IncrementalReader<R>, PersistError> {
    let mut reader = IncrementalReader::new(src, ReadOptions::default());
    let mut db = 0usize;
    let mut reported = 0usize;
    loop {
        let step = reader.next_with(|rec| -> Result<bool, PersistError> {
            match rec {
                Record::Key(k) => {
                    report_progress(watch, &mut reported, k.end, false);
                    if admit_key(watch, &k) {
                        watch.empty_keys.extend(insert(ks, decode_key(&k, name, limits)?, name)?);
                    }
                    Ok(false)
                }
                Record::Eof { end, .. } => {
                    report_progress(watch, &mut reported, end, true);
                    Ok(true)
                }
                other => apply_record(ks, other, name, watch, &mut db).map(|()| false),
            }
        });
        match step {
            Some(Ok(Ok(false))) => continue,
            Some(Ok(Ok(true))) => return Ok(reader),
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(IncrementalError::Rdb(source))) => {
                return Err(PersistError::Rdb { path: name.to_path_buf(), source })
            }
            Some(Err(IncrementalError::Io { source, .. })) => return Err(PersistError::io(name, "read", source)),
            None => return Err(PersistError::State(format!("{}: read after the end of the RDB", name.display()))),
        }
    }
}

/// What an AOF's commands are run on: the engine, whose caller sets it loading (keys
/// never expire); see `Engine::open`.
pub trait Replayer {
    fn keyspace(&mut self) -> &mut Keyspace;
    /// Whether commands named `name`, unknown to the engine, are run by the loader's host
    /// (scripts, see [`crate::engine::LoadHost`]).
    fn runs(&self, _name: &[u8]) -> bool {
        false
    }
    /// Run one logged command on database `db` (its reply is not looked at, as Redis's
    /// AOF client's).
    fn run(&mut self, db: usize, argv: &[Vec<u8>]);
    fn warn(&mut self, what: String);
    /// `bytes` more of the files were read (see [`LoadWatch::progress`]).
    fn progress(&mut self, _bytes: u64) {}
    /// `key-load-delay` in microseconds (a testing aid).
    fn key_load_delay_us(&self) -> i32 {
        0
    }
}

/// The AOF as the version keeps it: Redis 6.2's one file ([`load_single_aof`]), else the
/// directory ([`load_aof_dir`]). The manifest read, for the directory.
pub fn load_aof(cfg: &Config, r: &mut dyn Replayer) -> Result<Option<Manifest>, PersistError> {
    if cfg.aof_is_single_file() {
        load_single_aof(cfg, r)?;
        return Ok(None);
    }
    load_aof_dir(cfg, r)
}

/// Redis 6.2's AOF, `dir/appendfilename` (an RDB preamble, then commands), when it
/// exists: false when it does not. 6.2 reads nothing else with appendonly on, not even
/// the dump.
pub fn load_single_aof(cfg: &Config, r: &mut dyn Replayer) -> Result<bool, PersistError> {
    let path = cfg.dir.join(&cfg.appendfilename);
    match fs::metadata(&path) {
        Ok(md) if md.len() > 0 => {}
        Ok(_) => return Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(PersistError::io(&path, "stat", e)),
    }
    replay_aof_file(cfg, r, &path, true)?;
    Ok(true)
}

/// The AOF directory: manifest, upgrade of an old single-file AOF, then every file.
pub fn load_aof_dir(cfg: &Config, r: &mut dyn Replayer) -> Result<Option<Manifest>, PersistError> {
    let dir = cfg.dir.join(&cfg.appenddirname);
    let mut m = read_manifest(cfg)?;
    let old = cfg.dir.join(&cfg.appendfilename);
    if old.is_file() {
        let only_old_base = m.incr.is_empty()
            && m.base.as_ref().is_some_and(|b| b.name == cfg.appendfilename)
            && !dir.join(&cfg.appendfilename).exists();
        if !dir.is_dir() || (m.base.is_none() && m.incr.is_empty()) || only_old_base {
            upgrade_old_aof(&cfg.appendfilename, &old, &dir, &mut m)?;
        }
    }
    let files: Vec<AofInfo> = m.base.iter().chain(&m.incr).cloned().collect();
    if files.is_empty() {
        return Ok(Some(m));
    }
    let mut total = 0;
    for ai in &files {
        let p = dir.join(&ai.name);
        total += fs::metadata(&p).map_err(|err| PersistError::io(&p, super::MANIFEST_FILE_STAT, err))?.len();
    }
    if total == 0 {
        return Ok(Some(m));
    }
    let n = files.len();
    for (i, ai) in files.iter().enumerate() {
        replay_aof_file(cfg, r, &dir.join(&ai.name), i + 1 == n)?;
    }
    Ok(Some(m))
}

/// Replay one file of the AOF. A truncated end is cut off and loaded with a warning when
/// it is the `last` file and aof-load-truncated allows it, else an error.
fn replay_aof_file(cfg: &Config, r: &mut dyn Replayer, path: &Path, last: bool) -> Result<(), PersistError> {
    match replay_file(r, &cfg.limits, path)? {
        Replayed::Whole => Ok(()),
        Replayed::Truncated { valid_up_to, why } => {
            if !last {
                let why = format!("{why}, and it is not the last file");
                return Err(PersistError::aof(path, valid_up_to, AofFault::Truncated, why));
            }
            if !cfg.aof_load_truncated {
                let why = format!("{why} (aof-load-truncated is off)");
                return Err(PersistError::aof(path, valid_up_to, AofFault::Truncated, why));
            }
            let f = OpenOptions::new().write(true).open(path).map_err(|err| PersistError::io(path, "open", err))?;
            disk::truncate(&f, valid_up_to).map_err(|err| PersistError::io(path, "truncate", err))?;
            r.warn(format!(
                "{}: {why}; truncated the AOF at offset {valid_up_to} and loaded it anyway",
                path.display()
            ));
            Ok(())
        }
    }
}

/// The manifest on disk; empty when the AOF directory or the manifest does not exist.
pub fn read_manifest(cfg: &Config) -> Result<Manifest, PersistError> {
    read_manifest_in(&cfg.dir.join(&cfg.appenddirname), &cfg.appendfilename)
}

/// The manifest of the AOF directory `dir` whose files are named after `appendfilename`;
/// empty when the directory or the manifest does not exist.
pub fn read_manifest_in(dir: &Path, appendfilename: &str) -> Result<Manifest, PersistError> {
    let mpath = dir.join(manifest_name(appendfilename));
    if !(dir.is_dir() && mpath.exists()) {
        return Ok(Manifest::default());
    }
    let text = fs::read(&mpath).map_err(|err| PersistError::io(&mpath, "read", err))?;
    Manifest::parse(&text).map_err(|(line, what)| PersistError::Manifest { path: mpath, line, what })
}

/// Move `dir/appendfilename` into the AOF directory as its base (Redis's aofUpgradePrepare).
fn upgrade_old_aof(name: &str, old: &Path, dir: &Path, m: &mut Manifest) -> Result<(), PersistError> {
    fs::create_dir_all(dir).map_err(|err| PersistError::io(dir, "create AOF directory", err))?;
    m.base = Some(AofInfo { name: name.to_string(), seq: 1, kind: FileKind::Base });
    m.base_seq = 1;
    persist_manifest(dir, name, m)?;
    let to = dir.join(name);
    disk::rename(old, &to).map_err(|err| PersistError::io(&to, "move the old AOF into the AOF directory", err))
}

/// How an AOF file replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed {
    Whole,
    /// The file ends inside a command or a MULTI block; `valid_up_to` is where the last
    /// complete unit ends.
    Truncated {
        valid_up_to: u64,
        why: String,
    },
}

/// Replay one AOF file: an RDB part when it starts with `REDIS`, then RESP commands.
fn replay_file(r: &mut dyn Replayer, limits: &Limits, path: &Path) -> Result<Replayed, PersistError> {
    let src = Source::open(path).map_err(|err| PersistError::io(path, "open", err))?;
    replay_bytes(r, limits, &src, path)
}

/// Replay the bytes of one AOF file (`path` only names it in errors): an RDB part when
/// it starts with `REDIS` (values encoded under `limits`), then RESP commands, run on `r`.
pub fn replay_bytes(
    r: &mut dyn Replayer,
    limits: &Limits,
    src: &Source,
    path: &Path,
) -> Result<Replayed, PersistError> {
    let data: &[u8] = src;
    let mut pos = 0;
    if has_rdb_preamble(data) {
        // The base is loaded into the replayer's (empty) keyspace, taken out meanwhile so
        // the progress goes to the replayer.
        let mut ks = std::mem::replace(r.keyspace(), Keyspace::new(0));
        let delay = r.key_load_delay_us();
        let mut progress = |bytes| r.progress(bytes);
        let mut watch = LoadWatch::quiet(&mut progress);
        watch.key_delay_us = delay;
        let loaded = load_rdb_watched(&mut ks, src, path, limits, &mut watch);
        *r.keyspace() = ks;
        pos = loaded?;
    }
    let mut reported = pos;
    let mut db = 0usize;
    let mut multi: Option<Vec<Argv>> = None;
    let mut valid_up_to = pos;
    let mut valid_before_multi = pos;
    for cmd in CommandReader::at(data, pos) {
        if let Ok(c) = &cmd {
            if c.offset - reported >= PROGRESS_EVERY as usize {
                r.progress((c.offset - reported) as u64);
                reported = c.offset;
            }
        }
        let cmd = match cmd {
            Ok(cmd) => cmd,
            Err(err @ AofError::Truncated { .. }) => {
                let valid_up_to = if multi.is_some() { valid_before_multi } else { valid_up_to };
                return Ok(Replayed::Truncated { valid_up_to: valid_up_to as u64, why: err.what().to_string() });
            }
            Err(err) => return Err(PersistError::aof(path, err.offset() as u64, AofFault::Format, err.what())),
        };
        if cmd.is("multi") {
            valid_before_multi = valid_up_to;
            multi = Some(Vec::new());
        } else if cmd.is("exec") {
            for queued in multi.take().unwrap_or_default() {
                replay_command(r, &mut db, &queued);
            }
        } else if !cmd.is("select")
            && !cmd.is("function")
            && command::lookup(cmd.name()).is_none()
            && !r.runs(cmd.name())
        {
            let name = cmd.name();
            let shown = String::from_utf8_lossy(&name[..name.len().min(128)]).into_owned();
            let what = format!("unknown command '{shown}'");
            return Err(PersistError::aof(path, cmd.offset as u64, AofFault::UnknownCommand(shown), what));
        } else if let Some(q) = &mut multi {
            q.push(cmd.to_argv());
        } else {
            replay_command(r, &mut db, &cmd.to_argv());
        }
        valid_up_to = cmd.end;
        // Commands run are copies: their mapped pages are not read again (Source batches
        // the releases).
        src.release_before(valid_up_to);
    }
    if multi.is_some() {
        let why = "incomplete MULTI/EXEC transaction at the end of the file".to_string();
        return Ok(Replayed::Truncated { valid_up_to: valid_before_multi as u64, why });
    }
    Ok(Replayed::Whole)
}

/// Run one logged command (replies are discarded, as for Redis's AOF client, which logs
/// a FUNCTION command's error and goes on).
fn replay_command(r: &mut dyn Replayer, db: &mut usize, argv: &[Vec<u8>]) {
    if eq_ic(&argv[0], "function") {
        if let Err(what) = r.keyspace().functions.replay(argv, crate::format::rdb::REDIS_MAX_VERSION as u16) {
            r.warn(format!("an AOF's FUNCTION command failed: {what}"));
        }
        return;
    }
    if eq_ic(&argv[0], "select") {
        let to = argv.get(1).and_then(|a| command::parse_i64(a));
        if let Some(to) = to.and_then(|d| usize::try_from(d).ok()).filter(|&d| d < r.keyspace().dbs.len()) {
            *db = to;
        }
        return;
    }
    r.run(*db, argv);
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::command::ExpireMode;
    use crate::engine::{Engine, Session};

    fn replay(data: &[u8]) -> Result<(Replayed, Engine), PersistError> {
        let mut e = Engine::in_memory(Config::default());
        e.mode = ExpireMode::Loading;
        let limits = e.cfg.limits;
        let r = replay_bytes(&mut e, &limits, &Source::Buffered(data.to_vec()), Path::new("t.aof"))?;
        Ok((r, e))
    }

    fn truncated_at(data: &[u8]) -> u64 {
        match replay(data) {
            Ok((Replayed::Truncated { valid_up_to, .. }, _)) => valid_up_to,
            other => panic!("not truncated: {:?}", other.map(|r| r.0)),
        }
    }

    const SET: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";

    #[test]
    fn commands_annotations_and_cut_ends() {
        let mut data = b"#TS:1\r\n".to_vec();
        data.extend_from_slice(SET);
        data.extend_from_slice(b"#TS:2");
        let (r, mut e) = replay(&data).unwrap();
        assert_eq!(r, Replayed::Whole);
        let mut s = Session::default();
        assert_eq!(e.execute(&mut s, &[b"GET".to_vec(), b"k".to_vec()]), crate::Reply::Bulk(b"v".to_vec()));
        let whole = SET.len() as u64;
        let mut cut = SET.to_vec();
        cut.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$1\r\n");
        assert_eq!(truncated_at(&cut), whole);
        let mut multi = SET.to_vec();
        multi.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n");
        multi.extend_from_slice(SET);
        assert_eq!(truncated_at(&multi), whole);
        multi.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n*1");
        assert_eq!(truncated_at(&multi), multi.len() as u64 - 2);
    }

    #[test]
    fn temp_file_names() {
        assert_eq!(temp_file_pid("temp-123.rdb"), Some(123));
        assert_eq!(temp_file_pid("temp-replicas-123.rdb"), Some(123));
        assert_eq!(temp_file_pid("temp-rewriteaof-bg-77.aof"), Some(77));
        assert_eq!(temp_file_pid("temp-rewriteaof-77.aof"), Some(77));
        assert_eq!(temp_file_pid("temp-appendonly.aof.manifest"), None);
        assert_eq!(temp_file_pid("temp-99.1700000000.rdb"), None);
        assert_eq!(temp_file_pid("temp-.rdb"), None);
    }

    #[test]
    fn errors_name_the_offset() {
        // Not RESP where a command must start: Redis's "Bad file format".
        let mut bad = SET.to_vec();
        bad.extend_from_slice(b"*1\r\n%3\r\nGET\r\n");
        let err = replay(&bad).err().expect("malformed");
        assert!(matches!(err, PersistError::Aof { offset: 31, .. }), "{err}");
        let mut unknown = SET.to_vec();
        unknown.extend_from_slice(b"*1\r\n$4\r\nNOPE\r\n");
        let err = replay(&unknown).err().expect("unknown");
        assert!(matches!(&err, PersistError::Aof { offset: 27, what, .. } if what.contains("unknown command 'NOPE'")));
    }
}
