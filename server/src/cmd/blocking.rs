//! Blocking list and sorted set commands: BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP
//! BZPOPMIN BZPOPMAX BZMPOP, and CLIENT UNBLOCK. The waiting itself is crate::blocking.

use std::time::{Duration, Instant};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::long_double::LongDouble;
use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::Reply;

use crate::blocking::Op;
use crate::client::Client;
use crate::server::Server;

/// Redis's getTimeoutFromObjectOrReply in seconds: a float as strtold reads it (hex
/// too), rounded up to ms; 0 waits forever (None).
fn parse_timeout(b: &[u8]) -> Result<Option<Instant>, Reply> {
    let secs = LongDouble::parse(b)
        .map(LongDouble::to_f64)
        .ok_or_else(|| Reply::err("ERR timeout is not a float or out of range"))?;
    let ms = secs * 1000.0;
    // Redis 7.2 on checks the range; before, the C cast of a value beyond i64 gives
    // LLONG_MIN, which Redis then calls negative.
    let checks_range = crate::version::version().behaves_as() >= ServerVersion::Redis72;
    if checks_range && ms > i64::MAX as f64 {
        return Err(Reply::err("ERR timeout is out of range"));
    }
    let ms = ms.ceil();
    if !ms.is_finite() || ms < 0.0 || ms >= i64::MAX as f64 {
        return Err(Reply::err("ERR timeout is negative"));
    }
    if ms == 0.0 {
        return Ok(None);
    }
    if checks_range && ms > (i64::MAX - crate::server::unix_us() / 1000) as f64 {
        return Err(Reply::err("ERR timeout is out of range"));
    }
    Ok(Instant::now().checked_add(Duration::from_millis(ms as u64)))
}

/// Redis's getTimeoutFromObjectOrReply in milliseconds (WAIT, WAITAOF): 0 waits forever
/// (None). Past the clock's range Redis 7.2 on refuses it; before, the sum wraps and the
/// wait ends at once.
pub(crate) fn parse_ms_timeout(b: &[u8]) -> Result<Option<Instant>, Reply> {
    let ms = match parse_i64(b) {
        None => return Err(Reply::err("ERR timeout is not an integer or out of range")),
        Some(t) if t < 0 => return Err(Reply::err("ERR timeout is negative")),
        Some(0) => return Ok(None),
        Some(t) => t,
    };
    let now = Instant::now();
    if ms > i64::MAX - crate::server::unix_us() / 1000 {
        if crate::version::version().behaves_as() >= ServerVersion::Redis72 {
            return Err(Reply::err("ERR timeout is out of range"));
        }
        return Ok(Some(now));
    }
    Ok(Some(now.checked_add(Duration::from_millis(ms as u64)).unwrap_or(now)))
}

fn parse_end(b: &[u8]) -> Result<bool, Reply> {
    if eq_ic(b, "left") {
        Ok(true)
    } else if eq_ic(b, "right") {
        Ok(false)
    } else {
        Err(Reply::syntax())
    }
}

/// A long in 1..=LONG_MAX; otherwise (not a number either) the command's error.
fn positive(b: &[u8], msg: &'static str) -> Result<i64, Reply> {
    match parse_i64(b) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(Reply::err(msg)),
    }
}

fn keys_then_timeout(s: &mut Server, c: &mut Client, a: &[Vec<u8>], op: Op) -> Reply {
    let deadline = match parse_timeout(&a[a.len() - 1]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let keys = a[1..a.len() - 1].to_vec();
    s.block_or_serve(c, op, keys, deadline, a)
}

pub fn blpop(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    keys_then_timeout(s, c, a, Op::Pop { left: true, count: None })
}

pub fn brpop(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    keys_then_timeout(s, c, a, Op::Pop { left: false, count: None })
}

pub fn bzpopmin(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    keys_then_timeout(s, c, a, Op::ZPop { max: false, count: None })
}

pub fn bzpopmax(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    keys_then_timeout(s, c, a, Op::ZPop { max: true, count: None })
}

pub fn brpoplpush(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let deadline = match parse_timeout(&a[3]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let op = Op::Move { dst: a[2].clone(), from_left: false, to_left: true, rpoplpush: true };
    s.block_or_serve(c, op, vec![a[1].clone()], deadline, a)
}

pub fn blmove(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let parsed = parse_end(&a[3]).and_then(|f| parse_end(&a[4]).map(|t| (f, t)));
    let (from_left, to_left) = match parsed {
        Ok(x) => x,
        Err(e) => return e,
    };
    let deadline = match parse_timeout(&a[5]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let op = Op::Move { dst: a[2].clone(), from_left, to_left, rpoplpush: false };
    s.block_or_serve(c, op, vec![a[1].clone()], deadline, a)
}

/// BLMPOP / BZMPOP: timeout numkeys key... (LEFT|RIGHT or MIN|MAX) [COUNT count], and
/// LMPOP / ZMPOP (no timeout: `blocking` false).
fn mpop(s: &mut Server, c: &mut Client, a: &[Vec<u8>], zset: bool, blocking: bool) -> Reply {
    let numkeys_at = if blocking { 2 } else { 1 };
    let numkeys = match positive(&a[numkeys_at], "ERR numkeys should be greater than 0") {
        Ok(n) => n as usize,
        Err(e) => return e,
    };
    let where_at = match (numkeys_at + 1).checked_add(numkeys) {
        Some(i) if i < a.len() => i,
        _ => return Reply::syntax(),
    };
    let first = if zset {
        if eq_ic(&a[where_at], "min") {
            true
        } else if eq_ic(&a[where_at], "max") {
            false
        } else {
            return Reply::syntax();
        }
    } else {
        match parse_end(&a[where_at]) {
            Ok(l) => l,
            Err(e) => return e,
        }
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < a.len() {
        if count.is_none() && eq_ic(&a[j], "count") && j + 1 < a.len() {
            match positive(&a[j + 1], "ERR count should be greater than 0") {
                Ok(n) => count = Some(n),
                Err(e) => return e,
            }
            j += 2;
        } else {
            return Reply::syntax();
        }
    }
    let count = Some(count.unwrap_or(1));
    let op = if zset { Op::ZPop { max: !first, count } } else { Op::Pop { left: first, count } };
    let keys = a[numkeys_at + 1..where_at].to_vec();
    if !blocking {
        return s.serve_now(c, op, keys, a);
    }
    let deadline = match parse_timeout(&a[1]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    s.block_or_serve(c, op, keys, deadline, a)
}

pub fn blmpop(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    mpop(s, c, a, false, true)
}

pub fn bzmpop(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    mpop(s, c, a, true, true)
}

pub fn lmpop(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    mpop(s, c, a, false, false)
}

pub fn zmpop(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    mpop(s, c, a, true, false)
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR].
pub fn client_unblock(s: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    let Some(id) = parse_i64(&a[2]) else {
        return Reply::not_integer();
    };
    let error = match a.get(3) {
        None => false,
        Some(m) if eq_ic(m, "timeout") => false,
        Some(m) if eq_ic(m, "error") => true,
        Some(_) => return Reply::err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    if id <= 0 {
        return Reply::Int(0);
    }
    let err = error.then(|| Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK"));
    let target_cmd = s.clients.get(&(id as u64)).map(|t| t.last_cmd.clone());
    let unblocked = s.end_wait(id as u64, err);
    // Redis 7.0 counts a failed call for any CLIENT UNBLOCK, TIMEOUT too; 7.2 on, for
    // ERROR only.
    let counts = error || crate::version::version().behaves_as() < ServerVersion::Redis72;
    if let (true, true, Some(cmd)) = (unblocked, counts, target_cmd) {
        s.count_failed_call(&cmd);
    }
    Reply::Int(i64::from(unblocked))
}
