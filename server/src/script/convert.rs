//! Conversions between command replies and Lua values, as Redis 7.0's scripting does
//! them: a reply reaches the script as its RESP2 or RESP3 form (`redis.setresp`) would
//! be parsed, and the script's return value becomes the reply to the caller.

use ferrokv::Reply;
use mlua::{Lua, Table, Value};

/// Nesting beyond which a returned table is cut short with an error, where Redis runs
/// out of Lua stack (`reached lua stack limit`).
const MAX_REPLY_DEPTH: usize = 7995;

/// The text of the error table Redis builds from an error reply (`-CODE msg`): the code
/// kept, or `ERR` when the text has no space; CR/LF trimmed from the message's ends.
pub fn error_table_text(reply_text: &str) -> String {
    let (code, msg) = match reply_text.find(' ') {
        Some(sp) => (&reply_text[..sp], &reply_text[sp + 1..]),
        None => ("ERR", reply_text),
    };
    let msg = msg.trim_matches(|ch| ch == '\r' || ch == '\n');
    format!("{code} {msg}")
}

/// The field of an error table whose error INFO errorstats already counted.
pub const STATS_COUNTED: &str = "ignore_error_stats_update";

/// Whether `v` is an error table whose error was already counted.
pub fn stats_counted(v: &Value) -> bool {
    matches!(v, Value::Table(t) if matches!(t.raw_get::<Value>(STATS_COUNTED), Ok(Value::Boolean(true))))
}

/// A table `{err = text}`.
pub fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", text)?;
    Ok(t)
}

fn single_field(lua: &Lua, field: &str, v: impl mlua::IntoLua) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, v)?;
    Ok(Value::Table(t))
}

/// A command's reply as the script sees it; `resp3` is the script's protocol.
pub fn reply_to_lua(lua: &Lua, r: &Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Simple(s) => single_field(lua, "ok", lua.create_string(s.as_bytes())?)?,
        Reply::Error(e) => {
            let t = error_table(lua, &error_table_text(e))?;
            t.raw_set(STATS_COUNTED, true)?;
            Value::Table(t)
        }
        Reply::Int(i) => Value::Number(*i as f64),
        Reply::Bulk(b) | Reply::Verbatim(b) if !resp3 => Value::String(lua.create_string(b)?),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Verbatim(b) => {
            let inner = lua.create_table()?;
            inner.raw_set("string", lua.create_string(b)?)?;
            inner.raw_set("format", "txt")?;
            single_field(lua, "verbatim_string", inner)?
        }
        Reply::BigNumber(b) if !resp3 => Value::String(lua.create_string(b)?),
        Reply::BigNumber(b) => single_field(lua, "big_number", lua.create_string(b)?)?,
        Reply::Nil | Reply::NilArray => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Array(items) => array(lua, items.iter(), resp3)?,
        Reply::BulkArray(a) => {
            let t = lua.create_table()?;
            for (i, b) in a.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(b)?)?;
            }
            Value::Table(t)
        }
        Reply::Set(items) if !resp3 => array(lua, items.iter(), resp3)?,
        Reply::Set(items) => {
            let set = lua.create_table()?;
            for it in items {
                let k = reply_to_lua(lua, it, resp3)?;
                if !k.is_nil() {
                    set.raw_set(k, true)?;
                }
            }
            single_field(lua, "set", set)?
        }
        Reply::Map(pairs) if !resp3 => array(lua, pairs.iter().flat_map(|(k, v)| [k, v]), resp3)?,
        Reply::Map(pairs) => {
            let map = lua.create_table()?;
            for (k, v) in pairs {
                let k = reply_to_lua(lua, k, resp3)?;
                if !k.is_nil() {
                    map.raw_set(k, reply_to_lua(lua, v, resp3)?)?;
                }
            }
            single_field(lua, "map", map)?
        }
        Reply::Pairs(pairs) if !resp3 => array(lua, pairs.iter().flat_map(|(k, v)| [k, v]), resp3)?,
        // RESP3: a map; RESP2: an array of [key, value] arrays (XREAD), as Pairs in RESP3.
        Reply::KeyedArrays(pairs) if resp3 => reply_to_lua(lua, &Reply::Map(pairs.clone()), resp3)?,
        Reply::Pairs(pairs) | Reply::KeyedArrays(pairs) => {
            let t = lua.create_table_with_capacity(pairs.len(), 0)?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                let pair = lua.create_table_with_capacity(2, 0)?;
                pair.raw_set(1, reply_to_lua(lua, k, resp3)?)?;
                pair.raw_set(2, reply_to_lua(lua, v, resp3)?)?;
                t.raw_set(i + 1, pair)?;
            }
            Value::Table(t)
        }
        Reply::Double(d) if !resp3 => Value::String(lua.create_string(crate::version::doubles().reply(*d))?),
        Reply::Double(d) => single_field(lua, "double", *d)?,
        Reply::HumanDouble(t) if !resp3 => Value::String(lua.create_string(t)?),
        // As Redis's Lua parser reads a RESP3 double: strtod of the text.
        Reply::HumanDouble(t) => single_field(lua, "double", t.parse::<f64>().unwrap_or(0.0))?,
        Reply::Bool(b) if !resp3 => Value::Number(if *b { 1.0 } else { 0.0 }),
        Reply::Bool(b) => Value::Boolean(*b),
    })
}

fn array<'a>(lua: &Lua, items: impl Iterator<Item = &'a Reply>, resp3: bool) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    for (i, it) in items.enumerate() {
        // A RESP3 null inside an array leaves a hole, as lua_settable with nil does.
        let v = reply_to_lua(lua, it, resp3)?;
        if !v.is_nil() {
            t.raw_set(i + 1, v)?;
        }
    }
    Ok(Value::Table(t))
}

/// A Lua number as a reply integer (C's cast: truncation toward zero).
fn number_to_int(n: f64) -> i64 {
    // Out of range (and NaN) gives x86's "integer indefinite" value, as Redis shows.
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

fn as_text(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        // lua_isstring is true for numbers; tostring gives %.14g.
        Value::Integer(_) | Value::Number(_) => as_number(v).map(|n| lua_number_text(n).into_bytes()),
        _ => None,
    }
}

/// A number as Lua 5.1's tostring prints it (`%.14g`).
pub fn lua_number_text(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    ferrokv::command::fmt_g(n, 14)
}

fn crlf_to_spaces(b: &[u8]) -> Vec<u8> {
    b.iter().map(|&ch| if ch == b'\r' || ch == b'\n' { b' ' } else { ch }).collect()
}

/// The script's return value as the reply to its caller; `resp3` is the script's
/// protocol (it decides what booleans become).
pub fn lua_to_reply(v: &Value, resp3: bool) -> Reply {
    to_reply(v, resp3, 0)
}

fn to_reply(v: &Value, resp3: bool, depth: usize) -> Reply {
    match v {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(b) => match (resp3, b) {
            (false, true) => Reply::Int(1),
            (false, false) => Reply::Nil,
            (true, b) => Reply::Bool(*b),
        },
        Value::Integer(_) | Value::Number(_) => Reply::Int(number_to_int(as_number(v).unwrap_or(0.0))),
        Value::Table(t) => table_to_reply(t, resp3, depth),
        _ => Reply::Nil,
    }
}

fn raw(t: &Table, key: &str) -> Value {
    t.raw_get::<Value>(key).unwrap_or(Value::Nil)
}

fn table_to_reply(t: &Table, resp3: bool, depth: usize) -> Reply {
    if depth >= MAX_REPLY_DEPTH {
        return Reply::err("ERR reached lua stack limit");
    }
    if let Value::String(e) = raw(t, "err") {
        return Reply::Error(String::from_utf8_lossy(&e.as_bytes()).into_owned().into());
    }
    if let Value::String(ok) = raw(t, "ok") {
        return Reply::Simple(String::from_utf8_lossy(&ok.as_bytes()).into_owned().into());
    }
    if let Some(d) = as_number(&raw(t, "double")) {
        return Reply::Double(d);
    }
    if let Value::String(b) = raw(t, "big_number") {
        return Reply::BigNumber(crlf_to_spaces(&b.as_bytes()));
    }
    if let Value::Table(vt) = raw(t, "verbatim_string") {
        if let (Value::String(_), Value::String(s)) = (raw(&vt, "format"), raw(&vt, "string")) {
            return Reply::Verbatim(s.as_bytes().to_vec());
        }
    }
    if let Value::Table(m) = raw(t, "map") {
        let mut pairs = Vec::new();
        let _ = m.for_each(|k: Value, v: Value| {
            pairs.push((to_reply(&k, resp3, depth + 1), to_reply(&v, resp3, depth + 1)));
            Ok(())
        });
        return Reply::Map(pairs);
    }
    if let Value::Table(s) = raw(t, "set") {
        let mut items = Vec::new();
        let _ = s.for_each(|k: Value, _: Value| {
            items.push(to_reply(&k, resp3, depth + 1));
            Ok(())
        });
        return Reply::Set(items);
    }
    let mut items = Vec::new();
    for i in 1.. {
        let v: Value = match t.raw_get(i) {
            Ok(v) => v,
            // Out of references to Lua values: a cycle, nested deeper than we can hold.
            Err(_) => {
                items.push(Reply::err("ERR reached lua stack limit"));
                break;
            }
        };
        if v.is_nil() {
            break;
        }
        items.push(to_reply(&v, resp3, depth + 1));
    }
    Reply::Array(items)
}

/// The text of an error value a failed script left (its `err`, or the value itself).
pub fn error_parts(v: &Value) -> (Option<String>, Option<String>, Option<String>) {
    match v {
        Value::Table(_) => (error_field(v, "err"), error_field(v, "source"), error_field(v, "line")),
        other => (as_text(other).map(|b| format!("ERR {}", String::from_utf8_lossy(&b))), None, None),
    }
}

/// One field of an error table, as text.
pub fn error_field(v: &Value, key: &str) -> Option<String> {
    match v {
        Value::Table(t) => as_text(&raw(t, key)).map(|b| String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}

/// An argument of redis.call: a string, or a number printed with `%.17g`.
pub fn call_arg(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(_) | Value::Number(_) => {
            let n = as_number(v)?;
            Some(if n.is_finite() { ferrokv::command::fmt_g(n, 17) } else { lua_number_text(n) }.into_bytes())
        }
        _ => None,
    }
}
