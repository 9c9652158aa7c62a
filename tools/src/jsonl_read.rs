//! Read back the jsonl that `rdbtool dump` writes (docs/json-schema.md) as logical values.

use std::borrow::Cow;

use ferrokv::format::rdb::{Consumer, Group, Idmp, IdmpProducer, PendingEntry, RdbError, StreamId, StreamMeta};
use ferrokv::format::Elem;
use ferrokv::logical::{Field, Logical, ModuleBlob, StreamValue};
use serde_json::Value;

use crate::out::ToolError;

pub enum JsonlRecord {
    Key { db: u64, key: Vec<u8>, expire_ms: Option<i64>, idle: Option<u64>, freq: Option<u8>, value: Logical },
    Function(Vec<u8>),
    ModuleAux(Vec<u8>),
}

/// Non-empty lines with their 1-based numbers.
pub fn lines(text: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    text.split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
}

fn err(line: usize, what: impl Into<String>) -> ToolError {
    ToolError::Data(RdbError::at(0, format!("jsonl line {line}: {}", what.into())))
}

fn hex(s: &str, line: usize) -> Result<Vec<u8>, ToolError> {
    if !s.len().is_multiple_of(2) {
        return Err(err(line, "odd-length hex"));
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| err(line, format!("bad hex {s:?}"))))
        .collect()
}

fn bytes(v: &Value, line: usize) -> Result<Vec<u8>, ToolError> {
    match v {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Object(o) => match o.get("hex").and_then(Value::as_str) {
            Some(h) => hex(h, line),
            None => Err(err(line, "bytes object without \"hex\"")),
        },
        other => Err(err(line, format!("expected bytes, found {other}"))),
    }
}

fn arr<'v>(v: &'v Value, what: &str, line: usize) -> Result<&'v Vec<Value>, ToolError> {
    v.as_array().ok_or_else(|| err(line, format!("{what} is not an array")))
}

fn u64_of(v: &Value, what: &str, line: usize) -> Result<u64, ToolError> {
    v.as_u64().ok_or_else(|| err(line, format!("{what} is not an unsigned integer")))
}

fn i64_of(v: &Value, what: &str, line: usize) -> Result<i64, ToolError> {
    v.as_i64().ok_or_else(|| err(line, format!("{what} is not an integer")))
}

fn id(v: &Value, line: usize) -> Result<StreamId, ToolError> {
    let s = v.as_str().ok_or_else(|| err(line, "stream ID is not a string"))?;
    let (ms, seq) = s.split_once('-').ok_or_else(|| err(line, format!("bad stream ID {s:?}")))?;
    Ok(StreamId {
        ms: ms.parse().map_err(|_| err(line, format!("bad stream ID {s:?}")))?,
        seq: seq.parse().map_err(|_| err(line, format!("bad stream ID {s:?}")))?,
    })
}

fn opt_id(v: &Value, line: usize) -> Result<Option<StreamId>, ToolError> {
    if v.is_null() {
        Ok(None)
    } else {
        id(v, line).map(Some)
    }
}

fn elem(v: &Value, line: usize) -> Result<Elem<'static>, ToolError> {
    Ok(Elem::Bytes(Cow::Owned(bytes(v, line)?)))
}

fn score(v: &Value, line: usize) -> Result<f64, ToolError> {
    let s = v.as_str().ok_or_else(|| err(line, "score is not a string"))?;
    ferrokv::format::rdb::parse_double(s.as_bytes())
        .filter(|f| !f.is_nan())
        .ok_or_else(|| err(line, format!("bad score {s:?}")))
}

fn stream(v: &Value, meta: &Value, line: usize) -> Result<StreamValue, ToolError> {
    let mut entries = Vec::new();
    for e in arr(v, "stream entries", line)? {
        let fields = arr(&e[1], "entry fields", line)?;
        if !fields.len().is_multiple_of(2) {
            return Err(err(line, "odd number of entry fields"));
        }
        let mut fv = Vec::new();
        for c in fields.chunks(2) {
            fv.push((bytes(&c[0], line)?, bytes(&c[1], line)?));
        }
        entries.push((id(&e[0], line)?, fv));
    }
    let mut groups = Vec::new();
    for g in meta["groups"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let mut pending = Vec::new();
        for p in arr(&g["pel"], "pel", line)? {
            pending.push(PendingEntry {
                id: id(&p[0], line)?,
                delivery_time: i64_of(&p[1], "delivery time", line)?,
                delivery_count: u64_of(&p[2], "delivery count", line)?,
            });
        }
        let mut consumers = Vec::new();
        for c in arr(&g["consumers"], "consumers", line)? {
            consumers.push(Consumer {
                name: elem(&c["name"], line)?,
                seen_time: i64_of(&c["seen_time"], "seen time", line)?,
                active_time: c["active_time"].as_i64(),
                pending: arr(&c["pel"], "consumer pel", line)?.iter().map(|x| id(x, line)).collect::<Result<_, _>>()?,
            });
        }
        let nacked = match g.get("nacked") {
            Some(n) => arr(n, "nacked", line)?.iter().map(|x| id(x, line)).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        groups.push(Group {
            name: elem(&g["name"], line)?,
            last_delivered: id(&g["last_delivered_id"], line)?,
            entries_read: g["entries_read"].as_i64(),
            pending,
            consumers,
            nacked,
        });
    }
    let idmp = match meta.get("idmp") {
        Some(i) if !i.is_null() => {
            let mut producers = Vec::new();
            for p in arr(&i["producers"], "producers", line)? {
                let mut pe = Vec::new();
                for e in arr(&p["entries"], "producer entries", line)? {
                    pe.push((elem(&e[0], line)?, id(&e[1], line)?));
                }
                producers.push(IdmpProducer { id: elem(&p["id"], line)?, entries: pe });
            }
            Some(Idmp {
                duration: u64_of(&i["duration"], "duration", line)?,
                max_entries: u64_of(&i["max_entries"], "max_entries", line)?,
                producers,
                iids_added: u64_of(&i["iids_added"], "iids_added", line)?,
                iids_duplicates: u64_of(&i["iids_duplicates"], "iids_duplicates", line)?,
            })
        }
        _ => None,
    };
    let meta = StreamMeta {
        length: u64_of(&meta["length"], "stream length", line)?,
        last_id: id(&meta["last_id"], line)?,
        first_id: opt_id(&meta["first_id"], line)?,
        max_deleted_id: opt_id(&meta["max_deleted_id"], line)?,
        entries_added: meta["entries_added"].as_u64(),
        groups,
        idmp,
    };
    let mut meta = meta;
    ferrokv::logical::canonical_stream_meta(&mut meta, entries.first().map(|e| e.0));
    Ok(StreamValue { entries, meta })
}

pub fn parse(line: &[u8], n: usize) -> Result<JsonlRecord, ToolError> {
    let v: Value = serde_json::from_slice(line).map_err(|e| err(n, format!("not JSON: {e}")))?;
    if let Some(kind) = v.get("record").and_then(Value::as_str) {
        return match kind {
            "function" => Ok(JsonlRecord::Function(bytes(&v["code"], n)?)),
            "module_aux" => Ok(JsonlRecord::ModuleAux(hex(v["raw"].as_str().unwrap_or_default(), n)?)),
            other => Err(err(n, format!("unknown record {other:?}"))),
        };
    }
    let t = v["type"].as_str().ok_or_else(|| err(n, "no type"))?;
    let val = &v["value"];
    let value = match t {
        "string" => Logical::String(bytes(val, n)?),
        "list" => Logical::List(arr(val, "list", n)?.iter().map(|x| bytes(x, n)).collect::<Result<_, _>>()?),
        "set" => {
            let mut m: Vec<Vec<u8>> = arr(val, "set", n)?.iter().map(|x| bytes(x, n)).collect::<Result<_, _>>()?;
            m.sort_unstable();
            m.dedup();
            Logical::Set(m)
        }
        "zset" => {
            let mut m = Vec::new();
            for p in arr(val, "zset", n)? {
                m.push((bytes(&p[0], n)?, score(&p[1], n)?));
            }
            m.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            Logical::Zset(m)
        }
        "hash" => {
            let ttls: std::collections::HashMap<Vec<u8>, i64> = match v.get("field_expire_ms") {
                Some(f) => arr(f, "field_expire_ms", n)?
                    .iter()
                    .map(|p| Ok((bytes(&p[0], n)?, i64_of(&p[1], "field TTL", n)?)))
                    .collect::<Result<_, ToolError>>()?,
                None => Default::default(),
            };
            let mut fields = Vec::new();
            for p in arr(val, "hash", n)? {
                let field = bytes(&p[0], n)?;
                let expire_ms = ttls.get(&field).copied();
                fields.push(Field { field, value: bytes(&p[1], n)?, expire_ms });
            }
            fields.sort_unstable_by(|a, b| a.field.cmp(&b.field));
            Logical::Hash(fields)
        }
        "stream" => Logical::Stream(Box::new(stream(val, &v["stream"], n)?)),
        "module" => Logical::Module(ModuleBlob {
            id: u64_of(&val["id"], "module id", n)?,
            name: val["module"].as_str().unwrap_or_default().to_string(),
            payload: hex(val["payload"].as_str().unwrap_or_default(), n)?,
        }),
        other => return Err(err(n, format!("unknown type {other:?}"))),
    };
    Ok(JsonlRecord::Key {
        db: u64_of(&v["db"], "db", n)?,
        key: bytes(&v["key"], n)?,
        expire_ms: v["expire_ms"].as_i64(),
        idle: v["idle_s"].as_u64(),
        freq: v["freq"].as_u64().and_then(|f| u8::try_from(f).ok()),
        value,
    })
}
