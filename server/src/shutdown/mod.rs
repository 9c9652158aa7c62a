//! SHUTDOWN as Redis 7 runs it: with replicas behind, writes pause and the shutdown waits
//! (up to `shutdown-timeout` seconds, checked by the timer) for every replica to
//! acknowledge the whole stream, its SHUTDOWN clients blocked; then the final steps
//! (persistence/schedule.rs). When those fail the waiting clients are answered with an
//! error, writes resume and the server goes on. SHUTDOWN NOW, a zero timeout or Redis 6.2
//! do not wait.

use std::time::Instant;

mod run;

/// What SHUTDOWN (or a signal) asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownMode {
    /// Save if save points are configured.
    Default,
    Save,
    NoSave,
}

/// What a shutdown asked for: SHUTDOWN's flags, or a signal's `shutdown-on-*` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownRequest {
    pub mode: ShutdownMode,
    /// Exit even when the final AOF write or save fails.
    pub force: bool,
    /// Do not wait for replicas.
    pub now: bool,
}

/// A shutdown waiting for replicas.
#[derive(Debug)]
pub struct ShutdownWait {
    request: ShutdownRequest,
    deadline: Instant,
    /// The SHUTDOWN clients blocked until it ends.
    clients: Vec<u64>,
}

/// How a shutdown went on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownStep {
    /// Done: leave the loop.
    Exit,
    /// Waiting for replicas (or one was already waiting).
    Waiting,
    /// It failed and was cancelled (logged).
    Failed,
}

/// The reply of a SHUTDOWN that could not be completed.
pub const SHUTDOWN_FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";
