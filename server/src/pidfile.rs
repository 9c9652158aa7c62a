//! `pidfile`: the process id written where the operator's tools look for it, removed at
//! shutdown. A file that cannot be written is logged and the server runs on, as Redis.

use crate::log::{log, strerror, warn};

pub fn write(path: &str) {
    if path.is_empty() {
        return;
    }
    if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
        warn(&format!("Failed to write PID file: {}", strerror(&e)));
    }
}

pub fn remove(path: &str) {
    if path.is_empty() {
        return;
    }
    log("Removing the pid file.");
    let _ = std::fs::remove_file(path);
}
