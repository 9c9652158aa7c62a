//! The command table: every command as data, gathered from the family files.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::Spec;

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
