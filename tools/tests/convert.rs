//! rdbtool convert and the encoder against real Redis 7.0: what we write loads, with the
//! same DEBUG DIGEST as the server that wrote the original.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::fixtures_dir;
use common::redis::{cli, send_resp, start_server, start_server_with};
use ferrokv::format::rdb::{dump_payload, Encoder, RdbReader, Record, Target};
use ferrokv::logical::Logical;
use ferrokv_tools::convert::{jsonl_to_rdb, rdb_to_rdb};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    fixtures_dir().join(format!("rdb/redis-7.0/{name}.rdb"))
}

fn digest_of(name: &str) -> String {
    let text = std::fs::read_to_string(fixtures_dir().join(format!("rdb/redis-7.0/{name}.info.json"))).expect("info");
    let v: Value = serde_json::from_str(&text).expect("json");
    v["debug_digest"].as_str().expect("digest").to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrokv-convert-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp");
    d.join(name)
}

use common::dataset;

const LOADABLE: [&str; 4] = ["all-types", "nocompress-nochecksum", "lru", "lfu"];

#[test]
fn converted_files_load_in_real_redis_with_the_same_digest() {
    for name in LOADABLE {
        let data = std::fs::read(fixture(name)).expect("read");
        for target in [Target::Redis70, Target::Redis62] {
            let (out, _) = rdb_to_rdb(&data, target, Vec::new(), 1_700_000_000).expect("convert");
            let path = tmp(&format!("{name}-{target}.rdb"));
            std::fs::write(&path, &out).expect("write");
            let server = start_server_with(&path);
            assert_eq!(cli(server.port, &["DEBUG", "DIGEST"]), digest_of(name), "{name} as {target}");
        }
    }
}

#[test]
fn every_target_decodes_to_the_same_dataset() {
    for name in LOADABLE {
        let data = std::fs::read(fixture(name)).expect("read");
        let original = dataset(&data);
        for target in [Target::Redis70, Target::Redis72, Target::Redis74, Target::Valkey9] {
            let (out, report) = rdb_to_rdb(&data, target, Vec::new(), 1_700_000_000).expect("convert");
            assert!(report.losses.is_empty(), "{name} -> {target}: {:?}", report.losses);
            assert!(dataset(&out) == original, "{name} -> {target}: dataset differs");
        }
    }
}

#[test]
fn downgrade_to_6_2_reports_exactly_what_it_drops() {
    let data = std::fs::read(fixture("all-types")).expect("read");
    let (_, report) = rdb_to_rdb(&data, Target::Redis62, Vec::new(), 1_700_000_000).expect("convert");
    // RDB 9 has no functions and no stream entries-added / max-deleted-id.
    let functions = report.losses.iter().filter(|l| l.key.is_none()).count();
    assert_eq!(functions, 2, "{:?}", report.losses);
    for l in report.losses.iter().filter(|l| l.key.is_some()) {
        assert!(l.what.contains("stream"), "{l}");
    }
}

#[test]
fn jsonl_dump_converts_back_to_the_same_dataset() {
    for name in LOADABLE {
        let data = std::fs::read(fixture(name)).expect("read");
        let jsonl = common::dump_jsonl(&data).iter().map(|v| format!("{v}\n")).collect::<String>();
        let (out, report) = jsonl_to_rdb(jsonl.as_bytes(), Target::Redis70, Vec::new(), 1_700_000_000).expect("jsonl");
        assert!(report.losses.is_empty(), "{:?}", report.losses);
        assert!(dataset(&out) == dataset(&data), "{name}: jsonl round trip differs");
        let path = tmp(&format!("{name}-from-jsonl.rdb"));
        std::fs::write(&path, &out).expect("write");
        let server = start_server_with(&path);
        assert_eq!(cli(server.port, &["DEBUG", "DIGEST"]), digest_of(name), "{name} via jsonl");
    }
}

fn resp_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[test]
fn dump_payloads_restore_in_real_redis() {
    let data = std::fs::read(fixture("all-types")).expect("read");
    let enc = Encoder::new(Target::Redis70);
    let mut resp = Vec::new();
    let mut db = None;
    for rec in RdbReader::new(&data).expect("header") {
        match rec.expect("record") {
            Record::Key(k) => {
                if db != Some(k.db) {
                    resp.extend(resp_command(&[b"SELECT", k.db.to_string().as_bytes()]));
                    db = Some(k.db);
                }
                let payload = dump_payload(&enc, &Logical::from_record(&k).expect("value"), &mut Vec::new());
                let ttl = k.expire_ms.unwrap_or(0).to_string();
                resp.extend(resp_command(&[b"RESTORE", &k.key.to_bytes(), ttl.as_bytes(), &payload, b"ABSTTL"]));
            }
            Record::Function { code, .. } => {
                resp.extend(resp_command(&[b"FUNCTION", b"LOAD", &code.to_bytes()]));
            }
            _ => {}
        }
    }
    let server = start_server();
    send_resp(server.port, &resp);
    assert_eq!(cli(server.port, &["DEBUG", "DIGEST"]), digest_of("all-types"));
}

fn rdbtool() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rdbtool"))
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn corrupt_input_fails_with_exit_2_and_writes_nothing() {
    let data = std::fs::read(fixture("all-types")).expect("read");
    let bad = tmp("truncated.rdb");
    std::fs::write(&bad, &data[..data.len() / 3]).expect("write");
    let out = tmp("should-not-exist.rdb");
    let _ = std::fs::remove_file(&out);
    let r = rdbtool().arg("convert").arg(&bad).arg(&out).args(["--to", "rdb:redis-7.0"]).output().expect("run");
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("offset"), "{err}");
    assert!(!out.exists());
    assert!(leftovers(out.parent().expect("dir")).is_empty());
}

#[test]
fn strict_refuses_a_lossy_conversion() {
    let out = tmp("strict.rdb");
    let _ = std::fs::remove_file(&out);
    let r = rdbtool()
        .arg("convert")
        .arg(fixture("all-types"))
        .arg(&out)
        .args(["--to", "rdb:redis-6.2", "--strict"])
        .output()
        .expect("run");
    assert_eq!(r.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&r.stderr).contains("loss:"));
    assert!(!out.exists());
    let ok = rdbtool()
        .arg("convert")
        .arg(fixture("all-types"))
        .arg(&out)
        .args(["--to", "rdb:redis-7.0", "--strict"])
        .output()
        .expect("run");
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(out.exists());
}

#[test]
fn convert_to_dump_formats() {
    for to in ["jsonl", "json", "resp", "aof"] {
        let out = tmp(&format!("all.{to}"));
        let r = rdbtool().arg("convert").arg(fixture("all-types")).arg(&out).args(["--to", to]).output().expect("run");
        assert_eq!(r.status.code(), Some(0), "{to}: {}", String::from_utf8_lossy(&r.stderr));
        assert!(std::fs::metadata(&out).expect("output").len() > 1000);
    }
}

#[test]
fn encoded_bytes_do_not_depend_on_the_pipeline_shape() {
    use ferrokv_tools::pipeline::Pipeline;
    let data = std::fs::read(fixture("all-types")).expect("read");
    let shapes = [
        Pipeline { workers: 1, batch_bytes: usize::MAX, big_key_bytes: usize::MAX },
        Pipeline { workers: 2, batch_bytes: 1, big_key_bytes: 2000 },
        Pipeline { workers: 3, batch_bytes: 4000, big_key_bytes: 100 },
    ];
    for target in Target::ALL {
        let outs: Vec<Vec<u8>> = shapes
            .iter()
            .map(|p| {
                ferrokv_tools::convert::rdb_to_rdb_with(&data, target, Vec::new(), 1, p, &|_| {}).expect("convert").0
            })
            .collect();
        assert!(outs.iter().all(|o| o == &outs[0]), "{target}: bytes depend on the pipeline shape");
    }
}

#[test]
fn plain_quicklist_nodes_we_write_load_in_real_redis() {
    use ferrokv::format::rdb::RdbWriter;
    let items: Vec<Vec<u8>> = (0..40)
        .map(|i| if i % 7 == 3 { vec![b'a' + (i % 26) as u8; 300] } else { i.to_string().into_bytes() })
        .collect();
    let mut w = RdbWriter::new(Vec::new(), Target::Redis70, 1_700_000_000).expect("writer");
    w.enc.limits.list_plain_bytes = 200;
    w.select_db(0, Some((1, 0))).expect("select");
    w.key(b"plain", None, None, None, &Logical::List(items.clone()), &mut Vec::new()).expect("key");
    let path = tmp("plain-nodes.rdb");
    std::fs::write(&path, w.finish().expect("finish")).expect("write");
    let server = start_server_with(&path);
    let got = cli(server.port, &["LRANGE", "plain", "0", "-1"]);
    let want: Vec<String> = items.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect();
    assert_eq!(got, want.join("\n"));
    assert_eq!(cli(server.port, &["LLEN", "plain"]), "40");
}
