//! The commands ACL rules speak of: every command of this server, and the subcommands of
//! its container commands (CONFIG GET, CLIENT KILL, ...), each with an id that indexes a
//! selector's command bits, its categories and how it touches its keys.

use std::collections::HashMap;
use std::sync::OnceLock;

use ferrokv::command::flags;

use super::categories;
use crate::cmd::{self, Found};

/// How a key is accessed: read, write, or a shard channel that is no key at all.
pub const KEY_READ: u8 = 1;
pub const KEY_WRITE: u8 = 2;
pub const NOT_KEY: u8 = 4;

pub struct Entry {
    /// `name`, or `parent|sub`.
    pub name: String,
    pub arity: i32,
    pub categories: u32,
    /// Key access per key spec (the last one for the remaining keys); empty: no keys.
    pub key_access: Vec<u8>,
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

fn parse_access(spec: &str) -> Vec<u8> {
    spec.split_whitespace()
        .map(|w| match w {
            "N" => NOT_KEY,
            _ => (if w.contains('R') { KEY_READ } else { 0 }) | (if w.contains('W') { KEY_WRITE } else { 0 }),
        })
        .collect()
}

/// The ACL categories the newest version with `name` declares for it (its command JSON).
fn declared_categories(name: &str) -> u32 {
    let Some(def) = ferrokv::command::catalog::Catalog::get().lookup(None, name.as_bytes(), None) else { return 0 };
    categories_of(def)
}

fn categories_of(def: &ferrokv::command::catalog::CommandDef) -> u32 {
    def.facts["acl_categories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().and_then(|c| categories::by_name(c.as_bytes())))
        .fold(0, |acc, c| acc | c)
}

/// How each key spec the catalog declares for `name` accesses its keys.
fn declared_access(name: &str) -> Option<Vec<u8>> {
    let def = ferrokv::command::catalog::Catalog::get().lookup(None, name.as_bytes(), None)?;
    let specs = def.facts["key_specs"].as_array()?;
    let words: Vec<&str> = specs
        .iter()
        .map(|ks| {
            let flags: Vec<&str> = ks["flags"].as_array().into_iter().flatten().filter_map(|f| f.as_str()).collect();
            match () {
                _ if flags.contains(&"RW") => "RW",
                _ if flags.contains(&"RO") => "R",
                _ if flags.contains(&"OW") || flags.contains(&"RM") => "W",
                _ => "-",
            }
        })
        .collect();
    Some(parse_access(&words.join(" ")))
}

fn build() -> Registry {
    let facts: HashMap<&str, (i32, u32, &str)> =
        super::table::COMMANDS.iter().map(|&(n, a, c, k)| (n, (a, c, k))).collect();
    // Every Redis 7.0 command, whether this server has it or not, so rules written for
    // Redis (+geoadd, -@hyperloglog) are accepted and described as Redis does; plus any
    // command of ours Redis lacks.
    let ours: HashMap<&str, Found> = cmd::all().map(|f| (f.name(), f)).collect();
    let mut names: Vec<&str> = super::table::COMMANDS.iter().map(|r| r.0).filter(|n| !n.contains('|')).collect();
    names.extend(ours.keys().filter(|n| !facts.contains_key(*n)));
    names.sort_unstable();
    names.dedup();
    let mut reg =
        Registry { entries: Vec::new(), top: Vec::new(), by_name: HashMap::default(), containers: Vec::new() };
    for name in names {
        let found = ours.get(name);
        let (arity, categories, access) = match (facts.get(name), found) {
            (Some(&(a, c, k)), _) => (a, c, parse_access(k)),
            // A command Redis 7.0 does not have: its flags say what it is, and the command
            // catalog the categories it declares.
            (None, Some(f)) => (
                f.arity(),
                categories::from_flags(f.flags()) | declared_categories(name),
                declared_access(name).unwrap_or_else(|| {
                    if f.key_range().0 > 0 {
                        vec![KEY_READ | KEY_WRITE]
                    } else {
                        Vec::new()
                    }
                }),
            ),
            (None, None) => continue,
        };
        let id = reg.entries.len();
        reg.top.push(id);
        reg.by_name.insert(name.to_string(), id);
        reg.entries.push(Entry {
            name: name.to_string(),
            arity: found.map_or(arity, |f| f.arity()),
            categories,
            key_access: access,
            parent: None,
            subs: Vec::new(),
            no_auth: found.is_some_and(|f| f.flags() & flags::NO_AUTH != 0),
        });
        let prefix = format!("{name}|");
        let mut subs: Vec<(String, i32, u32, Vec<u8>)> = super::table::COMMANDS
            .iter()
            .filter(|(n, ..)| n.starts_with(&prefix))
            .map(|&(n, a, c, k)| (n.to_string(), a, c, parse_access(k)))
            .collect();
        // Subcommands of the version stood in for that Redis 7.0 lacks (CLIENT SETINFO).
        if found.is_some() {
            for def in ferrokv::command::catalog::Catalog::get().all() {
                let full = format!("{prefix}{}", def.name);
                if def.container.as_deref() == Some(name)
                    && def.in_version(crate::version::version())
                    && !subs.iter().any(|s| s.0 == full)
                {
                    subs.push((full, def.arity, categories_of(def), Vec::new()));
                }
            }
        }
        subs.sort_by(|a, b| a.0.cmp(&b.0));
        if let (Some(f), false) = (found, subs.is_empty()) {
            reg.containers.push((f.name().as_ptr() as usize, id));
        }
        for (sub, arity, c, access) in subs {
            let sid = reg.entries.len();
            reg.entries[id].subs.push(sid);
            reg.by_name.insert(sub.clone(), sid);
            reg.entries.push(Entry {
                name: sub,
                arity,
                categories: c,
                key_access: access,
                parent: Some(id),
                subs: Vec::new(),
                no_auth: false,
            });
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
        let key = found.name().as_ptr() as usize;
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
        let top = *self.by_name.get(&String::from_utf8_lossy(argv.first()?).to_ascii_lowercase())?;
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

/// COMMAND INFO's ACL categories of a top-level command (`@read`, ...).
pub fn categories_reply(name: &str) -> ferrokv::Reply {
    let cats = registry().id_of(name).map_or(0, |id| registry().get(id).categories);
    ferrokv::Reply::Set(
        super::categories::NAMES
            .iter()
            .filter(|(_, f)| cats & f != 0)
            .map(|(n, _)| ferrokv::Reply::Simple(format!("@{n}").into()))
            .collect(),
    )
}
