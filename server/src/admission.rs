//! The checks of Redis's processCommand that refuse a command for the server's state
//! rather than for the command itself: memory over `maxmemory` (OOM), data that cannot
//! be persisted (MISCONF), missing replicas (NOREPLICAS); and the same checks where a
//! script starts (scriptPrepareForRun) and where it calls a command
//! (scriptVerifyWriteCommandAllow, scriptVerifyOOM).

use ferrokv::command::flags;
use ferrokv::Reply;

use crate::client::Client;
use crate::cmd::Found;
use crate::script::script_flags;
use crate::server::Server;

pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";
pub const NOREPLICAS_ERROR: &str = "NOREPLICAS Not enough good replicas to write.";
const SCRIPT_OOM_ERROR: &str =
    "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'";
/// Redis 7's shared.bgsaveerr.
const BGSAVE_ERROR: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist \
     to disk. Commands that may modify the data set are disabled, because this instance is configured to report \
     errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs \
     for details about the RDB error.";
const SCRIPT_BGSAVE_ERROR: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to \
     persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts.";

/// Why writes are refused while data cannot be persisted (Redis's
/// writeCommandsDeniedByDiskError): the last BGSAVE failed and save points and
/// `stop-writes-on-bgsave-error` are on, or an AOF write or fsync failed.
pub enum DiskError {
    Rdb,
    /// strerror's text of the AOF's failed write or fsync.
    Aof(String),
}

impl DiskError {
    fn text(&self) -> String {
        match self {
            DiskError::Rdb => BGSAVE_ERROR.into(),
            DiskError::Aof(reason) => format!("MISCONF Errors writing to the AOF file: {reason}"),
        }
    }
}

pub fn disk_error(s: &Server) -> Option<DiskError> {
    let rdb_failed = !s.jobs.last_bgsave_ok
        && !s.cfg.engine.save.is_empty()
        && s.cfg.get("stop-writes-on-bgsave-error").as_deref() == Some("yes");
    if rdb_failed {
        return Some(DiskError::Rdb);
    }
    s.engine.aof_failure().map(|f| DiskError::Aof(f.reason.clone()))
}

/// Whether min-replicas-to-write refuses writes on a master: fewer replicas than it asks
/// acknowledged within min-replicas-max-lag seconds.
pub fn replicas_missing(s: &Server) -> bool {
    let (want, lag) = (s.cfg.min_replicas_to_write, s.cfg.min_replicas_max_lag);
    want > 0 && lag > 0 && s.link.is_none() && s.replicas.good(lag.into()) < want as usize
}

/// A replica with replica-read-only refuses writes from its clients (its master's
/// stream is the only writer).
fn readonly_replica(s: &Server, c: &Client, found: Found, argv: &[Vec<u8>]) -> Option<Reply> {
    if s.link.is_none() || s.cfg.get("replica-read-only").as_deref() != Some("yes") {
        return None;
    }
    if judged_flags(s, c, found, argv) & flags::WRITE == 0 {
        return None;
    }
    Some(Reply::err("READONLY You can't write against a read only replica."))
}

pub const MASTERDOWN_ERROR: &str = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// A replica whose link is down with replica-serve-stale-data off: only commands flagged
/// `stale` run (in a script too, one that declared `allow-stale`).
pub fn serving_stale_refused(s: &Server) -> bool {
    let down = s.link.as_ref().is_some_and(|l| !l.is_up());
    down && s.cfg.get("replica-serve-stale-data").as_deref() == Some("no")
}

/// [`serving_stale_refused`]: the commands flagged `stale` are answered; an EXEC, only
/// when every queued command is.
fn stale_replica(s: &Server, c: &Client, found: Found, argv: &[Vec<u8>]) -> Option<Reply> {
    if !serving_stale_refused(s) {
        return None;
    }
    let own = command_flags(s, found, argv) & flags::STALE != 0;
    let queued_ok = found.name != "exec"
        || c.multi.as_ref().is_none_or(|queue| {
            queue.iter().all(|q| {
                q.first()
                    .and_then(|name| crate::cmd::lookup(name))
                    .is_some_and(|f| command_flags(s, f, q) & flags::STALE != 0)
            })
        });
    if own && queued_ok {
        return None;
    }
    Some(Reply::err(MASTERDOWN_ERROR))
}

/// A command's flags as Redis's processCommand judges them: the script's declared flags
/// for EVAL/FCALL and their variants, the subcommand's for a container (FUNCTION LOAD).
pub fn command_flags(s: &Server, found: Found, argv: &[Vec<u8>]) -> u32 {
    let base = found.flags_for(argv);
    match found.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            match crate::script::declared_flags(&s.scripts, found.name, argv) {
                Some(declared) => script_command_flags(base, declared),
                None => base,
            }
        }
        _ => base,
    }
}

/// A script command's flags from the script's declared ones (Redis's
/// scriptFlagsToCmdFlags); scripts without a shebang keep the command's.
fn script_command_flags(base: u32, declared: u32) -> u32 {
    if declared & script_flags::EVAL_COMPAT != 0 {
        return base;
    }
    let mut f = base & !(flags::STALE | flags::DENYOOM | flags::WRITE | flags::MAY_REPLICATE);
    if declared & (script_flags::ALLOW_OOM | script_flags::NO_WRITES) == 0 {
        f |= flags::DENYOOM;
    }
    if declared & script_flags::NO_WRITES == 0 {
        f |= flags::WRITE;
    }
    if declared & script_flags::ALLOW_STALE != 0 {
        f |= flags::STALE;
    }
    f
}

/// Whether a command may write or replicate (EXEC: any command it runs), as CLIENT PAUSE
/// WRITE judges it.
pub fn may_replicate(s: &Server, c: &Client, found: Found, argv: &[Vec<u8>]) -> bool {
    judged_flags(s, c, found, argv) & (flags::WRITE | flags::MAY_REPLICATE) != 0
}

/// The flags processCommand judges a command by: its own ([`command_flags`]), and for
/// EXEC those of every queued command too.
fn judged_flags(s: &Server, c: &Client, found: Found, argv: &[Vec<u8>]) -> u32 {
    let own = command_flags(s, found, argv);
    if found.name == "exec" {
        own | queued_flags(s, c)
    } else {
        own
    }
}

/// The flags of the commands queued in MULTI, together (EXEC is judged by them).
fn queued_flags(s: &Server, c: &Client) -> u32 {
    let Some(queue) = &c.multi else {
        return 0;
    };
    queue
        .iter()
        .filter_map(|argv| crate::cmd::lookup(argv.first()?).map(|f| command_flags(s, f, argv)))
        .fold(0, |a, f| a | f)
}

/// The OOM, MISCONF and NOREPLICAS checks of processCommand (in its order), before a
/// command runs or is queued: evict as needed, then refuse what Redis refuses. PING is
/// refused with the writes while data cannot be persisted, as in Redis. A refused EXEC
/// discards its transaction.
pub fn refusal(s: &mut Server, c: &mut Client, found: Found, argv: &[Vec<u8>]) -> Option<Reply> {
    if c.master {
        return None;
    }
    if let Some(e) = readonly_replica(s, c, found, argv) {
        return Some(e);
    }
    if let Some(Reply::Error(text)) = stale_replica(s, c, found, argv) {
        if found.name == "exec" && c.multi.is_some() {
            c.reset_multi();
            s.unwatch_all(c);
            return Some(Reply::error(format!("EXECABORT Transaction discarded because of: {text}")));
        }
        return Some(Reply::Error(text));
    }
    let maxmemory = s.cfg.maxmemory > 0;
    let replicas = replicas_missing(s);
    let disk = disk_error(s);
    if !maxmemory && !replicas && disk.is_none() {
        return None;
    }
    let name = found.name;
    // Refused inside MULTI by their own check first, as in Redis.
    if c.multi.is_some() && found.flags_for(argv) & flags::NO_MULTI != 0 {
        return None;
    }
    let flags_of = |s: &Server, c: &Client| judged_flags(s, c, found, argv);
    let mut refused: Option<String> = None;
    if maxmemory && !s.engine.effects().from_script {
        let oom = s.oom_before_command(c);
        // Queueing takes memory too: inside MULTI everything is refused but the commands
        // that end it.
        let queueing = c.multi.is_some() && !matches!(name, "exec" | "discard" | "quit" | "reset");
        if oom && (queueing || flags_of(s, c) & flags::DENYOOM != 0) {
            refused = Some(OOM_ERROR.into());
        } else {
            s.eviction.pre_command_oom = oom;
        }
    }
    if let Some(d) = disk.filter(|_| refused.is_none()) {
        if name == "ping" || flags_of(s, c) & flags::WRITE != 0 {
            refused = Some(d.text());
        }
    }
    if refused.is_none() && replicas && flags_of(s, c) & flags::WRITE != 0 {
        refused = Some(NOREPLICAS_ERROR.into());
    }
    let text = refused?;
    if name == "exec" && c.multi.is_some() {
        c.reset_multi();
        s.unwatch_all(c);
        return Some(Reply::error(format!("EXECABORT Transaction discarded because of: {text}")));
    }
    Some(Reply::error(text))
}

/// The checks of a script about to run (Redis's scriptPrepareForRun) for its declared
/// flags: a script that may write needs its writes to be persisted and the replicas; one
/// that may write and did not declare `allow-oom` cannot start while memory is over the
/// limit.
pub fn script_start_refusal(s: &mut Server, declared: u32) -> Option<Reply> {
    let compat = declared & script_flags::EVAL_COMPAT != 0;
    s.eviction.script_allow_oom = !compat && declared & script_flags::ALLOW_OOM != 0;
    if compat {
        return None;
    }
    if declared & script_flags::NO_WRITES == 0 {
        match disk_error(s) {
            Some(DiskError::Rdb) => return Some(Reply::err(SCRIPT_BGSAVE_ERROR)),
            Some(DiskError::Aof(reason)) => {
                return Some(Reply::error(format!(
                    "MISCONF Redis is configured to persist data to AOF, but it's currently unable to persist to \
                     disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts. AOF error: {reason}"
                )));
            }
            None => {}
        }
        if replicas_missing(s) {
            return Some(Reply::err(NOREPLICAS_ERROR));
        }
    }
    let oom_exempt = declared & (script_flags::ALLOW_OOM | script_flags::NO_WRITES) != 0;
    if s.cfg.maxmemory > 0 && s.eviction.pre_command_oom && !oom_exempt {
        return Some(Reply::err(SCRIPT_OOM_ERROR));
    }
    None
}

/// The checks of a command a script calls (Redis's scriptVerifyWriteCommandAllow and
/// scriptVerifyOOM): until the script's first write, a write needs its effects to be
/// persisted and the replicas, and a denyoom command memory under the limit (as it was
/// when the script started).
pub fn script_call_refusal(s: &mut Server, f: u32, wrote: bool) -> Option<String> {
    if f & flags::WRITE != 0 && !wrote {
        if let Some(d) = disk_error(s) {
            return Some(d.text());
        }
        if replicas_missing(s) {
            return Some(NOREPLICAS_ERROR.into());
        }
    }
    let oom = !s.eviction.script_allow_oom
        && s.cfg.maxmemory > 0
        && !wrote
        && s.eviction.pre_command_oom
        && f & flags::DENYOOM != 0;
    oom.then(|| OOM_ERROR.into())
}

/// Redis's reply to what cannot run while the data loads.
pub const LOADING_ERROR: &str = "LOADING Redis is loading the dataset in memory";

/// `-LOADING` for a command that cannot run while the start's load runs (Redis's
/// is_denyloading_command: no `loading` flag, or an EXEC of one that has none).
pub fn loading_refusal(s: &Server, c: &Client, found: Found, argv: &[Vec<u8>]) -> Option<Reply> {
    if s.is_async_loading() {
        // The old data is served; what would disturb the load is refused.
        let denied = |f: Found, argv: &[Vec<u8>]| f.flags_for(argv) & flags::NO_ASYNC_LOADING != 0;
        let queued_denied = || {
            c.multi.as_ref().is_some_and(|q| {
                q.iter().any(|argv| argv.first().and_then(|n| crate::cmd::lookup(n)).is_some_and(|f| denied(f, argv)))
            })
        };
        let refused = denied(found, argv) || (found.name == "exec" && queued_denied());
        return refused.then(|| Reply::err(LOADING_ERROR));
    }
    if !s.is_loading() {
        return None;
    }
    let allowed = |f: Found, argv: &[Vec<u8>]| f.flags_for(argv) & flags::LOADING != 0;
    let queued_ok = || {
        c.multi.as_ref().is_none_or(|q| {
            q.iter().all(|argv| argv.first().and_then(|n| crate::cmd::lookup(n)).is_some_and(|f| allowed(f, argv)))
        })
    };
    if allowed(found, argv) && (found.name != "exec" || queued_ok()) {
        return None;
    }
    Some(Reply::err(LOADING_ERROR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_flags_become_command_flags() {
        let eval = flags::NOSCRIPT | flags::MAY_REPLICATE | flags::STALE;
        assert_eq!(script_command_flags(eval, script_flags::EVAL_COMPAT), eval);
        assert_eq!(script_command_flags(eval, 0), flags::NOSCRIPT | flags::WRITE | flags::DENYOOM);
        assert_eq!(script_command_flags(eval, script_flags::NO_WRITES), flags::NOSCRIPT);
        assert_eq!(script_command_flags(eval, script_flags::ALLOW_OOM), flags::NOSCRIPT | flags::WRITE);
        assert_eq!(
            script_command_flags(eval, script_flags::ALLOW_STALE | script_flags::NO_WRITES),
            flags::NOSCRIPT | flags::STALE
        );
    }
}
