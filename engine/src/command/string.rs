//! String commands.

use super::flags::*;
use super::{notify, Ctx, Reply, Spec};
use crate::value::{Str, Value};

pub const SPECS: &[Spec] =
    &[Spec::new("get", 2, READONLY | FAST, (1, 1, 1), get), Spec::new("set", -3, WRITE | DENYOOM, (1, 1, 1), set)];

/// The string at `key`: Ok(None) when missing, Err(WRONGTYPE) for another type.
pub fn read_str<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c Str>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::wrongtype()),
    }
}

fn get(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    match read_str(ctx, &a[1]) {
        Ok(Some(s)) => Reply::Bulk(s.to_vec()),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

fn set(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    // Options are parsed fully by the string family's SET implementation.
    let (key, val) = (&a[1], &a[2]);
    if a.len() > 3 {
        return Reply::syntax();
    }
    ctx.db_set(key, Value::Str(Str::try_encode(val)), false);
    ctx.dirty += 1;
    ctx.notify(notify::STRING, "set", key);
    Reply::ok()
}
