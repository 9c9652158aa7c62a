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
    // Redis 6.2's single-file AOF: an RDB preamble, then RESP commands after the checksum.
    let aof = shared_dir().join("corpus/redis-6.2.16/appendonly-preamble.aof");
    let data = std::fs::read(&aof).expect("read");
    let rep = walk(&data, Depth::Deep, 0).unwrap_or_else(|(_, e)| panic!("{}: {e}", aof.display()));
    assert!(rep.keys() > 1000);
    assert!(rep.trailing_bytes > 0, "the RESP tail follows the preamble");
    assert_eq!(data[data.len() - rep.trailing_bytes as usize], b'*');
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

/// HDT3213/rdb's expected outputs (rdb/cases/*.json): another tool's view of the same
/// files, so a cross-check for legacy encodings that have no server truth here. Where it
/// differs by design (lossy U+FFFD for binary bytes, ISO-8601 expirations) we compare in
/// its terms.
#[test]
#[ignore = "needs ../shared; run with make compat"]
fn external_hdt3213_expected_outputs() {
    use serde_json::Value;
    let dir = shared_dir().join("external/rdb/cases");
    let lossy = |v: &Value| String::from_utf8_lossy(&common::jbytes(v)).into_owned();
    let (mut files, mut keys) = (0, 0);
    let mut entries: Vec<_> =
        std::fs::read_dir(&dir).expect("rdb/cases").filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for jf in entries.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let rdb = jf.with_extension("rdb");
        // zipmap_big_len.rdb is rejected, as Redis rejects it (its count byte is 0xff).
        if !rdb.exists() || rdb.ends_with("zipmap_big_len.rdb") {
            continue;
        }
        let expected: Value = serde_json::from_str(&std::fs::read_to_string(jf).expect("json")).expect("parse");
        let ours: std::collections::HashMap<(u64, String), Value> =
            common::dump_jsonl(&std::fs::read(&rdb).expect("rdb"))
                .into_iter()
                .filter(|v| v.get("record").is_none())
                .map(|v| ((v["db"].as_u64().expect("db"), lossy(&v["key"])), v))
                .collect();
        files += 1;
        for e in expected.as_array().expect("array") {
            let t = e["type"].as_str().expect("type");
            if matches!(t, "aux" | "functions" | "module") {
                continue;
            }
            let k = (e["db"].as_u64().expect("db"), e["key"].as_str().expect("key").to_string());
            let o = ours.get(&k).unwrap_or_else(|| panic!("{}: {k:?} missing", jf.display()));
            let v = &o["value"];
            let arr = |x: &Value| x.as_array().cloned().unwrap_or_default();
            let same = match t {
                "string" => lossy(v) == e["value"].as_str().expect("value"),
                "list" => {
                    arr(v).iter().map(lossy).collect::<Vec<_>>()
                        == arr(&e["values"]).iter().map(|x| x.as_str().expect("str").to_string()).collect::<Vec<_>>()
                }
                "set" => {
                    let mut a: Vec<String> = arr(v).iter().map(lossy).collect();
                    let mut b: Vec<String> =
                        arr(&e["members"]).iter().map(|x| x.as_str().expect("str").to_string()).collect();
                    a.sort();
                    b.sort();
                    a == b
                }
                "hash" => {
                    let ours_h: std::collections::BTreeMap<String, String> =
                        arr(v).iter().map(|p| (lossy(&p[0]), lossy(&p[1]))).collect();
                    let theirs: std::collections::BTreeMap<String, String> = e["hash"]
                        .as_object()
                        .expect("hash")
                        .iter()
                        .map(|(f, x)| (f.clone(), x.as_str().expect("str").to_string()))
                        .collect();
                    let ttls_ok = e.get("expire").and_then(Value::as_object).is_none_or(|exp| {
                        let ours_t: std::collections::HashMap<String, i64> = arr(&o["field_expire_ms"])
                            .iter()
                            .map(|p| (lossy(&p[0]), p[1].as_i64().expect("ms")))
                            .collect();
                        exp.iter().all(|(f, ms)| ours_t.get(f).copied().unwrap_or(0) == ms.as_i64().expect("ms"))
                    });
                    ours_h == theirs && ttls_ok
                }
                "zset" => {
                    let mut a: Vec<(String, f64)> =
                        arr(v).iter().map(|p| (lossy(&p[0]), common::score(&p[1]))).collect();
                    let mut b: Vec<(String, f64)> = arr(&e["entries"])
                        .iter()
                        .map(|x| (x["member"].as_str().expect("m").to_string(), common::score(&x["score"])))
                        .collect();
                    a.sort_by(|x, y| x.0.cmp(&y.0));
                    b.sort_by(|x, y| x.0.cmp(&y.0));
                    // HDT prints scores with limited precision.
                    a.len() == b.len()
                        && a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && (x.1 - y.1).abs() <= 1e-9 * y.1.abs().max(1.0))
                }
                "stream" => {
                    let theirs: Vec<(String, Value)> = arr(&e["entries"])
                        .iter()
                        .flat_map(|n| arr(&n["msgs"]))
                        .filter(|m| m["deleted"] != true)
                        .map(|m| (m["id"].as_str().expect("id").to_string(), m["fields"].clone()))
                        .collect();
                    let mine: Vec<(String, Value)> = arr(v)
                        .iter()
                        .map(|x| {
                            let f = arr(&x[1]);
                            let obj: serde_json::Map<String, Value> =
                                f.chunks(2).map(|c| (lossy(&c[0]), Value::String(lossy(&c[1])))).collect();
                            (x[0].as_str().expect("id").to_string(), Value::Object(obj))
                        })
                        .collect();
                    mine == theirs
                }
                other => panic!("{}: unexpected type {other}", jf.display()),
            };
            assert!(same, "{}: key {k:?} differs\n ours: {o}\n theirs: {e}", jf.display());
            keys += 1;
        }
    }
    eprintln!("HDT3213 expected outputs: {files} files, {keys} keys agree");
    assert!(files >= 35);
}

// ---- issue #3: the encoder on real files ----

use common::dataset;

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn corpus_reencoded_for_its_own_version_is_the_same_dataset() {
    use ferrokv::format::rdb::Target;
    for (rel, target) in [
        ("redis-7.4.1/dump.rdb", Target::Redis74),
        ("redis-7.4.1/dump-lfu.rdb", Target::Redis74),
        ("redis-6.2.16/dump.rdb", Target::Redis62),
        ("expire-7.4.1/dump.rdb", Target::Redis74),
    ] {
        let data = std::fs::read(shared_dir().join("corpus").join(rel)).expect("corpus file");
        let (out, report) = ferrokv_tools::convert::rdb_to_rdb(&data, target, Vec::new(), 0).expect("convert");
        let fn_losses = report.losses.iter().filter(|l| l.key.is_none()).count();
        assert_eq!(report.losses.len(), fn_losses, "{rel}: {:?}", report.losses);
        assert!(dataset(&out) == dataset(&data), "{rel}: re-encoded dataset differs");
    }
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn field_ttls_downgraded_to_7_0_are_reported_by_key_and_load_in_redis_7_0() {
    use ferrokv::format::rdb::Target;
    let dir = shared_dir().join("corpus/redis-7.4.1");
    let data = std::fs::read(dir.join("dump.rdb")).expect("dump.rdb");
    let (out, report) = ferrokv_tools::convert::rdb_to_rdb(&data, Target::Redis70, Vec::new(), 0).expect("convert");
    // Exactly the keys with field TTLs, per the server's own truth.
    let truth = std::fs::read_to_string(dir.join("expected.jsonl")).expect("truth");
    let mut expected: Vec<(u64, Vec<u8>)> = truth
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|v| v.get("field_expire_ms").is_some_and(|f| f.as_array().is_some_and(|a| !a.is_empty())))
        .map(|v| (v["db"].as_u64().expect("db"), common::jbytes(&v["key"])))
        .collect();
    expected.sort();
    let mut reported: Vec<(u64, Vec<u8>)> = report
        .losses
        .iter()
        .filter(|l| l.what.contains("field TTL"))
        .filter_map(|l| Some((l.db?, l.key.clone()?)))
        .collect();
    // The only other loss: consumer active-time, which RDB 10 cannot hold.
    for l in report.losses.iter().filter(|l| !l.what.contains("field TTL")) {
        assert!(l.what.contains("active-time"), "unexpected loss {l}");
    }
    reported.sort();
    reported.dedup();
    assert!(!expected.is_empty());
    assert_eq!(reported, expected);
    let path = std::env::temp_dir().join(format!("ferrokv-downgrade-{}.rdb", std::process::id()));
    std::fs::write(&path, &out).expect("write");
    let server = common::redis::start_server_with(&path);
    let keys: u64 = dataset(&data).len() as u64;
    let mut total = 0;
    for db in [0u64, 1, 2, 15] {
        let n = common::redis::cli(server.port, &["-n", &db.to_string(), "DBSIZE"]);
        total += n.parse::<u64>().unwrap_or(0);
    }
    assert_eq!(total, keys, "real Redis 7.0 loaded every key");
    let _ = std::fs::remove_file(&path);
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn external_files_survive_a_reencode() {
    use ferrokv::format::rdb::{Family, RdbReader, Target};
    let base = shared_dir().join("external");
    let mut n = 0;
    for row in index_rows() {
        if row.kind.starts_with("AOF") || row.kind == "RESP" {
            continue;
        }
        let data = std::fs::read(base.join(&row.path)).expect("read");
        if walk(&data, Depth::Deep, 0).is_err() {
            continue; // the rejected ones are covered by external_fixtures
        }
        let dialect = RdbReader::new(&data).expect("header").dialect();
        let target = match (dialect.family, dialect.version) {
            (Family::Valkey, _) => Target::Valkey9,
            (_, v) if v <= 9 => Target::Redis62,
            (_, 10) => Target::Redis70,
            (_, 11) => Target::Redis72,
            _ => Target::Redis74,
        };
        let (out, report) = ferrokv_tools::convert::rdb_to_rdb(&data, target, Vec::new(), 0)
            .unwrap_or_else(|e| panic!("{}: {e:?}", row.path));
        let a = dataset(&data);
        let b = dataset(&out);
        if report.losses.is_empty() {
            assert!(a == b, "{}: dataset differs after re-encoding for {target}", row.path);
        } else {
            // Losses (RDB 13 stream state, key metadata, pre-GA functions on 6.2) keep the keys.
            assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{}", row.path);
        }
        n += 1;
    }
    eprintln!("{n} external files re-encoded");
    assert!(n >= 150);
}

/// Every AOF real Redis 7.4.1 wrote in ../shared/corpus (functions in the base, hash-field
/// TTLs in an incr file): aoftool verify accepts it with no warning, checked against the
/// version its base names or, for a base without one, against Redis 7.4 given; the same
/// AOFs checked as Redis 7.0 warn about each command 7.0 does not have, and fail with --strict.
#[test]
#[ignore = "needs ../shared; run with make compat"]
fn aof_verify_takes_the_version_from_the_file() {
    use ferrokv::command::catalog::ServerVersion;
    use ferrokv_tools::aof::check::{verify, Options};
    let corpus = shared_dir().join("corpus");
    for (dir, given) in [
        ("redis-7.4.1/aof-preamble/appendonlydir", None),
        ("redis-7.4.1/aof-nopreamble/appendonlydir", Some(ServerVersion::Redis74)),
        ("expire-7.4.1/aof/appendonlydir", Some(ServerVersion::Redis74)),
    ] {
        let path = corpus.join(dir);
        let r = verify(&path, Options { version: given, ..Options::default() }).expect("verify runs");
        assert!(r.problem.is_none(), "{dir}: {:?}", r.problem);
        let warnings: Vec<_> = r.files.iter().flat_map(|f| &f.warnings).collect();
        assert!(warnings.is_empty(), "{dir}: {warnings:?}");
        assert_eq!(r.version.map(|(v, _)| v), Some(ServerVersion::Redis74), "{dir}");
    }
    let expiry = corpus.join("expire-7.4.1/aof/appendonlydir");
    let as70 = Options { version: Some(ServerVersion::Redis70), ..Options::default() };
    let r = verify(&expiry, as70).expect("verify runs");
    assert!(r.problem.is_none());
    let warned: Vec<_> = r.files.iter().flat_map(|f| &f.warnings).collect();
    assert!(!warned.is_empty() && warned.iter().all(|w| w.what.contains("'hpexpireat' is not a command of Redis 7.0")));
    let strict = verify(&expiry, Options { strict: true, ..as70 }).expect("verify runs");
    assert!(strict.problem.is_some_and(|p| p.offset == warned[0].offset));
}

/// Every RDB of ../shared (files of real servers, and the public fixtures, the corrupt
/// among them) read record by record from a stream in small reads, as a replica reads
/// its master's socket: the same records and verdict as read whole from memory.
#[test]
#[ignore = "needs ../shared; run with make compat"]
fn shared_rdbs_read_from_a_stream_as_whole() {
    let mut files = Vec::new();
    let mut dirs = vec![shared_dir().join("corpus"), shared_dir().join("external")];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())).flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "rdb") {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 150, "{} RDB files", files.len());
    for p in &files {
        let data = std::fs::read(p).unwrap();
        for chunk in [13, 65536] {
            if let Some(diff) = ferrokv::format::rdb::differs_from_whole(&data, chunk) {
                panic!("{}: {diff}", p.display());
            }
        }
    }
    eprintln!("{} RDB files read from a stream as whole", files.len());
}
