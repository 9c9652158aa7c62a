//! The project's own fixtures (fixtures/rdb/redis-7.0), written by a real redis-server 7.0
//! with the truth read back through the server: decode, compare, reload into real Redis.

mod common;

use std::path::{Path, PathBuf};

use common::{compare_with_truth, fixtures_dir};
use ferrokv::format::rdb::{RdbReader, Record};
use ferrokv_tools::dump::{self, Expired, Filter, Format};
use ferrokv_tools::out::Out;
use ferrokv_tools::verify::{walk, Depth};
use serde_json::Value;

const FILES: [&str; 5] = ["all-types", "nocompress-nochecksum", "lru", "lfu", "expired"];

fn fixture(name: &str, ext: &str) -> PathBuf {
    fixtures_dir().join("rdb/redis-7.0").join(format!("{name}.{ext}"))
}

fn info(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name, "info.json")).expect("info.json");
    serde_json::from_str(&text).expect("info.json parses")
}

#[test]
fn every_fixture_matches_the_servers_truth() {
    for name in FILES {
        let n = compare_with_truth(&fixture(name, "rdb"), &fixture(name, "expected.jsonl"), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        let dbsize: u64 = info(name)["dbsize"].as_object().expect("dbsize").values().filter_map(Value::as_u64).sum();
        assert_eq!(n as u64, dbsize, "{name}: truth covers every key");
    }
}

#[test]
fn verify_counts_agree_with_redis_check_rdb() {
    for name in FILES {
        let data = std::fs::read(fixture(name, "rdb")).expect("read");
        let rep = walk(&data, Depth::Deep, i64::MAX).unwrap_or_else(|(_, e)| panic!("{name}: {e}"));
        let inf = info(name);
        let check = &inf["redis_check_rdb"];
        assert_eq!(rep.keys(), check["keys_read"].as_u64().expect("keys_read"), "{name}");
        let expires: u64 = rep.dbs.values().map(|d| d.with_expiry).sum();
        assert_eq!(expires, check["expires"].as_u64().expect("expires"), "{name}");
        assert_eq!(rep.magic, inf["rdb_header"].as_str().expect("header"));
        assert!(rep.warnings.is_empty(), "{name}: {:?}", rep.warnings);
    }
}

#[test]
fn lru_and_lfu_opcodes_are_read() {
    for (name, idle) in [("lru", true), ("lfu", false)] {
        let data = std::fs::read(fixture(name, "rdb")).expect("read");
        let rep = walk(&data, Depth::Records, 0).unwrap_or_else(|(_, e)| panic!("{e}"));
        if idle {
            assert_eq!(rep.with_idle, rep.keys());
        } else {
            assert_eq!(rep.with_freq, rep.keys());
        }
    }
}

#[test]
fn checksum_zero_means_disabled() {
    let data = std::fs::read(fixture("nocompress-nochecksum", "rdb")).expect("read");
    assert_eq!(&data[data.len() - 8..], &[0u8; 8]);
    let last = RdbReader::new(&data).expect("header").last().expect("records").expect("ok");
    assert!(matches!(last, Record::Eof { checksum: ferrokv::format::rdb::Checksum::Disabled, .. }));
}

fn dump_to_vec(data: &[u8], format: Format, filter: &Filter) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut out = Out::new(&mut buf);
    dump::run(data, format, filter, &mut out).unwrap_or_else(|e| panic!("{e:?}"));
    drop(out);
    buf
}

fn keep_all() -> Filter {
    Filter { db: None, key: None, types: vec![], expired: Expired::Keep, now_ms: 0 }
}

#[test]
fn expired_keys_can_be_left_out() {
    let data = std::fs::read(fixture("expired", "rdb")).expect("read");
    let truth: Vec<Value> = std::fs::read_to_string(fixture("expired", "expected.jsonl"))
        .expect("truth")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    // "Now" just after the short TTLs passed, long before the far-future ones.
    let short = truth.iter().filter_map(|t| t["expire_ms"].as_i64()).min().expect("some ttl");
    let now = short + 1_000;
    let live = truth.iter().filter(|t| t["expire_ms"].as_i64().is_none_or(|e| e > now)).count();
    let f = Filter { expired: Expired::Skip, now_ms: now, ..keep_all() };
    let out = dump_to_vec(&data, Format::Jsonl, &f);
    let keys = out.split(|&b| b == b'\n').filter(|l| l.starts_with(b"{\"db\"")).count();
    assert_eq!(keys, live);
    assert!(live < truth.len(), "the fixture holds expired keys");
}

#[test]
fn filters_select_db_key_and_type() {
    let data = std::fs::read(fixture("all-types", "rdb")).expect("read");
    let lines = |f: &Filter| -> Vec<Value> {
        dump_to_vec(&data, Format::Jsonl, f)
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("json"))
            .collect()
    };
    let db15 = lines(&Filter { db: Some(15), ..keep_all() });
    assert!(!db15.is_empty() && db15.iter().all(|v| v["db"] == 15));
    let zsets = lines(&Filter { types: vec![ferrokv::format::rdb::LogicalType::Zset], ..keep_all() });
    assert!(!zsets.is_empty() && zsets.iter().all(|v| v["type"] == "zset"));
    let lists = lines(&Filter { key: Some(b"list:*".to_vec()), ..keep_all() });
    assert!(!lists.is_empty() && lists.iter().all(|v| v["key"].as_str().is_some_and(|k| k.starts_with("list:"))));
}

#[test]
fn json_format_is_the_rdb_tools_layout() {
    let data = std::fs::read(fixture("all-types", "rdb")).expect("read");
    let out = dump_to_vec(&data, Format::Json, &keep_all());
    let v: Value = serde_json::from_slice(&out).expect("json output parses");
    let arr = v.as_array().expect("array of dbs");
    // db 0, 1, 15, then the expires element.
    assert_eq!(arr.len(), 4);
    assert!(arr[3]["expires"].is_object());
    let keys: u64 = arr[..3].iter().map(|d| d.as_object().expect("db object").len() as u64).sum();
    let dbsize: u64 = info("all-types")["dbsize"].as_object().expect("dbsize").values().filter_map(Value::as_u64).sum();
    assert_eq!(keys, dbsize);
}

// ---- real redis-server: the resp dump rebuilds the same dataset ----

use common::redis::{cli, pipe_into, start_server};

fn digest_after_resp_restore(path: &Path) -> String {
    let data = std::fs::read(path).expect("read");
    let resp = dump_to_vec(&data, Format::RESP, &keep_all());
    let server = start_server();
    pipe_into(server.port, &resp);
    cli(server.port, &["DEBUG", "DIGEST"])
}

#[test]
fn resp_dump_piped_into_real_redis_gives_the_same_digest() {
    // expired.rdb is left out: its short-TTL keys are gone once restored, by design.
    for name in ["all-types", "nocompress-nochecksum", "lru", "lfu"] {
        let digest = digest_after_resp_restore(&fixture(name, "rdb"));
        assert_eq!(digest, info(name)["debug_digest"].as_str().expect("digest"), "{name}");
    }
}

#[test]
fn output_is_the_same_whatever_the_pipeline_shape() {
    use ferrokv_tools::pipeline::Pipeline;
    let data = std::fs::read(fixture("all-types", "rdb")).expect("read");
    let shapes = [
        Pipeline { workers: 1, batch_bytes: usize::MAX, big_key_bytes: usize::MAX },
        Pipeline { workers: 2, batch_bytes: 1, big_key_bytes: 2000 },
        Pipeline { workers: 3, batch_bytes: 5000, big_key_bytes: 100 },
        Pipeline { workers: 1, batch_bytes: 700, big_key_bytes: 3000 },
    ];
    for format in [Format::Jsonl, Format::Json, Format::RESP] {
        let outputs: Vec<Vec<u8>> = shapes
            .iter()
            .map(|p| {
                let mut buf = Vec::new();
                let mut out = Out::new(&mut buf);
                dump::run_with(&data, format, &keep_all(), &mut out, p, &|_| {}).expect("dump");
                drop(out);
                buf
            })
            .collect();
        for o in &outputs[1..] {
            assert!(o == &outputs[0], "{format:?}: output depends on the pipeline shape");
        }
    }
}
