//! What `rename-command` did, read by the command lookup and by ACL: names that now mean
//! another command, or nothing (the old name of a renamed or removed command). Set once at
//! start (crate::cmd::set_renames checks the lines against the command table).

use std::collections::HashMap;
use std::sync::OnceLock;

static RENAMED: OnceLock<HashMap<Vec<u8>, Option<&'static str>>> = OnceLock::new();

pub fn set(map: HashMap<Vec<u8>, Option<&'static str>>) {
    let _ = RENAMED.set(map);
}

/// For a name rename-command touched (any case): the command it means now, or None when
/// it means nothing. None (the outer) for every other name.
pub fn get(name: &[u8]) -> Option<Option<&'static str>> {
    let map = RENAMED.get().filter(|m| !m.is_empty())?;
    map.get(name.to_ascii_lowercase().as_slice()).copied()
}
