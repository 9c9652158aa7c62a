//! Replication in both directions, full and partial resync.
//!
//! As a master: a client that sends SYNC or PSYNC gets a full resync (a snapshot made in
//! the background and streamed, shared by the replicas that arrive together: fullsync.rs)
//! and then every propagated command, as Redis streams them; its REPLCONF ACKs are what
//! WAIT counts. A
//! PSYNC naming our replication ID (or the previous one, up to where it ended) and an
//! offset the backlog still holds continues instead (+CONTINUE and the missed bytes).
//! As a replica (REPLICAOF host port): a thread does the handshake (asking to continue
//! when the data follows a stream) and downloads the master's snapshot (`$len` or
//! `$EOF:`) into the dump file, clients meanwhile seeing what repl-diskless-load would
//! show them (-LOADING, or the old data under async loading); the main loop loads it and runs the stream the master sends on, unanswered,
//! acknowledging the offset every second. The stream's bytes, as applied, go on
//! unchanged to the backlog and to this server's own replicas, so offsets agree along
//! a chain and across a promotion.

mod backlog;
mod fullsync;
mod master;
mod replica;
mod state;

pub use backlog::{new_replid, History};
pub use master::{replconf, sync, wait, waitaof, waitaof_reply};
pub use replica::{replicaof, role};
pub use state::{Failover, MasterLink, Replicas};
