//! Open a data directory's dump.rdb as the server does at startup, without a server (for
//! profiling the load: `perf record target/release/examples/load_rdb DIR`).
//!
//! `load_rdb DIR` prints `KEYS SECONDS`.

use std::time::Instant;

use ferrokv::keyspace::Clock;
use ferrokv::{Config, Engine};

fn main() -> std::process::ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: load_rdb DIR");
        return std::process::ExitCode::from(2);
    };
    let cfg = Config { dir: dir.into(), appendonly: false, ..Config::default() };
    let t = Instant::now();
    match Engine::open(cfg, Clock::System) {
        Ok(e) => {
            println!("{} {:.2}", e.keyspace().len(), t.elapsed().as_secs_f64());
            std::process::ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("load_rdb: {err}");
            std::process::ExitCode::from(1)
        }
    }
}
