//! The command table: every command as data, gathered from the family files.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::{flags, Handler};

/// Finds the key positions of a command whose keys are not a fixed range.
pub type KeyFinder = fn(&[Vec<u8>]) -> Vec<usize>;

/// One command: what COMMAND INFO reports, and the function that runs it.
#[derive(Clone, Copy)]
pub struct Spec {
    /// Lower case, as Redis names it.
    pub name: &'static str,
    /// Exact argument count (name included), or at least `-arity`.
    pub arity: i32,
    pub flags: u32,
    /// First key position (0: no keys), last (negative: from the end), step.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub handler: Handler,
    /// For commands with movable keys (ZUNIONSTORE, SORT ... STORE, ...).
    pub keys: Option<KeyFinder>,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spec").field("name", &self.name).field("arity", &self.arity).finish()
    }
}

impl Spec {
    pub const fn new(name: &'static str, arity: i32, flags: u32, keys: (i32, i32, i32), handler: Handler) -> Spec {
        Spec { name, arity, flags, first_key: keys.0, last_key: keys.1, step: keys.2, handler, keys: None }
    }

    pub const fn movable(mut self, finder: KeyFinder) -> Spec {
        self.keys = Some(finder);
        self.flags |= flags::MOVABLE_KEYS;
        self
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = i64::from(self.arity);
        if a >= 0 {
            argc == a
        } else {
            argc >= -a
        }
    }

    pub fn is_write(&self) -> bool {
        self.flags & flags::WRITE != 0
    }

    /// Positions of the keys in `argv`.
    pub fn key_positions(&self, argv: &[Vec<u8>]) -> Vec<usize> {
        if let Some(f) = self.keys {
            return f(argv);
        }
        if self.first_key <= 0 {
            return Vec::new();
        }
        let n = argv.len() as i32;
        let last = if self.last_key < 0 { n + self.last_key } else { self.last_key };
        let step = self.step.max(1);
        (self.first_key..=last.min(n - 1)).step_by(step as usize).map(|i| i as usize).collect()
    }
}

/// Every command of every family.
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
        super::stream::SPECS,
    ]
    .into_iter()
    .flatten()
}

/// Name → spec, for names of at most 16 bytes (all but a few) packed into an integer,
/// lower-cased: one integer hash and compare per command instead of hashing text.
type PackedIndex = HashMap<u128, &'static Spec, foldhash::fast::FixedState>;
/// The longer names.
type LongIndex = HashMap<&'static [u8], &'static Spec, foldhash::fast::FixedState>;

fn index() -> &'static (PackedIndex, LongIndex) {
    static INDEX: OnceLock<(PackedIndex, LongIndex)> = OnceLock::new();
    INDEX.get_or_init(|| {
        let (mut packed, mut long) = (PackedIndex::default(), LongIndex::default());
        for s in specs() {
            match pack_name(s.name.as_bytes()) {
                Some(k) => packed.insert(k, s),
                None => long.insert(s.name.as_bytes(), s),
            };
        }
        (packed, long)
    })
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

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    if name.len() > 32 || name.contains(&0) {
        return None;
    }
    let (packed, long) = index();
    match pack_name(name) {
        Some(k) => packed.get(&k).copied(),
        None => long.get(&*name.to_ascii_lowercase()).copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lower_case() {
        let mut seen = std::collections::HashSet::new();
        for s in specs() {
            assert!(seen.insert(s.name), "{} twice", s.name);
            assert_eq!(s.name, s.name.to_ascii_lowercase());
        }
    }
}
