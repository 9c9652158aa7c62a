//! SIGTERM and SIGINT as Redis takes them: the first schedules a shutdown, which the timer
//! runs (so DEBUG PAUSE-CRON holds it, and SHUTDOWN ABORT can cancel it); a SIGINT while one
//! is scheduled exits at once, removing the temp file of a save in progress, as Redis's
//! "You insist... exiting now." does. A thread waits for the signals: a save that holds the
//! event loop does not hold it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use signal_hook::consts::{SIGALRM, SIGINT, SIGTERM};

use crate::log::log;

#[derive(Clone)]
pub struct Signals {
    scheduled: Arc<AtomicBool>,
    last: Arc<AtomicI32>,
    /// Where a save's temp file is (the data directory).
    dir: Arc<Mutex<PathBuf>>,
}

impl Signals {
    pub fn install(dir: PathBuf) -> Result<Signals, String> {
        let s = Signals {
            scheduled: Arc::new(AtomicBool::new(false)),
            last: Arc::new(AtomicI32::new(0)),
            dir: Arc::new(Mutex::new(dir)),
        };
        // SIGALRM does not end the process: Redis ignores it (without a watchdog), 7.4
        // and Valkey 8.0 log it.
        let mut incoming =
            signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGALRM]).map_err(|e| e.to_string())?;
        let watcher = s.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in incoming.forever() {
                    watcher.received(sig);
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(s)
    }

    fn received(&self, sig: i32) {
        if sig == SIGALRM {
            if crate::version::version().since_redis74() {
                // Redis prints the main thread's stack after it; this thread cannot see it.
                crate::log::warn("Received SIGALRM");
            }
            return;
        }
        if sig == SIGINT && self.scheduled.load(Ordering::SeqCst) {
            log("You insist... exiting now.");
            let dir = self.dir.lock().unwrap_or_else(PoisonError::into_inner).clone();
            let _ = std::fs::remove_file(dir.join(format!("temp-{}.rdb", std::process::id())));
            std::process::exit(1);
        }
        let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
        log(&format!("Received {name} scheduling shutdown..."));
        self.last.store(sig, Ordering::SeqCst);
        self.scheduled.store(true, Ordering::SeqCst);
    }

    /// The signal of the shutdown waiting to run: `shutdown-on-sigint` or `-sigterm` is the
    /// parameter whose flags it takes.
    pub fn scheduled(&self) -> Option<&'static str> {
        if !self.scheduled.load(Ordering::SeqCst) {
            return None;
        }
        Some(if self.last.load(Ordering::SeqCst) == SIGINT { "shutdown-on-sigint" } else { "shutdown-on-sigterm" })
    }

    /// Forget the scheduled shutdown (it failed, or SHUTDOWN ABORT); false when none was.
    pub fn cancel(&self) -> bool {
        self.scheduled.swap(false, Ordering::SeqCst)
    }

    pub fn set_dir(&self, dir: PathBuf) {
        *self.dir.lock().unwrap_or_else(PoisonError::into_inner) = dir;
    }
}
