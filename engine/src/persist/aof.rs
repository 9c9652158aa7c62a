//! The open AOF directory: the incr file commands are appended to, the fsync policy, and
//! rewrites (BGREWRITEAOF semantics).
//!
//! fsync: `always` fsyncs after every unit; `everysec` fsyncs from the write path when
//! the last fsync is at least a second old, and from [`Aof::cron`] (which the server's
//! timer calls) so a quiet second is synced too; `no` leaves it to the OS. There is no
//! background thread: the fsync runs on the caller's thread.
//!
//! Write errors are handled as Redis's flushAppendOnlyFile does: the bytes of units not
//! yet written stay in a buffer (Redis's `aof_buf`); a partial write is cut off again
//! (ftruncate) so the file always ends on a whole unit, or, when that fails too, the part
//! written is dropped from the buffer. While a write or an fsync has failed,
//! [`Aof::write_refusal`] says why writes must be refused; [`Aof::cron`] retries, and the
//! state clears once everything is written (and, under `always`, fsynced). With
//! `always`, [`Aof::feed`] reports a unit that did not reach the disk, so the command is
//! not acknowledged.
//!
//! Redis 6.2 (`Config::aof_is_single_file`) keeps one file, `dir/appendfilename`; a
//! rewrite there builds the new file (base, then the writes made meanwhile, which are
//! kept in a buffer as Redis's rewrite buffer keeps them) and renames it over the old one.
//!
//! A rewrite is three steps. [`Aof::start_rewrite`] opens a new incr file and persists a
//! manifest naming it, so writes from then on land there, and returns a [`RewriteJob`]
//! owning a point-in-time copy of the keyspace. [`RewriteJob::run`] (any thread) writes
//! the new base to a temp file. [`Aof::finish_rewrite`] renames it to the next base name,
//! turns the old base and the rewritten incr files into history, switches the manifest
//! atomically (temp file, fsync, rename) and deletes the history files.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::disk;
use super::feed::AofFeed;
use super::snapshot::Source;
use super::{rewrite, snapshot, PersistError};
use crate::command::Argv;
use crate::config::{Config, Fsync};
use crate::format::aof::manifest::{manifest_name, temp_manifest_name, Manifest};
use crate::keyspace::{Keyspace, SnapFeed, SnapshotWalker};

#[derive(Debug)]
pub struct Aof {
    /// The AOF directory (`dir/appenddirname`).
    pub dir: PathBuf,
    pub manifest: Manifest,
    cfg: Config,
    /// The incr file being appended to; None once closed.
    file: Option<File>,
    incr_name: String,
    feed: AofFeed,
    last_fsync_ms: i64,
    /// Bytes written since the last fsync.
    unsynced: bool,
    rewriting: bool,
    /// Units not written yet: empty but after a failed write (Redis's aof_buf).
    pending: Vec<u8>,
    /// The incr file's size up to the last whole unit written.
    written_len: u64,
    /// Bytes of the files the manifest names besides the incr file being appended to.
    other_files_len: u64,
    /// The AOF's size after the last rewrite, or when it was opened (Redis's
    /// aof_rewrite_base_size): auto-aof-rewrite-percentage measures growth from it.
    base_size: u64,
    /// The failure writes are refused for (Redis's aof_last_write_status and
    /// aof_bio_fsync_status), until a write and fsync succeed.
    failed: Option<Failure>,
    /// What happened that the server logs ([`Aof::take_events`]).
    events: Vec<AofEvent>,
    /// While the AOF is being turned on (CONFIG SET appendonly yes) and has no base of its
    /// own yet: the manifest on disk, which stays in force until the first rewrite ends.
    enabling: Option<Manifest>,
    /// One file, as Redis 6.2 (no manifest; `dir` is the data directory).
    single: bool,
    /// Single file, while a rewrite runs: the units written since it started, which go
    /// after the new base (Redis 6.2's rewrite buffer).
    rewrite_buf: Option<Vec<u8>>,
}

/// A failed write or fsync of the incr file.
#[derive(Debug, Clone)]
pub struct Failure {
    pub op: &'static str,
    /// strerror's text of the error.
    pub reason: String,
    /// A short write: bytes written and expected.
    pub short: Option<(usize, usize)>,
    /// Why the bytes of a short write could not be cut off again (they stay in the file).
    pub truncate_error: Option<String>,
}

impl Failure {
    /// The error Redis answers writes with meanwhile (its MISCONF for the AOF).
    pub fn refusal(&self) -> String {
        format!("MISCONF Errors writing to the AOF file: {}", self.reason)
    }

    /// What Redis logs for it.
    pub fn log_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match (self.op, self.short) {
            ("fsync", _) => lines.push(format!("Fail to fsync the AOF file: {}", self.reason)),
            (_, Some((written, expected))) => lines
                .push(format!("Short write while writing to the AOF file: (nwritten={written}, expected={expected})")),
            _ => lines.push(format!("Error writing to the AOF file: {}", self.reason)),
        }
        if let Some(t) = &self.truncate_error {
            lines.push(format!(
                "Could not remove short write from the append-only file.  Redis may refuse to load the AOF the next \
                 time it starts.  ftruncate: {t}"
            ));
        }
        lines
    }
}

/// A change of the write status, for the log.
#[derive(Debug, Clone)]
pub enum AofEvent {
    Failed(Failure),
    /// Writes and fsyncs work again.
    Recovered,
}

/// A rewrite in progress: the point-in-time keyspace and where its base goes.
pub struct RewriteJob {
    snapshot: JobSource,
    cfg: Config,
    now_ms: i64,
    tmp: PathBuf,
    rdb_base: bool,
}

/// Where a rewrite job's keys come from.
enum JobSource {
    /// A copy taken at the start.
    Copy(Box<Keyspace>),
    /// Chunks from a [`SnapshotWalker`] the keyspace's owner drives.
    Live(SnapFeed),
}

/// A base built by [`RewriteJob::run`], waiting for [`Aof::finish_rewrite`].
#[derive(Debug)]
pub struct RewrittenBase {
    tmp: PathBuf,
    rdb_base: bool,
}

impl Aof {
    /// Open the AOF directory after loading (Redis's aofOpenIfNeededOnServerStart): create
    /// the directory, write a base from `ks` when the manifest names no file at all, open
    /// the last incr file for appending (or a new one), and persist the manifest.
    pub fn open_on_start(
        cfg: &Config,
        mut manifest: Manifest,
        ks: &Keyspace,
        now_ms: i64,
    ) -> Result<Aof, PersistError> {
        if cfg.aof_is_single_file() {
            // Redis 6.2 opens (creating) its one file and appends to it, whatever it held.
            let mut aof = Aof::closed(cfg, cfg.dir.clone(), Manifest::default(), now_ms);
            let path = aof.dir.join(&cfg.appendfilename);
            let file = disk::open_append(&path).map_err(|e| PersistError::io(&path, "open for appending", e))?;
            aof.written_len = file.metadata().map_err(|e| PersistError::io(&path, "stat", e))?.len();
            aof.base_size = aof.written_len;
            aof.incr_name = cfg.appendfilename.clone();
            aof.file = Some(file);
            return Ok(aof);
        }
        let dir = cfg.dir.join(&cfg.appenddirname);
        fs::create_dir_all(&dir).map_err(|e| PersistError::io(&dir, "create AOF directory", e))?;
        let mut dirty = false;
        if manifest.base.is_none() && manifest.incr.is_empty() {
            let rdb = rdb_base(cfg, ks);
            let name = manifest.new_base(&cfg.appendfilename, rdb);
            let tmp = dir.join(format!("temp-rewriteaof-{}.aof", std::process::id()));
            write_base(&tmp, Source::Keyspace(ks), cfg, now_ms, rdb)?;
            let path = dir.join(&name);
            disk::rename(&tmp, &path).map_err(|e| PersistError::io(&path, "rename", e))?;
            dirty = true;
        }
        if manifest.incr.is_empty() {
            manifest.new_incr(&cfg.appendfilename);
            dirty = true;
        }
        let incr_name = manifest.incr.last().map(|ai| ai.name.clone()).unwrap_or_default();
        let path = dir.join(&incr_name);
        let file = disk::open_append(&path).map_err(|e| PersistError::io(&path, "open for appending", e))?;
        let written_len = file.metadata().map_err(|e| PersistError::io(&path, "stat", e))?.len();
        if dirty {
            persist_manifest(&dir, &cfg.appendfilename, &manifest)?;
        }
        let other_files_len = files_len(&dir, &manifest, &incr_name);
        let mut aof = Aof::closed(cfg, dir, manifest, now_ms);
        aof.file = Some(file);
        aof.incr_name = incr_name;
        aof.written_len = written_len;
        aof.other_files_len = other_files_len;
        aof.base_size = other_files_len + written_len;
        Ok(aof)
    }

    /// An AOF in `dir` with no file open for appending.
    fn closed(cfg: &Config, dir: PathBuf, manifest: Manifest, now_ms: i64) -> Aof {
        Aof {
            dir,
            manifest,
            cfg: cfg.clone(),
            file: None,
            incr_name: String::new(),
            feed: AofFeed::new(cfg.aof_timestamp_enabled),
            last_fsync_ms: now_ms,
            unsynced: false,
            rewriting: false,
            pending: Vec::new(),
            written_len: 0,
            other_files_len: 0,
            base_size: 0,
            failed: None,
            events: Vec::new(),
            enabling: None,
            single: cfg.aof_is_single_file(),
            rewrite_buf: None,
        }
    }

    /// The AOF directory of a server with appendonly off, for a rewrite (Redis allows
    /// BGREWRITEAOF then: the result is a manifest naming only the new base).
    pub fn detached(cfg: &Config, manifest: Manifest, now_ms: i64) -> Result<Aof, PersistError> {
        if cfg.aof_is_single_file() {
            return Ok(Aof::closed(cfg, cfg.dir.clone(), Manifest::default(), now_ms));
        }
        let dir = cfg.dir.join(&cfg.appenddirname);
        fs::create_dir_all(&dir).map_err(|e| PersistError::io(&dir, "create AOF directory", e))?;
        Ok(Aof::closed(cfg, dir, manifest, now_ms))
    }

    /// CONFIG SET appendonly yes, as Redis's startAppendOnly: nothing is written until the
    /// first rewrite starts, which opens the next incr file; when it ends, the manifest names
    /// its base and that incr file (Redis's `appendonly.aof.1.base.rdb` and
    /// `appendonly.aof.1.incr.aof` in an empty directory).
    pub fn enabling(cfg: &Config, manifest: Manifest, now_ms: i64) -> Result<Aof, PersistError> {
        let mut aof = Aof::detached(cfg, manifest.clone(), now_ms)?;
        aof.enabling = Some(manifest);
        Ok(aof)
    }

    /// Whether the AOF is being turned on and its first rewrite has not ended yet.
    pub fn is_enabling(&self) -> bool {
        self.enabling.is_some()
    }

    /// Take settings changed at run time (CONFIG SET appendfsync, aof-timestamp-enabled,
    /// aof-use-rdb-preamble, rdbcompression, rdb-key-save-delay): they apply from the next
    /// write or rewrite.
    pub fn reconfigure(&mut self, cfg: &Config) {
        self.cfg.appendfsync = cfg.appendfsync;
        self.cfg.aof_use_rdb_preamble = cfg.aof_use_rdb_preamble;
        self.cfg.rdbcompression = cfg.rdbcompression;
        self.cfg.rdb_key_save_delay = cfg.rdb_key_save_delay;
        self.cfg.aof_flush_sleep_us = cfg.aof_flush_sleep_us;
        self.cfg.aof_timestamp_enabled = cfg.aof_timestamp_enabled;
        self.feed.timestamps = cfg.aof_timestamp_enabled;
        let gc_back_on = self.cfg.aof_disable_auto_gc && !cfg.aof_disable_auto_gc;
        self.cfg.aof_disable_auto_gc = cfg.aof_disable_auto_gc;
        if gc_back_on && !self.rewriting {
            self.delete_history();
        }
    }

    /// Delete the history files and write the manifest without them (Redis's
    /// aofDelHistoryFiles). A failure is harmless: loading reads no history entry.
    fn delete_history(&mut self) {
        if self.manifest.history.is_empty() {
            return;
        }
        for ai in std::mem::take(&mut self.manifest.history) {
            let _ = fs::remove_file(self.dir.join(&ai.name));
        }
        let _ = persist_manifest(&self.dir, &self.cfg.appendfilename, &self.manifest);
    }

    /// Whether commands are being appended (false for a detached or closed AOF).
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// The incr file being appended to.
    pub fn incr_path(&self) -> PathBuf {
        self.dir.join(&self.incr_name)
    }

    /// Append one unit (one write, fsynced per the policy). Err when the policy is
    /// `always` and the unit is not on disk: the command must not be acknowledged.
    /// Under `everysec` and `no` a unit whose write failed stays buffered for the retry,
    /// as Redis acknowledges it and keeps it in aof_buf.
    pub fn feed(&mut self, ops: &[(usize, Argv)], now_ms: i64) -> Result<(), Failure> {
        if self.file.is_none() {
            // A single file being turned on: the first rewrite's buffer is all there is.
            if let Some(buf) = &mut self.rewrite_buf {
                self.feed.unit(buf, ops, now_ms);
            }
            return Ok(());
        }
        let unit_at = self.pending.len();
        self.feed.unit(&mut self.pending, ops, now_ms);
        if let Some(buf) = &mut self.rewrite_buf {
            buf.extend_from_slice(&self.pending[unit_at..]);
        }
        if self.failed.is_none() && self.write_pending() {
            match self.cfg.appendfsync {
                Fsync::Always => {
                    self.fsync(now_ms);
                }
                Fsync::EverySec if now_ms - self.last_fsync_ms >= 1000 => {
                    self.fsync(now_ms);
                }
                _ => {}
            }
        }
        // After a failure the timer retries; writes are refused meanwhile, but an
        // expired key's DEL may still come and wait in the buffer.
        match (&self.failed, self.cfg.appendfsync) {
            (Some(f), Fsync::Always) => Err(f.clone()),
            _ => Ok(()),
        }
    }

    /// Write the buffered units. On a failure keep what was not written, enter the
    /// failed state and return false.
    fn write_pending(&mut self) -> bool {
        let Some(file) = &mut self.file else { return true };
        if self.pending.is_empty() {
            return true;
        }
        if self.cfg.aof_flush_sleep_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(self.cfg.aof_flush_sleep_us));
        }
        let mut done = 0;
        let mut w = disk::Checked(&mut *file);
        let err = loop {
            match w.write(&self.pending[done..]) {
                Ok(0) => break Some(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    done += n;
                    if done == self.pending.len() {
                        break None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Some(e),
            }
        };
        let Some(e) = err else {
            self.written_len += done as u64;
            self.pending.clear();
            self.unsynced = true;
            return true;
        };
        // Cut a partial unit off again, so the file ends on a whole one and the retry
        // writes the buffer whole; failing that, the part written stays and leaves the
        // buffer (as Redis's flushAppendOnlyFile does).
        let short = (done > 0).then_some((done, self.pending.len()));
        let mut truncate_error = None;
        if done > 0 {
            if let Err(t) = disk::truncate(file, self.written_len) {
                truncate_error = Some(disk::strerror(&t));
                self.written_len += done as u64;
                self.pending.drain(..done);
                self.unsynced = true;
            }
        }
        self.fail(Failure { op: "write", reason: disk::strerror(&e), short, truncate_error });
        false
    }

    fn fail(&mut self, f: Failure) {
        if self.failed.is_none() {
            self.events.push(AofEvent::Failed(f.clone()));
        }
        self.failed = Some(f);
    }

    /// Bytes waiting in the buffer for a write that failed (INFO aof_buffer_length).
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Timer work: the everysec fsync when due, and the retry after a failure: the
    /// buffered units are written and (unless the policy is `no`) fsynced; when both
    /// work, writes are accepted again.
    pub fn cron(&mut self, now_ms: i64) {
        if self.failed.is_some() {
            if self.write_pending() && (self.cfg.appendfsync == Fsync::No || self.fsync(now_ms)) {
                self.failed = None;
                self.events.push(AofEvent::Recovered);
            }
        } else if self.cfg.appendfsync == Fsync::EverySec && self.unsynced && now_ms - self.last_fsync_ms >= 1000 {
            self.fsync(now_ms);
        }
    }

    /// fsync the incr file now; false (and the failed state) when it fails.
    pub fn fsync(&mut self, now_ms: i64) -> bool {
        if let Some(f) = &self.file {
            if let Err(e) = disk::fsync(f) {
                self.fail(Failure { op: "fsync", reason: disk::strerror(&e), short: None, truncate_error: None });
                return false;
            }
        }
        self.unsynced = false;
        self.last_fsync_ms = now_ms;
        true
    }

    /// The current failure, if writes are refused for one.
    pub fn failure(&self) -> Option<&Failure> {
        self.failed.as_ref()
    }

    /// Changes of the write status since the last call, for the log.
    pub fn take_events(&mut self) -> Vec<AofEvent> {
        std::mem::take(&mut self.events)
    }

    /// Write what is buffered and fsync, then close the incr file; later units are not
    /// written. Err (and the file stays open) when that fails: closing then would lose
    /// acknowledged writes.
    pub fn close(&mut self, now_ms: i64) -> Result<(), PersistError> {
        self.settle(now_ms)?;
        self.file = None;
        Ok(())
    }

    /// Everything buffered written and fsynced, or the failure that prevents it.
    pub fn settle(&mut self, now_ms: i64) -> Result<(), PersistError> {
        self.cron(now_ms);
        if self.failed.is_none() {
            self.fsync(now_ms);
        }
        match &self.failed {
            Some(f) => Err(PersistError::io(&self.incr_path(), f.op, io::Error::other(f.reason.clone()))),
            None => Ok(()),
        }
    }

    /// Step 1 of a rewrite: switch writes to a new incr file named in a persisted
    /// manifest, and capture `ks` for the new base.
    pub fn start_rewrite(&mut self, ks: &Keyspace, now_ms: i64) -> Result<RewriteJob, PersistError> {
        self.switch_incr(now_ms)?;
        let tmp = self.dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
        let rdb_base = rdb_base(&self.cfg, ks);
        let snapshot = JobSource::Copy(Box::new(ks.clone()));
        Ok(RewriteJob { snapshot, cfg: self.cfg.clone(), now_ms, tmp, rdb_base })
    }

    /// [`Aof::start_rewrite`] without copying the keyspace here: the job reads the chunks
    /// of a snapshot the returned walker copies as the caller drives it
    /// ([`crate::keyspace::snapshot`]).
    pub fn start_rewrite_live(
        &mut self,
        ks: &mut Keyspace,
        now_ms: i64,
    ) -> Result<(RewriteJob, SnapshotWalker), PersistError> {
        if self.rewriting {
            return Err(PersistError::State("a rewrite is already in progress".into()));
        }
        let rdb_base = rdb_base(&self.cfg, ks);
        let (mut walker, rx) = ks.begin_snapshot().map_err(PersistError::State)?;
        if let Err(e) = self.switch_incr(now_ms) {
            walker.abort(ks);
            return Err(e);
        }
        let tmp = self.dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
        let cfg = snapshot::config_for(&self.cfg, ks);
        let job = RewriteJob { snapshot: JobSource::Live(rx), cfg, now_ms, tmp, rdb_base };
        Ok((job, walker))
    }

    /// A rewrite starts: writes from now on go to a new incr file named in a persisted
    /// manifest.
    fn switch_incr(&mut self, now_ms: i64) -> Result<(), PersistError> {
        if self.rewriting {
            return Err(PersistError::State("a rewrite is already in progress".into()));
        }
        if self.single {
            // One file: writes go on to it, and to the buffer that follows the new base
            // (none with the AOF off: nothing is fed then). A SELECT starts both.
            if self.file.is_some() || self.enabling.is_some() {
                self.rewrite_buf = Some(Vec::new());
                self.feed.reset();
            }
        } else if self.file.is_none() && self.enabling.is_some() {
            // The incr file the writes during the first rewrite go to. The manifest naming
            // it is written with the base (an incr file alone misses the data before it).
            let mut next = self.manifest.clone();
            let name = next.new_incr(&self.cfg.appendfilename);
            let path = self.dir.join(&name);
            let file = disk::create(&path).map_err(|e| PersistError::io(&path, "create", e))?;
            self.written_len = 0;
            self.file = Some(file);
            self.incr_name = name;
            self.manifest = next;
            self.feed.reset();
        } else if self.file.is_some() {
            // The old incr file gets everything written so far before it is left behind:
            // units still buffered are in the keyspace the new base is made of, so they
            // must not land in the new incr file after it.
            self.settle(now_ms)?;
            let mut next = self.manifest.clone();
            let name = next.new_incr(&self.cfg.appendfilename);
            let path = self.dir.join(&name);
            let file = disk::create(&path).map_err(|e| PersistError::io(&path, "create", e))?;
            // On a failure the new incr file stays (empty): the manifest on disk may name
            // it already (a rename whose directory fsync failed). Writes go on to the
            // old file, which both manifests name; the next switch reuses the name.
            persist_manifest(&self.dir, &self.cfg.appendfilename, &next)?;
            self.other_files_len += self.written_len;
            self.written_len = 0;
            self.file = Some(file);
            self.incr_name = name;
            self.manifest = next;
            self.feed.reset();
        }
        self.rewriting = true;
        Ok(())
    }

    /// Step 3: install the base `done` built (or clean up after the job failed).
    pub fn finish_rewrite(&mut self, done: Result<RewrittenBase, PersistError>) -> Result<(), PersistError> {
        self.rewriting = false;
        if self.single {
            return self.finish_single_file_rewrite(done);
        }
        let done = match done {
            Ok(d) => d,
            Err(e) => {
                if let Some(on_disk) = self.enabling.clone() {
                    // Back to waiting for a first rewrite: its incr file is not named anywhere.
                    self.file = None;
                    let _ = fs::remove_file(self.dir.join(&self.incr_name));
                    self.incr_name.clear();
                    self.written_len = 0;
                    self.pending.clear();
                    self.manifest = on_disk;
                }
                return Err(e);
            }
        };
        let mut next = self.manifest.clone();
        let name = next.new_base(&self.cfg.appendfilename, done.rdb_base);
        let base = self.dir.join(&name);
        if let Err(e) = disk::rename(&done.tmp, &base) {
            let _ = fs::remove_file(&done.tmp);
            return Err(PersistError::io(&base, "rename", e));
        }
        next.mark_rewritten_incr_as_history(self.file.is_some());
        match persist_manifest(&self.dir, &self.cfg.appendfilename, &next) {
            Ok(()) => {}
            Err(e @ PersistError::RenameNotDurable { .. }) => {
                // The new manifest is the one in place: follow it (its base's name must not
                // be given again), but keep the history files the old one, which a power
                // loss may bring back, names.
                self.manifest = next;
                return Err(e);
            }
            Err(e) => {
                let _ = fs::remove_file(&base);
                return Err(e);
            }
        }
        self.manifest = next;
        self.enabling = None;
        // History files are garbage now, unless aof-disable-auto-gc keeps them.
        if !self.cfg.aof_disable_auto_gc {
            self.delete_history();
        }
        self.other_files_len = files_len(&self.dir, &self.manifest, &self.incr_name);
        self.base_size = self.current_size();
        Ok(())
    }

    /// Step 3 for a single file (Redis 6.2's backgroundRewriteDoneHandler): the writes
    /// made during the rewrite are appended to the new file, which is fsynced and renamed
    /// over the old one and appended to from then on. Until the rename the old file stays
    /// whole and in use, so a failure anywhere before it loses nothing.
    fn finish_single_file_rewrite(&mut self, done: Result<RewrittenBase, PersistError>) -> Result<(), PersistError> {
        let during = self.rewrite_buf.take().unwrap_or_default();
        let done = done?;
        let path = self.dir.join(&self.cfg.appendfilename);
        let new_file = match append_synced(&done.tmp, &during) {
            Ok(f) => f,
            Err(e) => {
                let _ = fs::remove_file(&done.tmp);
                return Err(PersistError::io(&done.tmp, "write", e));
            }
        };
        if let Err(e) = disk::rename(&done.tmp, &path) {
            let _ = fs::remove_file(&done.tmp);
            return Err(PersistError::io(&path, "rename", e));
        }
        // The renamed file is the AOF now, whether or not its directory entry is durable.
        let durable = disk::sync_dir(&self.dir);
        if self.file.is_some() || self.enabling.is_some() {
            self.written_len = new_file.metadata().map_err(|e| PersistError::io(&path, "stat", e))?.len();
            self.file = Some(new_file);
            self.incr_name = self.cfg.appendfilename.clone();
            // What was buffered for the old file is in the new one (base or `during`).
            self.pending.clear();
            self.unsynced = false;
            self.feed.reset();
            if self.failed.take().is_some() {
                self.events.push(AofEvent::Recovered);
            }
        }
        self.enabling = None;
        self.base_size = self.current_size();
        durable.map_err(|source| PersistError::RenameNotDurable { path, source })
    }

    /// Bytes of the whole AOF: base and incr files (INFO's aof_current_size).
    pub fn current_size(&self) -> u64 {
        self.other_files_len + self.written_len
    }

    /// The size after the last rewrite (INFO's aof_base_size).
    pub fn base_size(&self) -> u64 {
        self.base_size
    }

    /// The growth in percent that calls for a rewrite under auto-aof-rewrite-percentage
    /// and -min-size, when it is due (Redis's serverCron rule): none while one runs.
    pub fn rewrite_due(&self, percentage: u64, min_size: u64) -> Option<u64> {
        if percentage == 0 || self.rewriting || self.file.is_none() {
            return None;
        }
        let size = self.current_size();
        if size < min_size {
            return None;
        }
        let base = self.base_size.max(1);
        let growth = (size * 100 / base).saturating_sub(100);
        (growth >= percentage).then_some(growth)
    }
}

/// Bytes of the files `m` names in `dir`, but `skip` (missing files count 0).
fn files_len(dir: &Path, m: &Manifest, skip: &str) -> u64 {
    m.base
        .iter()
        .chain(&m.incr)
        .filter(|ai| ai.name != skip)
        .map(|ai| fs::metadata(dir.join(&ai.name)).map_or(0, |md| md.len()))
        .sum()
}

impl RewriteJob {
    /// Step 2: write the new base to its temp file (fsynced). Runs on any thread.
    pub fn run(self) -> Result<RewrittenBase, PersistError> {
        let RewriteJob { snapshot, cfg, now_ms, tmp, rdb_base } = self;
        let copy;
        let src = match snapshot {
            JobSource::Copy(ks) => {
                copy = ks;
                Source::Keyspace(&copy)
            }
            JobSource::Live(rx) => Source::Stream { rx, key_delay_us: cfg.rdb_key_save_delay },
        };
        write_base(&tmp, src, &cfg, now_ms, rdb_base)?;
        Ok(RewrittenBase { tmp, rdb_base })
    }
}

/// Open `path` for appending, append `bytes` and fsync: the file handle stays valid
/// across a rename.
fn append_synced(path: &Path, bytes: &[u8]) -> io::Result<File> {
    let mut file = disk::open_append(path)?;
    disk::Checked(&mut file).write_all(bytes)?;
    disk::fsync(&file)?;
    Ok(file)
}

/// Whether a base of `ks` is an RDB: with aof-use-rdb-preamble (a RESP base holds streams
/// as XADD, XSETID, XGROUP and XCLAIM, as Redis writes them).
fn rdb_base(cfg: &Config, _ks: &Keyspace) -> bool {
    cfg.aof_use_rdb_preamble
}

/// A base file at `path`: an RDB with `aof-base` 1, or RESP commands.
fn write_base(path: &Path, src: Source, cfg: &Config, now_ms: i64, rdb: bool) -> Result<(), PersistError> {
    let file = disk::create(path).map_err(|e| PersistError::io(path, "create", e))?;
    let w = io::BufWriter::with_capacity(1 << 20, disk::Checked(file));
    let written = if rdb {
        snapshot::write_rdb_from(w, src, cfg, now_ms, true)
    } else {
        rewrite::write_keyspace_from(w, src, cfg.aof_timestamp_enabled.then_some(now_ms))
    };
    let synced =
        written.and_then(|w| w.into_inner().map_err(|e| e.into_error())).and_then(|f| disk::fsync_all(f.file()));
    synced.map_err(|e| {
        let _ = fs::remove_file(path);
        PersistError::io(path, "write", e)
    })
}

/// Write the manifest atomically: temp file, fsync, rename, fsync of the directory.
pub fn persist_manifest(dir: &Path, appendfilename: &str, m: &Manifest) -> Result<(), PersistError> {
    let path = dir.join(manifest_name(appendfilename));
    let tmp = dir.join(temp_manifest_name(appendfilename));
    let text = m.to_text();
    snapshot::write_atomically(&tmp, &path, |mut w| {
        w.write_all(text.as_bytes())?;
        Ok(w)
    })
}
