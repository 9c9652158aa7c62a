//! The server's log lines.

use ferrokv::keyspace::Clock;

/// A log line on stdout, Redis-style: `pid:M date * message`.
pub fn log(msg: &str) {
    println!("{}:M {} * {}", std::process::id(), Clock::System.now_ms(), msg);
}

/// A panic (a bug, or DEBUG SEGFAULT / PANIC) logs a crash report in the log, as Redis's
/// bug report, with the panicking thread's stack trace; the process then exits with 1.
pub fn log_crash_reports() {
    std::panic::set_hook(Box::new(|info| {
        let where_ = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        log("=== REDIS BUG REPORT START: Cut & paste starting from here ===");
        log(&format!("ferrokv-server {} crashed: {what}{where_}", env!("CARGO_PKG_VERSION")));
        log("------ STACK TRACE ------");
        println!("{}", std::backtrace::Backtrace::force_capture());
        log("=== REDIS BUG REPORT END. Make sure to include from START to END. ===");
    }));
}

pub use ferrokv::persist::disk::strerror;
