//! Starting and collecting BGSAVE and BGREWRITEAOF, the save points, SAVE and the
//! shutdown sequence.

use ferrokv::keyspace::Clock;
use ferrokv::persist::PersistError;

use crate::log::log;
use crate::server::Server;
use crate::shutdown::ShutdownMode;

impl Server {
    pub(crate) fn check_save_points(&mut self) {
        if self.background_busy() {
            return;
        }
        let now = Clock::System.now_ms() / 1000;
        let dirty = self.engine.stats().dirty;
        // After a failure, the save points try again only after a delay.
        let may_retry =
            self.jobs.last_bgsave_ok || now - self.jobs.last_bgsave_try > crate::persistence::BGSAVE_RETRY_DELAY_SECS;
        let due = may_retry
            && self.cfg.engine.save.iter().any(|&(secs, changes)| {
                dirty >= changes && now - self.jobs.last_save >= secs as i64 && (changes > 0 || dirty > 0)
            });
        if due {
            log(&format!("{dirty} changes since the last save. Saving..."));
            self.start_bgsave();
        }
    }

    /// Start a BGSAVE: a thread writes the keys the loop copies a few at a time
    /// (server/src/background.rs).
    pub fn start_bgsave(&mut self) {
        let cfg = ferrokv::persist::snapshot::config_for(self.engine.config(), self.engine.keyspace());
        let now = self.engine.now_ms();
        let rx = match self.engine.keyspace_mut().begin_snapshot() {
            Ok((walker, rx)) => {
                self.snapshot_started(walker);
                rx
            }
            // Cannot happen while jobs are one at a time; fall back to a copy.
            Err(_) => self.engine.keyspace().snapshot_now(),
        };
        self.jobs.writer_abort = Some(rx.abort_handle());
        self.jobs.bgsave_dirty = self.engine.stats().dirty;
        self.jobs.last_bgsave_try = Clock::System.now_ms() / 1000;
        let repl = self.repl_aux();
        self.jobs.bgsave = Some(std::thread::spawn(move || {
            let src = ferrokv::persist::snapshot::Source::Stream { rx, key_delay_us: cfg.rdb_key_save_delay };
            ferrokv::persist::snapshot::save_from(src, &cfg, now, repl.as_ref())
        }));
    }

    /// Start a BGREWRITEAOF on a thread.
    pub fn start_bgrewrite(&mut self) -> Result<(), PersistError> {
        let (job, walker) = self.engine.start_rewrite_live()?;
        self.jobs.writer_abort = Some(walker.abort_handle());
        self.snapshot_started(walker);
        self.jobs.bgrewrite = Some(std::thread::spawn(move || job.run()));
        Ok(())
    }

    /// A background save (BGSAVE, or a disk-target sync for replicas) is in the dump
    /// file: the changes made before its snapshot (`dirty_at_start`) are saved.
    pub(crate) fn background_save_done(&mut self, dirty_at_start: u64) {
        let stats = self.engine.stats_mut();
        stats.dirty = stats.dirty.saturating_sub(dirty_at_start);
        self.jobs.last_save = Clock::System.now_ms() / 1000;
        self.jobs.last_bgsave_ok = true;
        self.jobs.rdb_saves += 1;
        log("Background saving terminated with success");
    }

    pub(crate) fn background_save_failed(&mut self, e: &dyn std::fmt::Display) {
        self.jobs.last_bgsave_ok = false;
        log(&format!("Write error saving DB on disk: {e}"));
        log("Background saving error");
    }

    /// Collect finished background jobs. With `wait`, block until they finish.
    pub fn collect_background_jobs_wait(&mut self, wait: bool) {
        if wait {
            // The writer waits for the keys the loop has not copied yet.
            self.settle_snapshot();
        }
        if self.jobs.bgsave.as_ref().is_some_and(|h| wait || h.is_finished()) {
            if let Some(h) = self.jobs.bgsave.take() {
                let r = h.join().unwrap_or_else(|_| Err(PersistError::State("BGSAVE thread panicked".into())));
                match r {
                    Ok(()) => self.background_save_done(self.jobs.bgsave_dirty),
                    Err(e) => self.background_save_failed(&e),
                }
            }
        }
        if self.jobs.bgrewrite.as_ref().is_some_and(|h| wait || h.is_finished()) {
            if let Some(h) = self.jobs.bgrewrite.take() {
                let built =
                    h.join().unwrap_or_else(|_| Err(PersistError::State("BGREWRITEAOF thread panicked".into())));
                match self.engine.finish_rewrite(built) {
                    Ok(()) => {
                        self.jobs.last_rewrite_ok = true;
                        self.jobs.rewrite_failures_in_a_row = 0;
                        self.jobs.aof_rewrites += 1;
                        log("Background AOF rewrite finished successfully");
                        self.local_aof_ready();
                    }
                    Err(e) => {
                        if self.engine.persistence().aof.as_ref().is_some_and(|a| a.is_enabling()) {
                            // The AOF is still being turned on: try again, as Redis does.
                            self.jobs.rewrite_scheduled = true;
                        }
                        self.jobs.last_rewrite_ok = false;
                        self.jobs.rewrite_failures_in_a_row += 1;
                        log(&format!("Background AOF rewrite failed: {e}"));
                    }
                }
            }
        }
    }

    pub(crate) fn start_scheduled_jobs(&mut self) {
        if self.background_busy() {
            return;
        }
        if self.jobs.rewrite_scheduled {
            if self.rewrites_limited() {
                return;
            }
            self.jobs.rewrite_scheduled = false;
            if let Err(e) = self.start_bgrewrite() {
                log(&format!("Can't rewrite append only file in background: {e}"));
            }
        } else if self.jobs.bgsave_scheduled {
            self.jobs.bgsave_scheduled = false;
            self.start_bgsave();
        } else if let Some(growth) = self.auto_rewrite_due() {
            log(&format!("Starting automatic rewriting of AOF on {growth}% growth"));
            if let Err(e) = self.start_bgrewrite() {
                log(&format!("Can't rewrite append only file in background: {e}"));
            }
        }
    }

    /// auto-aof-rewrite-percentage and auto-aof-rewrite-min-size: the AOF's growth since
    /// the last rewrite when it calls for one.
    fn auto_rewrite_due(&mut self) -> Option<u64> {
        let aof = self.engine.persistence().aof.as_ref()?;
        let number = |name: &str| self.cfg.get(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let growth = aof.rewrite_due(number("auto-aof-rewrite-percentage"), number("auto-aof-rewrite-min-size"))?;
        (!self.rewrites_limited()).then_some(growth)
    }

    /// After 3 failed rewrites in a row, wait 1 minute before the next automatic one, then
    /// 2, 4 ... up to 60 (Redis's aofRewriteLimited), so a full disk is not hammered.
    fn rewrites_limited(&mut self) -> bool {
        if self.jobs.rewrite_failures_in_a_row < 3 {
            self.jobs.rewrite_limit = (0, None);
            return false;
        }
        let now = std::time::Instant::now();
        let (last_minutes, next) = self.jobs.rewrite_limit;
        if let Some(at) = next {
            if now < at {
                return true;
            }
            // The wait is over: one attempt, and a longer wait if it fails too.
            self.jobs.rewrite_limit.1 = None;
            return false;
        }
        let minutes = if last_minutes == 0 { 1 } else { (last_minutes * 2).min(60) };
        self.jobs.rewrite_limit = (minutes, Some(now + std::time::Duration::from_secs(minutes * 60)));
        log(&format!(
            "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {minutes} minutes"
        ));
        true
    }

    pub(crate) fn collect_background_jobs(&mut self) {
        self.collect_background_jobs_wait(false);
    }

    /// SAVE, on this thread.
    pub fn save_now(&mut self) -> Result<(), PersistError> {
        let repl = self.repl_aux();
        self.engine.save_following(repl.as_ref())?;
        self.jobs.last_save = Clock::System.now_ms() / 1000;
        self.jobs.last_bgsave_ok = true;
        self.jobs.rdb_saves += 1;
        Ok(())
    }

    /// The last steps of a shutdown (crate::shutdown): stop the background save or
    /// rewrite as Redis kills its child (not the AOF's first rewrite, which holds the only
    /// copy of the data in the AOF, unless `force`), save as asked, close the AOF. An error
    /// (the final save, or buffered AOF writes that cannot be written) keeps the server
    /// running, unless `force` says to exit anyway.
    pub fn prepare_shutdown(&mut self, mode: ShutdownMode, force: bool) -> Result<(), String> {
        self.collect_background_jobs_wait(false);
        let _ = self.abort_full_sync();
        if self.jobs.bgsave.is_some() {
            crate::log::warn("There is a child saving an .rdb. Killing it!");
            self.kill_bgsave();
        }
        if self.jobs.bgrewrite.is_some() {
            if self.engine.persistence().aof.as_ref().is_some_and(|a| a.is_enabling()) {
                if !force {
                    return Err("Writing initial AOF, can't exit.".into());
                }
                crate::log::warn("Writing initial AOF. Exit anyway.");
            }
            crate::log::warn("There is a child rewriting the AOF. Killing it!");
            self.kill_aof_rewrite();
        }
        let save = match mode {
            // The engine is empty while the start's load runs: saving it would replace the
            // data (Redis exits without saving then too).
            _ if self.is_loading() => false,
            ShutdownMode::Save => true,
            ShutdownMode::NoSave => false,
            ShutdownMode::Default => !self.cfg.engine.save.is_empty(),
        };
        if self.engine.persistence().aof.as_ref().is_some_and(|a| a.is_open()) {
            log("Calling fsync() on the AOF file.");
        }
        // The AOF first: acknowledged writes still buffered after a write error must reach
        // the disk (Redis exits without them).
        if let Err(e) = self.engine.settle_aof() {
            if !force {
                return Err(format!("Error writing the AOF, can't exit: {e}"));
            }
            log(&format!("Error writing the AOF: {e}. Exit anyway."));
        }
        if save {
            log("Saving the final RDB snapshot before exiting.");
            match self.save_now() {
                Ok(()) => log("DB saved on disk"),
                Err(e) if force => log(&format!("Error trying to save the DB: {e}. Exit anyway.")),
                Err(e) => return Err(format!("Error trying to save the DB, can't exit: {e}")),
            }
        }
        if let Err(e) = self.engine.close() {
            if !force {
                return Err(format!("Error closing the AOF, can't exit: {e}"));
            }
            log(&format!("Error closing the AOF: {e}. Exit anyway."));
        }
        self.remove_runtime_files();
        // Replies (SHUTDOWN's error, if any) are not written once we exit.
        crate::log::warn("Redis is now ready to exit, bye bye...");
        Ok(())
    }

    /// CONFIG SET appendonly yes: open the AOF directory and rewrite it from the dataset.
    /// `deferred`: inside a transaction, whose end the rewrite waits for.
    pub fn enable_aof(&mut self, deferred: bool) -> Result<(), PersistError> {
        let cfg = self.engine.config().clone();
        let manifest = ferrokv::persist::load::read_manifest(&cfg)?;
        let now = self.engine.now_ms();
        self.engine.persistence_mut().aof = Some(ferrokv::persist::Aof::enabling(&cfg, manifest, now)?);
        if self.jobs.bgsave.is_some() || self.replicas.syncs.is_running() {
            // One snapshot at a time, as Redis has one child: the rewrite follows the save
            // (or the replicas' sync).
            self.jobs.rewrite_scheduled = true;
            log("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
        } else if deferred {
            self.jobs.rewrite_scheduled = true;
            log("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.");
        } else if self.jobs.bgrewrite.is_none() {
            self.start_bgrewrite()?;
        }
        Ok(())
    }
}
