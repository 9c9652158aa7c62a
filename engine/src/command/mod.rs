//! The command layer: the command table (data) and one file per family.
//!
//! A command is a small function `fn(&mut Ctx, &[Vec<u8>]) -> Reply`. The table says its
//! arity, flags and key positions; [`execute`] checks arity, runs it and records what it
//! propagates: the command as called (or as the command rewrote itself, e.g. EXPIRE →
//! PEXPIREAT), after the DELs of keys found expired on the way.

pub mod catalog;
mod ctx;
mod reply;
mod spec;
pub mod table;

pub mod geo;
pub mod hash;
pub mod hash_ttl;
pub mod hll;
pub mod keys;
pub mod list;
pub mod long_double;
mod pqsort;
pub mod set;
pub mod stream;
pub mod string;
pub mod zset;

pub use ctx::{Ctx, Effects, Event, ExpireMode, Stats};
pub use reply::{fmt_double, fmt_g, BulkArray, Doubles, Reply, WRONGTYPE};
pub use spec::{
    bitfield_reads_only, key_flags, migrate_keys, numkeys_at_1, numkeys_at_2, numkeys_keys, Command, KeyFinder, Spec,
    Sub,
};
pub use table::{lookup, specs, table, Table};

use catalog::ServerVersion;

/// An argument vector, command name first.
pub type Argv = Vec<Vec<u8>>;

pub type Handler = fn(&mut Ctx<'_>, &[Vec<u8>]) -> Reply;

/// Redis's command flags, as bits (the catalog's `command_flags` of a version).
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const FAST: u32 = 1 << 10;
    pub const NO_AUTH: u32 = 1 << 11;
    pub const MAY_REPLICATE: u32 = 1 << 12;
    pub const NO_MULTI: u32 = 1 << 13;
    pub const MOVABLE_KEYS: u32 = 1 << 14;
    pub const SKIP_SLOWLOG: u32 = 1 << 15;
    pub const ASKING: u32 = 1 << 16;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;
    pub const ALLOW_BUSY: u32 = 1 << 19;
    pub const RANDOM: u32 = 1 << 20;
    pub const SORT_FOR_SCRIPT: u32 = 1 << 21;
    pub const PROTECTED: u32 = 1 << 22;
    pub const TOUCHES_ARBITRARY_KEYS: u32 = 1 << 23;
    pub const SENTINEL: u32 = 1 << 24;
    pub const ONLY_SENTINEL: u32 = 1 << 25;
    pub const MODULE: u32 = 1 << 26;

    /// Every flag by the name COMMAND INFO gives it (the catalog's, in upper case).
    const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (ALLOW_BUSY, "allow_busy"),
        (RANDOM, "random"),
        (SORT_FOR_SCRIPT, "sort_for_script"),
        (PROTECTED, "protected"),
        (TOUCHES_ARBITRARY_KEYS, "touches_arbitrary_keys"),
        (SENTINEL, "sentinel"),
        (ONLY_SENTINEL, "only_sentinel"),
        (MODULE, "module"),
    ];

    /// The flag the catalog names `name` (`NO_AUTH`).
    pub fn by_catalog_name(name: &str) -> Option<u32> {
        NAMES.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)).map(|&(b, _)| b)
    }

    /// The name COMMAND INFO gives `flag` (one bit).
    pub fn name(flag: u32) -> &'static str {
        NAMES.iter().find(|(b, _)| *b == flag).map_or("", |(_, n)| n)
    }

    /// The flags Redis 7 (and Valkey) COMMAND INFO shows, in its order; the others
    /// (may_replicate, protected, ...) it keeps hidden.
    pub const SHOWN: &[u32] = &[
        WRITE,
        READONLY,
        DENYOOM,
        MODULE,
        ADMIN,
        PUBSUB,
        NOSCRIPT,
        BLOCKING,
        LOADING,
        STALE,
        SKIP_MONITOR,
        SKIP_SLOWLOG,
        ASKING,
        FAST,
        NO_AUTH,
        NO_MANDATORY_KEYS,
        NO_ASYNC_LOADING,
        NO_MULTI,
        MOVABLE_KEYS,
        ALLOW_BUSY,
    ];

    /// The flags Redis 6.2's COMMAND shows, in its order.
    pub const SHOWN_62: &[u32] = &[
        WRITE,
        READONLY,
        DENYOOM,
        ADMIN,
        PUBSUB,
        NOSCRIPT,
        RANDOM,
        SORT_FOR_SCRIPT,
        LOADING,
        STALE,
        SKIP_MONITOR,
        SKIP_SLOWLOG,
        ASKING,
        FAST,
        NO_AUTH,
        MAY_REPLICATE,
        MOVABLE_KEYS,
    ];
}

/// Keyspace notification classes (`notify-keyspace-events`).
pub mod notify {
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
    pub const KEY_MISS: u32 = 1 << 11;
    pub const NEW: u32 = 1 << 14;
}

/// Run one command: look it up, check its arity, call it, and record its propagation in
/// `ctx.fx`. Unknown commands and arity errors reply as Redis 7.0 does.
pub fn execute(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let Some(name) = argv.first() else {
        return Reply::err("ERR empty command");
    };
    let Some(cmd) = table(ctx.cfg.version).lookup(name) else {
        return unknown_command(argv, ctx.cfg.version);
    };
    execute_spec(ctx, cmd, argv)
}

/// [`execute`] for a command already looked up (the server's dispatch found it).
pub fn execute_spec(ctx: &mut Ctx<'_>, cmd: &Command, argv: &[Vec<u8>]) -> Reply {
    if !cmd.arity_ok(argv.len()) {
        return Reply::error(format!("ERR wrong number of arguments for '{}' command", cmd.name));
    }
    ctx.begin_command();
    let reply = (cmd.run)(ctx, argv);
    ctx.end_command(argv);
    reply
}

/// An argument as Redis's `%s` / `%.Ns` prints it into an error: up to its first NUL
/// byte, at most `max` bytes. (The reply writer turns CR and LF into spaces, as Redis's
/// formatted errors do.)
pub fn err_arg(b: &[u8], max: usize) -> std::borrow::Cow<'_, str> {
    let b = b.iter().position(|&c| c == 0).map_or(b, |nul| &b[..nul]);
    String::from_utf8_lossy(&b[..b.len().min(max)])
}

/// An expire argument out of range: Redis 7 names the command in quotes.
pub fn invalid_expire_time(cmd: &str, version: ServerVersion) -> Reply {
    if version.is_redis62() {
        Reply::error(format!("ERR invalid expire time in {cmd}"))
    } else {
        Reply::error(format!("ERR invalid expire time in '{cmd}' command"))
    }
}

/// Redis's reply to a command it does not know: Redis 7 quotes with `'` and cuts the
/// name at 128 bytes; Redis 6.2 quotes with backticks and separates with commas.
pub fn unknown_command(argv: &[Vec<u8>], version: ServerVersion) -> Reply {
    let redis62 = version.is_redis62();
    let name =
        argv.first().map(|n| err_arg(n, if redis62 { usize::MAX } else { 128 }).into_owned()).unwrap_or_default();
    let (open, close) = if redis62 { ("`", "`, ") } else { ("'", "' ") };
    let mut args = String::new();
    for a in argv.iter().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push_str(open);
        args.push_str(&err_arg(a, room));
        args.push_str(close);
    }
    Reply::error(format!("ERR unknown command {open}{name}{}, with args beginning with: {args}", &close[..1]))
}

/// Parse an integer argument as Redis's string2ll does.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    crate::format::blob::parse_canonical_i64(b)
}

/// Parse an integer argument, or the reply Redis gives for a bad one.
pub fn arg_i64(b: &[u8]) -> Result<i64, Reply> {
    parse_i64(b).ok_or_else(Reply::not_integer)
}

/// Parse a float argument as Redis's getDoubleFromObject does (strtod, whole string, no NaN).
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty()
        || s.starts_with(|c: char| c.is_ascii_whitespace())
        || s.ends_with(|c: char| c.is_ascii_whitespace())
    {
        return None;
    }
    let v: f64 = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => s.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// Case-insensitive comparison of an argument with an option name.
pub fn eq_ic(arg: &[u8], opt: &str) -> bool {
    arg.eq_ignore_ascii_case(opt.as_bytes())
}
