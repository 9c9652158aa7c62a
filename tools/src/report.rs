//! Text and JSON renderings of a verify/info `Report`.

use ferrokv::format::rdb::{Checksum, RdbError};
use serde_json::{json, Value};

use crate::verify::Report;

fn checksum_text(c: Option<Checksum>) -> String {
    match c {
        Some(Checksum::Valid(v)) => format!("ok ({v:016x})"),
        Some(Checksum::Disabled) => "disabled (stored as 0)".into(),
        Some(Checksum::Absent) => "none (RDB < 5)".into(),
        Some(Checksum::Unchecked(v)) => format!("not checked ({v:016x})"),
        None => "not reached".into(),
    }
}

pub fn text(r: &Report, verified: bool) -> String {
    let mut s = String::new();
    s.push_str(&format!("format: {} (RDB version {}), {} bytes\n", r.magic, r.version, r.size));
    s.push_str(&format!("checksum: {}\n", checksum_text(r.checksum)));
    if !r.aux.is_empty() {
        let aux: Vec<String> = r.aux.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s.push_str(&format!("aux: {}\n", aux.join(" ")));
    }
    s.push_str(&format!("keys: {}", r.keys()));
    if verified {
        s.push_str(&format!(", elements: {}", r.elements));
    }
    s.push('\n');
    for (db, d) in &r.dbs {
        let types: Vec<String> = d.types.iter().map(|(t, n)| format!("{t} {n}")).collect();
        let encs: Vec<String> = d.encodings.iter().map(|(t, n)| format!("{t} {n}")).collect();
        s.push_str(&format!(
            "db {db}: {} keys ({}); encodings: {}; {} with expiry, {} already expired",
            d.keys,
            types.join(", "),
            encs.join(", "),
            d.with_expiry,
            d.already_expired
        ));
        if let Some((a, b)) = d.resize_hint {
            s.push_str(&format!("; resize hint {a}/{b}"));
        }
        s.push('\n');
    }
    if r.functions > 0 {
        s.push_str(&format!("functions: {}\n", r.functions));
    }
    if !r.module_aux.is_empty() {
        s.push_str(&format!("module aux: {}\n", r.module_aux.join(", ")));
    }
    if r.with_idle > 0 || r.with_freq > 0 {
        s.push_str(&format!("keys with LRU idle: {}, with LFU freq: {}\n", r.with_idle, r.with_freq));
    }
    if r.trailing_bytes > 0 {
        s.push_str(&format!("trailing bytes after the checksum: {}\n", r.trailing_bytes));
    }
    for w in &r.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    if r.warnings_total > r.warnings.len() as u64 {
        s.push_str(&format!("warning: ... {} more\n", r.warnings_total - r.warnings.len() as u64));
    }
    s
}

pub fn json(r: &Report, file: &str, error: Option<&RdbError>) -> Value {
    let dbs: serde_json::Map<String, Value> = r
        .dbs
        .iter()
        .map(|(db, d)| {
            (
                db.to_string(),
                json!({
                    "keys": d.keys,
                    "types": d.types,
                    "encodings": d.encodings,
                    "with_expiry": d.with_expiry,
                    "already_expired": d.already_expired,
                    "resize_hint": d.resize_hint.map(|(a, b)| json!([a, b])),
                }),
            )
        })
        .collect();
    let checksum = match r.checksum {
        Some(Checksum::Valid(v)) => json!({"status": "ok", "value": format!("{v:016x}")}),
        Some(Checksum::Disabled) => json!({"status": "disabled"}),
        Some(Checksum::Absent) => json!({"status": "absent"}),
        Some(Checksum::Unchecked(v)) => json!({"status": "unchecked", "value": format!("{v:016x}")}),
        None => Value::Null,
    };
    json!({
        "file": file,
        "ok": error.is_none(),
        "error": error.map(|e| json!({
            "offset": e.offset,
            "db": e.db,
            "key": e.key.as_ref().map(|k| ferrokv::format::rdb::escape_key(k)),
            "type": e.vtype,
            "message": e.what,
            "kind": error_kind(e.kind),
            "text": e.to_string(),
        })),
        "magic": r.magic,
        "version": r.version,
        "size": r.size,
        "checksum": checksum,
        "aux": r.aux.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "keys": r.keys(),
        "elements": r.elements,
        "dbs": dbs,
        "functions": r.functions,
        "module_aux": r.module_aux,
        "keys_with_idle": r.with_idle,
        "keys_with_freq": r.with_freq,
        "trailing_bytes": r.trailing_bytes,
        "warnings": r.warnings,
        "warnings_total": r.warnings_total,
    })
}

/// An error's kind as the JSON report names it.
fn error_kind(k: ferrokv::format::ErrorKind) -> &'static str {
    use ferrokv::format::ErrorKind;
    match k {
        ErrorKind::Truncated => "truncated",
        ErrorKind::Checksum => "checksum",
        ErrorKind::Unsupported => "unsupported",
        _ => "malformed",
    }
}
