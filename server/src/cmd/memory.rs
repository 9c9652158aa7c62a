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
        b"stats" => stats(s, c),
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

/// Where memory goes beside the dataset, as Redis's getMemoryOverheadData breaks it down
/// (INFO memory's used_memory_overhead and mem_* fields, MEMORY STATS): the memory taken
/// at startup, the replication backlog and replicas' buffers, the other clients' buffers,
/// the AOF's pending buffer, the script caches, and each database's table and TTL index
/// sized in Redis's dict model (the key tables' share, where Redis counts its dicts).
pub(crate) struct Overhead {
    pub startup: u64,
    pub backlog: u64,
    pub replicas: u64,
    pub clients_normal: u64,
    pub aof_buffer: u64,
    pub lua_caches: u64,
    pub functions_caches: u64,
    /// Per non-empty database: its index, the main table's and the TTL index's bytes.
    pub dbs: Vec<(usize, u64, u64)>,
}

impl Overhead {
    /// `current`: the client running the command (out of the client table meanwhile).
    pub(crate) fn of(s: &Server, current: &Client) -> Overhead {
        let (backlog, replicas) = s.replication_buffer_split();
        let others = s.clients.values().map(|x| &**x);
        let clients_normal = others
            .chain(std::iter::once(current))
            .filter(|x| !x.replica && !x.master)
            .map(|x| x.total_memory() as u64)
            .sum();
        let aof_buffer = s.engine.persistence().aof.as_ref().map_or(0, |a| a.pending_len()) as u64;
        let dbs = (s.engine.keyspace().dbs.iter().enumerate())
            .filter(|(_, db)| !db.is_empty())
            .map(|(i, db)| {
                let main = dict_slots(db.len()) * 8 + db.len() * DICT_ENTRY;
                let expires = dict_slots(db.volatile_len()) * 8 + db.volatile_len() * DICT_ENTRY;
                (i, main as u64, expires as u64)
            })
            .collect();
        Overhead {
            startup: s.startup_memory,
            backlog: backlog as u64,
            replicas: replicas as u64,
            clients_normal,
            aof_buffer,
            lua_caches: s.scripts.cache_memory() as u64,
            functions_caches: s.scripts.functions_memory() as u64,
            dbs,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        let fixed = self.startup + self.backlog + self.replicas + self.clients_normal + self.aof_buffer;
        fixed + self.lua_caches + self.functions_caches + self.dbs.iter().map(|(_, m, e)| m + e).sum::<u64>()
    }

    /// The dataset (used memory less the overhead) and its share of what is not startup
    /// memory, in percent (INFO used_memory_dataset / _perc).
    pub(crate) fn dataset(&self, used: u64) -> (u64, f64) {
        let dataset = used.saturating_sub(self.total());
        let net = used.saturating_sub(self.startup);
        (dataset, if net > 0 { dataset as f64 * 100.0 / net as f64 } else { 0.0 })
    }
}

/// MEMORY STATS: Redis's fields; the totals are the allocator's count (INFO used_memory),
/// the allocator's resident figures the process's resident size.
fn stats(s: &Server, c: &Client) -> Reply {
    let (used, peak) = crate::maxmemory::used_and_peak(s);
    let (total, peak, resident) = (used as i64, peak as i64, rss() as i64);
    let keys: usize = s.engine.keyspace().len();
    let o = Overhead::of(s, c);
    let int = |n: i64| Reply::Int(n);
    let mut m: Vec<(Reply, Reply)> = vec![
        (Reply::bulk(b"peak.allocated"), int(peak)),
        (Reply::bulk(b"total.allocated"), int(total)),
        (Reply::bulk(b"startup.allocated"), int(o.startup as i64)),
        (Reply::bulk(b"replication.backlog"), int(o.backlog as i64)),
        (Reply::bulk(b"clients.slaves"), int(o.replicas as i64)),
        (Reply::bulk(b"clients.normal"), int(o.clients_normal as i64)),
        (Reply::bulk(b"cluster.links"), int(0)),
        (Reply::bulk(b"aof.buffer"), int(o.aof_buffer as i64)),
        (Reply::bulk(b"lua.caches"), int(o.lua_caches as i64)),
        (Reply::bulk(b"functions.caches"), int(o.functions_caches as i64)),
    ];
    // Redis 7.4 (and Valkey 8) keeps its databases in a kvstore: no slot-to-keys table, a lookup table
    // and a rehashing count instead (none of them here).
    let redis74 = s.engine.config().version.since_redis74();
    for &(i, main, expires) in &o.dbs {
        let mut db = vec![
            (Reply::bulk(b"overhead.hashtable.main"), int(main as i64)),
            (Reply::bulk(b"overhead.hashtable.expires"), int(expires as i64)),
        ];
        if !redis74 {
            db.push((Reply::bulk(b"overhead.hashtable.slot-to-keys"), int(0)));
        }
        m.push((Reply::bulk(format!("db.{i}").as_bytes()), Reply::Map(db)));
    }
    if redis74 {
        m.push((Reply::bulk(b"overhead.db.hashtable.lut"), int(0)));
        m.push((Reply::bulk(b"overhead.db.hashtable.rehashing"), int(0)));
    }
    let (dataset, dataset_perc) = o.dataset(used);
    let per_key = if keys > 0 { (used.saturating_sub(o.startup) / keys as u64) as i64 } else { 0 };
    m.push((Reply::bulk(b"overhead.total"), int(o.total() as i64)));
    if redis74 {
        m.push((Reply::bulk(b"db.dict.rehashing.count"), int(0)));
    }
    m.extend([
        (Reply::bulk(b"keys.count"), int(keys as i64)),
        (Reply::bulk(b"keys.bytes-per-key"), int(per_key)),
        (Reply::bulk(b"dataset.bytes"), int(dataset as i64)),
        (Reply::bulk(b"dataset.percentage"), Reply::Double(dataset_perc)),
        (
            Reply::bulk(b"peak.percentage"),
            Reply::Double(if peak > 0 { total as f64 * 100.0 / peak as f64 } else { 100.0 }),
        ),
        (Reply::bulk(b"allocator.allocated"), int(total)),
        (Reply::bulk(b"allocator.active"), int(resident)),
        (Reply::bulk(b"allocator.resident"), int(resident)),
    ]);
    if redis74 {
        m.push((Reply::bulk(b"allocator.muzzy"), int(0)));
    }
    m.extend([
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
