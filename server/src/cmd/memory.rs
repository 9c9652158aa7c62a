//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP.
//!
//! USAGE answers what Redis would, from the engine's model of Redis's allocations
//! (`ferrokv::value::memory`).

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::memory::{dict_slots, key_usage, Allocator, Model, DICT_ENTRY};
use ferrokv::Reply;

use super::{sub_arity, unknown_subcommand};
use crate::client::Client;
use crate::server::Server;

const DEFAULT_SAMPLES: usize = 5;

const HELP: &[&str] = &[
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
        b"help" => Reply::help("MEMORY", HELP, crate::version::version()),
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
    let size = key_usage(
        &slot.key,
        &slot.value,
        samples,
        limit,
        &Model::usage(crate::version::version(), Allocator::JemallocQ16),
    );
    Reply::Int(size as i64)
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
    let (backlog, replicas) = s.replication_buffer_split();
    let int = |n: i64| Reply::Int(n);
    let mut m: Vec<(Reply, Reply)> = vec![
        (Reply::bulk(b"peak.allocated"), int(peak)),
        (Reply::bulk(b"total.allocated"), int(total)),
        (Reply::bulk(b"startup.allocated"), int(0)),
        (Reply::bulk(b"replication.backlog"), int(backlog as i64)),
        (Reply::bulk(b"clients.slaves"), int(replicas as i64)),
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
