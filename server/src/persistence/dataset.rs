//! The AOF's write status logged as Redis logs it (a failure at most once per 30 seconds,
//! its end once), a dataset replaced by another (a replica's full sync), and the start's
//! load with clients answered meanwhile, as Redis does: the data is read into a new engine
//! while the server holds an empty one, and the loader hands the event loop a turn every
//! `loading-process-events-interval-bytes` or 100 ms (Redis's processEventsWhileBlocked).
//! Commands without the `loading` flag are refused with `-LOADING` (admission.rs); nothing
//! that writes the data files runs meanwhile (SHUTDOWN does not save, CONFIG SET of where
//! the data lives is refused, DEBUG RELOAD and its kin answer LOADING), so the empty engine
//! is never persisted over the real data.

use std::time::Instant;

use ferrokv::keyspace::Clock;
use ferrokv::persist::AofEvent;
use ferrokv::Engine;

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

impl Server {
    /// Load the data directory into the engine, answering clients meanwhile. Err: the
    /// message to exit with (the reasons are logged, Redis's own line last).
    pub(crate) fn load_dataset(&mut self) -> Result<(), String> {
        let cfg = self.cfg.engine.clone();
        let turn_every = self.cfg.get("loading-process-events-interval-bytes").and_then(|v| v.parse().ok());
        self.loading = Some(crate::loading::Loading::start(&cfg, turn_every.unwrap_or(2 << 20)));
        let loaded = {
            let mut progress = |bytes: u64| self.serve_while_loading(bytes);
            Engine::open_watched(cfg, Clock::System, &mut progress)
        };
        self.loading = None;
        let mut engine = loaded.map_err(|e| {
            if !e.redis_message_is_whole() {
                log(&format!("Loading failed: {e}"));
            }
            for line in e.redis_load_message() {
                log(&line);
            }
            format!("Loading failed: {e}")
        })?;
        for w in std::mem::take(&mut engine.persistence_mut().warnings) {
            log(&w);
        }
        engine.set_clock(self.time.clone());
        // Settings CONFIG SET changed meanwhile (never where the data lives: refused).
        *engine.config_mut() = self.cfg.engine.clone();
        if let Some(aof) = &mut engine.persistence_mut().aof {
            aof.reconfigure(&self.cfg.engine);
        }
        self.engine = engine;
        Ok(())
    }

    /// The loader read `bytes` more: the clients' turn when it is due.
    fn serve_while_loading(&mut self, bytes: u64) {
        let Some(l) = &mut self.loading else { return };
        if !l.read(bytes) {
            return;
        }
        self.refresh_time();
        self.serve_while_busy();
        if self.exit {
            // SHUTDOWN (which saves nothing while loading).
            std::process::exit(0);
        }
        if self.signals.scheduled().is_some() {
            // Nothing to save: the dataset is not loaded.
            crate::log::warn("User requested shutdown...");
            self.remove_runtime_files();
            crate::log::warn("Redis is now ready to exit, bye bye...");
            std::process::exit(0);
        }
    }

    pub(crate) fn is_loading(&self) -> bool {
        self.loading.is_some()
    }

    /// INFO persistence's loading_* fields, while the load runs.
    pub(crate) fn loading_info(&self) -> Vec<(&'static str, String)> {
        self.loading.as_ref().map(crate::loading::Loading::info).unwrap_or_default()
    }
}
