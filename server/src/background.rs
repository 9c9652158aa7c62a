//! Driving a background snapshot (BGSAVE, BGREWRITEAOF) from the event loop: the loop
//! copies keys a slice at a time between client turns, a write barrier keeps the copy a
//! point-in-time one, and the job's thread encodes and writes what it receives. See
//! ferrokv::keyspace::snapshot and docs/server.md.

use std::time::Duration;

use ferrokv::keyspace::{SnapshotWalker, Step};
use ferrokv::persist::PersistError;

use crate::log::log;
use crate::server::Server;

/// Loop time one step may spend copying keys.
const STEP_BUDGET: Duration = Duration::from_micros(1000);
/// How long the loop sleeps when the writer has not caught up.
const BLOCKED_WAIT: Duration = Duration::from_millis(1);

impl Server {
    /// A snapshot began: account for its start (INFO's latest_fork_usec) and drive it.
    pub fn snapshot_started(&mut self, walker: SnapshotWalker) {
        self.jobs.latest_fork_usec = walker.start_usec;
        self.jobs.total_forks += 1;
        self.jobs.snapshot = Some(walker);
        self.step_snapshot();
    }

    /// How long the loop may sleep while a snapshot runs: not at all while keys are left
    /// to copy, a little while the writer catches up.
    pub fn snapshot_poll_timeout(&self) -> Option<Duration> {
        let walking =
            self.jobs
                .snapshot
                .as_ref()
                .map(|w| if w.last_step == Step::Blocked { BLOCKED_WAIT } else { Duration::ZERO });
        // A full resync's encoder hands over chunks to pass on.
        walking.or_else(|| self.full_sync_wants_turns().then_some(BLOCKED_WAIT))
    }

    /// A BGSAVE, a BGREWRITEAOF or a replicas' snapshot runs (Redis: a child is active).
    pub fn background_busy(&self) -> bool {
        self.jobs.running() || self.replicas.syncs.is_running()
    }

    /// One slice of copying, between client turns.
    pub fn step_snapshot(&mut self) {
        let Some(walker) = self.jobs.snapshot.as_mut() else { return };
        match walker.step(self.engine.keyspace_mut(), STEP_BUDGET, false) {
            Step::More | Step::Blocked => {}
            Step::Done => self.snapshot_done(),
        }
    }

    /// Copy whatever is left now (before the keyspace is replaced, or to wait for the job).
    pub fn settle_snapshot(&mut self) {
        // A replicas' snapshot goes at their sockets' pace: it is dropped (they sync
        // again) rather than waited for.
        let _ = self.abort_full_sync();
        if let Some(walker) = self.jobs.snapshot.as_mut() {
            walker.finish(self.engine.keyspace_mut());
            self.snapshot_done();
        }
    }

    fn snapshot_done(&mut self) {
        if let Some(w) = self.jobs.snapshot.take() {
            log(&format!(
                "Snapshot copied in {} steps: start {} us, longest step {} us, {} us in all",
                w.steps, w.start_usec, w.longest_step_usec, w.total_usec
            ));
        }
    }

    /// After FLUSHALL, as Redis's flushAllDataAndResetRDB: a running BGSAVE is dropped (its
    /// file would bring the flushed keys back), and so is a replicas' sync (they sync
    /// again, to the empty dataset), and, with save points, the empty dataset is saved at
    /// once.
    pub fn after_flushall(&mut self) {
        if self.abort_full_sync() {
            // Redis's line for its transfer child killed with SIGUSR1.
            log("Background transfer terminated by signal 10");
        }
        self.kill_bgsave();
        if !self.cfg.engine.save.is_empty() {
            if let Err(e) = self.save_now() {
                log(&format!("Failed saving the DB after FLUSHALL: {e}"));
            }
        }
    }

    /// The AOF is turned off while it is rewritten: the rewrite stops at once and its
    /// temp file goes, as Redis kills its rewrite child; not a failed rewrite.
    pub fn kill_aof_rewrite(&mut self) {
        self.jobs.rewrite_scheduled = false;
        let Some(job) = self.jobs.bgrewrite.take() else { return };
        log(&format!("Killing running AOF rewrite child: {}", std::process::id()));
        self.stop_snapshot_writer();
        let built = job.join().unwrap_or_else(|_| Err(PersistError::State("BGREWRITEAOF thread panicked".into())));
        // Clears the rewrite's state (the incr file it opened stays, as in Redis).
        let _ = self.engine.finish_rewrite(built);
    }

    /// Stop a running BGSAVE (its file would not be the dataset any more, or the server
    /// exits): not a save error, as Redis kills its child with SIGUSR1, which leaves the
    /// status alone.
    pub fn kill_bgsave(&mut self) {
        let Some(job) = self.jobs.bgsave.take() else { return };
        self.stop_snapshot_writer();
        // The writer stops at its next key and removes its temp file; it must be gone
        // before a save reuses the name.
        let _ = job.join();
        log("Background saving terminated by signal 10");
    }

    /// The running job's walk and writer stop (the walk may be over, the writer not).
    fn stop_snapshot_writer(&mut self) {
        if let Some(mut walker) = self.jobs.snapshot.take() {
            walker.abort(self.engine.keyspace_mut());
        }
        if let Some(writer) = self.jobs.writer_abort.take() {
            writer.abort();
        }
    }

    /// Keys copied so far and keys at the start (INFO's current_save_keys_*).
    pub fn snapshot_progress(&self) -> (u64, u64) {
        self.jobs.snapshot.as_ref().map_or((0, 0), |w| (w.copied, w.total))
    }
}
