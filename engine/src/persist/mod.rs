//! The write path: AOF (multi-part, fsync policy, rewrite), RDB snapshots, startup loading.

pub mod feed;

pub use feed::AofFeed;

use crate::command::Argv;

/// Where propagated commands go.
#[derive(Debug, Default)]
pub struct Persistence {}

impl Persistence {
    /// No files.
    pub fn none() -> Persistence {
        Persistence {}
    }

    /// Append one unit of propagated commands.
    pub fn feed(&mut self, _ops: &[(usize, Argv)], _now_ms: i64) {}
}
