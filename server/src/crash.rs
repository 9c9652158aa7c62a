//! Crash reports, as Redis logs them: a panic (a bug, DEBUG PANIC) or a fatal signal
//! (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT — a fault in Lua's C code, DEBUG SEGFAULT, a
//! `kill -ABRT`) writes a report between Redis's START and END lines, with the stack trace
//! of the thread that crashed. After a signal's report the process dies by that signal, as
//! Redis does, so a core dump and the parent's exit status say what happened.

use std::sync::atomic::{AtomicBool, Ordering};

use signal_hook::consts::{SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV};

use crate::log::{warn, write_raw};

/// Set by the first report: a crash while reporting dies at once.
static REPORTING: AtomicBool = AtomicBool::new(false);

/// Seconds a signal's report may take: a crash inside the allocator can leave a lock the
/// report then waits on, and a server that hangs is worse than one that died.
const REPORT_SECONDS: u32 = 5;

pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let where_ = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        report(&[format!("ferrokv-server {} crashed: {what}{where_}", env!("CARGO_PKG_VERSION"))]);
    }));
    for sig in [SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT] {
        // SAFETY: signal-hook-registry demands `unsafe` for any handler (and its unchecked
        // form for SIGSEGV, SIGFPE, SIGILL). The handler does not return into the code that
        // faulted: it reports, then restores the default action and raises the signal
        // again, so the process ends as it would have without us. The report is not
        // async-signal-safe (it formats and writes the log, as Redis's does); the alarm set
        // first ends the process should it block.
        let registered =
            unsafe { signal_hook_registry::register_unchecked(sig, move |info| on_fatal_signal(sig, info)) };
        if let Err(e) = registered {
            warn(&format!("Can't install the crash report handler for signal {sig}: {e}"));
        }
    }
}

fn on_fatal_signal(sig: i32, info: &libc::siginfo_t) {
    if !REPORTING.swap(true, Ordering::SeqCst) {
        // SAFETY: signal() and alarm() are async-signal-safe libc calls with plain integer
        // arguments; SIGALRM's default action ends the process.
        unsafe {
            libc::signal(libc::SIGALRM, libc::SIG_DFL);
            libc::alarm(REPORT_SECONDS);
        }
        let mut lines = vec![format!(
            "ferrokv-server {} crashed by signal: {sig}, si_code: {}",
            env!("CARGO_PKG_VERSION"),
            info.si_code
        )];
        if (sig == SIGSEGV || sig == SIGBUS) && info.si_code > 0 {
            // SAFETY: the kernel fills si_addr for the SIGSEGV and SIGBUS it raises itself
            // (si_code > 0).
            lines.push(format!("Accessing address: {:p}", unsafe { info.si_addr() }));
        }
        if info.si_code == libc::SI_USER {
            // SAFETY: SI_USER (kill, raise) fills the sender's pid and uid.
            let (pid, uid) = unsafe { (info.si_pid(), info.si_uid()) };
            lines.push(format!("Killed by PID: {pid}, UID: {uid}"));
        }
        report(&lines);
    }
    let _ = signal_hook::low_level::emulate_default_handler(sig);
}

/// The report: Redis's START line, what happened, the stack trace, Redis's END line.
fn report(what: &[String]) {
    warn("=== REDIS BUG REPORT START: Cut & paste starting from here ===");
    for line in what {
        warn(line);
    }
    warn("------ STACK TRACE ------");
    write_raw(&format!("{}\n", std::backtrace::Backtrace::force_capture()));
    warn("=== REDIS BUG REPORT END. Make sure to include from START to END. ===");
}
