//! The server's log: lines in Redis's format (`pid:M 26 Nov 2026 22:30:42.678 * message`,
//! local time), at `loglevel` and above, on stdout or appended to `logfile`. The file is
//! opened for each line, as Redis does, so a rotated log is picked up at the next line.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::RwLock;

/// How much a line matters, from Redis's `loglevel`: each has its mark in the line.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Level {
    Debug,
    Verbose,
    Notice,
    Warning,
}

impl Level {
    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning => '#',
        }
    }
}

/// The lowest level written: `loglevel` (4 = `nothing`, Redis 7.2's level that writes none).
static THRESHOLD: AtomicU8 = AtomicU8::new(Level::Notice as u8);
/// Lines say `S` while this server replicates a master, `M` otherwise.
static REPLICA: AtomicBool = AtomicBool::new(false);
/// `logfile`: None for stdout.
static FILE: RwLock<Option<String>> = RwLock::new(None);

/// Follow `loglevel` and `logfile`. Err (a config error at start): the file cannot be
/// opened for appending, with Redis's text.
pub fn configure(loglevel: &str, logfile: &str) -> Result<(), String> {
    let threshold = match loglevel {
        "debug" => 0,
        "verbose" => 1,
        "warning" => 3,
        "nothing" => 4,
        _ => 2,
    };
    THRESHOLD.store(threshold, Ordering::Relaxed);
    if !logfile.is_empty() {
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(logfile)
            .map_err(|e| format!("Can't open the log file: {}", strerror(&e)))?;
    }
    if let Ok(mut f) = FILE.write() {
        *f = (!logfile.is_empty()).then(|| logfile.to_string());
    }
    Ok(())
}

/// Lines from now on carry the role of a replica (`S`) or of a master (`M`).
pub fn set_replica(replica: bool) {
    REPLICA.store(replica, Ordering::Relaxed);
}

/// A line at notice level, Redis's `*`.
pub fn log(msg: &str) {
    line(Level::Notice, msg);
}

/// A line at warning level, Redis's `#`.
pub fn warn(msg: &str) {
    line(Level::Warning, msg);
}

/// A line at verbose level, Redis's `-`.
pub fn verbose(msg: &str) {
    line(Level::Verbose, msg);
}

pub fn enabled(level: Level) -> bool {
    level as u8 >= THRESHOLD.load(Ordering::Relaxed)
}

/// One line at `level`, if `loglevel` lets it through.
pub fn line(level: Level, msg: &str) {
    if !enabled(level) {
        return;
    }
    let role = if REPLICA.load(Ordering::Relaxed) { 'S' } else { 'M' };
    let text = format!("{}:{role} {} {} {msg}\n", std::process::id(), timestamp(), level.mark());
    write_raw(&text);
}

/// Text as it is, with no prefix (Redis's LL_RAW): a stack trace in a crash report.
pub fn write_raw(text: &str) {
    let file = FILE.read().ok().and_then(|f| f.clone());
    match file {
        Some(path) => {
            if let Ok(mut f) = OpenOptions::new().append(true).create(true).open(path) {
                let _ = f.write_all(text.as_bytes());
            }
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }
}

/// `26 Nov 2026 22:30:42.678` in the machine's time zone, as Redis writes it.
fn timestamp() -> String {
    let now = jiff::ZonedDateTime::now();
    format!("{}.{:03}", now.strftime("%d %b %Y %H:%M:%S"), now.subsec_nanosecond() / 1_000_000)
}

pub use ferrokv::persist::disk::strerror;
