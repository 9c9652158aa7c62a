//! The `cmsgpack` library scripts use (lua-cmsgpack 0.4's behaviour, written here in
//! Rust): pack, unpack, unpack_one, unpack_limit.

use mlua::{Lua, MultiValue, Table, Value};

/// Tables nested deeper than this pack as nil (so a cycle packs as a finite copy).
const MAX_NESTING: usize = 16;

fn err(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.to_string())
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

fn is_int64(n: f64) -> bool {
    n.is_finite() && (n as i64) as f64 == n
}

fn pack_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend([0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend((n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend((n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend((n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend([0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend((n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend((n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend(n.to_be_bytes());
    }
}

fn pack_len(out: &mut Vec<u8>, len: usize, fix: u8, fix_max: usize, c16: u8, c32: u8) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(c16);
        out.extend((len as u16).to_be_bytes());
    } else {
        out.push(c32);
        out.extend((len as u32).to_be_bytes());
    }
}

fn pack_value(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(_) | Value::Number(_) => {
            let n = number(v).unwrap_or(0.0);
            if is_int64(n) {
                pack_int(out, n as i64);
            } else if f64::from(n as f32) == n {
                out.push(0xca);
                out.extend((n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend(n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            let len = b.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.extend([0xd9, len as u8]);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend((len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend((len as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if level < MAX_NESTING => pack_table(out, t, level)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack_table(out: &mut Vec<u8>, t: &Table, level: usize) -> mlua::Result<()> {
    let mut count = 0usize;
    let mut max = 0f64;
    let mut array = true;
    t.for_each(|k: Value, _: Value| {
        count += 1;
        match number(&k) {
            Some(n) if n > 0.0 && n.floor() == n => max = max.max(n),
            _ => array = false,
        }
        Ok(())
    })?;
    if array && count as f64 == max {
        let len = t.raw_len();
        pack_len(out, len, 0x90, 15, 0xdc, 0xdd);
        for i in 1..=len {
            let v: Value = t.raw_get(i)?;
            pack_value(out, &v, level + 1)?;
        }
    } else {
        pack_len(out, count, 0x80, 15, 0xde, 0xdf);
        let mut failure = None;
        t.for_each(|k: Value, v: Value| {
            if failure.is_none() {
                if let Err(e) = pack_value(out, &k, level + 1).and_then(|()| pack_value(out, &v, level + 1)) {
                    failure = Some(e);
                }
            }
            Ok(())
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
    }
    Ok(())
}

struct Unpacker<'a> {
    lua: &'a Lua,
    s: &'a [u8],
    pos: usize,
}

const MISSING: &str = "Missing bytes in input.";

impl Unpacker<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.s.len()).ok_or_else(|| err(MISSING))?;
        let b = &self.s[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    fn be(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn string(&mut self, len: usize) -> mlua::Result<Value> {
        let b = self.take(len)?.to_vec();
        Ok(Value::String(self.lua.create_string(b)?))
    }

    fn array(&mut self, len: usize) -> mlua::Result<Value> {
        let t = self.lua.create_table()?;
        for i in 1..=len {
            let v = self.value()?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, len: usize) -> mlua::Result<Value> {
        let t = self.lua.create_table()?;
        for _ in 0..len {
            let k = self.value()?;
            let v = self.value()?;
            if !k.is_nil() {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }

    fn value(&mut self) -> mlua::Result<Value> {
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => Value::Number(f64::from(tag)),
            0x80..=0x8f => return self.map(usize::from(tag & 0x0f)),
            0x90..=0x9f => return self.array(usize::from(tag & 0x0f)),
            0xa0..=0xbf => return self.string(usize::from(tag & 0x1f)),
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let n = self.be(1)? as usize;
                return self.string(n);
            }
            0xc5 | 0xda => {
                let n = self.be(2)? as usize;
                return self.string(n);
            }
            0xc6 | 0xdb => {
                let n = self.be(4)? as usize;
                return self.string(n);
            }
            0xca => Value::Number(f64::from(f32::from_bits(self.be(4)? as u32))),
            0xcb => Value::Number(f64::from_bits(self.be(8)?)),
            0xcc => Value::Number(self.be(1)? as f64),
            0xcd => Value::Number(self.be(2)? as f64),
            0xce => Value::Number(self.be(4)? as f64),
            0xcf => Value::Number(self.be(8)? as f64),
            0xd0 => Value::Number(f64::from(self.be(1)? as u8 as i8)),
            0xd1 => Value::Number(f64::from(self.be(2)? as u16 as i16)),
            0xd2 => Value::Number(f64::from(self.be(4)? as u32 as i32)),
            0xd3 => Value::Number(self.be(8)? as i64 as f64),
            0xdc => {
                let n = self.be(2)? as usize;
                return self.array(n);
            }
            0xdd => {
                let n = self.be(4)? as usize;
                return self.array(n);
            }
            0xde => {
                let n = self.be(2)? as usize;
                return self.map(n);
            }
            0xdf => {
                let n = self.be(4)? as usize;
                return self.map(n);
            }
            0xe0..=0xff => Value::Number(f64::from(tag as i8)),
            _ => return Err(err("Bad data format in input.")),
        })
    }
}

/// Unpack up to `limit` objects (0: all) from `offset`; with `with_offset`, the offset
/// after them (-1 at the end) comes first.
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64, with_offset: bool) -> mlua::Result<MultiValue> {
    if offset < 0 || limit < 0 || offset as usize > s.len() {
        return Err(err(&format!("Invalid request to unpack with offset of {offset} and limit of {limit}.")));
    }
    let mut u = Unpacker { lua, s, pos: offset as usize };
    let mut out = MultiValue::new();
    let mut count = 0;
    while u.pos < s.len() && (limit == 0 || count < limit) {
        out.push_back(u.value()?);
        count += 1;
    }
    if with_offset {
        let next = if u.pos >= s.len() { -1.0 } else { u.pos as f64 };
        out.push_front(Value::Number(next));
    }
    Ok(out)
}

fn arg_bytes(args: &MultiValue, i: usize, fname: &str) -> mlua::Result<Vec<u8>> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => {
            Ok(super::convert::lua_number_text(number(v).unwrap_or(0.0)).into_bytes())
        }
        _ => Err(err(&format!("bad argument #{} to '{fname}' (string expected)", i + 1))),
    }
}

fn arg_int(args: &MultiValue, i: usize) -> i64 {
    args.get(i).and_then(number).unwrap_or(0.0) as i64
}

/// The `cmsgpack` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(err("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                pack_value(&mut out, v, 0)?;
            }
            lua.create_string(out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let s = arg_bytes(&args, 0, "unpack")?;
            unpack_full(lua, &s, 0, 0, false)
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let s = arg_bytes(&args, 0, "unpack_one")?;
            unpack_full(lua, &s, 1, arg_int(&args, 1), true)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let s = arg_bytes(&args, 0, "unpack_limit")?;
            unpack_full(lua, &s, arg_int(&args, 1), arg_int(&args, 2), true)
        })?,
    )?;
    Ok(t)
}
