//! INFO: the sections Redis 7.0 prints, with this server's numbers.

use std::fmt::Write;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::keyspace::Clock;
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;
use crate::stats::Metric;

/// Every section, in Redis's order.
const ORDER: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];
/// The sections of `all` and `everything` that `default` leaves out.
const ALL_EXTRA: &[&str] = &["commandstats", "latencystats"];

pub fn info(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let mut wanted: Vec<String> = Vec::new();
    for arg in &a[1..] {
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        match name.as_str() {
            "default" => wanted.extend(default_sections()),
            "all" | "everything" => wanted.extend(ORDER.iter().map(|s| s.to_string())),
            _ => wanted.push(name),
        }
    }
    if wanted.is_empty() {
        wanted.extend(default_sections());
    }
    let mut out = String::new();
    for &section in ORDER {
        if !wanted.iter().any(|w| w == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        write_section(s, c, section, &mut out);
    }
    Reply::Verbatim(out.into_bytes())
}

fn default_sections() -> impl Iterator<Item = String> {
    ORDER.iter().filter(|s| !ALL_EXTRA.contains(s)).map(|s| s.to_string())
}

fn title(section: &str) -> String {
    if section == "cpu" {
        return "CPU".into();
    }
    let mut t = section.to_string();
    if let Some(f) = t.get_mut(0..1) {
        f.make_ascii_uppercase();
    }
    t
}

/// Fields Redis 7.0 added to INFO, which 6.2 does not show.
const SINCE_7_0: &[&str] = &[
    "used_memory_vm_eval",
    "used_memory_scripts_eval",
    "number_of_functions",
    "number_of_libraries",
    "used_memory_vm_functions",
    "used_memory_vm_total",
    "used_memory_vm_total_human",
    "used_memory_functions",
    "mem_total_replication_buffers",
    "mem_cluster_links",
    "async_loading",
    "current_cow_peak",
    "rdb_saves",
    "rdb_last_load_keys_expired",
    "rdb_last_load_keys_loaded",
    "aof_rewrites",
    "aof_rewrites_consecutive_failures",
    "total_net_repl_input_bytes",
    "total_net_repl_output_bytes",
    "instantaneous_input_repl_kbps",
    "instantaneous_output_repl_kbps",
    "evicted_clients",
    "total_eviction_exceeded_time",
    "current_eviction_exceeded_time",
    "pubsubshard_channels",
    "total_active_defrag_time",
    "current_active_defrag_time",
    "reply_buffer_shrinks",
    "reply_buffer_expands",
];

fn write_section(s: &Server, c: &Client, section: &str, out: &mut String) {
    let _ = writeln_crlf(out, &format!("# {}", title(section)));
    let now_ms = Clock::System.now_ms();
    let redis62 = s.engine.config().version.is_redis62();
    let mut kv = |k: &str, v: String| {
        if redis62 && SINCE_7_0.contains(&k) {
            return;
        }
        out.push_str(k);
        out.push(':');
        out.push_str(&v);
        out.push_str("\r\n");
    };
    match section {
        "server" => {
            let uptime = s.started.elapsed().as_secs();
            kv("redis_version", crate::version::release().into());
            if let Some(valkey) = crate::version::valkey_release() {
                kv("server_name", "valkey".into());
                kv("valkey_version", valkey.into());
            }
            kv("redis_git_sha1", "00000000".into());
            kv("redis_git_dirty", "0".into());
            kv("redis_build_id", "0".into());
            let mode = if s.engine.config().version == ServerVersion::Valkey80 { "server_mode" } else { "redis_mode" };
            kv(mode, "standalone".into());
            kv("ferrokv_version", env!("CARGO_PKG_VERSION").into());
            kv("os", format!("{} {}", std::env::consts::OS, std::env::consts::ARCH));
            kv("arch_bits", (usize::BITS).to_string());
            kv("monotonic_clock", "POSIX clock_gettime".into());
            kv("multiplexing_api", "epoll".into());
            kv("process_id", std::process::id().to_string());
            kv("process_supervised", "no".into());
            kv("run_id", s.run_id.clone());
            kv("tcp_port", s.local_port().unwrap_or(s.cfg.port).to_string());
            kv("server_time_usec", (now_ms * 1000).to_string());
            kv("uptime_in_seconds", uptime.to_string());
            kv("uptime_in_days", (uptime / 86400).to_string());
            kv("hz", s.cfg.engine.hz.to_string());
            kv("configured_hz", s.cfg.engine.hz.to_string());
            kv("lru_clock", Clock::System.lru().to_string());
            kv("executable", std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
            kv("config_file", s.cfg.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default());
            kv("io_threads_active", "0".into());
            if let Some(ms) = s.shutdown_in_ms() {
                kv("shutdown_in_milliseconds", ms.to_string());
            }
        }
        "clients" => {
            // Replicas are not counted (Redis: clients less replicas).
            let replicas = s.clients.values().filter(|x| x.replica).count();
            kv("connected_clients", (s.clients.len() + 1 - replicas).to_string());
            kv("cluster_connections", "0".into());
            kv("maxclients", s.cfg.maxclients.to_string());
            kv("client_recent_max_input_buffer", c.query.capacity().to_string());
            kv("client_recent_max_output_buffer", "0".into());
            kv("blocked_clients", (s.blocking.count + s.pause.waiting()).to_string());
            kv("tracking_clients", s.tracking.clients().to_string());
            let version = s.engine.config().version;
            let all = || s.clients.values().map(|x| &**x).chain(std::iter::once(&*c));
            if version.since_redis74() {
                kv("pubsub_clients", all().filter(|x| x.subs.active()).count().to_string());
                kv("watching_clients", all().filter(|x| !x.watched.is_empty()).count().to_string());
            }
            kv("clients_in_timeout_table", s.blocking.with_timeout().to_string());
            if version.since_redis74() {
                kv("total_watched_keys", s.watched.len().to_string());
            }
            if version.behaves_as() >= ServerVersion::Redis72 {
                // Keys whose deletion ends a wait: those an XREADGROUP waits on.
                let on_nokey = |ids: &std::collections::VecDeque<u64>| {
                    ids.iter().any(|id| {
                        let x = if *id == c.id { Some(&*c) } else { s.clients.get(id).map(|x| &**x) };
                        x.and_then(|x| x.blocked.as_ref()).is_some_and(|b| b.op.unblocks_on_deletion())
                    })
                };
                kv("total_blocking_keys", s.blocking.keys().count().to_string());
                kv("total_blocking_keys_on_nokey", s.blocking.keys().filter(|ids| on_nokey(ids)).count().to_string());
            }
        }
        "memory" => {
            // used_memory is the allocator's count (the figure maxmemory is held to).
            let rss = rss_bytes();
            let (used, peak) = crate::maxmemory::used_and_peak(s);
            kv("used_memory", used.to_string());
            kv("used_memory_human", human(used));
            kv("used_memory_rss", rss.to_string());
            kv("used_memory_rss_human", human(rss));
            kv("used_memory_peak", peak.to_string());
            kv("used_memory_peak_human", human(peak));
            kv("used_memory_peak_perc", format!("{:.2}%", used as f64 * 100.0 / peak.max(1) as f64));
            let overhead = crate::cmd::memory::Overhead::of(s, c);
            kv("used_memory_overhead", overhead.total().to_string());
            kv("used_memory_startup", s.startup_memory.to_string());
            let (dataset, dataset_perc) = overhead.dataset(used);
            kv("used_memory_dataset", dataset.to_string());
            kv("used_memory_dataset_perc", format!("{dataset_perc:.2}%"));
            let total = total_system_memory();
            kv("total_system_memory", total.to_string());
            kv("total_system_memory_human", human(total));
            for (k, v) in crate::script::info_memory(&s.scripts) {
                kv(k, v);
            }
            kv("maxmemory", s.cfg.maxmemory.to_string());
            kv("maxmemory_human", human(s.cfg.maxmemory));
            kv("maxmemory_policy", s.cfg.maxmemory_policy.clone());
            kv("mem_fragmentation_ratio", format!("{:.2}", rss as f64 / used.max(1) as f64));
            kv("mem_fragmentation_bytes", (rss as i64 - used as i64).to_string());
            kv("mem_not_counted_for_evict", s.replica_buffer_excess().to_string());
            let (backlog, replicas) = s.replication_buffer_split();
            kv("mem_replication_backlog", backlog.to_string());
            kv("mem_total_replication_buffers", s.replication_buffer_mem().to_string());
            kv("mem_clients_slaves", replicas.to_string());
            kv("mem_clients_normal", overhead.clients_normal.to_string());
            kv("mem_cluster_links", "0".into());
            kv("mem_aof_buffer", overhead.aof_buffer.to_string());
            kv("mem_allocator", "mimalloc".into());
            if s.engine.config().version.since_redis74() {
                // Redis 7.4's tables being rehashed: ours are never rehashed step by step.
                kv("mem_overhead_db_hashtable_rehashing", "0".into());
            }
            kv("active_defrag_running", "0".into());
            kv("lazyfree_pending_objects", ferrokv::keyspace::lazyfree::pending().to_string());
            kv("lazyfreed_objects", ferrokv::keyspace::lazyfree::freed().to_string());
        }
        "persistence" => {
            let aof_on = s.engine.persistence().aof.as_ref().is_some_and(|a| a.is_open());
            kv("loading", u8::from(s.is_loading()).to_string());
            kv("async_loading", u8::from(s.is_async_loading()).to_string());
            // No fork here, so no copy-on-write: Redis's figures for a fork that copied nothing.
            kv("current_cow_peak", "0".into());
            kv("current_cow_size", "0".into());
            kv("current_cow_size_age", "0".into());
            kv("current_fork_perc", "0.00".into());
            let (copied, total) = s.snapshot_progress();
            kv("current_save_keys_processed", copied.to_string());
            kv("current_save_keys_total", total.to_string());
            kv("rdb_changes_since_last_save", s.engine.stats().dirty.to_string());
            kv(
                "rdb_bgsave_in_progress",
                u8::from(s.jobs.bgsave.is_some() || s.replicas.syncs.is_running()).to_string(),
            );
            kv("rdb_last_save_time", s.jobs.last_save.to_string());
            kv("rdb_last_bgsave_status", if s.jobs.last_bgsave_ok { "ok" } else { "err" }.into());
            kv("rdb_last_bgsave_time_sec", "-1".into());
            kv("rdb_current_bgsave_time_sec", "-1".into());
            kv("rdb_saves", s.jobs.rdb_saves.to_string());
            kv("rdb_last_cow_size", "0".into());
            let loaded = &s.engine.persistence().rdb_load;
            kv("rdb_last_load_keys_expired", loaded.expired.to_string());
            kv("rdb_last_load_keys_loaded", loaded.loaded.to_string());
            kv("aof_enabled", u8::from(aof_on).to_string());
            kv("aof_rewrite_in_progress", u8::from(s.jobs.bgrewrite.is_some()).to_string());
            kv("aof_rewrite_scheduled", u8::from(s.jobs.rewrite_scheduled).to_string());
            kv("aof_last_rewrite_time_sec", "-1".into());
            kv("aof_current_rewrite_time_sec", "-1".into());
            kv("aof_last_bgrewrite_status", if s.jobs.last_rewrite_ok { "ok" } else { "err" }.into());
            kv("aof_rewrites", s.jobs.aof_rewrites.to_string());
            kv("aof_rewrites_consecutive_failures", s.jobs.rewrite_failures_in_a_row.to_string());
            kv("aof_last_write_status", if s.engine.aof_failure().is_some() { "err" } else { "ok" }.into());
            kv("aof_last_cow_size", "0".into());
            if let Some(aof) = s.engine.persistence().aof.as_ref().filter(|a| a.is_open()) {
                kv("aof_current_size", aof.current_size().to_string());
                kv("aof_base_size", aof.base_size().to_string());
                kv("aof_buffer_length", aof.pending_len().to_string());
            }
            kv("module_fork_in_progress", "0".into());
            for (k, v) in s.loading_info() {
                kv(k, v);
            }
        }
        "stats" => {
            let st = &s.stats;
            let es = s.engine.stats();
            kv("total_connections_received", st.connections_received.to_string());
            kv("total_commands_processed", st.commands_processed.to_string());
            let inst = &st.instantaneous;
            let kbps = |m| format!("{:.2}", inst.get(m) as f64 / 1024.0);
            kv("instantaneous_ops_per_sec", inst.get(Metric::Commands).to_string());
            kv("total_net_input_bytes", st.net_input_bytes.to_string());
            kv("total_net_output_bytes", st.net_output_bytes.to_string());
            kv("total_net_repl_input_bytes", st.net_repl_input_bytes.to_string());
            kv("total_net_repl_output_bytes", st.net_repl_output_bytes.to_string());
            kv("instantaneous_input_kbps", kbps(Metric::NetInput));
            kv("instantaneous_output_kbps", kbps(Metric::NetOutput));
            kv("instantaneous_input_repl_kbps", kbps(Metric::NetReplInput));
            kv("instantaneous_output_repl_kbps", kbps(Metric::NetReplOutput));
            kv("rejected_connections", st.rejected_connections.to_string());
            kv("sync_full", st.sync_full.to_string());
            kv("sync_partial_ok", st.sync_partial_ok.to_string());
            kv("sync_partial_err", st.sync_partial_err.to_string());
            let v74 = s.engine.config().version == ServerVersion::Redis74;
            if v74 {
                kv("expired_subkeys", es.expired_subkeys.to_string());
            }
            kv("expired_keys", es.expired_keys.to_string());
            kv("expired_stale_perc", format!("{:.2}", st.expired_stale_perc * 100.0));
            kv("expired_time_cap_reached_count", st.expired_time_cap_reached_count.to_string());
            kv("expire_cycle_cpu_milliseconds", (st.expire_cycle_us / 1000).to_string());
            kv("evicted_keys", st.evicted_keys.to_string());
            kv("evicted_clients", "0".into());
            if s.engine.config().version.since_redis74() {
                kv("evicted_scripts", st.evicted_scripts.to_string());
            }
            let current = s.eviction.exceeded_ms();
            kv("total_eviction_exceeded_time", (st.total_eviction_exceeded_ms + current).to_string());
            kv("current_eviction_exceeded_time", current.to_string());
            kv("keyspace_hits", es.keyspace_hits.to_string());
            kv("keyspace_misses", es.keyspace_misses.to_string());
            kv("pubsub_channels", s.pubsub.channels.len().to_string());
            kv("pubsub_patterns", s.pubsub.patterns.len().to_string());
            kv("pubsubshard_channels", s.pubsub.shard_channels.len().to_string());
            kv("latest_fork_usec", s.jobs.latest_fork_usec.to_string());
            kv("total_forks", s.jobs.total_forks.to_string());
            kv("migrate_cached_sockets", s.migrate.count().to_string());
            // A writable replica's own TTLs are tracked with the keyspace's; no active
            // defragmentation here (mimalloc, no jemalloc hints).
            kv("slave_expires_tracked_keys", "0".into());
            for k in
                ["active_defrag_hits", "active_defrag_misses", "active_defrag_key_hits", "active_defrag_key_misses"]
            {
                kv(k, "0".into());
            }
            kv("total_active_defrag_time", "0".into());
            kv("current_active_defrag_time", "0".into());
            let (keys, items, prefixes) = s.tracking.totals();
            kv("tracking_total_keys", keys.to_string());
            kv("tracking_total_items", items.to_string());
            kv("tracking_total_prefixes", prefixes.to_string());
            kv("unexpected_error_replies", st.unexpected_error_replies.to_string());
            kv("total_error_replies", st.error_replies.to_string());
            kv("dump_payload_sanitizations", es.dump_payload_sanitizations.to_string());
            kv("total_reads_processed", "0".into());
            kv("total_writes_processed", "0".into());
            kv("io_threaded_reads_processed", "0".into());
            kv("io_threaded_writes_processed", "0".into());
            let version = s.engine.config().version;
            if version.since_redis74() {
                kv("client_query_buffer_limit_disconnections", st.query_buffer_limit_disconnections.to_string());
                kv("client_output_buffer_limit_disconnections", crate::obuf::disconnections().to_string());
            }
            kv("reply_buffer_shrinks", st.reply_buffer_shrinks.to_string());
            kv("reply_buffer_expands", st.reply_buffer_expands.to_string());
            if version.behaves_as() >= ServerVersion::Redis72 {
                kv("eventloop_cycles", st.eventloop_cycles.to_string());
                kv("eventloop_duration_sum", st.eventloop_us.to_string());
                kv("eventloop_duration_cmd_sum", st.eventloop_cmd_us.to_string());
                kv("instantaneous_eventloop_cycles_per_sec", inst.get(Metric::EventloopCycles).to_string());
                kv("instantaneous_eventloop_duration_usec", inst.turn_us().to_string());
                let [command, key, auth, channel] = st.acl_denied;
                kv("acl_access_denied_auth", auth.to_string());
                kv("acl_access_denied_cmd", command.to_string());
                kv("acl_access_denied_key", key.to_string());
                kv("acl_access_denied_channel", channel.to_string());
            }
        }
        "replication" => {
            let offset = s.repl_offset();
            match &s.link {
                Some(link) => {
                    kv("role", "slave".into());
                    kv("master_host", link.host.clone());
                    kv("master_port", link.port.to_string());
                    kv("master_link_status", if link.is_up() { "up" } else { "down" }.into());
                    kv(
                        "master_last_io_seconds_ago",
                        if link.is_up() { link.last_io_secs() as i64 } else { -1 }.to_string(),
                    );
                    kv("master_sync_in_progress", u8::from(link.is_syncing()).to_string());
                    kv("slave_read_repl_offset", offset.to_string());
                    kv("slave_repl_offset", offset.to_string());
                    kv("slave_priority", "100".into());
                    let ro = s.cfg.get("replica-read-only").as_deref() == Some("yes");
                    kv("slave_read_only", u8::from(ro).to_string());
                    kv("replica_announced", "1".into());
                }
                None => kv("role", "master".into()),
            }
            kv("connected_slaves", s.replicas.len().to_string());
            let (want, lag) = (s.cfg.min_replicas_to_write, s.cfg.min_replicas_max_lag);
            if want > 0 && lag > 0 {
                kv("min_slaves_good_slaves", s.replicas.good(lag.into()).to_string());
            }
            for (k, v) in s.replicas.info_lines() {
                kv(&k, v);
            }
            kv("master_failover_state", crate::replication::Failover::state_name(s.replicas.failover.as_ref()).into());
            for (k, v) in s.replicas.history.info_lines(offset) {
                kv(k, v);
            }
        }
        "cpu" => {
            let (user, sys) = cpu_seconds("/proc/self/stat");
            kv("used_cpu_sys", format!("{sys:.6}"));
            kv("used_cpu_user", format!("{user:.6}"));
            // No fork: background saves run on threads of this process.
            kv("used_cpu_sys_children", "0.000000".into());
            kv("used_cpu_user_children", "0.000000".into());
            let (user, sys) = cpu_seconds("/proc/thread-self/stat");
            kv("used_cpu_sys_main_thread", format!("{sys:.6}"));
            kv("used_cpu_user_main_thread", format!("{user:.6}"));
        }
        "errorstats" => {
            let mut codes: Vec<_> = s.stats.errors.iter().map(|(k, v)| (k.clone(), *v)).collect();
            codes.sort();
            for (code, n) in codes {
                kv(&format!("errorstat_{code}"), format!("count={n}"));
            }
        }
        "latencystats" => {
            let wanted: Vec<f64> = s
                .cfg
                .get("latency-tracking-info-percentiles")
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            for (name, h) in s.histograms.all() {
                let parts: Vec<String> = wanted
                    .iter()
                    .map(|p| format!("p{}={:.3}", crate::config::percentile_text(*p), h.percentile(*p)))
                    .collect();
                kv(&format!("latency_percentiles_usec_{name}"), parts.join(","));
            }
        }
        "cluster" => kv("cluster_enabled", "0".into()),
        "keyspace" => {
            for (i, db) in s.engine.keyspace().dbs.iter().enumerate() {
                if !db.is_empty() {
                    let mut line = format!("keys={},expires={},avg_ttl=0", db.len(), db.volatile_len());
                    // Redis 7.4 adds the hashes with field TTLs.
                    if s.engine.config().version == ServerVersion::Redis74 {
                        line.push_str(&format!(",subexpiry={}", db.hash_ttl_len()));
                    }
                    kv(&format!("db{i}"), line);
                }
            }
        }
        "commandstats" => {
            for (name, st) in s.stats.commands.iter() {
                let per = if st.calls > 0 { st.usec as f64 / st.calls as f64 } else { 0.0 };
                kv(
                    &format!("cmdstat_{name}"),
                    format!(
                        "calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
                        st.calls, st.usec, st.rejected, st.failed
                    ),
                );
            }
        }
        _ => {}
    }
}

/// A percentile as Redis names it: `%f` without its trailing zeros (`99.9`, `50`).
fn writeln_crlf(out: &mut String, line: &str) -> std::fmt::Result {
    write!(out, "{line}\r\n")
}

/// The machine's memory (MemTotal of /proc/meminfo).
fn total_system_memory() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    kb.unwrap_or(0) * 1024
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn human(b: u64) -> String {
    let b = b as f64;
    if b < 1024.0 {
        format!("{b}B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", b / 1024.0 / 1024.0)
    } else {
        format!("{:.2}G", b / 1024.0 / 1024.0 / 1024.0)
    }
}

/// User and system CPU seconds of this process or thread (`/proc/self/stat`,
/// `/proc/thread-self/stat`: clock ticks of 1/100 s).
fn cpu_seconds(path: &str) -> (f64, f64) {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name, which ends at the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
}
