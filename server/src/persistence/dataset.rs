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

use ferrokv::command::eq_ic;
use ferrokv::engine::LoadHost;
use ferrokv::keyspace::Clock;
use ferrokv::persist::AofEvent;
use ferrokv::{Engine, Reply};

use super::jobs::WRITE_ERROR_LOG_EVERY;
use crate::client::Client;
use crate::log::{log, verbose, warn};
use crate::server::Server;

/// Redis's id for its AOF client (CLIENT_ID_AOF).
const AOF_CLIENT_ID: u64 = u64::MAX;

/// The server as the host of its engine's load: clients are answered while the data
/// loads, and the scripts an AOF holds (EVAL, EVALSHA: Redis before 7.0 could log a script
/// verbatim) run as Redis's AOF client runs them, on the engine being loaded, their replies
/// discarded and their effects not logged again. SCRIPT LOAD and FLUSH, which Redis 6.2
/// logs whenever a client sends them, act on the script cache as they did there.
pub(crate) struct ServerAsLoadHost<'a>(pub &'a mut Server);

impl LoadHost for ServerAsLoadHost<'_> {
    fn progress(&mut self, bytes: u64) {
        self.0.serve_while_loading(bytes);
    }

    fn runs(&self, name: &[u8]) -> bool {
        eq_ic(name, "eval") || eq_ic(name, "evalsha") || eq_ic(name, "script")
    }

    fn run(&mut self, engine: &mut Engine, db: usize, argv: &[Vec<u8>]) {
        let s = &mut *self.0;
        let is_script = eq_ic(&argv[0], "script");
        if argv.len() < if is_script { 2 } else { 3 } {
            warn(&format!("Skipping a '{}' with too few arguments in the AOF", String::from_utf8_lossy(&argv[0])));
            return;
        }
        let Ok(mut c) = Client::detached(AOF_CLIENT_ID) else {
            warn("Can't create the AOF client to run a logged script");
            return;
        };
        c.session.db = db;
        // As inside EXEC: the script's effects are not flushed (they are data being loaded).
        c.in_exec = true;
        std::mem::swap(&mut s.engine, engine);
        let reply = if is_script {
            crate::script::script(s, &mut c, argv)
        } else if eq_ic(&argv[0], "eval") {
            crate::script::eval(s, &mut c, argv)
        } else {
            crate::script::evalsha(s, &mut c, argv)
        };
        std::mem::swap(&mut s.engine, engine);
        if let Reply::Error(e) = reply {
            verbose(&format!("A script in the AOF answered an error: {e}"));
        }
    }
}

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
        let mut read = ferrokv::Engine::open(cfg, ferrokv::keyspace::Clock::System).map_err(|e| e.to_string())?;
        // INFO's rdb_last_load_keys_* count this load (DEBUG RELOAD), as Redis's.
        self.engine.persistence_mut().rdb_load = std::mem::take(&mut read.persistence_mut().rdb_load);
        Ok(read.into_keyspace())
    }

    /// Replace every key and function library with `ks`'s (DEBUG RELOAD, a replica's
    /// full resync); a background snapshot of the old ones is settled first.
    pub fn replace_dataset(&mut self, ks: ferrokv::keyspace::Keyspace) -> Result<(), String> {
        self.settle_snapshot();
        *self.engine.keyspace_mut() = ks;
        crate::script::functions::install(self)
    }
}

impl Server {
    /// Load the data directory into the engine, answering clients meanwhile. Err: the
    /// message to exit with (the reasons are logged, Redis's own line last).
    pub(crate) fn load_dataset(&mut self) -> Result<(), String> {
        let cfg = self.cfg.engine.clone();
        self.start_loading(&cfg);
        let loaded = Engine::open_watched(cfg, Clock::System, &mut ServerAsLoadHost(self));
        self.loading = None;
        let mut engine = loaded.map_err(|e| {
            if !e.redis_message_is_whole() {
                warn(&format!("Loading failed: {e}"));
            }
            let lines = e.redis_load_message();
            let report = e.rdb_check_report();
            for (i, line) in lines.iter().enumerate() {
                if i + 1 == lines.len() && !report.is_empty() {
                    crate::log::write_raw(&format!("{}\n", report.join("\n")));
                }
                warn(line);
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

    /// A load of what `cfg` names begins: clients are answered `-LOADING` from now on, and
    /// get a turn every `loading-process-events-interval-bytes`.
    pub(crate) fn start_loading(&mut self, cfg: &ferrokv::Config) {
        let turn_every = self.cfg.get("loading-process-events-interval-bytes").and_then(|v| v.parse().ok());
        self.loading = Some(crate::loading::Loading::start(cfg, turn_every.unwrap_or(2 << 20)));
    }

    /// The start's load runs, or a replica's diskless load (clients get -LOADING).
    pub(crate) fn is_loading(&self) -> bool {
        self.loading.is_some() || self.link.as_ref().is_some_and(|l| l.is_loading())
    }

    /// A replica loads its master's snapshot while serving the old data (Redis's
    /// async_loading): commands flagged no-async-loading get -LOADING.
    pub(crate) fn is_async_loading(&self) -> bool {
        self.link.as_ref().is_some_and(|l| l.is_async_loading())
    }

    /// INFO persistence's loading_* fields, while the load runs.
    pub(crate) fn loading_info(&self) -> Vec<(&'static str, String)> {
        self.loading.as_ref().map(crate::loading::Loading::info).unwrap_or_default()
    }
}
