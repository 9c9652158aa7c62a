//! The bookkeeping of saves and rewrites: the running background jobs, when the last
//! ones ended and how, and what is scheduled (INFO persistence reads it).

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokv::keyspace::{SnapAbort, SnapshotWalker};
use ferrokv::persist::{PersistError, RewrittenBase};

/// Seconds between two log lines of the same AOF write failure (Redis's
/// AOF_WRITE_LOG_ERROR_RATE).
pub(super) const WRITE_ERROR_LOG_EVERY: Duration = Duration::from_secs(30);
/// A failed BGSAVE is tried again by the save points after this long (Redis's
/// CONFIG_BGSAVE_RETRY_DELAY, compared with `>`).
pub const BGSAVE_RETRY_DELAY_SECS: i64 = 5;

/// When the AOF's write failure was last logged.
#[derive(Debug, Default)]
pub struct AofLog {
    pub(super) last_failure_log: Option<Instant>,
}

/// The background jobs (one at a time, as Redis's child) and their history.
#[derive(Debug)]
pub struct SaveJobs {
    pub bgsave: Option<JoinHandle<Result<(), PersistError>>>,
    pub bgrewrite: Option<JoinHandle<Result<RewrittenBase, PersistError>>>,
    /// Stops the running BGSAVE's or BGREWRITEAOF's writer (as Redis kills its child).
    pub writer_abort: Option<SnapAbort>,
    /// The running BGSAVE's or BGREWRITEAOF's key copier (server/src/background.rs).
    pub snapshot: Option<SnapshotWalker>,
    /// Unix seconds of the last successful save.
    pub last_save: i64,
    pub last_bgsave_ok: bool,
    /// Unix seconds of the last BGSAVE attempt (a failed one is retried after a delay).
    pub last_bgsave_try: i64,
    pub last_rewrite_ok: bool,
    /// Rewrites failed in a row (INFO aof_rewrites_consecutive_failures).
    pub rewrite_failures_in_a_row: u64,
    /// After 3 failures in a row, automatic rewrites wait (Redis's aofRewriteLimited): the
    /// minutes of the last wait, and when the next attempt may start.
    pub rewrite_limit: (u64, Option<std::time::Instant>),
    /// The dirty count when the running BGSAVE started (subtracted when it succeeds).
    pub bgsave_dirty: u64,
    pub bgsave_scheduled: bool,
    pub rewrite_scheduled: bool,
    pub rdb_saves: u64,
    pub aof_rewrites: u64,
    /// Microseconds the loop spent starting the last snapshot (Redis's fork time).
    pub latest_fork_usec: u64,
    pub total_forks: u64,
    /// When the AOF's write failure was last logged.
    pub aof_log: AofLog,
}

impl SaveJobs {
    /// No job ran yet; `now_unix` counts as the last save (Redis's lastsave at start).
    pub fn new(now_unix: i64) -> SaveJobs {
        SaveJobs {
            bgsave: None,
            bgrewrite: None,
            writer_abort: None,
            snapshot: None,
            last_save: now_unix,
            last_bgsave_ok: true,
            last_bgsave_try: 0,
            last_rewrite_ok: true,
            rewrite_failures_in_a_row: 0,
            rewrite_limit: (0, None),
            bgsave_dirty: 0,
            bgsave_scheduled: false,
            rewrite_scheduled: false,
            rdb_saves: 0,
            aof_rewrites: 0,
            latest_fork_usec: 0,
            total_forks: 0,
            aof_log: AofLog::default(),
        }
    }

    /// A BGSAVE or BGREWRITEAOF runs.
    pub fn running(&self) -> bool {
        self.bgsave.is_some() || self.bgrewrite.is_some()
    }
}
