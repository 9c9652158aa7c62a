//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP.
//!
//! USAGE answers what Redis 7.0 would: the size of Redis's structures for the key's
//! encoding (robj, sds headers, listpacks, quicklist nodes, dict tables and entries),
//! each allocation rounded up to jemalloc's size classes, nested values sampled as
//! objectComputeSize samples them. It describes Redis's layout, not ferrokv's own
//! (docs/server.md says how close it comes).

use ferrokv::command::{eq_ic, fmt_double, parse_i64};
use ferrokv::value::{Hash, List, Set, Str, Value, Zset};
use ferrokv::Reply;

use super::{sub_arity, unknown_subcommand};
use crate::client::Client;
use crate::server::Server;

const ROBJ: usize = 16;
const DICT_ENTRY: usize = 24;
const DICT: usize = 56;
const QUICKLIST: usize = 40;
const QUICKLIST_NODE: usize = 40;
const ZSET: usize = 16;
const ZSKIPLIST: usize = 32;
/// zmalloc_size of a skiplist header (32 levels).
const ZSL_HEADER: usize = 640;
/// Expected zmalloc_size of a skiplist node: 48 bytes at level 1 (p = 3/4), more above.
const ZSL_NODE: f64 = 53.3;
const DEFAULT_SAMPLES: usize = 5;

const HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

pub fn memory(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = a[1].to_ascii_lowercase();
    // A container command, as in Redis 7.0: each subcommand has its own arity.
    let arity_ok = match sub.as_slice() {
        b"usage" => a.len() >= 3,
        b"help" | b"stats" | b"doctor" | b"malloc-stats" | b"purge" => a.len() == 2,
        _ => return unknown_subcommand(&a[1], "memory"),
    };
    if !arity_ok {
        return sub_arity("memory", &a[1]);
    }
    match sub.as_slice() {
        b"help" => Reply::Array(HELP.iter().map(|l| Reply::simple(l)).collect()),
        b"usage" => usage(s, c, a),
        b"stats" => stats(s),
        b"doctor" => {
            let text = if crate::alloc::used_memory() < 5 << 20 {
                "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used \
                 in these conditions. Please, leave for your mission on Earth and fill it with some data. The new \
                 Sam and I will be back to our programming as soon as I finished rebooting.\n"
            } else {
                "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on \
                 this base.\n"
            };
            Reply::Verbatim(text.as_bytes().to_vec())
        }
        b"malloc-stats" => Reply::bulk(b"Stats not supported for the current allocator"),
        _ => Reply::ok(),
    }
}

fn usage(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let mut samples = DEFAULT_SAMPLES;
    let mut i = 3;
    while i < a.len() {
        if eq_ic(&a[i], "samples") && i + 1 < a.len() {
            match parse_i64(&a[i + 1]) {
                None => return Reply::not_integer(),
                Some(n) if n < 0 => return Reply::syntax(),
                Some(0) => samples = usize::MAX,
                Some(n) => samples = n as usize,
            }
            i += 2;
        } else {
            return Reply::syntax();
        }
    }
    // As Redis: the key as stored, even when its TTL has passed.
    let Some(slot) = s.engine.keyspace().dbs.get(c.session.db).and_then(|d| d.get(&a[2])) else {
        return Reply::Nil;
    };
    let limit = s.cfg.engine.limits.list_max_listpack_size;
    let size = value_size(&slot.value, samples, limit) + sds_alloc(slot.key.len()) + DICT_ENTRY;
    Reply::Int(size as i64)
}

/// Redis 7.4's `listpackEx` beside its listpack: expiry metadata, key and listpack pointers.
const LISTPACK_EX_HEADER: usize = 32;

/// What Redis's objectComputeSize answers for `v`.
pub fn value_size(v: &Value, samples: usize, list_fill: i64) -> usize {
    let samples = samples.max(1);
    match v {
        Value::Str(Str::Int(_)) => ROBJ,
        Value::Str(Str::Emb(b)) => jemalloc(ROBJ + 3 + b.len() + 1),
        Value::Str(Str::Raw(b)) => ROBJ + sds_alloc(b.len()),
        Value::List(l) => list_size(l, samples, list_fill),
        Value::Hash(h) => match &**h {
            Hash::Listpack(pairs) => {
                ROBJ + jemalloc(listpack_bytes(pairs.iter().flat_map(|(f, v)| [f.as_slice(), v.as_slice()])))
            }
            Hash::ListpackEx(_) => {
                // The triplets' listpack (a TTL is a listpack integer) and the listpackEx
                // header (its expiry metadata and key pointer).
                let ttls: Vec<String> = h.iter_with_ttl().map(|(_, _, t)| t.unwrap_or(0).to_string()).collect();
                let items = h.iter_with_ttl().zip(&ttls).flat_map(|((f, v, _), t)| [f, v, t.as_bytes()]);
                ROBJ + LISTPACK_EX_HEADER + jemalloc(listpack_bytes(items))
            }
            Hash::Table(_) => {
                let per = sampled(h.iter(), samples, |(f, v)| sds_alloc(f.len()) + sds_alloc(v.len()) + DICT_ENTRY);
                ROBJ + DICT + 8 * dict_slots(h.len()) + (per * h.len() as f64) as usize
            }
        },
        Value::Set(st) => match &**st {
            Set::Intset(v) => {
                let width = match v.iter().map(|x| x.unsigned_abs()).max().unwrap_or(0) {
                    m if m <= i16::MAX as u64 => 2,
                    m if m <= i32::MAX as u64 => 4,
                    _ => 8,
                };
                ROBJ + jemalloc(8 + v.len() * width)
            }
            Set::Listpack(members) => ROBJ + jemalloc(listpack_bytes(members.iter().map(|m| m.as_slice()))),
            Set::Table(_) => {
                let per = sampled(st.iter(), samples, |m| sds_alloc(m.len()) + DICT_ENTRY);
                ROBJ + DICT + 8 * dict_slots(st.len()) + (per * st.len() as f64) as usize
            }
        },
        Value::Zset(z) => match &**z {
            Zset::Listpack(items) => {
                let scores: Vec<String> = items.iter().map(|(_, sc)| fmt_double(*sc)).collect();
                let entries = items.iter().zip(&scores).flat_map(|((m, _), sc)| [m.as_slice(), sc.as_bytes()]);
                ROBJ + jemalloc(listpack_bytes(entries))
            }
            Zset::Skiplist(_) => {
                let per = sampled(z.iter(), samples, |(m, _)| sds_alloc(m.len()) + DICT_ENTRY) + ZSL_NODE;
                ROBJ + ZSET + ZSKIPLIST + DICT + 8 * dict_slots(z.len()) + ZSL_HEADER + (per * z.len() as f64) as usize
            }
        },
        Value::Stream(st) => {
            // A rough figure: the entries' listpacks and a radix tree node per 100 entries.
            let bytes: usize =
                st.entries().map(|(_, f)| f.iter().map(|(k, v)| k.len() + v.len() + 4).sum::<usize>() + 16).sum();
            ROBJ + 64 + jemalloc(bytes) + st.len().div_ceil(100) * 64
        }
    }
}

/// The average of `f` over the first `samples` items (0 for none).
fn sampled<T>(items: impl Iterator<Item = T>, samples: usize, f: impl Fn(T) -> usize) -> f64 {
    let (mut sum, mut n) = (0usize, 0usize);
    for it in items.take(samples) {
        sum += f(it);
        n += 1;
    }
    if n == 0 {
        0.0
    } else {
        sum as f64 / n as f64
    }
}

/// A quicklist as Redis 7.0 builds it by appending: nodes filled up to the
/// list-max-listpack-size limit, each a 40-byte node and its listpack.
fn list_size(l: &List, samples: usize, fill: i64) -> usize {
    let limit_bytes = match fill {
        -1 => 4096,
        -3 => 16384,
        -4 => 32768,
        f if f <= -5 => 65536,
        f if f >= 0 => 8192,
        _ => 8192,
    };
    let mut nodes: Vec<usize> = Vec::new();
    let (mut sz, mut count) = (0usize, 0i64);
    for item in l.iter() {
        let fits = count > 0 && sz + item.len() + 8 <= limit_bytes && (fill < 0 || count < fill.max(1));
        if !fits {
            if count > 0 {
                nodes.push(sz);
            }
            sz = 7;
            count = 0;
        }
        sz += entry_bytes(item);
        count += 1;
    }
    if count > 0 {
        nodes.push(sz);
    }
    let n = nodes.len();
    let per = sampled(nodes.into_iter(), samples, |b| QUICKLIST_NODE + jemalloc(b));
    ROBJ + QUICKLIST + (per * n as f64) as usize
}

/// Bytes of a listpack holding `items` (header, entries, end byte).
fn listpack_bytes<'a>(items: impl Iterator<Item = &'a [u8]>) -> usize {
    7 + items.map(entry_bytes).sum::<usize>()
}

/// One listpack entry: encoding, data and back length.
fn entry_bytes(b: &[u8]) -> usize {
    let size = match std::str::from_utf8(b).ok().and_then(|t| t.parse::<i64>().ok().filter(|v| v.to_string() == t)) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..=4095).contains(&v) => 2,
        Some(v) if i16::try_from(v).is_ok() => 3,
        Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => 4,
        Some(v) if i32::try_from(v).is_ok() => 5,
        Some(_) => 9,
        None if b.len() < 64 => 1 + b.len(),
        None if b.len() < 4096 => 2 + b.len(),
        None => 5 + b.len(),
    };
    let backlen = match size {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    };
    size + backlen
}

/// An sds string's allocation: header by length class, bytes, terminator.
fn sds_alloc(len: usize) -> usize {
    let header = match len {
        0..=31 => 1,
        32..=255 => 3,
        256..=65535 => 5,
        _ => 9,
    };
    jemalloc(header + len + 1)
}

/// Slots of a dict holding `n` entries (a power of two, at least 4).
fn dict_slots(n: usize) -> usize {
    n.max(4).next_power_of_two()
}

/// jemalloc's size class for `n` bytes: 8, multiples of 16 up to 128, then four classes
/// per doubling.
fn jemalloc(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    let pow = usize::BITS - (n - 1).leading_zeros();
    let step = 1usize << (pow - 3);
    n.div_ceil(step) * step
}

fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4096
}

/// MEMORY STATS: Redis's fields; the totals are the allocator's count (INFO used_memory),
/// the allocator's resident figures the process's resident size.
fn stats(s: &Server) -> Reply {
    let (used, peak) = crate::maxmemory::used_and_peak(s);
    let (total, peak, resident) = (used as i64, peak as i64, rss() as i64);
    let keys: usize = s.engine.keyspace().len();
    let int = |n: i64| Reply::Int(n);
    let mut m: Vec<(Reply, Reply)> = vec![
        (Reply::bulk(b"peak.allocated"), int(peak)),
        (Reply::bulk(b"total.allocated"), int(total)),
        (Reply::bulk(b"startup.allocated"), int(0)),
        (Reply::bulk(b"replication.backlog"), int(0)),
        (Reply::bulk(b"clients.slaves"), int(0)),
        (Reply::bulk(b"clients.normal"), int(0)),
        (Reply::bulk(b"cluster.links"), int(0)),
        (Reply::bulk(b"aof.buffer"), int(0)),
        (Reply::bulk(b"lua.caches"), int(0)),
        (Reply::bulk(b"functions.caches"), int(0)),
    ];
    for (i, db) in s.engine.keyspace().dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let main = (dict_slots(db.len()) * 8 + db.len() * DICT_ENTRY) as i64;
        let expires = (dict_slots(db.volatile_len()) * 8 + db.volatile_len() * DICT_ENTRY) as i64;
        m.push((
            Reply::bulk(format!("db.{i}").as_bytes()),
            Reply::Map(vec![
                (Reply::bulk(b"overhead.hashtable.main"), int(main)),
                (Reply::bulk(b"overhead.hashtable.expires"), int(expires)),
                (Reply::bulk(b"overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let per_key = if keys > 0 { total / keys as i64 } else { 0 };
    m.extend([
        (Reply::bulk(b"overhead.total"), int(0)),
        (Reply::bulk(b"keys.count"), int(keys as i64)),
        (Reply::bulk(b"keys.bytes-per-key"), int(per_key)),
        (Reply::bulk(b"dataset.bytes"), int(total)),
        (Reply::bulk(b"dataset.percentage"), Reply::Double(100.0)),
        (
            Reply::bulk(b"peak.percentage"),
            Reply::Double(if peak > 0 { total as f64 * 100.0 / peak as f64 } else { 100.0 }),
        ),
        (Reply::bulk(b"allocator.allocated"), int(total)),
        (Reply::bulk(b"allocator.active"), int(resident)),
        (Reply::bulk(b"allocator.resident"), int(resident)),
        (Reply::bulk(b"allocator-fragmentation.ratio"), Reply::Double(1.0)),
        (Reply::bulk(b"allocator-fragmentation.bytes"), int(0)),
        (Reply::bulk(b"allocator-rss.ratio"), Reply::Double(1.0)),
        (Reply::bulk(b"allocator-rss.bytes"), int(0)),
        (Reply::bulk(b"rss-overhead.ratio"), Reply::Double(1.0)),
        (Reply::bulk(b"rss-overhead.bytes"), int(0)),
        (Reply::bulk(b"fragmentation"), Reply::Double(1.0)),
        (Reply::bulk(b"fragmentation.bytes"), int(0)),
    ]);
    Reply::Map(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_classes() {
        let got: Vec<usize> = [1, 8, 9, 17, 100, 128, 129, 160, 161, 257, 544, 1025].map(jemalloc).to_vec();
        assert_eq!(got, [8, 8, 16, 32, 112, 128, 160, 160, 192, 320, 640, 1280]);
    }
}
