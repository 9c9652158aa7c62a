//! The `cjson` library scripts use (lua-cjson 2.1's behaviour, written here in Rust):
//! encode and decode with its number format (`%.14g`), escapes (`/` too), sparse-array
//! rule, depth limits and error texts.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::convert::lua_number_text;

#[derive(Debug)]
struct Config {
    encode_max_depth: Cell<i64>,
    decode_max_depth: Cell<i64>,
    encode_invalid_numbers: Cell<bool>,
    decode_invalid_numbers: Cell<bool>,
    keep_buffer: Cell<bool>,
    precision: Cell<i64>,
    sparse_convert: Cell<bool>,
    sparse_ratio: Cell<i64>,
    sparse_safe: Cell<i64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encode_max_depth: Cell::new(1000),
            decode_max_depth: Cell::new(1000),
            encode_invalid_numbers: Cell::new(false),
            decode_invalid_numbers: Cell::new(true),
            keep_buffer: Cell::new(true),
            precision: Cell::new(14),
            sparse_convert: Cell::new(false),
            sparse_ratio: Cell::new(2),
            sparse_safe: Cell::new(10),
        }
    }
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn err(msg: String) -> mlua::Error {
    mlua::Error::RuntimeError(msg)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        Value::LightUserData(_) => "lightuserdata",
        _ => "userdata",
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// A number as cjson writes it.
fn number_text(n: f64, precision: i64) -> String {
    if n.is_nan() || n.is_infinite() {
        return lua_number_text(n);
    }
    ferrokv::command::fmt_g(n, precision.clamp(1, 14) as usize)
}

fn escape_into(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

struct Encoder<'a> {
    cfg: &'a Config,
    out: Vec<u8>,
}

impl Encoder<'_> {
    fn value(&mut self, v: &Value, depth: i64) -> mlua::Result<()> {
        match v {
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            Value::Boolean(b) => self.out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Integer(_) | Value::Number(_) => {
                let n = number(v).unwrap_or(0.0);
                if (n.is_nan() || n.is_infinite()) && !self.cfg.encode_invalid_numbers.get() {
                    return Err(err("Cannot serialise number: must not be NaN or Inf".into()));
                }
                self.out.extend_from_slice(number_text(n, self.cfg.precision.get()).as_bytes());
            }
            Value::String(s) => escape_into(&mut self.out, &s.as_bytes()),
            Value::Table(t) => self.table(t, depth + 1)?,
            other => return Err(err(format!("Cannot serialise {}: type not supported", type_name(other)))),
        }
        Ok(())
    }

    /// The array length of `t`, or None when it is an object.
    fn array_len(&self, t: &Table) -> mlua::Result<Option<usize>> {
        let mut max = 0f64;
        let mut items = 0usize;
        let mut object = false;
        t.for_each(|k: Value, _: Value| {
            match number(&k) {
                Some(n) if n >= 1.0 && n.floor() == n => {
                    max = max.max(n);
                    items += 1;
                }
                _ => object = true,
            }
            Ok(())
        })?;
        if object {
            return Ok(None);
        }
        let ratio = self.cfg.sparse_ratio.get();
        if ratio > 0 && max > (items as f64) * ratio as f64 && max > self.cfg.sparse_safe.get() as f64 {
            if !self.cfg.sparse_convert.get() {
                return Err(err("Cannot serialise table: excessively sparse array".into()));
            }
            return Ok(None);
        }
        Ok(Some(max as usize))
    }

    fn table(&mut self, t: &Table, depth: i64) -> mlua::Result<()> {
        if depth > self.cfg.encode_max_depth.get() {
            return Err(err(format!("Cannot serialise, excessive nesting ({depth})")));
        }
        match self.array_len(t)? {
            Some(len) if len > 0 => {
                self.out.push(b'[');
                for i in 1..=len {
                    if i > 1 {
                        self.out.push(b',');
                    }
                    let v: Value = t.raw_get(i)?;
                    self.value(&v, depth)?;
                }
                self.out.push(b']');
            }
            _ => {
                self.out.push(b'{');
                let mut first = true;
                let mut failure = None;
                t.for_each(|k: Value, v: Value| {
                    if failure.is_some() {
                        return Ok(());
                    }
                    if !first {
                        self.out.push(b',');
                    }
                    first = false;
                    match &k {
                        Value::String(s) => escape_into(&mut self.out, &s.as_bytes()),
                        Value::Integer(_) | Value::Number(_) => {
                            let text = number_text(number(&k).unwrap_or(0.0), self.cfg.precision.get());
                            escape_into(&mut self.out, text.as_bytes());
                        }
                        other => {
                            failure = Some(err(format!(
                                "Cannot serialise {}: table key must be a number or string",
                                type_name(other)
                            )));
                            return Ok(());
                        }
                    }
                    self.out.push(b':');
                    if let Err(e) = self.value(&v, depth) {
                        failure = Some(e);
                    }
                    Ok(())
                })?;
                if let Some(e) = failure {
                    return Err(e);
                }
                self.out.push(b'}');
            }
        }
        Ok(())
    }
}

struct Decoder<'a> {
    lua: &'a Lua,
    cfg: &'a Config,
    s: &'a [u8],
    pos: usize,
    depth: i64,
}

impl Decoder<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    /// What the token at the current position is, for error texts.
    fn token_name(&self) -> &'static str {
        match self.s.get(self.pos) {
            None => "T_END",
            Some(b'{') => "T_OBJ_BEGIN",
            Some(b'}') => "T_OBJ_END",
            Some(b'[') => "T_ARR_BEGIN",
            Some(b']') => "T_ARR_END",
            Some(b',') => "T_COMMA",
            Some(b':') => "T_COLON",
            Some(b'"') => "T_STRING",
            Some(b'-' | b'0'..=b'9') => "T_NUMBER",
            Some(b't' | b'f') => "T_BOOLEAN",
            Some(b'n') => "T_NULL",
            _ => "invalid token",
        }
    }

    fn fail(&self, expected: &str) -> mlua::Error {
        err(format!("Expected {expected} but found {} at character {}", self.token_name(), self.pos + 1))
    }

    fn enter(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth.get() {
            return Err(err(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth,
                self.pos + 1
            )));
        }
        Ok(())
    }

    fn value(&mut self) -> mlua::Result<Value> {
        self.ws();
        let Some(&b) = self.s.get(self.pos) else {
            return Err(self.fail("value"));
        };
        match b {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => Ok(Value::String(self.lua.create_string(self.string()?)?)),
            b't' if self.s[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.s[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.s[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(null())
            }
            b'-' | b'0'..=b'9' | b'I' | b'N' | b'i' | b'n' => self.number(),
            _ => Err(err(format!("Expected value but found invalid token at character {}", self.pos + 1))),
        }
    }

    fn number(&mut self) -> mlua::Result<Value> {
        let start = self.pos;
        while self.pos < self.s.len()
            && matches!(self.s[self.pos], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9' | b'x' | b'X' | b'a'..=b'd' | b'f' | b'A'..=b'D' | b'F' | b'i' | b'n' | b'I' | b'N' | b't' | b'y')
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        let lower = text.to_ascii_lowercase();
        let n = match lower.as_str() {
            "nan" | "-nan" if self.cfg.decode_invalid_numbers.get() => f64::NAN,
            "inf" | "infinity" if self.cfg.decode_invalid_numbers.get() => f64::INFINITY,
            "-inf" | "-infinity" if self.cfg.decode_invalid_numbers.get() => f64::NEG_INFINITY,
            _ => match text.parse::<f64>() {
                Ok(n) if !lower.contains("inf") && !lower.contains("nan") => n,
                _ => {
                    self.pos = start;
                    return Err(err(format!("Expected value but found invalid number at character {}", start + 1)));
                }
            },
        };
        Ok(Value::Number(n))
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    fn string(&mut self) -> mlua::Result<Vec<u8>> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.pos) else {
                self.pos = start;
                return Err(err(format!(
                    "Expected value but found unexpected end of string at character {}",
                    start + 1
                )));
            };
            self.pos += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else { continue };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let bad = || {
                                err(format!(
                                    "Expected value but found invalid unicode escape code at character {}",
                                    start + 1
                                ))
                            };
                            let mut cp = self.hex4().ok_or_else(bad)?;
                            if (0xD800..0xDC00).contains(&cp) {
                                if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(bad());
                                }
                                self.pos += 2;
                                let lo = self.hex4().ok_or_else(bad)?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(bad());
                                }
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                            }
                            let ch = char::from_u32(cp).ok_or_else(bad)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            return Err(err(format!(
                                "Expected value but found invalid escape code at character {}",
                                start + 1
                            )))
                        }
                    }
                }
                _ => out.push(b),
            }
        }
    }

    fn object(&mut self) -> mlua::Result<Value> {
        self.enter()?;
        self.pos += 1;
        let t = self.lua.create_table()?;
        self.ws();
        if self.s.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        loop {
            self.ws();
            if self.s.get(self.pos) != Some(&b'"') {
                return Err(self.fail("object key string"));
            }
            let k = self.string()?;
            self.ws();
            if self.s.get(self.pos) != Some(&b':') {
                return Err(self.fail("colon"));
            }
            self.pos += 1;
            let v = self.value()?;
            t.raw_set(self.lua.create_string(&k)?, v)?;
            self.ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                _ => return Err(self.fail("comma or object end")),
            }
        }
    }

    fn array(&mut self) -> mlua::Result<Value> {
        self.enter()?;
        self.pos += 1;
        let t = self.lua.create_table()?;
        self.ws();
        if self.s.get(self.pos) == Some(&b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        let mut i = 1;
        loop {
            let v = self.value()?;
            t.raw_set(i, v)?;
            i += 1;
            self.ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                _ => return Err(self.fail("comma or array end")),
            }
        }
    }
}

fn arg_bool(v: Option<&Value>) -> Option<bool> {
    match v {
        Some(Value::Boolean(b)) => Some(*b),
        Some(Value::String(s)) => match &s.as_bytes()[..] {
            b"on" => Some(true),
            b"off" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The `cjson` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cfg = Rc::new(Config::default());
    let t = lua.create_table()?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    t.raw_set("null", null())?;

    let c = Rc::clone(&cfg);
    t.raw_set(
        "encode",
        lua.create_function(move |_, args: MultiValue| {
            if args.len() != 1 {
                return Err(err("bad argument #1 to 'encode' (expected 1 argument)".into()));
            }
            let mut enc = Encoder { cfg: &c, out: Vec::new() };
            enc.value(&args[0], 0)?;
            Ok(mlua::BString::from(enc.out))
        })?,
    )?;
    let c = Rc::clone(&cfg);
    t.raw_set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            let Some(Value::String(s)) = args.front() else {
                return Err(err("bad argument #1 to 'decode' (expected 1 argument)".into()));
            };
            let bytes = s.as_bytes().to_vec();
            let mut dec = Decoder { lua, cfg: &c, s: &bytes, pos: 0, depth: 0 };
            let v = dec.value()?;
            dec.ws();
            if dec.pos < bytes.len() {
                return Err(dec.fail("the end"));
            }
            Ok(v)
        })?,
    )?;
    let c = Rc::clone(&cfg);
    t.raw_set(
        "encode_max_depth",
        lua.create_function(move |_, v: Option<i64>| {
            if let Some(v) = v {
                c.encode_max_depth.set(v);
            }
            Ok(c.encode_max_depth.get())
        })?,
    )?;
    let c = Rc::clone(&cfg);
    t.raw_set(
        "decode_max_depth",
        lua.create_function(move |_, v: Option<i64>| {
            if let Some(v) = v {
                c.decode_max_depth.set(v);
            }
            Ok(c.decode_max_depth.get())
        })?,
    )?;
    let c = Rc::clone(&cfg);
    t.raw_set(
        "encode_number_precision",
        lua.create_function(move |_, v: Option<i64>| {
            if let Some(v) = v {
                if !(1..=14).contains(&v) {
                    return Err(err("bad argument #1 to '?' (expected integer between 1 and 14)".into()));
                }
                c.precision.set(v);
            }
            Ok(c.precision.get())
        })?,
    )?;
    let c = Rc::clone(&cfg);
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(b) = arg_bool(args.front()) {
                c.encode_invalid_numbers.set(b);
            }
            Ok(c.encode_invalid_numbers.get())
        })?,
    )?;
    let c = Rc::clone(&cfg);
    t.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(b) = arg_bool(args.front()) {
                c.decode_invalid_numbers.set(b);
            }
            Ok(c.decode_invalid_numbers.get())
        })?,
    )?;
    let c = Rc::clone(&cfg);
    t.raw_set(
        "encode_keep_buffer",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(b) = arg_bool(args.front()) {
                c.keep_buffer.set(b);
            }
            Ok(c.keep_buffer.get())
        })?,
    )?;
    let c = Rc::clone(&cfg);
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(b) = arg_bool(args.front()) {
                c.sparse_convert.set(b);
            }
            if let Some(r) = args.get(1).and_then(number) {
                c.sparse_ratio.set(r as i64);
            }
            if let Some(s) = args.get(2).and_then(number) {
                c.sparse_safe.set(s as i64);
            }
            Ok((c.sparse_convert.get(), c.sparse_ratio.get(), c.sparse_safe.get()))
        })?,
    )?;
    Ok(t)
}
