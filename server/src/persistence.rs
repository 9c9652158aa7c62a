//! The server's side of persistence failures: the AOF's write status logged as Redis logs
//! it (a failure at most once per 30 seconds, its end once), and when a failed BGSAVE is
//! tried again.

use std::time::{Duration, Instant};

use ferrokv::persist::AofEvent;

use crate::server::{log, Server};

/// Seconds between two log lines of the same AOF write failure (Redis's
/// AOF_WRITE_LOG_ERROR_RATE).
const WRITE_ERROR_LOG_EVERY: Duration = Duration::from_secs(30);
/// A failed BGSAVE is tried again by the save points after this long (Redis's
/// CONFIG_BGSAVE_RETRY_DELAY, compared with `>`).
pub const BGSAVE_RETRY_DELAY_SECS: i64 = 5;

/// When the AOF's write failure was last logged.
#[derive(Debug, Default)]
pub struct AofLog {
    last_failure_log: Option<Instant>,
}

impl Server {
    /// Log what changed in the AOF's write status since the last call.
    pub fn log_aof_events(&mut self) {
        for ev in self.engine.take_aof_events() {
            match ev {
                AofEvent::Failed(f) => {
                    let due = self.aof_log.last_failure_log.is_none_or(|t| t.elapsed() > WRITE_ERROR_LOG_EVERY);
                    if due {
                        self.aof_log.last_failure_log = Some(Instant::now());
                        for line in f.log_lines() {
                            log(&line);
                        }
                        if self.cfg.engine.appendfsync == ferrokv::config::Fsync::Always {
                            log("The AOF fsync policy is 'always': writes are refused until the AOF can be written \
                                 again (Redis exits here).");
                        }
                    }
                }
                AofEvent::Recovered => {
                    self.aof_log.last_failure_log = None;
                    log("AOF write error looks solved, Redis can write again.");
                }
            }
        }
    }
}

impl Server {
    /// The dataset of the dump file (`dir`/`dbfilename`), read aside. A running snapshot
    /// copies what it still needs first, as the keys are about to be replaced.
    pub fn read_dump_file(&mut self) -> Result<ferrokv::keyspace::Keyspace, String> {
        self.settle_snapshot();
        let mut cfg = self.engine.cfg.clone();
        cfg.appendonly = false;
        ferrokv::Engine::open(cfg, ferrokv::keyspace::Clock::System).map(|e| e.ks).map_err(|e| e.to_string())
    }

    /// Replace every key and function library with `ks`'s (DEBUG RELOAD, a replica's
    /// full resync).
    pub fn replace_dataset(&mut self, ks: ferrokv::keyspace::Keyspace) -> Result<(), String> {
        self.engine.ks = ks;
        crate::script::functions::install(self)
    }
}
