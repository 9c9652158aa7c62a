//! ferrokv-server: a Redis-compatible RESP2/RESP3 server over the ferrokv engine.
//!
//! One thread owns the engine and every connection (Redis's model) and runs a mio event
//! loop; see docs/server.md.

pub mod acl;
pub mod admission;
pub mod alloc;
pub mod background;
pub mod blocking;
pub mod client;
pub mod cmd;
pub mod config;
pub mod crash;
pub mod dispatch;
pub mod event_loop;
mod latency;
mod loading;
pub mod log;
pub mod maxmemory;
pub mod memory_value;
pub mod monitor;
mod net;
pub mod notify;
pub mod obuf;
mod pause;
pub mod persistence;
mod pidfile;
pub mod pubsub;
pub mod renames;
pub mod replication;
pub mod reply_buffer;
pub mod resp;
pub mod script;
pub mod server;
pub mod shutdown;
mod signals;
pub mod slowlog;
pub mod stats;
pub mod stream_wait;
mod tracking;
pub mod version;
pub mod watch;

pub use config::ServerConfig;
pub use server::Server;
