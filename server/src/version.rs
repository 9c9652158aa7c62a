//! The Redis version the server stands in for (`redis-version`, one per process).

use std::sync::atomic::{AtomicU8, Ordering};

use ferrokv::command::catalog::ServerVersion;

/// The version: its index in [`ServerVersion::ALL`].
static VERSION: AtomicU8 = AtomicU8::new(1);

/// Set the version, once, at start.
pub fn set(v: ServerVersion) {
    let i = ServerVersion::ALL.iter().position(|x| *x == v).unwrap_or(1);
    VERSION.store(i as u8, Ordering::Relaxed);
}

pub fn version() -> ServerVersion {
    ServerVersion::ALL[usize::from(VERSION.load(Ordering::Relaxed)) % ServerVersion::ALL.len()]
}

/// The release INFO, HELLO and scripts report (`7.0.15`).
pub fn release() -> &'static str {
    ferrokv::config::rdb_target_of(version()).server_version()
}
