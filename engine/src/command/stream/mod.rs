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
use super::{eq_ic, Spec};

pub const SPECS: &[Spec] = &[
    Spec::new("xadd", xadd),
    Spec::new("xlen", xlen),
    Spec::new("xrange", xrange),
    Spec::new("xrevrange", xrevrange),
    Spec::new("xdel", xdel),
    Spec::new("xtrim", xtrim),
    Spec::new("xsetid", xsetid),
    Spec::new("xread", xread).movable(xread_keys),
    Spec::new("xreadgroup", xread).movable(xread_keys),
    // Containers: Redis declares flags and keys per subcommand and none on the command.
    Spec { keys: Some(subcommand_key), ..Spec::new("xgroup", xgroup) },
    Spec::new("xack", xack),
    Spec::new("xpending", xpending),
    Spec::new("xclaim", xclaim),
    Spec::new("xautoclaim", xautoclaim),
    Spec { keys: Some(subcommand_key), ..Spec::new("xinfo", xinfo) },
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
