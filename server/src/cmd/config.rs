//! CONFIG GET / SET / RESETSTAT / HELP over the parameter table in crate::config.

use ferrokv::command::Stats;
use ferrokv::Reply;

use super::{sub_arity, text, unknown_subcommand};
use crate::client::Client;
use crate::config::ServerConfig;
use crate::log::log;
use crate::server::Server;
use crate::stats::ServerStats;

pub fn config(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = a[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"get" if a.len() >= 3 => get(s, &a[2..]),
        b"set" if a.len() >= 4 && a.len().is_multiple_of(2) => set(s, c, &a[2..]),
        b"resetstat" if a.len() == 2 => {
            s.stats = ServerStats::default();
            s.histograms.clear();
            let dirty = s.engine.stats().dirty;
            *s.engine.stats_mut() = Stats { dirty, ..Stats::default() };
            ferrokv::keyspace::lazyfree::reset_stats();
            crate::obuf::reset_disconnections();
            Reply::ok()
        }
        b"rewrite" if a.len() == 2 => rewrite(s, false),
        b"help" if a.len() == 2 => Reply::help("CONFIG", HELP, crate::version::version()),
        b"get" | b"set" | b"resetstat" | b"rewrite" | b"help" => sub_arity("config", &a[1]),
        _ => unknown_subcommand(&a[1], "config"),
    }
}

/// CONFIG REWRITE (and DEBUG CONFIG-REWRITE-FORCE-ALL, `force_all`): the file the server
/// started from, rewritten with the current values.
pub fn rewrite(s: &Server, force_all: bool) -> Reply {
    let Some(path) = s.cfg.config_file.clone() else {
        return Reply::err("ERR The server is running without a config file");
    };
    let users = s
        .cfg
        .get("aclfile")
        .filter(|f| !f.is_empty())
        .is_none()
        .then(|| s.acl.list_lines().iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect());
    match s.cfg.rewrite_file(&path, users, force_all) {
        Ok(()) => {
            log("CONFIG REWRITE executed with success.");
            Reply::ok()
        }
        Err(e) => {
            let why = crate::log::strerror(&e);
            log(&format!("CONFIG REWRITE failed: {why}"));
            let what = if force_all { "CONFIG-REWRITE-FORCE-ALL failed" } else { "Rewriting config file" };
            Reply::error(format!("ERR {what}: {why}"))
        }
    }
}

const HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
];

/// Redis 7.0's HIDDEN_CONFIG parameters (test and debugging knobs).
const HIDDEN: &[&str] = &[
    "use-exit-on-panic",
    "rdb-key-save-delay",
    "key-load-delay",
    "watchdog-period",
    "loading-process-events-interval-bytes",
];

fn get(s: &Server, patterns: &[Vec<u8>]) -> Reply {
    let mut out: Vec<(Reply, Reply)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for pat in patterns {
        let lower = pat.to_ascii_lowercase();
        // Hidden parameters answer only when named exactly, as in Redis.
        let glob = lower.iter().any(|b| matches!(b, b'[' | b'*' | b'?'));
        for name in ServerConfig::names() {
            if glob && HIDDEN.contains(&name) {
                continue;
            }
            if ferrokv::glob::matches(&lower, name.as_bytes()) && seen.insert(name) {
                if let Some(v) = s.cfg.get(name) {
                    out.push((Reply::bulk(name.as_bytes()), Reply::Bulk(v.into_bytes())));
                }
            }
        }
    }
    Reply::Map(out)
}

fn set(s: &mut Server, c: &mut Client, pairs: &[Vec<u8>]) -> Reply {
    let fail = |name: &str, why: &str| {
        Reply::error(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"))
    };
    // Check every pair first: CONFIG SET applies all or nothing.
    let mut names = Vec::new();
    for pair in pairs.chunks(2) {
        let raw = text(&pair[0]);
        let Some(name) = ServerConfig::canonical(&raw) else {
            return Reply::error(format!("ERR Unknown option or number of arguments for CONFIG SET - '{raw}'"));
        };
        if names.contains(&name) {
            return fail(&raw, "duplicate parameter");
        }
        // ferrokv's own redis-version is not Redis's: setting it to what it is changes
        // nothing and succeeds, so a client that sets back every CONFIG GET * value works.
        let unchanged_own = name == "redis-version" && s.cfg.get(name).is_some_and(|v| v.as_bytes() == pair[1]);
        if ServerConfig::is_immutable(name) && !unchanged_own {
            return fail(&raw, "can't set immutable config");
        }
        if ServerConfig::is_protected(name) && !s.cfg.enable_protected_configs.allows(c.addr.as_ref()) {
            return fail(&raw, "can't set protected config");
        }
        if (s.is_loading() || s.is_async_loading())
            && matches!(name, "appendonly" | "dir" | "dbfilename" | "save" | "repl-diskless-load")
        {
            // The engine is empty until the load ends: nothing may write it to the files.
            // Redis answers its LOADING error for the first three (and repl-diskless-load).
            return Reply::err("LOADING Redis is loading the dataset in memory");
        }
        names.push(name);
    }
    let mut next = s.cfg.clone();
    for pair in pairs.chunks(2) {
        let raw = text(&pair[0]);
        if let Err(why) = next.set(&raw, &[text(&pair[1])]) {
            return fail(&raw, &why);
        }
    }
    if next.maxclients != s.cfg.maxclients && next.maxclients > 100_000 {
        return fail("maxclients", "The operating system is not able to handle the specified number of clients");
    }
    if let Err(refused) = s.listeners.reconfigure(s.poll.registry(), &s.cfg, &next, &names) {
        return fail(refused.param, refused.why);
    }
    let reply = apply(s, next, c.in_exec);
    if names.contains(&"requirepass") && !reply.is_error() {
        s.acl_requirepass_changed();
    }
    reply
}

/// The parameters read for every command, kept as values by their owners:
/// latency-monitor-threshold, latency-tracking, tracking-table-max-keys.
pub(crate) fn follow_cached(s: &mut Server) {
    s.latency.threshold_ms = s.cfg.get("latency-monitor-threshold").and_then(|v| v.parse().ok()).unwrap_or(0);
    s.histograms.enabled = s.cfg.get("latency-tracking").as_deref() != Some("no");
    s.tracking.max_keys = s.cfg.get("tracking-table-max-keys").and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
}

/// Install a new configuration, with the side effects some parameters have.
fn apply(s: &mut Server, next: ServerConfig, in_exec: bool) -> Reply {
    let was_aof = s.cfg.engine.appendonly;
    let hz_before = s.cfg.engine.hz;
    let now_aof = next.engine.appendonly;
    let (old_limit, old_policy) = (s.cfg.maxmemory, s.cfg.eviction_policy);
    s.cfg = next;
    // logfile is fixed at start; the level follows.
    let _ = crate::log::configure(&s.cfg.loglevel, &s.cfg.get("logfile").unwrap_or_default());
    follow_cached(s);
    crate::maxmemory::config_changed(s, old_limit, old_policy);
    s.sync_event_tracking();
    let keep_dir = s.engine.config().dir.clone();
    *s.engine.config_mut() = s.cfg.engine.clone();
    if s.engine.config().dir != keep_dir {
        log(&format!("Data directory is now {}", s.engine.config().dir.display()));
        s.signals.set_dir(s.engine.config().dir.clone());
    }
    if s.engine.config().hz != hz_before {
        *s.engine.expire_cycle_mut() = ferrokv::keyspace::ExpireCycle::new(s.engine.config_mut().hz);
    }
    if let Some(aof) = &mut s.engine.persistence_mut().aof {
        aof.reconfigure(&s.cfg.engine);
    }
    if was_aof && !now_aof {
        s.kill_aof_rewrite();
        s.end_local_aof_waits();
        if let Err(e) = s.engine.close() {
            return Reply::error(format!("ERR {e}"));
        }
        log("Background append only file rewriting has been disabled");
    } else if !was_aof && now_aof {
        // Inside EXEC its first rewrite waits for the transaction's end (a snapshot
        // would hold half of it).
        if let Err(e) = s.enable_aof(in_exec) {
            s.cfg.engine.appendonly = false;
            s.engine.config_mut().appendonly = false;
            return Reply::error(format!("ERR CONFIG SET failed (possibly related to argument 'appendonly') - {e}"));
        }
    }
    Reply::ok()
}
