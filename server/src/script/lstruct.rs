//! The `struct` library scripts use (Roberto Ierusalimschy's struct 0.2 as Redis ships
//! it, written here in Rust): pack, unpack, size over formats like `>I2 s d`.

use mlua::{Lua, MultiValue, Table, Value};

/// Largest alignment `!` gives without a number (x86-64's).
const MAX_ALIGN: usize = 8;
/// Largest integer size, `i32` and the like.
const MAX_INT_SIZE: usize = 32;

fn err(msg: String) -> mlua::Error {
    mlua::Error::RuntimeError(msg)
}

struct Format<'a> {
    fname: &'static str,
    f: &'a [u8],
    pos: usize,
    little: bool,
    align: usize,
}

/// One option of a format: its letter and size.
struct Opt {
    op: u8,
    size: usize,
}

impl Format<'_> {
    fn new<'a>(f: &'a [u8], fname: &'static str) -> Format<'a> {
        Format { fname, f, pos: 0, little: true, align: 1 }
    }

    fn number(&mut self, default: usize) -> usize {
        let start = self.pos;
        let mut n = 0usize;
        while let Some(d) = self.f.get(self.pos).filter(|b| b.is_ascii_digit()) {
            n = n.saturating_mul(10).saturating_add(usize::from(d - b'0'));
            self.pos += 1;
        }
        if self.pos == start {
            default
        } else {
            n
        }
    }

    /// The next sized option; endianness and alignment options are applied on the way.
    fn next(&mut self) -> mlua::Result<Option<Opt>> {
        while let Some(&op) = self.f.get(self.pos) {
            self.pos += 1;
            let size = match op {
                b' ' => continue,
                b'>' => {
                    self.little = false;
                    continue;
                }
                b'<' => {
                    self.little = true;
                    continue;
                }
                b'!' => {
                    let a = self.number(MAX_ALIGN);
                    if !a.is_power_of_two() {
                        return Err(err(format!("alignment {a} is not a power of 2")));
                    }
                    self.align = a;
                    continue;
                }
                b'x' | b'b' | b'B' => 1,
                b'h' | b'H' => 2,
                b'l' | b'L' | b'T' | b'd' => 8,
                b'f' => 4,
                b's' => 0,
                b'c' => self.number(1),
                b'i' | b'I' => {
                    let n = self.number(4);
                    if n > MAX_INT_SIZE {
                        return Err(err(format!("integral size {n} is larger than limit of {MAX_INT_SIZE}")));
                    }
                    n
                }
                other => {
                    return Err(err(format!(
                        "bad argument #1 to '{}' (invalid format option '{}')",
                        self.fname,
                        char::from(other)
                    )))
                }
            };
            return Ok(Some(Opt { op, size }));
        }
        Ok(None)
    }

    /// Padding before an option of `size` bytes at offset `len`.
    fn padding(&self, len: usize, opt: &Opt) -> usize {
        if opt.size == 0 || opt.op == b'c' {
            return 0;
        }
        let size = opt.size.min(self.align);
        (size - (len & (size - 1))) & (size - 1)
    }
}

fn number(v: Option<&Value>, i: usize) -> mlua::Result<f64> {
    match v {
        Some(Value::Integer(n)) => Ok(*n as f64),
        Some(Value::Number(n)) => Ok(*n),
        Some(Value::String(s)) => std::str::from_utf8(&s.as_bytes())
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| err(format!("bad argument #{i} to 'pack' (number expected, got string)"))),
        _ => Err(err(format!("bad argument #{i} to 'pack' (number expected)"))),
    }
}

fn bytes(v: Option<&Value>, i: usize) -> mlua::Result<Vec<u8>> {
    match v {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => Ok(super::convert::lua_number_text(*n as f64).into_bytes()),
        Some(Value::Number(n)) => Ok(super::convert::lua_number_text(*n).into_bytes()),
        _ => Err(err(format!("bad argument #{i} to 'pack' (string expected)"))),
    }
}

fn put_int(out: &mut Vec<u8>, v: u64, size: usize, little: bool) {
    let mut b: Vec<u8> = (0..size).map(|i| if i < 8 { (v >> (8 * i)) as u8 } else { 0 }).collect();
    if !little {
        b.reverse();
    }
    out.extend(b);
}

fn pack(args: &MultiValue) -> mlua::Result<Vec<u8>> {
    let fmt = bytes(args.front(), 1)?;
    let mut f = Format::new(&fmt, "pack");
    let mut out = Vec::new();
    let mut arg = 1;
    while let Some(opt) = f.next()? {
        let pad = f.padding(out.len(), &opt);
        out.resize(out.len() + pad, 0);
        match opt.op {
            b'x' => out.push(0),
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number(args.get(arg), arg + 1)?;
                arg += 1;
                put_int(&mut out, n as i64 as u64, opt.size, f.little);
            }
            b'f' => {
                let n = number(args.get(arg), arg + 1)? as f32;
                arg += 1;
                out.extend(if f.little { n.to_le_bytes() } else { n.to_be_bytes() });
            }
            b'd' => {
                let n = number(args.get(arg), arg + 1)?;
                arg += 1;
                out.extend(if f.little { n.to_le_bytes() } else { n.to_be_bytes() });
            }
            b'c' | b's' => {
                let s = bytes(args.get(arg), arg + 1)?;
                arg += 1;
                let size = if opt.size == 0 { s.len() } else { opt.size };
                if s.len() < size {
                    return Err(err(format!("bad argument #{arg} to 'pack' (string too short)")));
                }
                out.extend_from_slice(&s[..size]);
                if opt.op == b's' {
                    out.push(0);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn unpack(lua: &Lua, args: &MultiValue) -> mlua::Result<MultiValue> {
    let fmt = bytes(args.front(), 1)?;
    let data = bytes(args.get(1), 2)?;
    let init = match args.get(2) {
        None | Some(Value::Nil) => 1.0,
        v => number(v, 3)?,
    };
    if init < 1.0 {
        return Err(err("bad argument #3 to 'unpack' (offset must be 1 or greater)".into()));
    }
    let mut pos = init as usize - 1;
    let mut f = Format::new(&fmt, "unpack");
    let mut out = MultiValue::new();
    let short = || err("bad argument #2 to 'unpack' (data string too short)".into());
    while let Some(opt) = f.next()? {
        pos += f.padding(pos, &opt);
        if pos + opt.size > data.len() {
            return Err(short());
        }
        match opt.op {
            b'x' => pos += 1,
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let mut raw: Vec<u8> = data[pos..pos + opt.size].to_vec();
                if !f.little {
                    raw.reverse();
                }
                let mut v: u64 = raw.iter().take(8).rev().fold(0, |acc, &b| (acc << 8) | u64::from(b));
                let signed = opt.op.is_ascii_lowercase();
                let n = if signed && opt.size < 8 && opt.size > 0 {
                    let mask = 1u64 << (opt.size * 8 - 1);
                    v &= (1u64 << (opt.size * 8)) - 1;
                    ((v ^ mask).wrapping_sub(mask)) as i64 as f64
                } else if signed {
                    v as i64 as f64
                } else {
                    v as f64
                };
                out.push_back(Value::Number(n));
                pos += opt.size;
            }
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let n = if f.little { f32::from_le_bytes(b) } else { f32::from_be_bytes(b) };
                out.push_back(Value::Number(f64::from(n)));
                pos += 4;
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let n = if f.little { f64::from_le_bytes(b) } else { f64::from_be_bytes(b) };
                out.push_back(Value::Number(n));
                pos += 8;
            }
            b'c' => {
                let size = if opt.size == 0 {
                    match out.pop_back() {
                        Some(Value::Number(n)) => n as usize,
                        Some(Value::Integer(n)) => n as usize,
                        _ => return Err(err("format 'c0' needs a previous size".into())),
                    }
                } else {
                    opt.size
                };
                if pos + size > data.len() {
                    return Err(short());
                }
                out.push_back(Value::String(lua.create_string(&data[pos..pos + size])?));
                pos += size;
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(err("unfinished string in data".into()));
                };
                out.push_back(Value::String(lua.create_string(&data[pos..pos + end])?));
                pos += end + 1;
            }
            _ => {}
        }
    }
    out.push_back(Value::Number((pos + 1) as f64));
    Ok(out)
}

fn size(args: &MultiValue) -> mlua::Result<f64> {
    let fmt = bytes(args.front(), 1)?;
    let mut f = Format::new(&fmt, "size");
    let mut total = 0usize;
    while let Some(opt) = f.next()? {
        if opt.op == b's' || (opt.op == b'c' && opt.size == 0) {
            return Err(err("options 'c0' - 's' have undefined sizes".into()));
        }
        total += f.padding(total, &opt) + opt.size;
    }
    Ok(total as f64)
}

/// The `struct` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(|lua, args: MultiValue| lua.create_string(pack(&args)?))?)?;
    t.raw_set("unpack", lua.create_function(|lua, args: MultiValue| unpack(lua, &args))?)?;
    t.raw_set("size", lua.create_function(|_, args: MultiValue| size(&args))?)?;
    Ok(t)
}
