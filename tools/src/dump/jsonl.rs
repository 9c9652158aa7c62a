//! jsonl: one JSON object per key, lossless (docs/json-schema.md).

use ferrokv::format::rdb::{KeyRecord, LogicalType, PackedItem, Record, StreamId, Value};
use ferrokv::format::Elem;

use super::{ctx, Filter, Writer};
use crate::jsonw;
use crate::out::{Out, ToolError};

pub struct Jsonl;

fn id(out: &mut Vec<u8>, id: StreamId) {
    out.push(b'"');
    out.extend_from_slice(id.to_string().as_bytes());
    out.push(b'"');
}

fn opt_id(out: &mut Vec<u8>, v: Option<StreamId>) {
    match v {
        Some(i) => id(out, i),
        None => out.extend_from_slice(b"null"),
    }
}

/// The storage encoding reported for a key: for strings, how the file holds the bytes.
pub fn encoding(k: &KeyRecord<'_>) -> &'static str {
    if k.value.logical() == LogicalType::String {
        match k.value.string() {
            Ok(s) => s.storage(),
            Err(_) => "string",
        }
    } else {
        k.value.vtype.encoding()
    }
}

impl Writer for Jsonl {
    fn key(&mut self, out: &mut Out<'_>, k: &KeyRecord<'_>, f: &Filter) -> Result<(), ToolError> {
        let e = ctx(k);
        let b = &mut out.buf;
        b.extend_from_slice(b"{\"db\":");
        jsonw::uint(b, k.db);
        b.extend_from_slice(b",\"key\":");
        jsonw::bytes(b, &k.key.to_bytes());
        b.extend_from_slice(b",\"type\":\"");
        b.extend_from_slice(k.value.logical().name().as_bytes());
        b.extend_from_slice(b"\",\"encoding\":\"");
        b.extend_from_slice(encoding(k).as_bytes());
        b.extend_from_slice(b"\",\"expire_ms\":");
        match k.expire_ms {
            Some(ms) => jsonw::int(b, ms),
            None => b.extend_from_slice(b"null"),
        }
        if let Some(idle) = k.idle {
            b.extend_from_slice(b",\"idle_s\":");
            jsonw::uint(b, idle);
        }
        if let Some(freq) = k.freq {
            b.extend_from_slice(b",\"freq\":");
            jsonw::uint(b, u64::from(freq));
        }
        if let Some(meta) = &k.meta {
            b.extend_from_slice(b",\"key_meta\":[");
            for (i, m) in meta.iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                b.extend_from_slice(b"{\"class\":");
                jsonw::string(b, &m.name);
                b.extend_from_slice(b",\"spec\":");
                jsonw::uint(b, u64::from(m.spec));
                b.extend_from_slice(b",\"payload\":\"");
                jsonw::hex(b, m.payload.bytes());
                b.extend_from_slice(b"\"}");
            }
            b.push(b']');
        }
        b.extend_from_slice(b",\"value\":");
        if super::one_pass(&k.value) && packed_value(&mut out.buf, &k.value) {
            out.buf.extend_from_slice(b"}\n");
            return Ok(());
        }
        match k.value.logical() {
            LogicalType::String => {
                let s = k.value.string().map_err(&e)?;
                jsonw::elem(&mut out.buf, &s.to_elem().map_err(&e)?);
            }
            LogicalType::List | LogicalType::Set => {
                out.buf.push(b'[');
                let mut first = true;
                let iter: Box<dyn Iterator<Item = Result<Elem<'_>, _>>> = if k.value.logical() == LogicalType::List {
                    Box::new(k.value.list().map_err(&e)?)
                } else {
                    Box::new(k.value.set().map_err(&e)?)
                };
                for item in iter {
                    let item = item.map_err(&e)?;
                    if !first {
                        out.buf.push(b',');
                    }
                    first = false;
                    jsonw::elem(&mut out.buf, &item);
                    out.check()?;
                }
                out.buf.push(b']');
            }
            LogicalType::Zset => {
                out.buf.push(b'[');
                let mut first = true;
                for item in k.value.zset().map_err(&e)? {
                    let (m, s) = item.map_err(&e)?;
                    if !first {
                        out.buf.push(b',');
                    }
                    first = false;
                    out.buf.push(b'[');
                    jsonw::elem(&mut out.buf, &m);
                    out.buf.push(b',');
                    jsonw::score(&mut out.buf, s);
                    out.buf.push(b']');
                    out.check()?;
                }
                out.buf.push(b']');
            }
            LogicalType::Hash => {
                out.buf.push(b'[');
                let mut first = true;
                let mut ttls: Vec<(Elem<'_>, i64)> = Vec::new();
                for item in k.value.hash().map_err(&e)? {
                    let h = item.map_err(&e)?;
                    if !f.wants_field(h.expire_ms) {
                        continue;
                    }
                    if !first {
                        out.buf.push(b',');
                    }
                    first = false;
                    out.buf.push(b'[');
                    jsonw::elem(&mut out.buf, &h.field);
                    out.buf.push(b',');
                    jsonw::elem(&mut out.buf, &h.value);
                    out.buf.push(b']');
                    if let Some(t) = h.expire_ms {
                        ttls.push((h.field.into_owned(), t));
                    }
                    out.check()?;
                }
                out.buf.push(b']');
                if !ttls.is_empty() {
                    out.buf.extend_from_slice(b",\"field_expire_ms\":[");
                    for (i, (fld, t)) in ttls.iter().enumerate() {
                        if i > 0 {
                            out.buf.push(b',');
                        }
                        out.buf.push(b'[');
                        jsonw::elem(&mut out.buf, fld);
                        out.buf.push(b',');
                        jsonw::int(&mut out.buf, *t);
                        out.buf.push(b']');
                    }
                    out.buf.push(b']');
                }
            }
            LogicalType::Stream => write_stream(out, k)?,
            LogicalType::Module => {
                let m = k.value.module().map_err(&e)?;
                let b = &mut out.buf;
                b.extend_from_slice(b"{\"module\":");
                jsonw::string(b, &m.name);
                b.extend_from_slice(b",\"encver\":");
                jsonw::uint(b, u64::from(m.encver));
                b.extend_from_slice(b",\"id\":");
                jsonw::uint(b, m.id);
                b.extend_from_slice(b",\"payload\":\"");
                jsonw::hex(b, m.payload.bytes());
                b.extend_from_slice(b"\"}");
            }
        }
        out.buf.extend_from_slice(b"}\n");
        Ok(())
    }

    fn function(&mut self, out: &mut Out<'_>, code: &Elem<'_>) -> Result<(), ToolError> {
        out.buf.extend_from_slice(b"{\"record\":\"function\",\"code\":");
        jsonw::elem(&mut out.buf, code);
        out.buf.extend_from_slice(b"}\n");
        Ok(())
    }

    fn other(&mut self, out: &mut Out<'_>, r: &Record<'_>) -> Result<(), ToolError> {
        if let Record::ModuleAux(m) = r {
            let b = &mut out.buf;
            b.extend_from_slice(b"{\"record\":\"module_aux\",\"module\":");
            jsonw::string(b, &m.name);
            b.extend_from_slice(b",\"encver\":");
            jsonw::uint(b, u64::from(m.encver));
            b.extend_from_slice(b",\"when\":");
            jsonw::uint(b, m.when);
            b.extend_from_slice(b",\"raw\":\"");
            jsonw::hex(b, m.raw.bytes());
            b.extend_from_slice(b"\"}\n");
        }
        Ok(())
    }
}

fn write_stream(out: &mut Out<'_>, k: &KeyRecord<'_>) -> Result<(), ToolError> {
    let e = ctx(k);
    let s = k.value.stream().map_err(&e)?;
    out.buf.push(b'[');
    let mut first = true;
    for entry in s.entries() {
        let entry = entry.map_err(&e)?;
        if !first {
            out.buf.push(b',');
        }
        first = false;
        out.buf.push(b'[');
        id(&mut out.buf, entry.id);
        out.buf.extend_from_slice(b",[");
        for (i, (fld, v)) in entry.fields.iter().enumerate() {
            if i > 0 {
                out.buf.push(b',');
            }
            jsonw::elem(&mut out.buf, fld);
            out.buf.push(b',');
            jsonw::elem(&mut out.buf, v);
        }
        out.buf.extend_from_slice(b"]]");
        out.check()?;
    }
    out.buf.push(b']');
    let m = &s.meta;
    let b = &mut out.buf;
    b.extend_from_slice(b",\"stream\":{\"length\":");
    jsonw::uint(b, m.length);
    b.extend_from_slice(b",\"last_id\":");
    id(b, m.last_id);
    b.extend_from_slice(b",\"first_id\":");
    opt_id(b, m.first_id);
    b.extend_from_slice(b",\"max_deleted_id\":");
    opt_id(b, m.max_deleted_id);
    b.extend_from_slice(b",\"entries_added\":");
    match m.entries_added {
        Some(v) => jsonw::uint(b, v),
        None => b.extend_from_slice(b"null"),
    }
    b.extend_from_slice(b",\"groups\":[");
    for (gi, g) in m.groups.iter().enumerate() {
        if gi > 0 {
            b.push(b',');
        }
        b.extend_from_slice(b"{\"name\":");
        jsonw::elem(b, &g.name);
        b.extend_from_slice(b",\"last_delivered_id\":");
        id(b, g.last_delivered);
        b.extend_from_slice(b",\"entries_read\":");
        match g.entries_read {
            Some(v) => jsonw::int(b, v),
            None => b.extend_from_slice(b"null"),
        }
        b.extend_from_slice(b",\"pel\":[");
        for (i, p) in g.pending.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            b.push(b'[');
            id(b, p.id);
            b.push(b',');
            jsonw::int(b, p.delivery_time);
            b.push(b',');
            jsonw::uint(b, p.delivery_count);
            b.push(b']');
        }
        b.extend_from_slice(b"],\"consumers\":[");
        for (ci, c) in g.consumers.iter().enumerate() {
            if ci > 0 {
                b.push(b',');
            }
            b.extend_from_slice(b"{\"name\":");
            jsonw::elem(b, &c.name);
            b.extend_from_slice(b",\"seen_time\":");
            jsonw::int(b, c.seen_time);
            b.extend_from_slice(b",\"active_time\":");
            match c.active_time {
                Some(v) => jsonw::int(b, v),
                None => b.extend_from_slice(b"null"),
            }
            b.extend_from_slice(b",\"pel\":[");
            for (i, p) in c.pending.iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                id(b, *p);
            }
            b.extend_from_slice(b"]}");
        }
        b.push(b']');
        if !g.nacked.is_empty() {
            b.extend_from_slice(b",\"nacked\":[");
            for (i, p) in g.nacked.iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                id(b, *p);
            }
            b.push(b']');
        }
        b.push(b'}');
    }
    b.push(b']');
    if let Some(idmp) = &m.idmp {
        b.extend_from_slice(b",\"idmp\":{\"duration\":");
        jsonw::uint(b, idmp.duration);
        b.extend_from_slice(b",\"max_entries\":");
        jsonw::uint(b, idmp.max_entries);
        b.extend_from_slice(b",\"iids_added\":");
        jsonw::uint(b, idmp.iids_added);
        b.extend_from_slice(b",\"iids_duplicates\":");
        jsonw::uint(b, idmp.iids_duplicates);
        b.extend_from_slice(b",\"producers\":[");
        for (pi, p) in idmp.producers.iter().enumerate() {
            if pi > 0 {
                b.push(b',');
            }
            b.extend_from_slice(b"{\"id\":");
            jsonw::elem(b, &p.id);
            b.extend_from_slice(b",\"entries\":[");
            for (i, (iid, sid)) in p.entries.iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                b.push(b'[');
                jsonw::elem(b, iid);
                b.push(b',');
                id(b, *sid);
                b.push(b']');
            }
            b.extend_from_slice(b"]}");
        }
        b.extend_from_slice(b"]}");
    }
    b.push(b'}');
    Ok(())
}

/// A value whose elements lie one after another (in listpacks: most small lists, sets,
/// zsets and hashes; hashtable sets and hashes) written as the element walk writes it,
/// straight from the bytes: no iterator, no element copied. False, with nothing written, when the value is stored otherwise or does not
/// read whole; the walk then writes it or says what is wrong.
fn packed_value(buf: &mut Vec<u8>, v: &Value<'_>) -> bool {
    let mark = buf.len();
    buf.push(b'[');
    let mut first = true;
    let read = v.visit_items(|item| {
        if !first {
            buf.push(b',');
        }
        first = false;
        match item {
            PackedItem::One(e) => jsonw::elem(buf, &e),
            PackedItem::Pair(a, b) => {
                buf.push(b'[');
                jsonw::elem(buf, &a);
                buf.push(b',');
                jsonw::elem(buf, &b);
                buf.push(b']');
            }
            PackedItem::Scored(m, s) => {
                let Some(s) = s.value() else { return false };
                buf.push(b'[');
                jsonw::elem(buf, &m);
                buf.push(b',');
                jsonw::score(buf, s);
                buf.push(b']');
            }
        }
        true
    });
    if read.is_none() {
        buf.truncate(mark);
        return false;
    }
    buf.push(b']');
    true
}
