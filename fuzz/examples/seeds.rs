//! Write the starting corpus of one fuzz target: `seeds <rdb|rdb_body> <out-dir> <file.rdb>...`.
//! Each file goes in whole and cut into one small seed per record (`split_records`); for
//! `rdb_body` the 9-byte magic becomes the one selector byte that target reads first.
//! fuzz/run.sh calls this; it is a plain program, not built with fuzzing instrumentation.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(target), Some(out)) = (args.first(), args.get(1)) else {
        eprintln!("usage: seeds <rdb|rdb_body> <out-dir> <file.rdb>...");
        return ExitCode::from(2);
    };
    let body = match target.as_str() {
        "rdb" => false,
        "rdb_body" => true,
        other => {
            eprintln!("seeds: unknown target {other}");
            return ExitCode::from(2);
        }
    };
    let out = PathBuf::from(out);
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("seeds: {}: {e}", out.display());
        return ExitCode::from(2);
    }
    let mut seen = HashSet::new();
    let mut written = 0usize;
    for path in &args[2..] {
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("seeds: {path}: {e}");
                return ExitCode::from(2);
            }
        };
        let stem = Path::new(path).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let mut all = vec![data.clone()];
        all.extend(ferrokv_fuzz::split_records(&data));
        for (i, seed) in all.into_iter().enumerate() {
            let seed = if body && seed.len() >= 9 {
                // Odd selector: Valkey; even: Redis (see ferrokv_fuzz::with_magic).
                let sel = u8::from(seed.starts_with(b"VALKEY"));
                let mut s = vec![sel];
                s.extend_from_slice(&seed[9..]);
                s
            } else {
                seed
            };
            if !seen.insert(seed.clone()) {
                continue;
            }
            let name = if i == 0 { format!("{stem}.whole") } else { format!("{stem}.{i:04}") };
            if let Err(e) = std::fs::write(out.join(name), &seed) {
                eprintln!("seeds: {}: {e}", out.display());
                return ExitCode::from(2);
            }
            written += 1;
        }
    }
    println!("seeds: {written} files in {}", out.display());
    ExitCode::SUCCESS
}
