//! The AOF's write status logged as Redis logs it (a failure at most once per 30 seconds,
//! its end once), and a dataset replaced by another (a replica's full sync).

use std::time::Instant;

use ferrokv::persist::AofEvent;

use super::jobs::WRITE_ERROR_LOG_EVERY;
use crate::log::log;
use crate::server::Server;

impl Server {
    /// Log what changed in the AOF's write status since the last call.
    pub fn log_aof_events(&mut self) {
        for ev in self.engine.take_aof_events() {
            match ev {
                AofEvent::Failed(f) => {
                    let due = self.jobs.aof_log.last_failure_log.is_none_or(|t| t.elapsed() > WRITE_ERROR_LOG_EVERY);
                    if due {
                        self.jobs.aof_log.last_failure_log = Some(Instant::now());
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
                    self.jobs.aof_log.last_failure_log = None;
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
        let mut cfg = self.engine.config().clone();
        cfg.appendonly = false;
        ferrokv::Engine::open(cfg, ferrokv::keyspace::Clock::System)
            .map(ferrokv::Engine::into_keyspace)
            .map_err(|e| e.to_string())
    }

    /// Replace every key and function library with `ks`'s (DEBUG RELOAD, a replica's
    /// full resync).
    pub fn replace_dataset(&mut self, ks: ferrokv::keyspace::Keyspace) -> Result<(), String> {
        *self.engine.keyspace_mut() = ks;
        crate::script::functions::install(self)
    }
}
