//! Replay fuzz/regressions/commands/, aof/ and dump/ (crashes the `commands`, `aof` and
//! `dump` fuzz targets found, plus crafted seeds) through the same harness the targets
//! run, fuzz/src/engine_check.rs, with its invariants. See fuzz/README.md.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

#[allow(dead_code)] // the fuzz targets use constants this test does not
#[path = "../../fuzz/src/engine_check.rs"]
mod engine_check;

fn files(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Run `check` on every file of `target`; every file is tried, so one report names all
/// that panic.
fn replay(target: &str, check: fn(&[u8])) {
    let files = files(target);
    assert!(!files.is_empty(), "fuzz/regressions/{target}/ holds at least the crafted seeds");
    let panicked: Vec<String> = files
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            catch_unwind(AssertUnwindSafe(|| check(&data))).is_err()
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(panicked.is_empty(), "panicked on {} of {} inputs: {panicked:?}", panicked.len(), files.len());
}

#[test]
fn commands_regressions_do_not_panic() {
    replay("commands", engine_check::run_commands);
}

#[test]
fn aof_regressions_do_not_panic() {
    replay("aof", engine_check::run_aof);
}

#[test]
fn dump_regressions_do_not_panic() {
    replay("dump", engine_check::run_dump);
}

/// The dictionary of the commands target names every command in the table.
#[test]
fn commands_dict_names_every_command() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/dicts/commands.dict");
    let dict = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let missing: Vec<&str> = ferrokv::command::specs()
        .map(|s| s.name)
        .filter(|name| !dict.lines().any(|l| l.eq_ignore_ascii_case(&format!("\"{name}\""))))
        .collect();
    assert!(
        missing.is_empty(),
        "not in fuzz/dicts/commands.dict (regenerate: fuzz/examples/seeds.rs dict): {missing:?}"
    );
}
