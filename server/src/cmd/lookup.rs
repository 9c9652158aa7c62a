//! Finding a command by name: one table of the version the server stands in for, the
//! server's own commands (cmd/table.rs) joined with the engine's, each with that
//! version's facts from the catalog.

use std::collections::HashMap;
use std::sync::OnceLock;

use ferrokv::command::catalog::{Catalog, ServerVersion};
use ferrokv::command::{Command, Spec, Table};
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;
use crate::stats::StatKey;

pub type ServerFn = fn(&mut Server, &mut Client, &[Vec<u8>]) -> Reply;

/// What runs a command: a server function, or the engine's command.
#[derive(Clone, Copy)]
pub enum Run {
    Server(ServerFn),
    Engine(&'static Command),
}

/// A server-level command as cmd/table.rs binds it.
pub type Cmd = Spec<Run>;

pub const fn cmd(name: &'static str, run: ServerFn) -> Cmd {
    Spec::with(name, Run::Server(run))
}

/// A command found by name, with the facts of the version stood in for.
pub type Found = &'static Command<Run>;

static TABLE: OnceLock<Table<Run>> = OnceLock::new();

/// Apply the configuration's `rename-command old new` lines in order (an empty `new`
/// removes the command), with Redis's errors; once, after [`set_version`].
pub fn set_renames(renames: &[(String, String)]) -> Result<(), String> {
    let mut map: HashMap<Vec<u8>, Option<&'static str>> = HashMap::new();
    for (old, new) in renames {
        let old = old.to_ascii_lowercase().into_bytes();
        let found = match map.get(&old) {
            Some(over) => over.and_then(|name| table().lookup(name.as_bytes())),
            None => table().lookup(&old),
        };
        let Some(found) = found else {
            return Err("No such command in rename-command".into());
        };
        map.insert(old, None);
        if !new.is_empty() {
            let new = new.to_ascii_lowercase().into_bytes();
            let taken = match map.get(&new) {
                Some(over) => over.is_some(),
                None => table().lookup(&new).is_some(),
            };
            if taken {
                return Err("Target command name already exists".into());
            }
            map.insert(new, Some(found.name));
        }
    }
    crate::renames::set(map);
    Ok(())
}

/// Set the version and the server's own commands, once, at start: the table holds the
/// commands the version has (a command of a later version is unknown to its clients).
pub fn set_version(v: ServerVersion, server_commands: &'static [Cmd]) {
    crate::version::set(v);
    let catalog = Catalog::get();
    let engine = ferrokv::command::table(v).all().map(|c| Spec { name: c.name, run: Run::Engine(c), keys: c.keys });
    let specs: Vec<Cmd> = server_commands
        .iter()
        .copied()
        .chain(engine)
        .filter(|s| catalog.lookup(None, s.name.as_bytes(), Some(v)).is_some())
        .collect();
    let _ = TABLE.set(Table::build(v, &specs));
}

fn table() -> &'static Table<Run> {
    TABLE.get_or_init(|| Table::build(ServerVersion::Redis70, &[]))
}

/// Whose INFO commandstats counters a call of `argv` as `found` goes to: its subcommand's
/// when it names one.
pub fn stat_key(found: Found, argv: &[Vec<u8>]) -> StatKey {
    StatKey { name: found.name, sub: found.sub(argv).map(|s| s.def.name.as_str()) }
}

/// Whether the version flags the command `skip_slowlog` (EXEC).
pub fn skips_slowlog(found: Found) -> bool {
    found.has(ferrokv::command::flags::SKIP_SLOWLOG)
}

/// The command named `name` (any case), if the version has it (under that name, after
/// rename-command).
pub fn lookup(name: &[u8]) -> Option<Found> {
    match crate::renames::get(name) {
        Some(now) => now.and_then(|real| table().lookup(real.as_bytes())),
        None => table().lookup(name),
    }
}

/// Every command the version has, the server's then the engine's.
pub fn all() -> impl Iterator<Item = Found> {
    table().all()
}
