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

/// The Redis release INFO's `redis_version` and scripts' `redis.REDIS_VERSION` report.
pub fn release() -> &'static str {
    version().release()
}

/// How replies write doubles under this version.
pub fn doubles() -> ferrokv::command::Doubles {
    version().doubles()
}

/// Valkey's own release (INFO's `valkey_version`), for a Valkey version.
pub fn valkey_release() -> Option<&'static str> {
    version().valkey_release()
}

/// HELLO's `server` and `version`: Redis's, Valkey 7.2's (`redis` with its own release),
/// Valkey 8's (`valkey`).
pub fn hello_identity() -> (&'static str, &'static str) {
    match (version(), valkey_release()) {
        (ServerVersion::Valkey80, Some(v)) => ("valkey", v),
        (_, Some(v)) => ("redis", v),
        (_, None) => ("redis", release()),
    }
}
