//! json: the redis-rdb-tools layout, an array with one object per non-empty database
//! mapping key -> value, plus one trailing `{"expires": {"<db>": {"<key>": ms}}}` element
//! when any key has a TTL. The TTL map is held in memory until the end; use jsonl for
//! unbounded streaming.

use std::collections::BTreeMap;

use ferrokv::format::rdb::{escape_key, KeyRecord, LogicalType};
use ferrokv::format::Elem;

use super::{ctx, Filter, Writer};
use crate::jsonw;
use crate::out::{Out, ToolError};

pub struct Json {
    db: Option<u64>,
    first_key: bool,
    expires: Vec<(u64, Vec<u8>, i64)>,
}

impl Json {
    /// A writer continuing after a key in `prev_db` (whose database object is open).
    pub fn after(prev_db: Option<u64>) -> Self {
        Json { db: prev_db, first_key: false, expires: Vec::new() }
    }
}

/// Object member names must be strings: non-UTF-8 keys are written escaped (\xNN).
fn name(out: &mut Vec<u8>, b: &[u8]) {
    match std::str::from_utf8(b) {
        Ok(s) => jsonw::string(out, s),
        Err(_) => jsonw::string(out, &escape_key(b)),
    }
}

fn number(out: &mut Vec<u8>, f: f64) {
    if f.is_finite() {
        ferrokv::format::rdb::score_text_into(out, f);
    } else {
        jsonw::score(out, f);
    }
}

impl Writer for Json {
    fn key(&mut self, out: &mut Out<'_>, k: &KeyRecord<'_>, f: &Filter) -> Result<(), ToolError> {
        let e = ctx(k);
        if self.db != Some(k.db) {
            if self.db.is_some() {
                out.buf.extend_from_slice(b"},\n");
            }
            out.buf.push(b'{');
            self.db = Some(k.db);
            self.first_key = true;
        }
        if !self.first_key {
            out.buf.push(b',');
        }
        self.first_key = false;
        let key = k.key.to_bytes();
        name(&mut out.buf, &key);
        out.buf.push(b':');
        if let Some(ms) = k.expire_ms {
            self.expires.push((k.db, key.into_owned(), ms));
        }
        match k.value.logical() {
            LogicalType::String => {
                let v = k.value.string().and_then(|s| s.to_elem()).map_err(&e)?;
                jsonw::elem(&mut out.buf, &v);
            }
            LogicalType::List | LogicalType::Set => {
                let iter: Box<dyn Iterator<Item = Result<Elem<'_>, _>>> = if k.value.logical() == LogicalType::List {
                    Box::new(k.value.list().map_err(&e)?)
                } else {
                    Box::new(k.value.set().map_err(&e)?)
                };
                out.buf.push(b'[');
                for (i, item) in iter.enumerate() {
                    if i > 0 {
                        out.buf.push(b',');
                    }
                    jsonw::elem(&mut out.buf, &item.map_err(&e)?);
                    out.check()?;
                }
                out.buf.push(b']');
            }
            LogicalType::Hash => {
                out.buf.push(b'{');
                let mut first = true;
                for item in k.value.hash().map_err(&e)? {
                    let h = item.map_err(&e)?;
                    if !f.wants_field(h.expire_ms) {
                        continue;
                    }
                    if !first {
                        out.buf.push(b',');
                    }
                    first = false;
                    name(&mut out.buf, &h.field.to_bytes());
                    out.buf.push(b':');
                    jsonw::elem(&mut out.buf, &h.value);
                    out.check()?;
                }
                out.buf.push(b'}');
            }
            LogicalType::Zset => {
                out.buf.push(b'{');
                for (i, item) in k.value.zset().map_err(&e)?.enumerate() {
                    let (m, s) = item.map_err(&e)?;
                    if i > 0 {
                        out.buf.push(b',');
                    }
                    name(&mut out.buf, &m.to_bytes());
                    out.buf.push(b':');
                    number(&mut out.buf, s);
                    out.check()?;
                }
                out.buf.push(b'}');
            }
            LogicalType::Stream => {
                out.buf.push(b'{');
                let s = k.value.stream().map_err(&e)?;
                for (i, entry) in s.entries().enumerate() {
                    let entry = entry.map_err(&e)?;
                    if i > 0 {
                        out.buf.push(b',');
                    }
                    jsonw::string(&mut out.buf, &entry.id.to_string());
                    out.buf.extend_from_slice(b":{");
                    for (j, (fld, v)) in entry.fields.iter().enumerate() {
                        if j > 0 {
                            out.buf.push(b',');
                        }
                        name(&mut out.buf, &fld.to_bytes());
                        out.buf.push(b':');
                        jsonw::elem(&mut out.buf, v);
                    }
                    out.buf.push(b'}');
                    out.check()?;
                }
                out.buf.push(b'}');
            }
            LogicalType::Module => {
                let m = k.value.module().map_err(&e)?;
                out.buf.extend_from_slice(b"{\"module\":");
                jsonw::string(&mut out.buf, &m.name);
                out.buf.extend_from_slice(b",\"payload\":\"");
                jsonw::hex(&mut out.buf, m.payload.bytes());
                out.buf.extend_from_slice(b"\"}");
            }
        }
        Ok(())
    }

    fn take_expires(&mut self) -> Vec<(u64, Vec<u8>, i64)> {
        std::mem::take(&mut self.expires)
    }
}

/// Close the last database object, add the TTL element, close the array.
pub fn footer(out: &mut Vec<u8>, any_key: bool, expires: &BTreeMap<u64, Vec<(Vec<u8>, i64)>>) {
    if any_key {
        out.push(b'}');
    }
    if !expires.is_empty() {
        if any_key {
            out.extend_from_slice(b",\n");
        }
        out.extend_from_slice(b"{\"expires\":{");
        for (i, (db, keys)) in expires.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            jsonw::string(out, &db.to_string());
            out.extend_from_slice(b":{");
            for (j, (k, ms)) in keys.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                name(out, k);
                out.push(b':');
                jsonw::int(out, *ms);
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"}}");
    }
    out.extend_from_slice(b"]\n");
}
