//! Finding a command by name: the server's own table (cmd/table.rs) joined with the
//! engine's, filtered by the version the server stands in for.

use std::sync::OnceLock;

use ferrokv::command::catalog::{Catalog, ServerVersion};
use ferrokv::command::{flags::MOVABLE_KEYS, Spec};
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;

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

pub const fn cmd(name: &'static str, arity: i32, flags: u32, run: Run) -> Cmd {
    Cmd { name, arity, flags, keys: (0, 0, 0), run }
}

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
                movable_keys(c.name, argv).unwrap_or_default()
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

/// The server-level commands (cmd/table.rs), installed at start: the commands that look
/// others up (EXEC, scripts, COMMAND, ACL) are themselves in that table.
static SERVER_COMMANDS: OnceLock<&'static [Cmd]> = OnceLock::new();

fn server_commands() -> &'static [Cmd] {
    SERVER_COMMANDS.get().copied().unwrap_or_default()
}

/// The commands this process has that its version does not (unknown to its clients).
static UNAVAILABLE: OnceLock<Vec<&'static str>> = OnceLock::new();
/// The commands whose arity in this version differs from the table's (Redis 7.2's
/// `ZRANK key member [WITHSCORE]`): checked by dispatch and shown by COMMAND INFO.
static ARITY: OnceLock<Vec<(&'static str, i32)>> = OnceLock::new();

/// Set the version and the server's own commands, once, at start.
pub fn set_version(v: ServerVersion, table: &'static [Cmd]) {
    let _ = SERVER_COMMANDS.set(table);
    crate::version::set(v);
    let catalog = Catalog::get();
    let _ = UNAVAILABLE.set(
        table
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
        table
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

/// Whether the version's catalog flags the command `skip_slowlog` (EXEC).
pub fn skips_slowlog(name: &str) -> bool {
    static SKIP: OnceLock<Vec<String>> = OnceLock::new();
    SKIP.get_or_init(|| {
        let catalog = Catalog::get();
        server_commands()
            .iter()
            .map(|c| c.name)
            .chain(ferrokv::command::specs().map(|s| s.name))
            .filter(|n| {
                catalog
                    .lookup(None, n.as_bytes(), Some(crate::version::version()))
                    .is_some_and(|d| d.has_flag("SKIP_SLOWLOG"))
            })
            .map(str::to_string)
            .collect()
    })
    .iter()
    .any(|n| n == name)
}

fn available(name: &str) -> bool {
    UNAVAILABLE.get().is_none_or(|u| !u.contains(&name))
}

/// The command named `name` (any case), if the version has it.
pub fn lookup(name: &[u8]) -> Option<Found> {
    // The engine's table is hashed and holds most commands (no name is in both tables).
    let found = match ferrokv::command::lookup(name) {
        Some(s) => Found::Engine(s),
        None => server_commands().iter().find(|c| c.name.as_bytes().eq_ignore_ascii_case(name)).map(Found::Server)?,
    };
    available(found.name()).then_some(found)
}

/// Every command the version has, the server's then the engine's.
pub fn all() -> impl Iterator<Item = Found> {
    server_commands()
        .iter()
        .map(Found::Server)
        .chain(ferrokv::command::specs().map(Found::Engine))
        .filter(|f| available(f.name()))
}

/// Keys of the server's own commands whose keys move (numkeys arguments): LMPOP ZMPOP
/// BLMPOP BZMPOP, EVAL* and FCALL*; the engine's commands carry their own finders.
pub fn movable_keys(name: &str, argv: &[Vec<u8>]) -> Option<Vec<usize>> {
    let numkeys_at = match name {
        "lmpop" | "zmpop" => 1,
        "blmpop" | "bzmpop" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => 2,
        _ => return None,
    };
    let n = argv.get(numkeys_at).and_then(|b| ferrokv::command::parse_i64(b)).unwrap_or(0).max(0) as usize;
    Some((numkeys_at + 1..argv.len()).take(n).collect())
}
