//! The libraries Redis gives scripts beyond Lua's own, written here in Rust: `bit`
//! (LuaBitOp's functions), math.random on Redis's lrand48, and redis.sha1hex. cjson is
//! in cjson.rs.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{Lua, MultiValue, Table, Value};

/// SHA-1 of `data` as 40 lowercase hex digits.
pub fn sha1hex(data: &[u8]) -> String {
    sha1_smol::Sha1::from(data).digest().to_string()
}

/// Redis's redisLrand48: the 48-bit linear congruential generator of lrand48.
#[derive(Debug, Clone)]
pub struct Lrand48(Rc<Cell<u64>>);

const LRAND_A: u64 = 0x5_DEEC_E66D;
const LRAND_C: u64 = 0xB;
const LRAND_MASK: u64 = (1 << 48) - 1;
const LRAND48_MAX: i64 = i32::MAX as i64;

impl Default for Lrand48 {
    fn default() -> Self {
        // The generator's initial state (X0..X2 of rand.c).
        Lrand48(Rc::new(Cell::new(0x1234_ABCD_330E)))
    }
}

impl Lrand48 {
    pub fn seed(&self, seed: i32) {
        self.0.set((u64::from(seed as u32) << 16) | 0x330E);
    }

    pub fn next(&self) -> i32 {
        let x = self.0.get().wrapping_mul(LRAND_A).wrapping_add(LRAND_C) & LRAND_MASK;
        self.0.set(x);
        (x >> 17) as i32
    }
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => std::str::from_utf8(&s.as_bytes()).ok().and_then(|t| t.trim().parse().ok()),
        _ => None,
    }
}

fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(v) => match v {
            Value::Nil => "nil",
            Value::Boolean(_) => "boolean",
            Value::Integer(_) | Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Table(_) => "table",
            Value::Function(_) => "function",
            Value::Thread(_) => "thread",
            _ => "userdata",
        },
    }
}

fn arg_error(i: usize, fname: &str, expected: &str, got: Option<&Value>) -> mlua::Error {
    mlua::Error::RuntimeError(format!("bad argument #{i} to '{fname}' ({expected} expected, got {})", type_name(got)))
}

fn check_num(args: &[Value], i: usize, fname: &str) -> mlua::Result<f64> {
    args.get(i).and_then(num).ok_or_else(|| arg_error(i + 1, fname, "number", args.get(i)))
}

/// luaL_checkint: a number truncated to an int.
fn check_int(args: &[Value], i: usize, fname: &str) -> mlua::Result<i32> {
    check_num(args, i, fname).map(|n| n as i32)
}

/// math.random and math.randomseed on Redis's generator.
pub fn random_functions(lua: &Lua, rng: &Lrand48) -> mlua::Result<(mlua::Function, mlua::Function)> {
    let r = rng.clone();
    let random = lua.create_function(move |_, args: MultiValue| {
        let args: Vec<Value> = args.into_iter().collect();
        // The modulo keeps 1.0 out, as in Redis.
        let x = (i64::from(r.next()) % LRAND48_MAX) as f64 / LRAND48_MAX as f64;
        match args.len() {
            0 => Ok(x),
            1 => {
                let u = check_int(&args, 0, "random")?;
                if u < 1 {
                    return Err(mlua::Error::RuntimeError("bad argument #1 to 'random' (interval is empty)".into()));
                }
                Ok((x * f64::from(u)).floor() + 1.0)
            }
            2 => {
                let l = check_int(&args, 0, "random")?;
                let u = check_int(&args, 1, "random")?;
                if l > u {
                    return Err(mlua::Error::RuntimeError("bad argument #2 to 'random' (interval is empty)".into()));
                }
                Ok((x * (f64::from(u) - f64::from(l) + 1.0)).floor() + f64::from(l))
            }
            _ => Err(mlua::Error::RuntimeError("wrong number of arguments".into())),
        }
    })?;
    let r = rng.clone();
    let seed = lua.create_function(move |_, args: MultiValue| {
        let args: Vec<Value> = args.into_iter().collect();
        r.seed(check_int(&args, 0, "randomseed")?);
        Ok(())
    })?;
    Ok((random, seed))
}

/// LuaBitOp's conversion of a number to a 32-bit integer (round to nearest, mod 2^32).
fn tobit(n: f64) -> i32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn bit_arg(args: &[Value], i: usize, fname: &str) -> mlua::Result<i32> {
    check_num(args, i, fname).map(tobit)
}

/// The `bit` library (LuaBitOp 1.0.2).
pub fn bit_library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    type Fold = fn(i32, i32) -> i32;
    let folds: [(&str, Fold); 3] = [("band", |a, b| a & b), ("bor", |a, b| a | b), ("bxor", |a, b| a ^ b)];
    for (name, op) in folds {
        t.raw_set(
            name,
            lua.create_function(move |_, args: MultiValue| {
                let args: Vec<Value> = args.into_iter().collect();
                let mut acc = bit_arg(&args, 0, name)?;
                for i in 1..args.len() {
                    acc = op(acc, bit_arg(&args, i, name)?);
                }
                Ok(f64::from(acc))
            })?,
        )?;
    }
    type Unary = fn(i32) -> i32;
    let unary: [(&str, Unary); 3] = [("tobit", |a| a), ("bnot", |a| !a), ("bswap", |a| a.swap_bytes())];
    for (name, op) in unary {
        t.raw_set(
            name,
            lua.create_function(move |_, args: MultiValue| {
                let args: Vec<Value> = args.into_iter().collect();
                Ok(f64::from(op(bit_arg(&args, 0, name)?)))
            })?,
        )?;
    }
    type Shift = fn(i32, u32) -> i32;
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |a, n| ((a as u32) << n) as i32),
        ("rshift", |a, n| ((a as u32) >> n) as i32),
        ("arshift", |a, n| a >> n),
        ("rol", |a, n| (a as u32).rotate_left(n) as i32),
        ("ror", |a, n| (a as u32).rotate_right(n) as i32),
    ];
    for (name, op) in shifts {
        t.raw_set(
            name,
            lua.create_function(move |_, args: MultiValue| {
                let args: Vec<Value> = args.into_iter().collect();
                let a = bit_arg(&args, 0, name)?;
                let n = (bit_arg(&args, 1, name)? as u32) & 31;
                Ok(f64::from(op(a, n)))
            })?,
        )?;
    }
    t.raw_set(
        "tohex",
        lua.create_function(|_, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            let b = bit_arg(&args, 0, "tohex")? as u32;
            let mut n = match args.get(1) {
                None | Some(Value::Nil) => 8,
                Some(_) => bit_arg(&args, 1, "tohex")?,
            };
            let upper = n < 0;
            if upper {
                n = n.saturating_neg();
            }
            let n = n.clamp(0, 8) as usize;
            let full = if upper { format!("{b:08X}") } else { format!("{b:08x}") };
            Ok(full[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}

/// Where an error raised by a library function called from Lua code happened
/// (luaL_where(L, 1): `user_script:3: `), or nothing when its caller is not Lua code.
fn caller_position(lua: &Lua) -> String {
    lua.inspect_stack(1, |d| {
        let s = d.source();
        match (s.what, d.current_line()) {
            ("C", _) | (_, None) => String::new(),
            (_, Some(line)) => format!("{}:{line}: ", s.short_src.unwrap_or_default()),
        }
    })
    .unwrap_or_default()
}

/// The innermost message of an error raised by Rust code.
fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// `f`, with its errors raised as a C library's are: the message, prefixed with the
/// position of the Lua code that called it.
pub fn located(lua: &Lua, f: mlua::Function) -> mlua::Result<mlua::Function> {
    lua.create_function(move |lua, args: MultiValue| {
        f.call::<MultiValue>(args)
            .map_err(|e| mlua::Error::RuntimeError(format!("{}{}", caller_position(lua), root_message(&e))))
    })
}

/// [`located`] for every function of a library table.
pub fn locate_all(lua: &Lua, t: &Table) -> mlua::Result<()> {
    let mut fns = Vec::new();
    t.for_each(|k: Value, v: Value| {
        if let Value::Function(f) = v {
            fns.push((k, f));
        }
        Ok(())
    })?;
    for (k, f) in fns {
        t.raw_set(k, located(lua, f)?)?;
    }
    Ok(())
}
