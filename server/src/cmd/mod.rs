//! Server-level commands (connection, transactions, configuration, introspection,
//! persistence), one file per group, and the lookup that joins them with the engine's
//! command table.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use ferrokv::command::catalog::{Catalog, ServerVersion};
use ferrokv::command::{flags, Spec};
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;

pub mod admin;
pub mod blocking;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
pub mod info;
pub mod memory;
pub mod multi;
pub mod pubsub;
pub mod xread;

pub type Run = fn(&mut Server, &mut Client, &[Vec<u8>]) -> Reply;

/// A server-level command: what COMMAND reports, and the function that runs it.
pub struct Cmd {
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    /// First key, last key, step (as the engine's table).
    pub keys: (i32, i32, i32),
    pub run: Run,
}

const fn cmd(name: &'static str, arity: i32, flags: u32, run: Run) -> Cmd {
    Cmd { name, arity, flags, keys: (0, 0, 0), run }
}

use flags::*;

pub const COMMANDS: &[Cmd] = &[
    cmd("ping", -1, FAST, connection::ping),
    cmd("echo", 2, FAST, connection::echo),
    cmd("quit", -1, NO_AUTH | FAST | LOADING | STALE, connection::quit),
    cmd("auth", -2, NO_AUTH | FAST | LOADING | STALE | NOSCRIPT, connection::auth),
    cmd("hello", -1, NO_AUTH | FAST | LOADING | STALE | NOSCRIPT, connection::hello),
    cmd("reset", 1, NO_AUTH | FAST | LOADING | STALE | NOSCRIPT, connection::reset),
    cmd("client", -2, ADMIN | NOSCRIPT | LOADING | STALE, connection::client),
    cmd("multi", 1, FAST | LOADING | STALE | NOSCRIPT, multi::multi),
    cmd("exec", 1, LOADING | STALE | NOSCRIPT | SKIP_MONITOR, multi::exec),
    cmd("discard", 1, FAST | LOADING | STALE | NOSCRIPT, multi::discard),
    Cmd { name: "watch", arity: -2, flags: FAST | LOADING | STALE | NOSCRIPT, keys: (1, -1, 1), run: multi::watch },
    cmd("unwatch", 1, FAST | LOADING | STALE | NOSCRIPT, multi::unwatch),
    cmd("config", -2, ADMIN | NOSCRIPT | LOADING | STALE, config::config),
    cmd("info", -1, LOADING | STALE, info::info),
    cmd("command", -1, LOADING | STALE, command::command),
    cmd("save", 1, ADMIN | NOSCRIPT | NO_MULTI, admin::save),
    cmd("bgsave", -1, ADMIN | NOSCRIPT, admin::bgsave),
    cmd("bgrewriteaof", 1, ADMIN | NOSCRIPT, admin::bgrewriteaof),
    cmd("lastsave", 1, LOADING | STALE | FAST, admin::lastsave),
    cmd("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI, admin::shutdown),
    cmd("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE, admin::debug),
    cmd("module", -2, ADMIN | NOSCRIPT, admin::module),
    cmd("time", 1, LOADING | STALE | FAST, admin::time),
    cmd("wait", 3, NOSCRIPT, crate::replication::wait),
    cmd("waitaof", 4, NOSCRIPT, crate::replication::waitaof),
    cmd("replicaof", 3, ADMIN | NOSCRIPT | STALE, crate::replication::replicaof),
    cmd("slaveof", 3, ADMIN | NOSCRIPT | STALE, crate::replication::replicaof),
    cmd("role", 1, NOSCRIPT | LOADING | STALE | FAST, crate::replication::role),
    cmd("sync", 1, ADMIN | NOSCRIPT | NO_MULTI, crate::replication::sync),
    cmd("psync", -3, ADMIN | NOSCRIPT | NO_MULTI, crate::replication::sync),
    cmd("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE, crate::replication::replconf),
    cmd("subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, pubsub::subscribe),
    cmd("psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, pubsub::psubscribe),
    cmd("unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, pubsub::unsubscribe),
    cmd("punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, pubsub::punsubscribe),
    cmd("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, pubsub::publish),
    cmd("pubsub", -2, PUBSUB | LOADING | STALE, pubsub::pubsub),
    Cmd {
        name: "ssubscribe",
        arity: -2,
        flags: PUBSUB | NOSCRIPT | LOADING | STALE,
        keys: (1, -1, 1),
        run: pubsub::ssubscribe,
    },
    Cmd {
        name: "sunsubscribe",
        arity: -1,
        flags: PUBSUB | NOSCRIPT | LOADING | STALE,
        keys: (1, -1, 1),
        run: pubsub::sunsubscribe,
    },
    Cmd {
        name: "spublish",
        arity: 3,
        flags: PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        keys: (1, 1, 1),
        run: pubsub::spublish,
    },
    Cmd { name: "blpop", arity: -3, flags: WRITE | NOSCRIPT | BLOCKING, keys: (1, -2, 1), run: blocking::blpop },
    Cmd { name: "brpop", arity: -3, flags: WRITE | NOSCRIPT | BLOCKING, keys: (1, -2, 1), run: blocking::brpop },
    Cmd {
        name: "brpoplpush",
        arity: 4,
        flags: WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        keys: (1, 2, 1),
        run: blocking::brpoplpush,
    },
    Cmd {
        name: "blmove",
        arity: 6,
        flags: WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        keys: (1, 2, 1),
        run: blocking::blmove,
    },
    cmd("blmpop", -5, WRITE | BLOCKING | MOVABLE_KEYS, blocking::blmpop),
    Cmd {
        name: "bzpopmin",
        arity: -3,
        flags: WRITE | NOSCRIPT | FAST | BLOCKING,
        keys: (1, -2, 1),
        run: blocking::bzpopmin,
    },
    Cmd {
        name: "bzpopmax",
        arity: -3,
        flags: WRITE | NOSCRIPT | FAST | BLOCKING,
        keys: (1, -2, 1),
        run: blocking::bzpopmax,
    },
    cmd("bzmpop", -5, WRITE | BLOCKING | MOVABLE_KEYS, blocking::bzmpop),
    cmd("lmpop", -4, WRITE | MOVABLE_KEYS, blocking::lmpop),
    cmd("zmpop", -4, WRITE | MOVABLE_KEYS, blocking::zmpop),
    cmd("memory", -2, 0, memory::memory),
    cmd("eval", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE, crate::script::eval),
    cmd("evalsha", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE, crate::script::evalsha),
    cmd("eval_ro", -3, NOSCRIPT | SKIP_MONITOR | STALE | READONLY, crate::script::eval_ro),
    cmd("evalsha_ro", -3, NOSCRIPT | SKIP_MONITOR | STALE | READONLY, crate::script::evalsha_ro),
    cmd("script", -2, NOSCRIPT, crate::script::script),
    cmd("function", -2, NOSCRIPT, crate::script::functions::function),
    cmd("fcall", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE, crate::script::functions::fcall),
    cmd("fcall_ro", -3, NOSCRIPT | SKIP_MONITOR | STALE | READONLY, crate::script::functions::fcall_ro),
    cmd("acl", -2, NOSCRIPT | LOADING | STALE, crate::acl::command::acl),
];

/// A command found by name: the server's or the engine's.
#[derive(Clone, Copy)]
pub enum Found {
    Server(&'static Cmd),
    Engine(&'static Spec),
}

impl Found {
    pub fn name(&self) -> &'static str {
        match self {
            Found::Server(c) => c.name,
            Found::Engine(s) => s.name,
        }
    }

    pub fn arity(&self) -> i32 {
        let table = match self {
            Found::Server(c) => c.arity,
            Found::Engine(s) => s.arity,
        };
        match ARITY.get() {
            Some(changed) if !changed.is_empty() => {
                let name = self.name();
                changed.iter().find(|(n, _)| *n == name).map_or(table, |(_, a)| *a)
            }
            _ => table,
        }
    }

    pub fn flags(&self) -> u32 {
        match self {
            Found::Server(c) => c.flags,
            Found::Engine(s) => s.flags,
        }
    }

    /// First key, last key, step.
    pub fn key_range(&self) -> (i32, i32, i32) {
        match self {
            Found::Server(c) => c.keys,
            Found::Engine(s) => (s.first_key, s.last_key, s.step),
        }
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = i64::from(self.arity());
        let n = argc as i64;
        if a >= 0 {
            n == a
        } else {
            n >= -a
        }
    }

    /// Positions of the keys in `argv` (COMMAND GETKEYS).
    pub fn key_positions(&self, argv: &[Vec<u8>]) -> Vec<usize> {
        match self {
            Found::Engine(s) => s.key_positions(argv),
            // MEMORY USAGE's key, as Redis's memoryGetKeys (the container has none).
            Found::Server(c) if c.name == "memory" => {
                if argv.len() >= 3 && argv[1].eq_ignore_ascii_case(b"usage") {
                    vec![2]
                } else {
                    Vec::new()
                }
            }
            // numkeys forms (LMPOP, EVAL, FCALL, ...).
            Found::Server(c)
                if c.flags & MOVABLE_KEYS != 0 || c.name.starts_with("eval") || c.name.starts_with("fcall") =>
            {
                crate::acl::enforce::movable_keys(c.name, argv).unwrap_or_default()
            }
            Found::Server(c) => {
                let (first, last, step) = c.keys;
                if first <= 0 {
                    return Vec::new();
                }
                let n = argv.len() as i32;
                let last = if last < 0 { n + last } else { last };
                (first..=last.min(n - 1)).step_by(step.max(1) as usize).map(|i| i as usize).collect()
            }
        }
    }
}

/// The version the server stands in for (`redis-version`; one per process): index in
/// [`ServerVersion::ALL`].
static VERSION: AtomicU8 = AtomicU8::new(1);
/// The commands this process has that its version does not (unknown to its clients).
static UNAVAILABLE: OnceLock<Vec<&'static str>> = OnceLock::new();
/// The commands whose arity in this version differs from the table's (Redis 7.2's
/// `ZRANK key member [WITHSCORE]`): checked by dispatch and shown by COMMAND INFO.
static ARITY: OnceLock<Vec<(&'static str, i32)>> = OnceLock::new();

/// Set the version, once, at start.
pub fn set_version(v: ServerVersion) {
    let i = ServerVersion::ALL.iter().position(|x| *x == v).unwrap_or(1);
    VERSION.store(i as u8, Ordering::Relaxed);
    let catalog = Catalog::get();
    let _ = UNAVAILABLE.set(
        COMMANDS
            .iter()
            .map(|c| c.name)
            .chain(ferrokv::command::specs().map(|s| s.name))
            .filter(|n| {
                catalog.lookup(None, n.as_bytes(), None).is_some()
                    && catalog.lookup(None, n.as_bytes(), Some(v)).is_none()
            })
            .collect(),
    );
    let _ = ARITY.set(
        COMMANDS
            .iter()
            .map(|c| (c.name, c.arity))
            .chain(ferrokv::command::specs().map(|s| (s.name, s.arity)))
            .filter_map(|(n, table)| {
                let def = catalog.lookup(None, n.as_bytes(), Some(v))?;
                (def.arity != table).then_some((n, def.arity))
            })
            .collect(),
    );
}

pub fn version() -> ServerVersion {
    ServerVersion::ALL[usize::from(VERSION.load(Ordering::Relaxed)) % ServerVersion::ALL.len()]
}

/// The release INFO, HELLO and scripts report (`7.0.15`).
pub fn release() -> &'static str {
    ferrokv::config::rdb_target_of(version()).server_version()
}

fn available(name: &str) -> bool {
    UNAVAILABLE.get().is_none_or(|u| !u.contains(&name))
}

/// The command named `name` (any case), if the version has it.
pub fn lookup(name: &[u8]) -> Option<Found> {
    // The engine's table is hashed and holds most commands (no name is in both tables).
    let found = match ferrokv::command::lookup(name) {
        Some(s) => Found::Engine(s),
        None => COMMANDS.iter().find(|c| c.name.as_bytes().eq_ignore_ascii_case(name)).map(Found::Server)?,
    };
    available(found.name()).then_some(found)
}

/// Every command the version has, the server's then the engine's.
pub fn all() -> impl Iterator<Item = Found> {
    COMMANDS
        .iter()
        .map(Found::Server)
        .chain(ferrokv::command::specs().map(Found::Engine))
        .filter(|f| available(f.name()))
}

/// Redis's reply to an unknown subcommand.
pub fn unknown_subcommand(sub: &[u8], cmd: &str) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
        cmd.to_ascii_uppercase()
    ))
}

/// The wrong-arity error for a subcommand (`config|get`).
pub fn sub_arity(cmd: &str, sub: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}|{}' command",
        cmd,
        String::from_utf8_lossy(sub).to_ascii_lowercase()
    ))
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
