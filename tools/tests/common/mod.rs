//! Compare our jsonl dump of an RDB with truth read back from a real server
//! (`expected.jsonl`: see ../shared/corpus/README.md and fixtures/README.md).
#![allow(dead_code)]

pub mod redis;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferrokv_tools::dump::{self, Expired, Filter, Format};
use ferrokv_tools::out::Out;
use serde_json::Value;

/// ../shared beside the checkout, or $FERROKV_SHARED.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("FERROKV_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// JSON bytes (string or {"hex": ...}) to raw bytes.
pub fn jbytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(o) => {
            let h = o.get("hex").and_then(Value::as_str).expect("hex object");
            (0..h.len() / 2).map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("hex")).collect()
        }
        Value::Number(n) => n.to_string().into_bytes(),
        other => panic!("not bytes: {other}"),
    }
}

pub fn score(v: &Value) -> f64 {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => panic!("not a score: {other}"),
    };
    match s.as_str() {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or_else(|_| panic!("bad score {s}")),
    }
}

/// Dump `data` as jsonl with nothing filtered out.
pub fn dump_jsonl(data: &[u8]) -> Vec<Value> {
    let mut buf = Vec::new();
    {
        let mut out = Out::new(&mut buf);
        let f = Filter { db: None, key: None, types: vec![], expired: Expired::Keep, now_ms: 0 };
        dump::run(data, Format::Jsonl, &f, &mut out).unwrap_or_else(|e| panic!("dump failed: {e:?}"));
    }
    buf.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("our jsonl parses"))
        .collect()
}

fn key_of(v: &Value) -> (u64, Vec<u8>) {
    (v["db"].as_u64().expect("db"), jbytes(&v["key"]))
}

fn sorted_bytes(v: &Value) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = v.as_array().expect("array").iter().map(jbytes).collect();
    out.sort();
    out
}

fn pairs(v: &Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<_> = v.as_array().expect("pairs").iter().map(|p| (jbytes(&p[0]), jbytes(&p[1]))).collect();
    out.sort();
    out
}

fn zset(v: &Value) -> Vec<(u64, Vec<u8>)> {
    let mut out: Vec<_> = v.as_array().expect("zset").iter().map(|p| (score(&p[1]).to_bits(), jbytes(&p[0]))).collect();
    out.sort();
    out
}

fn field_ttls(v: &Value) -> Vec<(Vec<u8>, i64)> {
    let mut out: Vec<_> = v
        .as_array()
        .map(|a| a.iter().map(|p| (jbytes(&p[0]), p[1].as_i64().expect("ttl"))).collect())
        .unwrap_or_default();
    out.sort();
    out
}

fn entries(v: &Value) -> Vec<(String, Vec<Vec<u8>>)> {
    v.as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (e[0].as_str().expect("id").to_string(), e[1].as_array().expect("fields").iter().map(jbytes).collect())
        })
        .collect()
}

/// XINFO STREAM FULL reply as a map (it alternates names and values).
fn kv(v: &Value) -> BTreeMap<String, Value> {
    let a = v.as_array().expect("xinfo array");
    a.chunks(2).map(|c| (c[0].as_str().expect("name").to_string(), c[1].clone())).collect()
}

fn compare_stream(ours: &Value, truth: &Value, ctx: &str) -> Result<(), String> {
    if entries(&ours["value"]) != entries(&truth["value"]) {
        return Err(format!("{ctx}: stream entries differ"));
    }
    let Some(x) = truth.get("xinfo_full") else { return Ok(()) };
    let x = kv(x);
    let s = &ours["stream"];
    let eq = |a: &Value, b: &Value, what: &str| -> Result<(), String> {
        if a != b {
            Err(format!("{ctx}: stream {what}: ours {a} truth {b}"))
        } else {
            Ok(())
        }
    };
    eq(&s["length"], &x["length"], "length")?;
    eq(&s["last_id"], &x["last-generated-id"], "last id")?;
    if let Some(v) = x.get("max-deleted-entry-id") {
        eq(&s["max_deleted_id"], v, "max deleted id")?;
        eq(&s["entries_added"], &x["entries-added"], "entries added")?;
        eq(&s["first_id"], &x["recorded-first-entry-id"], "recorded first id")?;
    }
    let groups = x["groups"].as_array().cloned().unwrap_or_default();
    let ours_g = s["groups"].as_array().cloned().unwrap_or_default();
    if groups.len() != ours_g.len() {
        return Err(format!("{ctx}: {} groups, truth {}", ours_g.len(), groups.len()));
    }
    for tg in groups {
        let tg = kv(&tg);
        let name = jbytes(&tg["name"]);
        let og = ours_g
            .iter()
            .find(|g| jbytes(&g["name"]) == name)
            .ok_or_else(|| format!("{ctx}: group {} missing", String::from_utf8_lossy(&name)))?;
        eq(&og["last_delivered_id"], &tg["last-delivered-id"], "group last delivered")?;
        if let Some(er) = tg.get("entries-read") {
            if !er.is_null() {
                eq(&og["entries_read"], er, "group entries read")?;
            }
        }
        let pel = og["pel"].as_array().expect("pel");
        eq(&Value::from(pel.len()), &tg["pel-count"], "group pel count")?;
        // XINFO shows only the first COUNT pending entries, in ID order.
        for (i, tp) in tg["pending"].as_array().expect("pending").iter().enumerate() {
            let op = &pel[i];
            eq(&op[0], &tp[0], "pending id")?;
            eq(&op[1], &tp[2], "pending delivery time")?;
            eq(&op[2], &tp[3], "pending delivery count")?;
            let owner = og["consumers"]
                .as_array()
                .expect("consumers")
                .iter()
                .find(|c| c["pel"].as_array().is_some_and(|p| p.contains(&op[0])))
                .map(|c| jbytes(&c["name"]));
            if owner != Some(jbytes(&tp[1])) {
                return Err(format!("{ctx}: pending {} owner differs", tp[0]));
            }
        }
        let tcons = tg["consumers"].as_array().cloned().unwrap_or_default();
        let ocons = og["consumers"].as_array().expect("consumers");
        if tcons.len() != ocons.len() {
            return Err(format!("{ctx}: consumer count differs"));
        }
        for tc in tcons {
            let tc = kv(&tc);
            let cname = jbytes(&tc["name"]);
            let oc =
                ocons.iter().find(|c| jbytes(&c["name"]) == cname).ok_or_else(|| format!("{ctx}: consumer missing"))?;
            eq(&oc["seen_time"], &tc["seen-time"], "consumer seen time")?;
            if let Some(a) = tc.get("active-time") {
                if !oc["active_time"].is_null() {
                    eq(&oc["active_time"], a, "consumer active time")?;
                }
            }
            eq(&Value::from(oc["pel"].as_array().map_or(0, Vec::len)), &tc["pel-count"], "consumer pel count")?;
        }
    }
    Ok(())
}

/// Compare one key of ours with the truth's record for it.
pub fn compare_key(ours: &Value, truth: &Value, ttl_tolerance_ms: i64) -> Result<(), String> {
    let (db, key) = key_of(truth);
    let ctx = format!("db {db} key {:?}", String::from_utf8_lossy(&key));
    if ours["type"] != truth["type"] {
        return Err(format!("{ctx}: type {} vs truth {}", ours["type"], truth["type"]));
    }
    let ttl_ok = match (ours["expire_ms"].as_i64(), truth["expire_ms"].as_i64()) {
        (Some(a), Some(b)) => (a - b).abs() <= ttl_tolerance_ms,
        _ => ours["expire_ms"] == truth["expire_ms"],
    };
    if !ttl_ok {
        return Err(format!("{ctx}: expire {} vs truth {}", ours["expire_ms"], truth["expire_ms"]));
    }
    let (o, t) = (&ours["value"], &truth["value"]);
    let same = match truth["type"].as_str().expect("type") {
        "string" => jbytes(o) == jbytes(t),
        "list" => {
            o.as_array().map(|a| a.iter().map(jbytes).collect::<Vec<_>>())
                == t.as_array().map(|a| a.iter().map(jbytes).collect::<Vec<_>>())
        }
        "set" => sorted_bytes(o) == sorted_bytes(t),
        "hash" => {
            if field_ttls(&ours["field_expire_ms"]) != field_ttls(&truth["field_expire_ms"]) {
                return Err(format!("{ctx}: field TTLs differ"));
            }
            pairs(o) == pairs(t)
        }
        "zset" => zset(o) == zset(t),
        "stream" => return compare_stream(ours, truth, &ctx),
        other => return Err(format!("{ctx}: unexpected type {other}")),
    };
    if !same {
        let (os, ts) = (o.to_string(), t.to_string());
        return Err(format!(
            "{ctx}: value differs\n ours:  {}\n truth: {}",
            &os[..os.len().min(300)],
            &ts[..ts.len().min(300)]
        ));
    }
    Ok(())
}

/// Dump `rdb` and compare every key with `truth` (jsonl). Returns the number of keys checked.
/// `ttl_tolerance_ms` is 0 except for truth taken from servers without PEXPIRETIME.
pub fn compare_with_truth(rdb: &Path, truth: &Path, ttl_tolerance_ms: i64) -> Result<usize, String> {
    let data = std::fs::read(rdb).map_err(|e| format!("{}: {e}", rdb.display()))?;
    let ours: BTreeMap<(u64, Vec<u8>), Value> =
        dump_jsonl(&data).into_iter().filter(|v| v.get("record").is_none()).map(|v| (key_of(&v), v)).collect();
    let text = std::fs::read_to_string(truth).map_err(|e| format!("{}: {e}", truth.display()))?;
    let mut truth_keys = 0;
    let mut errors = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let t: Value = serde_json::from_str(line).map_err(|e| format!("truth line: {e}"))?;
        let k = key_of(&t);
        truth_keys += 1;
        match ours.get(&k) {
            None => errors.push(format!("db {} key {:?}: missing from our dump", k.0, String::from_utf8_lossy(&k.1))),
            Some(o) => {
                if let Err(e) = compare_key(o, &t, ttl_tolerance_ms) {
                    errors.push(e);
                }
            }
        }
        seen.insert(k);
    }
    for k in ours.keys() {
        if !seen.contains(k) {
            errors.push(format!("db {} key {:?}: in our dump, not in the truth", k.0, String::from_utf8_lossy(&k.1)));
        }
    }
    if errors.is_empty() {
        Ok(truth_keys)
    } else {
        let n = errors.len();
        errors.truncate(10);
        Err(format!("{}: {n} differences:\n{}", rdb.display(), errors.join("\n")))
    }
}

/// Every key of an RDB as (db, key) -> (expiry, canonical value).
pub fn dataset(data: &[u8]) -> BTreeMap<(u64, Vec<u8>), (Option<i64>, ferrokv::logical::Logical)> {
    use ferrokv::format::rdb::{RdbReader, Record};
    let mut m = BTreeMap::new();
    for rec in RdbReader::new(data).expect("header") {
        if let Record::Key(k) = rec.expect("record") {
            let v = ferrokv::logical::Logical::from_record(&k).expect("value");
            m.insert((k.db, k.key.to_bytes().into_owned()), (k.expire_ms, v));
        }
    }
    m
}
