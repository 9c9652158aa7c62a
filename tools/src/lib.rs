//! ferrokv-tools: the library behind `rdbtool` and `aoftool`. Binaries stay thin; everything testable
//! lives here.

pub mod against;
pub mod aof;
pub mod convert;
pub mod dataset;
pub mod diff;
pub mod dump;
pub mod generate;
pub mod jsonl_read;
pub mod jsonw;
pub mod memory;
pub mod out;
pub mod pipeline;
pub mod progress;
pub mod replay;
pub mod report;
pub mod rewrite;
pub mod verify;

/// Exit codes shared by every tool (docs/cli.md).
pub mod exit {
    /// Success; for verify, the file is valid.
    pub const OK: u8 = 0;
    /// The input is invalid or corrupt (the error names file, offset, db and key).
    pub const INVALID: u8 = 1;
    /// Usage error, unreadable input, or an output error.
    pub const ERROR: u8 = 2;
}

/// Milliseconds since the Unix epoch, for `--now` defaults.
/// A `--redis-version` value (clap's value parser for every tool that takes one).
pub fn parse_server_version(s: &str) -> Result<ferrokv::command::catalog::ServerVersion, String> {
    ferrokv::command::catalog::ServerVersion::parse(s)
        .ok_or_else(|| format!("unknown version '{s}' (6.2, 7.0, 7.2, 7.4, valkey-7.2, valkey-8.0)"))
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
