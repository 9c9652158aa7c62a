//! The commands ACL rules speak of: every command of this server, and the subcommands of
//! its container commands (CONFIG GET, CLIENT KILL, ...), each with an id that indexes a
//! selector's command bits, its categories and how it touches its keys.

use std::collections::HashMap;
use std::sync::OnceLock;

use ferrokv::command::catalog::{Catalog, CommandDef};
use ferrokv::command::flags;

use super::categories;
use crate::cmd::{self, Found};

/// The access a key needs: read, write.
pub const KEY_READ: u8 = 1;
pub const KEY_WRITE: u8 = 2;

pub struct Entry {
    /// `name`, or `parent|sub`.
    pub name: String,
    pub arity: i32,
    pub categories: u32,
    pub parent: Option<usize>,
    pub subs: Vec<usize>,
    /// AUTH, HELLO, QUIT, RESET: allowed to everyone, as NO_AUTH commands are.
    pub no_auth: bool,
}

pub struct Registry {
    pub entries: Vec<Entry>,
    /// Top-level commands, in name order (the order rules and ACL CAT walk them).
    pub top: Vec<usize>,
    by_name: HashMap<String, usize, foldhash::fast::FixedState>,
    /// Our commands that have subcommands: (address of their static name, entry id),
    /// sorted; the check every command passes through, without hashing its name.
    containers: Vec<(usize, usize)>,
}

/// The ACL categories of a command: those its facts declare, and for a Redis 7 command
/// those its flags imply (Redis's setImplicitACLCategories; Redis 6.2 reported them all).
fn categories_of(def: &CommandDef) -> u32 {
    let declared = def.facts["acl_categories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().and_then(|c| categories::by_name(c.as_bytes())))
        .fold(0, |acc, c| acc | c);
    if def.from_reply() {
        return declared;
    }
    declared | categories::from_flags(def.flag_bits(), declared)
}

fn entry(def: &CommandDef, name: String, parent: Option<usize>) -> Entry {
    Entry {
        name,
        arity: def.arity,
        categories: categories_of(def),
        parent,
        subs: Vec::new(),
        no_auth: def.flag_bits() & flags::NO_AUTH != 0,
    }
}

/// Every command and subcommand of the version stood in for, whether this server has it
/// or not, so rules written for that Redis (+geoadd, -@hyperloglog) are accepted and
/// described as it does.
fn build() -> Registry {
    let version = crate::version::version();
    let catalog = Catalog::get();
    let ours: HashMap<&str, Found> = cmd::all().map(|f| (f.name, f)).collect();
    let mut tops: Vec<&CommandDef> =
        catalog.all().iter().filter(|d| d.container.is_none() && d.in_version(version)).collect();
    tops.sort_by(|a, b| a.name.cmp(&b.name));
    let mut reg =
        Registry { entries: Vec::new(), top: Vec::new(), by_name: HashMap::default(), containers: Vec::new() };
    for def in tops {
        let id = reg.entries.len();
        reg.top.push(id);
        reg.by_name.insert(def.name.clone(), id);
        reg.entries.push(entry(def, def.name.clone(), None));
        let mut subs: Vec<&CommandDef> = catalog.subcommands(&def.name, version).collect();
        subs.sort_by(|a, b| a.name.cmp(&b.name));
        if let (Some(f), false) = (ours.get(def.name.as_str()), subs.is_empty()) {
            reg.containers.push((f.name.as_ptr() as usize, id));
        }
        for sub in subs {
            let full = format!("{}|{}", def.name, sub.name);
            let sid = reg.entries.len();
            reg.entries[id].subs.push(sid);
            reg.by_name.insert(full.clone(), sid);
            let mut e = entry(sub, full, Some(id));
            e.no_auth = false;
            reg.entries.push(e);
        }
    }
    reg.containers.sort_unstable();
    reg
}

pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(build)
}

impl Registry {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, id: usize) -> &Entry {
        &self.entries[id]
    }

    /// The entry of `found` when it has subcommands.
    pub fn container_of(&self, found: Found) -> Option<usize> {
        let key = found.name.as_ptr() as usize;
        let i = self.containers.binary_search_by_key(&key, |&(k, _)| k).ok()?;
        Some(self.containers[i].1)
    }

    /// A top-level command by its lower-case name.
    pub fn id_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// A command by name (any case): `get`, or `config|get` for a subcommand.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        let mut parts = lower.split('|');
        let base = *self.by_name.get(parts.next()?)?;
        match (parts.next(), parts.next()) {
            (None, _) => Some(base),
            (Some(sub), None) if !sub.is_empty() && !self.entries[base].subs.is_empty() => {
                self.by_name.get(&lower).copied()
            }
            _ => None,
        }
    }

    /// The command an argument vector runs, as Redis's lookupCommand: a container's
    /// subcommand when there is one. None for an unknown subcommand.
    pub fn resolve(&self, argv: &[Vec<u8>]) -> Option<usize> {
        let typed = argv.first()?;
        // A renamed command is known by its new name only.
        let name = match crate::renames::get(typed) {
            Some(now) => now?.to_string(),
            None => String::from_utf8_lossy(typed).to_ascii_lowercase(),
        };
        let top = *self.by_name.get(&name)?;
        let e = &self.entries[top];
        if e.subs.is_empty() || argv.len() < 2 {
            return Some(top);
        }
        let sub = format!("{}|{}", e.name, String::from_utf8_lossy(&argv[1]).to_ascii_lowercase());
        self.by_name.get(&sub).copied()
    }

    /// Whether `argc` arguments suit the command's arity.
    pub fn arity_ok(&self, id: usize, argc: usize) -> bool {
        let a = i64::from(self.entries[id].arity);
        let n = argc as i64;
        if a >= 0 {
            n == a
        } else {
            n >= -a
        }
    }
}

/// COMMAND INFO's ACL categories of a command or subcommand (`@read`, ...).
pub fn categories_reply(name: &str) -> ferrokv::Reply {
    let cats = registry().lookup(name.as_bytes()).map_or(0, |id| registry().get(id).categories);
    ferrokv::Reply::Set(
        super::categories::NAMES
            .iter()
            .filter(|(_, f)| cats & f != 0)
            .map(|(n, _)| ferrokv::Reply::Simple(format!("@{n}").into()))
            .collect(),
    )
}
