//! ACL command categories, in Redis 7.0's order (ACL CAT lists them so, COMMAND INFO
//! prints a command's in this order, and ACL GETUSER's rules are built trying them so).

pub const KEYSPACE: u32 = 1 << 0;
pub const READ: u32 = 1 << 1;
pub const WRITE: u32 = 1 << 2;
pub const SET: u32 = 1 << 3;
pub const SORTEDSET: u32 = 1 << 4;
pub const LIST: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const STRING: u32 = 1 << 7;
pub const BITMAP: u32 = 1 << 8;
pub const HYPERLOGLOG: u32 = 1 << 9;
pub const GEO: u32 = 1 << 10;
pub const STREAM: u32 = 1 << 11;
pub const PUBSUB: u32 = 1 << 12;
pub const ADMIN: u32 = 1 << 13;
pub const FAST: u32 = 1 << 14;
pub const SLOW: u32 = 1 << 15;
pub const BLOCKING: u32 = 1 << 16;
pub const DANGEROUS: u32 = 1 << 17;
pub const CONNECTION: u32 = 1 << 18;
pub const TRANSACTION: u32 = 1 << 19;
pub const SCRIPTING: u32 = 1 << 20;

pub const NAMES: &[(&str, u32)] = &[
    ("keyspace", KEYSPACE),
    ("read", READ),
    ("write", WRITE),
    ("set", SET),
    ("sortedset", SORTEDSET),
    ("list", LIST),
    ("hash", HASH),
    ("string", STRING),
    ("bitmap", BITMAP),
    ("hyperloglog", HYPERLOGLOG),
    ("geo", GEO),
    ("stream", STREAM),
    ("pubsub", PUBSUB),
    ("admin", ADMIN),
    ("fast", FAST),
    ("slow", SLOW),
    ("blocking", BLOCKING),
    ("dangerous", DANGEROUS),
    ("connection", CONNECTION),
    ("transaction", TRANSACTION),
    ("scripting", SCRIPTING),
];

/// The category named `name` (any case).
pub fn by_name(name: &[u8]) -> Option<u32> {
    NAMES.iter().find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name)).map(|(_, f)| *f)
}

/// The categories a Redis 7 command's flags imply, given those it declares (Redis's
/// setImplicitACLCategories): a read-only scripting command is not `@read`; a command
/// that is not `@fast` is `@slow`.
pub fn from_flags(flags: u32, declared: u32) -> u32 {
    use ferrokv::command::flags as f;
    let mut c = 0;
    if flags & f::WRITE != 0 {
        c |= WRITE;
    }
    if flags & f::READONLY != 0 && declared & SCRIPTING == 0 {
        c |= READ;
    }
    if flags & f::ADMIN != 0 {
        c |= ADMIN | DANGEROUS;
    }
    if flags & f::PUBSUB != 0 {
        c |= PUBSUB;
    }
    if flags & f::FAST != 0 {
        c |= FAST;
    }
    if flags & f::BLOCKING != 0 {
        c |= BLOCKING;
    }
    if (c | declared) & FAST == 0 {
        c |= SLOW;
    }
    c
}
