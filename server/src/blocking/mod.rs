//! Blocked clients (BLPOP & co.): which clients wait on which keys (FIFO per key), their
//! deadlines, and serving them when a write leaves a list or sorted set at a key.
//!
//! A blocking command is served by running its non-blocking form through the engine
//! (LPOP, LPOP key count, LMOVE, RPOPLPUSH, ZPOPMIN/ZPOPMAX [count]), which replies,
//! fires the events and propagates exactly what Redis 7.0 writes to the AOF for a
//! served blocking pop. Keys become candidates when the engine reports them modified
//! (the WATCH hook); a candidate is served when it then holds a list or sorted set.

mod serve;
mod state;

pub use state::{Blocked, Blocking, Op, StreamRead, BLOCKED_DEFAULT_COUNT};
