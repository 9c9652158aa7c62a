//! Server-level commands (connection, transactions, configuration, introspection,
//! persistence), one file per group, and the lookup that joins them with the engine's
//! command table.

pub mod admin;
pub mod blocking;
mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
mod failover;
pub mod info;
mod latency;
mod lolwut;
mod lookup;
pub mod memory;
pub mod migrate;
pub mod multi;
mod pause;
pub mod pubsub;
mod replies;
pub mod slowlog;
pub mod table;
mod tracking;
pub mod xread;

pub use lookup::{all, lookup, set_renames, set_version, skips_slowlog, stat_key, Cmd, Found, Run};
pub use replies::{sub_arity, text, unknown_subcommand};
