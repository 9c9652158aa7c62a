//! Stream commands (Redis 7.0).
//!
//! XREAD / XREADGROUP answer at once here, with the data available or a null array (as
//! Redis answers inside MULTI); the server parks clients that asked to BLOCK
//! (server/src/cmd/xread.rs) and wakes them when the stream changes.

mod common;
mod group;
mod info;
mod read;
mod write;

pub use self::read::{parse_read_id, parse_read_options, ReadOptions};

use self::group::{xack, xautoclaim, xclaim, xgroup, xpending};
use self::info::xinfo;
use self::read::{xlen, xrange, xread, xrevrange};
use self::write::{xadd, xdel, xsetid, xtrim};
use super::flags::*;
use super::{eq_ic, Spec};

pub const SPECS: &[Spec] = &[
    Spec::new("xadd", -5, WRITE | DENYOOM | FAST, (1, 1, 1), xadd),
    Spec::new("xlen", 2, READONLY | FAST, (1, 1, 1), xlen),
    Spec::new("xrange", -4, READONLY, (1, 1, 1), xrange),
    Spec::new("xrevrange", -4, READONLY, (1, 1, 1), xrevrange),
    Spec::new("xdel", -3, WRITE | FAST, (1, 1, 1), xdel),
    Spec::new("xtrim", -4, WRITE, (1, 1, 1), xtrim),
    Spec::new("xsetid", -3, WRITE | DENYOOM | FAST, (1, 1, 1), xsetid),
    Spec::new("xread", -4, READONLY | BLOCKING, (0, 0, 0), xread).movable(xread_keys),
    Spec::new("xreadgroup", -7, WRITE | BLOCKING, (0, 0, 0), xread).movable(xread_keys),
    // Containers: Redis declares flags and keys per subcommand and none on the command.
    Spec { keys: Some(subcommand_key), ..Spec::new("xgroup", -2, 0, (0, 0, 0), xgroup) },
    Spec::new("xack", -4, WRITE | FAST, (1, 1, 1), xack),
    Spec::new("xpending", -3, READONLY, (1, 1, 1), xpending),
    Spec::new("xclaim", -6, WRITE | FAST, (1, 1, 1), xclaim),
    Spec::new("xautoclaim", -6, WRITE | FAST, (1, 1, 1), xautoclaim),
    Spec { keys: Some(subcommand_key), ..Spec::new("xinfo", -2, 0, (0, 0, 0), xinfo) },
];

/// The keys of XREAD / XREADGROUP: the first half of what follows STREAMS.
fn xread_keys(a: &[Vec<u8>]) -> Vec<usize> {
    let Some(pos) = a.iter().skip(1).position(|x| eq_ic(x, "streams")) else {
        return Vec::new();
    };
    let first = pos + 2;
    let n = (a.len() - first) / 2;
    (first..first + n).collect()
}

/// The key of XGROUP / XINFO subcommands (all but HELP): the argument after the name.
fn subcommand_key(a: &[Vec<u8>]) -> Vec<usize> {
    if a.len() > 2 && !eq_ic(&a[1], "help") {
        vec![2]
    } else {
        Vec::new()
    }
}
