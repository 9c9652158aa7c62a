//! Compatibility against ../shared: real Redis 6.2.16 / 7.4.1 files with truth read back
//! from the server, and 151 public fixtures. Run with `make compat` (these tests need
//! ../shared, so plain `cargo test` lists them as ignored).

mod common;

use common::{compare_with_truth, shared_dir};
use ferrokv_tools::verify::{walk, Depth};

fn corpus(rel: &str, truth: &str) {
    corpus_tol(rel, truth, 0)
}

/// Redis 6.2 has no PEXPIRETIME, so its truth derives expiries from PTTL and the clock,
/// a few ms apart from what the server stored.
fn corpus_tol(rel: &str, truth: &str, tol: i64) {
    let dir = shared_dir().join("corpus");
    assert!(dir.is_dir(), "{} is missing: make compat needs ../shared", dir.display());
    let n = compare_with_truth(&dir.join(rel), &dir.join(truth), tol).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    eprintln!("{rel}: {n} keys match {truth}");
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn corpus_redis_7_4_1() {
    corpus("redis-7.4.1/dump.rdb", "redis-7.4.1/expected.jsonl");
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn corpus_redis_7_4_1_lru_lfu() {
    corpus("redis-7.4.1/dump-lru.rdb", "redis-7.4.1/expected.jsonl");
    corpus("redis-7.4.1/dump-lfu.rdb", "redis-7.4.1/expected.jsonl");
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn corpus_redis_6_2_16() {
    corpus_tol("redis-6.2.16/dump.rdb", "redis-6.2.16/expected.jsonl", 50);
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn corpus_expire_7_4_1() {
    corpus("expire-7.4.1/dump.rdb", "expire-7.4.1/expected.jsonl");
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn corpus_aof_preamble_base() {
    let dir = shared_dir().join("corpus/redis-7.4.1/aof-preamble/appendonlydir");
    let base = std::fs::read_dir(&dir)
        .expect("aof-preamble dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".base.rdb"))
        .expect("a base rdb");
    let data = std::fs::read(&base).expect("read");
    let rep = walk(&data, Depth::Deep, 0).unwrap_or_else(|(_, e)| panic!("{}: {e}", base.display()));
    assert!(rep.keys() > 1000);
}

/// One row of ../shared/external/INDEX.md.
struct Row {
    path: String,
    kind: String,
    pass: bool,
}

fn index_rows() -> Vec<Row> {
    let text = std::fs::read_to_string(shared_dir().join("external/INDEX.md")).expect("external/INDEX.md");
    let mut rows = Vec::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        // | file | bytes | RDB ver | redis-check | failure | name |
        if cols.len() >= 7 && (cols[4] == "PASS" || cols[4] == "FAIL") {
            rows.push(Row { path: cols[1].to_string(), kind: cols[3].to_string(), pass: cols[4] == "PASS" });
        }
        // librdb table: | repo | path | bytes | magic+ver | redis-ver | note |
        if cols.len() >= 7 && cols[1] == "redis/librdb" && cols[2].ends_with(".rdb") {
            let pass = !matches!(
                cols[2],
                "test/dumps/future_v19.rdb"
                    | "test/dumps/invalid_chksum_v8.rdb"
                    | "test/dumps/redis_ent_opcode_ram_lru.rdb"
            );
            rows.push(Row { path: format!("redis-librdb/{}", cols[2]), kind: cols[4].to_string(), pass });
        }
    }
    rows
}

/// Files redis-check-rdb 7.4.1 rejects that we decode, because they are valid for the
/// writer that made them (pre-release functions, pre-release modules aside, Valkey 9).
fn decodable_though_rejected(path: &str) -> bool {
    path.contains("redis-rdb-cli/")
        || path.ends_with("replicator/src/test/resources/function.rdb")
        || path.contains("valkey_hash2")
        || path.contains("corrupt_empty_keys")
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn external_fixtures() {
    let base = shared_dir().join("external");
    let rows = index_rows();
    assert!(rows.len() >= 151, "INDEX.md rows: {}", rows.len());
    let (mut decoded, mut rejected, mut failures) = (0, 0, Vec::new());
    for row in &rows {
        if row.kind.starts_with("AOF") {
            continue;
        }
        let p = base.join(&row.path);
        let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let result = walk(&data, Depth::Deep, 0);
        let should_decode = row.pass || decodable_though_rejected(&row.path);
        match (&result, should_decode) {
            (Ok(_), true) => {
                // A full dump must also succeed.
                let _ = common::dump_jsonl(&data);
                decoded += 1;
            }
            (Err((_, e)), false) => {
                assert!(
                    e.offset > 0 || e.what.contains("version") || e.what.contains("signature"),
                    "{}: imprecise error {e}",
                    row.path
                );
                eprintln!("rejected as expected: {}: {e}", row.path);
                rejected += 1;
            }
            (Ok(_), false) => failures.push(format!("{}: decoded, but it is corrupt", row.path)),
            (Err((_, e)), true) => failures.push(format!("{}: {e}", row.path)),
        }
    }
    eprintln!("external: {decoded} decoded, {rejected} rejected with an error");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
