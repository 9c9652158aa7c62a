//! Module values (type 7), MODULE_AUX records and KEY_META blocks.
//!
//! Module payloads are opaque to us, but since RDB 8 every item carries a module opcode,
//! so the value can be walked to its end and kept as bytes with the module's name.
//!
//! # Format
//! ```text
//! len module_id (9 x 6-bit name chars, then a 10-bit encoding version)
//! { len opcode: 1 SINT / 2 UINT -> len, 3 FLOAT -> 4 bytes, 4 DOUBLE -> 8 bytes, 5 STRING -> str }*
//! len 0 (EOF)
//! ```

use crate::format::input::{fail, finish, take_bytes, FormatError, Input, PResult};

use super::prim::{length, rdb_str};

const NAME_CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const KEYMETA_CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/// Walk module opcodes up to and including EOF.
pub fn skip_module_ops(input: Input<'_>) -> PResult<'_, ()> {
    let mut i = input;
    loop {
        let at = i;
        let (r, op) = length(i, "a module opcode")?;
        i = match op {
            0 => return Ok((r, ())),
            1 | 2 => length(r, "a module integer")?.0,
            3 => take_bytes(r, 4, "a module float")?.0,
            4 => take_bytes(r, 8, "a module double")?.0,
            5 => rdb_str(r)?.0,
            other => return fail(at, format!("unknown module opcode {other}")),
        };
    }
}

/// Decode a 64-bit module type id into its 9-character name and encoding version.
pub fn module_name(id: u64) -> (String, u16) {
    let encver = (id & 0x3FF) as u16;
    let mut n = id >> 10;
    let mut name = [0u8; 9];
    for slot in name.iter_mut().rev() {
        *slot = NAME_CHARS[(n & 63) as usize];
        n >>= 6;
    }
    (String::from_utf8_lossy(&name).into_owned(), encver)
}

/// A module value, kept opaque.
#[derive(Debug, Clone)]
pub struct ModuleValue<'a> {
    pub id: u64,
    pub name: String,
    pub encver: u16,
    /// The module opcode stream, EOF included.
    pub payload: Input<'a>,
}

impl<'a> ModuleValue<'a> {
    pub fn parse(body: Input<'a>) -> Result<Self, FormatError> {
        let (rest, id) = length(body, "a module id").map_err(|e| finish(e, "a module id"))?;
        let (name, encver) = module_name(id);
        Ok(ModuleValue { id, name, encver, payload: rest })
    }
}

/// A MODULE_AUX record (opcode 247).
#[derive(Debug, Clone)]
pub struct ModuleAux<'a> {
    pub id: u64,
    pub name: String,
    pub encver: u16,
    /// 1 = before the keyspace, 2 = after.
    pub when: u64,
    /// The whole record after the opcode byte, for lossless re-encoding.
    pub raw: Input<'a>,
}

pub fn module_aux(input: Input<'_>) -> PResult<'_, ModuleAux<'_>> {
    let (r, id) = length(input, "a module id")?;
    let (r, op) = length(r, "the module aux 'when' opcode")?;
    if op != 2 {
        return fail(r, format!("module aux 'when' must be a UINT (opcode 2), found opcode {op}"));
    }
    let (r, when) = length(r, "the module aux 'when'")?;
    let (r, ()) = skip_module_ops(r)?;
    let (name, encver) = module_name(id);
    Ok((r, ModuleAux { id, name, encver, when, raw: input.until(&r) }))
}

/// One key-metadata class (Redis 8.6 KEY_META, opcode 243).
#[derive(Debug, Clone)]
pub struct KeyMetaClass<'a> {
    pub spec: u32,
    pub name: String,
    pub version: u8,
    pub flags: u8,
    pub payload: Input<'a>,
}

pub fn key_meta(input: Input<'_>) -> PResult<'_, Vec<KeyMetaClass<'_>>> {
    let (mut r, n) = length(input, "the key metadata class count")?;
    if n > 7 {
        return fail(input, format!("key metadata has {n} classes, at most 7 are allowed"));
    }
    let mut out = Vec::new();
    for _ in 0..n {
        let (r2, spec) = take_bytes(r, 4, "a key metadata class spec")?;
        let b = spec.bytes();
        let spec = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let (r3, ()) = skip_module_ops(r2)?;
        let mut name = [0u8; 4];
        let mut n = spec >> 8;
        for slot in name.iter_mut().rev() {
            *slot = KEYMETA_CHARS[(n & 63) as usize];
            n >>= 6;
        }
        out.push(KeyMetaClass {
            spec,
            name: String::from_utf8_lossy(&name).into_owned(),
            version: ((spec >> 3) & 31) as u8,
            flags: (spec & 7) as u8,
            payload: r2.until(&r3),
        });
        r = r3;
    }
    Ok((r, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(name: &str, encver: u64) -> u64 {
        let mut id = 0u64;
        for c in name.bytes() {
            let k = NAME_CHARS.iter().position(|&x| x == c).unwrap() as u64;
            id = (id << 6) | k;
        }
        (id << 10) | encver
    }

    #[test]
    fn module_names_round_trip() {
        let id = id_of("hellotype", 3);
        assert_eq!(module_name(id), ("hellotype".to_string(), 3));
    }

    #[test]
    fn walks_module_opcodes() {
        // UINT 5, STRING "ab", DOUBLE, EOF, then a trailing byte
        let mut b = vec![2, 5, 5, 2, b'a', b'b', 4];
        b.extend_from_slice(&1.5f64.to_le_bytes());
        b.extend_from_slice(&[0, 0x77]);
        let (rest, ()) = skip_module_ops(Input::new(&b)).unwrap();
        assert_eq!(rest.bytes(), &[0x77]);
        assert!(skip_module_ops(Input::new(&[9])).is_err());
    }
}
