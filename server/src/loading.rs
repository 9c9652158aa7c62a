//! The start's load while it runs: what INFO reports of it. The load itself, with clients
//! answered meanwhile, is persistence/dataset.rs's `load_dataset`; admission.rs refuses
//! what cannot run meanwhile (`-LOADING`).

use std::time::{Duration, Instant};

use ferrokv::keyspace::Clock;

pub struct Loading {
    started_unix: i64,
    started: Instant,
    /// Bytes of the files to read (the dump, or the AOF directory's files).
    total_bytes: u64,
    loaded_bytes: u64,
    /// Bytes read since the clients last had a turn, and when it was.
    since_turn: u64,
    last_turn: Instant,
    /// loading-process-events-interval-bytes: the clients get a turn after this many.
    turn_every: u64,
}

/// Clients get a turn at least this often, however slow the load.
const TURN_AT_LEAST_EVERY: Duration = Duration::from_millis(100);

impl Loading {
    pub fn start(cfg: &ferrokv::Config, turn_every: u64) -> Loading {
        Loading {
            started_unix: Clock::System.now_ms() / 1000,
            started: Instant::now(),
            total_bytes: files_to_load(cfg),
            loaded_bytes: 0,
            since_turn: 0,
            last_turn: Instant::now(),
            turn_every,
        }
    }

    /// The loader read `bytes` more: whether the clients get a turn now (every
    /// loading-process-events-interval-bytes, or 100 ms).
    pub fn read(&mut self, bytes: u64) -> bool {
        self.loaded_bytes += bytes;
        self.since_turn += bytes;
        if self.since_turn < self.turn_every && self.last_turn.elapsed() < TURN_AT_LEAST_EVERY {
            return false;
        }
        self.since_turn = 0;
        self.last_turn = Instant::now();
        true
    }

    /// INFO persistence's last fields while the load runs (Redis's loading_*).
    pub fn info(&self) -> Vec<(&'static str, String)> {
        let perc = if self.total_bytes == 0 { 0.0 } else { self.loaded_bytes as f64 * 100.0 / self.total_bytes as f64 };
        let elapsed = self.started.elapsed().as_secs();
        let remaining = self.total_bytes.saturating_sub(self.loaded_bytes);
        let eta = if elapsed == 0 { 1 } else { elapsed * remaining / (self.loaded_bytes + 1) };
        vec![
            ("loading_start_time", self.started_unix.to_string()),
            ("loading_total_bytes", self.total_bytes.to_string()),
            ("loading_rdb_used_mem", "0".into()),
            ("loading_loaded_bytes", self.loaded_bytes.to_string()),
            ("loading_loaded_perc", format!("{perc:.2}")),
            ("loading_eta_seconds", eta.to_string()),
        ]
    }
}

/// The bytes a start will read: the AOF directory's files, or the dump.
fn files_to_load(cfg: &ferrokv::Config) -> u64 {
    if cfg.appendonly && cfg.aof_is_single_file() {
        std::fs::metadata(cfg.dir.join(&cfg.appendfilename)).map_or(0, |m| m.len())
    } else if cfg.appendonly {
        let dir = cfg.dir.join(&cfg.appenddirname);
        std::fs::read_dir(dir)
            .map(|d| d.flatten().filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
            .unwrap_or(0)
    } else {
        std::fs::metadata(cfg.dir.join(&cfg.dbfilename)).map_or(0, |m| m.len())
    }
}
