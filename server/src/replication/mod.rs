//! Replication, Redis's full-resync path in both directions.
//!
//! As a master: a client that sends SYNC or PSYNC gets a full resync (a snapshot of the
//! dataset as an RDB bulk, built at once rather than from a fork) and then every
//! propagated command, as Redis streams them; its REPLCONF ACKs are what WAIT counts.
//! As a replica (REPLICAOF host port): a thread does the handshake and downloads the
//! master's snapshot into the dump file; the main loop loads it and runs the stream the
//! master sends on, unanswered, acknowledging the offset every second.
//! Partial resync (the backlog) is not here yet: a broken link means a full resync.

mod master;
mod replica;
mod state;

pub use master::{replconf, sync, wait, waitaof, waitaof_reply};
pub use replica::{replicaof, role};
pub use state::{MasterLink, Replicas};
