//! Replay fuzz/regressions/aof/ (crashes the `aof` fuzz target found, plus crafted seeds)
//! through the target's aoftool checks (fuzz/src/aof_reader.rs; the loader's checks are
//! replayed by engine/tests/fuzz_seeds.rs), and every cut and many one-byte flips of the
//! small seeds. See fuzz/README.md.

#[path = "../../fuzz/src/aof_reader.rs"]
mod aof_reader;

use std::path::Path;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/aof");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files.iter().map(|p| (p.display().to_string(), std::fs::read(p).expect("read"))).collect()
}

#[test]
fn regressions_hold_the_invariants() {
    let seeds = seeds();
    assert!(seeds.len() >= 4, "the crafted seeds are there");
    for (name, data) in &seeds {
        let r = std::panic::catch_unwind(|| aof_reader::run(data));
        assert!(r.is_ok(), "{name}");
    }
}

#[test]
fn every_cut_and_byte_flip_of_the_small_seeds() {
    for (name, data) in seeds().iter().filter(|(_, d)| d.len() < 512) {
        for cut in 0..data.len() {
            aof_reader::run(&data[..cut]);
        }
        for pos in 0..data.len() {
            for x in [0xFFu8, b'*' ^ data[pos], b'\n' ^ data[pos]] {
                let mut bad = data.clone();
                bad[pos] ^= x;
                let r = std::panic::catch_unwind(|| aof_reader::run(&bad));
                assert!(r.is_ok(), "{name}: byte {pos} ^ {x:#x}");
            }
        }
    }
}
