//! The command table of a version: every command the family files declare, with the facts
//! that version's catalog entry gives it. The server builds its own from the same parts.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::catalog::ServerVersion;
use super::{Command, Handler, Spec};

/// Every engine command, as the family files bind them.
pub fn specs() -> impl Iterator<Item = &'static Spec> {
    [
        super::keys::SPECS,
        super::string::SPECS,
        super::list::SPECS,
        super::hash::SPECS,
        super::hash_ttl::SPECS,
        super::set::SPECS,
        super::zset::SPECS,
        super::geo::SPECS,
        super::hll::SPECS,
        super::stream::SPECS,
    ]
    .into_iter()
    .flatten()
}

/// Name → index, for names of at most 16 bytes (all but a few) packed into an integer,
/// lower-cased: one integer hash and compare per command instead of hashing text.
type PackedIndex = HashMap<u128, usize, foldhash::fast::FixedState>;
/// The longer names.
type LongIndex = HashMap<&'static [u8], usize, foldhash::fast::FixedState>;

/// Commands bound to one version's facts, found by name.
pub struct Table<H> {
    commands: Vec<Command<H>>,
    packed: PackedIndex,
    long: LongIndex,
}

impl<H: Copy> Table<H> {
    /// A table of `specs` with `version`'s facts.
    pub fn build<'a>(version: ServerVersion, specs: impl IntoIterator<Item = &'a Spec<H>>) -> Table<H>
    where
        H: 'a,
    {
        let mut t = Table { commands: Vec::new(), packed: PackedIndex::default(), long: LongIndex::default() };
        for s in specs {
            let i = t.commands.len();
            t.commands.push(Command::bind(s, version));
            match pack_name(s.name.as_bytes()) {
                Some(k) => t.packed.insert(k, i),
                None => t.long.insert(s.name.as_bytes(), i),
            };
        }
        t
    }
}

impl<H> Table<H> {
    /// The command named `name` (any case).
    pub fn lookup(&self, name: &[u8]) -> Option<&Command<H>> {
        if name.len() > 32 || name.contains(&0) {
            return None;
        }
        let i = match pack_name(name) {
            Some(k) => self.packed.get(&k),
            None => self.long.get(&*name.to_ascii_lowercase()),
        }?;
        self.commands.get(*i)
    }

    /// Every command, in the order the table was built.
    pub fn all(&self) -> impl Iterator<Item = &Command<H>> {
        self.commands.iter()
    }
}

/// A name of up to 16 bytes, ASCII-lower-cased and zero-padded, as one integer. No
/// command name holds a NUL, so lookups refuse names with one before packing.
fn pack_name(name: &[u8]) -> Option<u128> {
    if name.len() > 16 {
        return None;
    }
    let mut buf = [0u8; 16];
    for (d, &b) in buf.iter_mut().zip(name) {
        *d = b.to_ascii_lowercase();
    }
    Some(u128::from_le_bytes(buf))
}

/// The engine's commands with `version`'s facts.
pub fn table(version: ServerVersion) -> &'static Table<Handler> {
    static TABLES: [OnceLock<Table<Handler>>; ServerVersion::ALL.len()] = [const { OnceLock::new() }; 6];
    TABLES[version as usize].get_or_init(|| Table::build(version, specs()))
}

/// The command named `name` (any case), with the default version's (Redis 7.0's) facts.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    table(ServerVersion::Redis70).lookup(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::catalog::Catalog;

    #[test]
    fn names_are_unique_and_lower_case() {
        let mut seen = std::collections::HashSet::new();
        for s in specs() {
            assert!(seen.insert(s.name), "{} twice", s.name);
            assert_eq!(s.name, s.name.to_ascii_lowercase());
        }
    }

    #[test]
    fn every_command_is_in_the_catalog() {
        for s in specs() {
            assert!(Catalog::get().lookup(None, s.name.as_bytes(), None).is_some(), "{} is in no version", s.name);
        }
    }
}
