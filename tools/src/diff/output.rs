//! The report as text and as JSON.

use ferrokv::format::rdb::{escape_key, LogicalType};

use super::report::{DiffReport, Difference, EntryFields, FieldValue, Shown, Side, Status};
use crate::jsonw;

pub(super) fn show(b: &[u8]) -> String {
    let cut = &b[..b.len().min(64)];
    let mut s = format!("'{}'", escape_key(cut));
    if b.len() > 64 {
        s.push_str(&format!("... ({} bytes)", b.len()));
    }
    s
}

/// A shown element for a human line.
pub(super) fn show_el(e: &Shown) -> String {
    if e.is_whole() {
        show(&e.head)
    } else {
        format!("'{}'... ({} bytes)", escape_key(&e.head[..e.head.len().min(64)]), e.len)
    }
}

pub(super) fn ttl_text(t: Option<i64>) -> String {
    t.map_or("none".into(), |v| v.to_string())
}

pub(super) fn unit(t: LogicalType) -> &'static str {
    match t {
        LogicalType::String => "bytes",
        LogicalType::List => "elements",
        LogicalType::Set | LogicalType::Zset => "members",
        LogicalType::Hash => "fields",
        LogicalType::Stream => "entries",
        LogicalType::Module => "values",
    }
}

pub(super) fn human_difference(out: &mut String, d: &Difference) {
    use std::fmt::Write as _;
    let opt = |v: &Option<Shown>| v.as_ref().map_or("(none)".to_string(), show_el);
    let _ = match d {
        Difference::Bytes { offset, a, b } => writeln!(out, "    at byte {offset}: {} -> {}", show(a), show(b)),
        Difference::Index { index, a, b } => writeln!(out, "    [{index}]: {} -> {}", opt(a), opt(b)),
        Difference::Member { member, in_a: true } => writeln!(out, "    - {}", show_el(member)),
        Difference::Member { member, in_a: false } => writeln!(out, "    + {}", show_el(member)),
        Difference::Score { member, a, b } => {
            let s = |v: &Option<f64>| v.map_or("(none)".to_string(), jsonw::score_text);
            writeln!(out, "    {}: score {} -> {}", show_el(member), s(a), s(b))
        }
        Difference::Field { field, a, b } => {
            let f = |v: &Option<FieldValue>| match v {
                None => "(none)".to_string(),
                Some(FieldValue { value, expire_ms: None }) => show_el(value),
                Some(FieldValue { value, expire_ms: Some(t) }) => format!("{} (TTL {t})", show_el(value)),
            };
            writeln!(out, "    {}: {} -> {}", show_el(field), f(a), f(b))
        }
        Difference::Entry { id, a, b } => {
            let e = |v: &Option<EntryFields>| match v {
                None => "(none)".to_string(),
                Some(fs) => {
                    let parts: Vec<String> =
                        fs.iter().map(|(f, v)| format!("{}: {}", show_el(f), show_el(v))).collect();
                    format!("{{{}}}", parts.join(", "))
                }
            };
            writeln!(out, "    entry {id}: {} -> {}", e(a), e(b))
        }
        Difference::Meta { what, a, b } => writeln!(out, "    {what}: {a} -> {b}"),
    };
}

/// The human report: one line per shown key (elements indented under it), then a summary.
pub fn human(r: &DiffReport) -> Vec<u8> {
    use std::fmt::Write as _;
    let mut s = String::new();
    for k in &r.keys {
        let name = format!("db {} {}", k.db, show(&k.key));
        let ttl = |side: &Option<Side>| side.as_ref().and_then(|x| x.expire_ms).map(|t| format!(", TTL {t}"));
        let _ = match (k.status, &k.a, &k.b) {
            (Status::OnlyInA, Some(a), _) => {
                writeln!(s, "{name}: only in A ({}{})", a.ltype, ttl(&k.a).unwrap_or_default())
            }
            (Status::OnlyInB, _, Some(b)) => {
                writeln!(s, "{name}: only in B ({}{})", b.ltype, ttl(&k.b).unwrap_or_default())
            }
            (Status::TypeChanged, Some(a), Some(b)) => writeln!(s, "{name}: type {} (A) -> {} (B)", a.ltype, b.ltype),
            (_, Some(a), Some(b)) => {
                let mut line = format!("{name} ({})", a.ltype);
                if let Some(v) = &k.value {
                    let u = unit(a.ltype);
                    let n = v.total;
                    let _ = write!(
                        line,
                        ": value differs: {n} difference{} (A {} {u}, B {} {u})",
                        if n == 1 { "" } else { "s" },
                        v.len_a,
                        v.len_b
                    );
                } else if k.value_changed {
                    line.push_str(": value differs");
                }
                if k.ttl_changed {
                    line.push_str(if k.value_changed { "; " } else { ": " });
                    let _ = write!(line, "TTL {} -> {}", ttl_text(a.expire_ms), ttl_text(b.expire_ms));
                    if let (Some(x), Some(y)) = (a.expire_ms, b.expire_ms) {
                        let _ = write!(line, " ({:+} ms)", i128::from(y) - i128::from(x));
                    }
                }
                writeln!(s, "{line}")
            }
            _ => writeln!(s, "{name}: {}", k.status.name()),
        };
        if let Some(v) = &k.value {
            for d in &v.shown {
                human_difference(&mut s, d);
            }
            if v.total > v.shown.len() as u64 {
                let _ = writeln!(s, "    ... {} more (--max-details)", v.total - v.shown.len() as u64);
            }
        }
    }
    if r.keys_not_shown > 0 {
        let _ = writeln!(s, "... {} more differing keys not shown (--max-keys)", r.keys_not_shown);
    }
    for f in &r.functions_only_in_a {
        let _ = writeln!(s, "function library '{f}': only in A");
    }
    for f in &r.functions_only_in_b {
        let _ = writeln!(s, "function library '{f}': only in B");
    }
    let c = &r.counts;
    if r.same() {
        let _ = writeln!(s, "same: {} keys (A {}, B {})", c.keys_same, r.a_name, r.b_name);
    } else {
        let _ = writeln!(
            s,
            "different: {} key{} differ ({} only in A, {} only in B, {} type changed, {} value changed, {} TTL changed); {} same; A {} keys, B {} keys",
            c.keys_differ,
            if c.keys_differ == 1 { "" } else { "s" },
            c.only_in_a,
            c.only_in_b,
            c.type_changed,
            c.value_changed,
            c.ttl_changed,
            c.keys_same,
            c.keys_a,
            c.keys_b
        );
    }
    s.into_bytes()
}

pub(super) fn j_opt_i64(o: &mut Vec<u8>, v: Option<i64>) {
    match v {
        Some(t) => jsonw::int(o, t),
        None => o.extend_from_slice(b"null"),
    }
}

/// A shown element: bytes when whole, else `{"truncated": bytes, "len": n}`.
pub(super) fn j_shown(o: &mut Vec<u8>, e: &Shown) {
    if e.is_whole() {
        jsonw::bytes(o, &e.head);
    } else {
        o.extend_from_slice(b"{\"truncated\":");
        jsonw::bytes(o, &e.head);
        o.extend_from_slice(b",\"len\":");
        jsonw::uint(o, e.len);
        o.push(b'}');
    }
}

pub(super) fn j_opt_shown(o: &mut Vec<u8>, v: Option<&Shown>) {
    match v {
        Some(e) => j_shown(o, e),
        None => o.extend_from_slice(b"null"),
    }
}

pub(super) fn j_opt_bytes(o: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        Some(b) => jsonw::bytes(o, b),
        None => o.extend_from_slice(b"null"),
    }
}

pub(super) fn j_key(o: &mut Vec<u8>, name: &str) {
    jsonw::string(o, name);
    o.push(b':');
}

pub(super) fn j_difference(o: &mut Vec<u8>, d: &Difference) {
    o.push(b'{');
    match d {
        Difference::Bytes { offset, a, b } => {
            j_key(o, "offset");
            jsonw::uint(o, *offset);
            o.extend_from_slice(b",\"a\":");
            jsonw::bytes(o, a);
            o.extend_from_slice(b",\"b\":");
            jsonw::bytes(o, b);
        }
        Difference::Index { index, a, b } => {
            j_key(o, "index");
            jsonw::uint(o, *index);
            o.extend_from_slice(b",\"a\":");
            j_opt_shown(o, a.as_ref());
            o.extend_from_slice(b",\"b\":");
            j_opt_shown(o, b.as_ref());
        }
        Difference::Member { member, in_a } => {
            j_key(o, "member");
            j_shown(o, member);
            o.extend_from_slice(if *in_a { b",\"in\":\"a\"" } else { b",\"in\":\"b\"" });
        }
        Difference::Score { member, a, b } => {
            j_key(o, "member");
            j_shown(o, member);
            for (name, v) in [("a", a), ("b", b)] {
                o.push(b',');
                j_key(o, name);
                match v {
                    Some(s) => jsonw::string(o, &jsonw::score_text(*s)),
                    None => o.extend_from_slice(b"null"),
                }
            }
        }
        Difference::Field { field, a, b } => {
            j_key(o, "field");
            j_shown(o, field);
            for (name, v) in [("a", a), ("b", b)] {
                o.push(b',');
                j_key(o, name);
                match v {
                    Some(f) => {
                        o.extend_from_slice(b"{\"value\":");
                        j_shown(o, &f.value);
                        o.extend_from_slice(b",\"expire_ms\":");
                        j_opt_i64(o, f.expire_ms);
                        o.push(b'}');
                    }
                    None => o.extend_from_slice(b"null"),
                }
            }
        }
        Difference::Entry { id, a, b } => {
            j_key(o, "id");
            jsonw::string(o, &id.to_string());
            for (name, v) in [("a", a), ("b", b)] {
                o.push(b',');
                j_key(o, name);
                match v {
                    Some(fs) => {
                        o.push(b'[');
                        for (i, (f, v)) in fs.iter().enumerate() {
                            if i > 0 {
                                o.push(b',');
                            }
                            j_shown(o, f);
                            o.push(b',');
                            j_shown(o, v);
                        }
                        o.push(b']');
                    }
                    None => o.extend_from_slice(b"null"),
                }
            }
        }
        Difference::Meta { what, a, b } => {
            j_key(o, "meta");
            jsonw::string(o, what);
            o.extend_from_slice(b",\"a\":");
            jsonw::string(o, a);
            o.extend_from_slice(b",\"b\":");
            jsonw::string(o, b);
        }
    }
    o.push(b'}');
}

pub(super) fn j_names(o: &mut Vec<u8>, names: &[String]) {
    o.push(b'[');
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        jsonw::string(o, n);
    }
    o.push(b']');
}

/// The JSON report: one document, layout in docs/diff.md.
pub fn json(r: &DiffReport) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend_from_slice(b"{\"a\":");
    jsonw::string(&mut o, &r.a_name);
    o.extend_from_slice(b",\"b\":");
    jsonw::string(&mut o, &r.b_name);
    o.extend_from_slice(if r.same() { b",\"same\":true" } else { b",\"same\":false" });
    o.extend_from_slice(b",\"options\":{\"db\":");
    match r.db {
        Some(d) => jsonw::uint(&mut o, d),
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"key\":");
    j_opt_bytes(&mut o, r.key_pattern.as_deref());
    o.extend_from_slice(if r.ignore_ttl { b",\"ignore_ttl\":true" } else { b",\"ignore_ttl\":false" });
    o.extend_from_slice(b",\"ttl_tolerance_ms\":");
    jsonw::uint(&mut o, r.ttl_tolerance_ms);
    o.extend_from_slice(b",\"max_details\":");
    jsonw::uint(&mut o, r.max_details as u64);
    o.extend_from_slice(b",\"max_keys\":");
    jsonw::uint(&mut o, r.max_keys as u64);
    o.extend_from_slice(b"},\"counts\":{");
    let c = &r.counts;
    let counts = [
        ("keys_a", c.keys_a),
        ("keys_b", c.keys_b),
        ("keys_same", c.keys_same),
        ("keys_differ", c.keys_differ),
        ("only_in_a", c.only_in_a),
        ("only_in_b", c.only_in_b),
        ("type_changed", c.type_changed),
        ("value_changed", c.value_changed),
        ("ttl_changed", c.ttl_changed),
    ];
    for (i, (name, v)) in counts.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        j_key(&mut o, name);
        jsonw::uint(&mut o, *v);
    }
    o.extend_from_slice(b"},\"functions\":{\"only_in_a\":");
    j_names(&mut o, &r.functions_only_in_a);
    o.extend_from_slice(b",\"only_in_b\":");
    j_names(&mut o, &r.functions_only_in_b);
    o.extend_from_slice(b"},\"keys\":[");
    for (i, k) in r.keys.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        o.extend_from_slice(b"{\"db\":");
        jsonw::uint(&mut o, k.db);
        o.extend_from_slice(b",\"key\":");
        jsonw::bytes(&mut o, &k.key);
        o.extend_from_slice(b",\"status\":");
        jsonw::string(&mut o, k.status.name());
        for (suffix, side) in [("a", &k.a), ("b", &k.b)] {
            o.push(b',');
            j_key(&mut o, &format!("type_{suffix}"));
            match side {
                Some(s) => jsonw::string(&mut o, s.ltype.name()),
                None => o.extend_from_slice(b"null"),
            }
            o.push(b',');
            j_key(&mut o, &format!("encoding_{suffix}"));
            match side {
                Some(s) => jsonw::string(&mut o, s.encoding),
                None => o.extend_from_slice(b"null"),
            }
            o.push(b',');
            j_key(&mut o, &format!("expire_ms_{suffix}"));
            j_opt_i64(&mut o, side.as_ref().and_then(|s| s.expire_ms));
            o.push(b',');
            j_key(&mut o, &format!("offset_{suffix}"));
            match side {
                Some(s) => jsonw::uint(&mut o, s.offset),
                None => o.extend_from_slice(b"null"),
            }
        }
        o.extend_from_slice(if k.value_changed { b",\"value_changed\":true" } else { b",\"value_changed\":false" });
        o.extend_from_slice(if k.ttl_changed { b",\"ttl_changed\":true" } else { b",\"ttl_changed\":false" });
        if let Some(v) = &k.value {
            o.extend_from_slice(b",\"value\":{\"len_a\":");
            jsonw::uint(&mut o, v.len_a);
            o.extend_from_slice(b",\"len_b\":");
            jsonw::uint(&mut o, v.len_b);
            o.extend_from_slice(b",\"differences_total\":");
            jsonw::uint(&mut o, v.total);
            o.extend_from_slice(b",\"differences\":[");
            for (i, d) in v.shown.iter().enumerate() {
                if i > 0 {
                    o.push(b',');
                }
                j_difference(&mut o, d);
            }
            o.extend_from_slice(b"]}");
        }
        o.push(b'}');
    }
    o.extend_from_slice(b"],\"keys_not_shown\":");
    jsonw::uint(&mut o, r.keys_not_shown);
    o.push(b'}');
    o
}
