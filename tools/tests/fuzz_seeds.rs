//! Replay every file in fuzz/regressions/ (crashes the fuzzers found, plus a few crafted
//! seeds) through the deep verifier and the three dump formats. Errors are fine; a panic
//! is the bug. See fuzz/README.md.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use ferrokv_tools::dump::{self, Expired, Filter, Format};
use ferrokv_tools::out::Out;
use ferrokv_tools::verify::{walk, Depth};

/// Same fixed "now" as the fuzz targets (fuzz/src/lib.rs).
const NOW_MS: i64 = 1_704_067_200_000;

fn regressions() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(data: &[u8]) {
    let _ = walk(data, Depth::Deep, NOW_MS);
    let filter = Filter { db: None, key: None, types: vec![], expired: Expired::Keep, now_ms: NOW_MS };
    for format in [Format::Jsonl, Format::Json, Format::RESP] {
        let mut buf = Vec::new();
        let mut out = Out::new(&mut buf);
        let _ = dump::run(data, format, &filter, &mut out);
    }
}

#[test]
fn fuzz_regressions_do_not_panic() {
    let files = regressions();
    assert!(!files.is_empty(), "fuzz/regressions/ holds at least the crafted seeds");
    // Every file is tried, so one report names all that panic.
    let panicked: Vec<String> = files
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            catch_unwind(AssertUnwindSafe(|| replay(&data))).is_err()
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(panicked.is_empty(), "panicked on {} of {} inputs: {panicked:?}", panicked.len(), files.len());
}

/// fuzz/regressions/replies/: server replies that once made `rdbtool restore`'s reply
/// reader panic.
#[test]
fn reply_regressions_do_not_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/replies");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    assert!(!files.is_empty(), "{} holds the crashes found", dir.display());
    for path in files {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut r = data.as_slice();
        while let Ok(reply) = ferrokv_tools::restore::read_reply(&mut r) {
            let _ = reply.text();
        }
    }
}
