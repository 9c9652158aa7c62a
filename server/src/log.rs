//! The server's log lines.

use ferrokv::keyspace::Clock;

/// A log line on stdout, Redis-style: `pid:M date * message`.
pub fn log(msg: &str) {
    println!("{}:M {} * {}", std::process::id(), Clock::System.now_ms(), msg);
}
