//! Starting and collecting BGSAVE and BGREWRITEAOF, the save points, SAVE and the
//! shutdown sequence.

use ferrokv::keyspace::Clock;
use ferrokv::persist::PersistError;

use crate::log::log;
use crate::server::{Server, ShutdownMode};

impl Server {
    pub(crate) fn check_save_points(&mut self) {
        if self.jobs.running() {
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
        self.jobs.bgsave_dirty = self.engine.stats().dirty;
        self.jobs.last_bgsave_try = Clock::System.now_ms() / 1000;
        self.jobs.bgsave = Some(std::thread::spawn(move || {
            let src = ferrokv::persist::snapshot::Source::Stream { rx, key_delay_us: cfg.rdb_key_save_delay };
            ferrokv::persist::snapshot::save_from(src, &cfg, now)
        }));
    }

    /// Start a BGREWRITEAOF on a thread.
    pub fn start_bgrewrite(&mut self) -> Result<(), PersistError> {
        let (job, walker) = self.engine.start_rewrite_live()?;
        self.snapshot_started(walker);
        self.jobs.bgrewrite = Some(std::thread::spawn(move || job.run()));
        Ok(())
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
                    Ok(()) => {
                        self.engine.stats_mut().dirty =
                            self.engine.stats_mut().dirty.saturating_sub(self.jobs.bgsave_dirty);
                        self.jobs.last_save = Clock::System.now_ms() / 1000;
                        self.jobs.last_bgsave_ok = true;
                        self.jobs.rdb_saves += 1;
                        log("Background saving terminated with success");
                    }
                    Err(e) => {
                        self.jobs.last_bgsave_ok = false;
                        log(&format!("Write error saving DB on disk: {e}"));
                        log("Background saving error");
                    }
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
                        self.jobs.aof_rewrites += 1;
                        log("Background AOF rewrite finished successfully");
                    }
                    Err(e) => {
                        self.jobs.last_rewrite_ok = false;
                        log(&format!("Background AOF rewrite failed: {e}"));
                    }
                }
            }
        }
    }

    pub(crate) fn start_scheduled_jobs(&mut self) {
        if self.jobs.running() {
            return;
        }
        if self.jobs.rewrite_scheduled {
            self.jobs.rewrite_scheduled = false;
            if let Err(e) = self.start_bgrewrite() {
                log(&format!("Can't rewrite append only file in background: {e}"));
            }
        } else if self.jobs.bgsave_scheduled {
            self.jobs.bgsave_scheduled = false;
            self.start_bgsave();
        }
    }

    pub(crate) fn collect_background_jobs(&mut self) {
        self.collect_background_jobs_wait(false);
    }

    /// SAVE, on this thread.
    pub fn save_now(&mut self) -> Result<(), PersistError> {
        self.engine.save()?;
        self.jobs.last_save = Clock::System.now_ms() / 1000;
        self.jobs.last_bgsave_ok = true;
        self.jobs.rdb_saves += 1;
        Ok(())
    }

    /// Finish background work, save as asked, close the AOF. An error (the final save,
    /// or buffered AOF writes that cannot be written) keeps the server running, unless
    /// `force` says to exit anyway.
    pub fn prepare_shutdown(&mut self, mode: ShutdownMode, force: bool) -> Result<(), String> {
        log("User requested shutdown...");
        self.collect_background_jobs_wait(true);
        let save = match mode {
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
        // Replies (SHUTDOWN's error, if any) are not written once we exit.
        log("Redis is now ready to exit, bye bye...");
        Ok(())
    }

    /// CONFIG SET appendonly yes: open the AOF directory and rewrite it from the dataset.
    pub fn enable_aof(&mut self) -> Result<(), PersistError> {
        let cfg = self.engine.config().clone();
        let manifest = ferrokv::persist::load::read_manifest(&cfg)?;
        let now = self.engine.now_ms();
        let aof = ferrokv::persist::Aof::open_on_start(&cfg, manifest, self.engine.keyspace(), now)?;
        self.engine.persistence_mut().aof = Some(aof);
        if self.jobs.bgsave.is_some() {
            // One snapshot at a time, as Redis has one child: the rewrite follows the save.
            self.jobs.rewrite_scheduled = true;
        } else if self.jobs.bgrewrite.is_none() {
            self.start_bgrewrite()?;
        }
        Ok(())
    }
}
