//! Server configuration: a redis.conf-style file plus `--name value` flags, and the
//! parameter table CONFIG GET/SET work from (names, aliases, types, ranges and Redis
//! 7.0's error texts).

use std::path::PathBuf;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::config::Fsync;
use ferrokv::Config;

use crate::memory_value::parse_memory;

/// Who may change protected parameters (dir, dbfilename), as `enable-protected-configs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protected {
    No,
    Yes,
    Local,
}

impl Protected {
    /// Whether a client connected from `addr` may use what this guards (`local`: from
    /// the loopback interface or the unix socket only).
    pub fn allows(self, addr: Option<&crate::net::Peer>) -> bool {
        match self {
            Protected::Yes => true,
            Protected::No => false,
            Protected::Local => addr.is_some_and(crate::net::Peer::is_local),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// What the engine reads (persistence, expiry, encodings).
    pub engine: Config,
    pub port: u16,
    pub bind: Vec<String>,
    pub protected_mode: bool,
    pub requirepass: Option<Vec<u8>>,
    pub maxclients: u64,
    /// Idle seconds before a client is closed (0: never).
    pub timeout: u64,
    pub proto_max_bulk_len: i64,
    /// A client whose unparsed input grows past this is closed.
    pub client_query_buffer_limit: u64,
    pub enable_protected_configs: Protected,
    pub enable_debug_command: Protected,
    pub enable_module_command: Protected,
    pub loglevel: String,
    /// Values of the parameters accepted for compatibility that change nothing here yet
    /// (see `stored`), by canonical name.
    pub stored: std::collections::HashMap<&'static str, String>,
    /// `notify-keyspace-events` as flag bits (crate::notify).
    pub notify_keyspace_events: u32,
    pub obuf_limits: crate::obuf::Limits,
    /// maxmemory-policy as CONFIG GET prints it; `eviction_policy` is the same, parsed.
    pub maxmemory_policy: String,
    pub eviction_policy: crate::maxmemory::Policy,
    /// Bytes of `used_memory` above which keys are evicted or writes refused (0: no limit).
    pub maxmemory: u64,
    pub maxmemory_samples: u32,
    /// Microseconds a command takes to be logged in the slow log (negative: none).
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    pub maxmemory_eviction_tenacity: u32,
    /// Evicted keys propagate as UNLINK rather than DEL.
    pub lazyfree_lazy_eviction: bool,
    /// min-replicas-to-write / min-replicas-max-lag: with both above 0, a master refuses
    /// writes (NOREPLICAS) while fewer replicas acknowledged within the lag.
    pub min_replicas_to_write: u32,
    pub min_replicas_max_lag: u32,
    /// list-compress-depth: accepted and reported; lists are never compressed.
    pub list_compress_depth: i64,
    /// Milliseconds a script runs before other clients get BUSY (lua-time-limit).
    pub busy_reply_threshold: u64,
    /// `user` lines of the configuration (name, then rules), applied at startup.
    pub acl_users: Vec<Vec<String>>,
    /// `replicaof host port`: the master to replicate from at startup.
    pub replicaof: Option<(String, u16)>,
    /// The configuration file the server started from (absolute): CONFIG REWRITE's target.
    pub config_file: Option<std::path::PathBuf>,
    /// `rename-command old new` lines, in order (an empty new name removes the command).
    pub renames: Vec<(String, String)>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let mut engine = Config::default();
        // Redis 7.0 keeps small sets of strings in a hashtable (no listpack sets before 7.2).
        engine.limits.set_max_listpack_entries = 0;
        ServerConfig {
            engine,
            port: 6379,
            // Redis's compiled-in default (protected mode refuses remote clients without a
            // password); the embedded configuration binds 127.0.0.1.
            bind: vec!["*".into(), "-::*".into()],
            protected_mode: true,
            requirepass: None,
            maxclients: 10000,
            timeout: 0,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1 << 30,
            enable_protected_configs: Protected::No,
            // Redis 7's defaults: both off.
            enable_debug_command: Protected::No,
            enable_module_command: Protected::No,
            loglevel: "notice".into(),
            stored: std::collections::HashMap::new(),
            notify_keyspace_events: 0,
            obuf_limits: Default::default(),
            maxmemory_policy: "noeviction".into(),
            eviction_policy: crate::maxmemory::Policy::NoEviction,
            maxmemory: 0,
            maxmemory_samples: 5,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            maxmemory_eviction_tenacity: 10,
            lazyfree_lazy_eviction: false,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            list_compress_depth: 0,
            busy_reply_threshold: 5000,
            acl_users: Vec::new(),
            replicaof: None,
            config_file: None,
            renames: Vec::new(),
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    /// An integer that also takes units (1k, 2mb, 1gb).
    Memory {
        min: i64,
        max: i64,
    },
    /// A memory value, or a percentage (`10%`) as Redis's PERCENT_CONFIG takes it.
    MemoryOrPercent,
    /// An integer written in octal (`unixsocketperm 700`), as CONFIG GET prints it too.
    Octal {
        max: i64,
    },
    /// An unsigned memory value with no bounds (Redis's unsigned long long configs, such
    /// as maxmemory): the value's bits are carried in the i64.
    MemoryU64,
    Enum(&'static [&'static str]),
    /// Words out of a set, several at once (Redis's flag configs: `shutdown-on-sigterm`).
    Flags(&'static [&'static str]),
    Str,
    /// Percentiles in 0..=100 (latency-tracking-info-percentiles): each read as a double,
    /// printed as Redis prints them (`%f` less its trailing zeros).
    Percentiles,
    /// Parsed by its own code (save, bind, dir).
    Special,
}

/// A percentile as Redis prints it: `%f` without trailing zeros (50, 99.9).
pub(crate) fn percentile_text(p: f64) -> String {
    let t = format!("{p:.6}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

struct Param {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    immutable: bool,
    protected: bool,
    /// For a stored parameter: its default (Redis 7.0's), as CONFIG GET prints it.
    stored: Option<&'static str>,
}

const fn p(name: &'static str, kind: Kind) -> Param {
    Param { name, alias: None, kind, immutable: false, protected: false, stored: None }
}

/// A parameter clients and test suites set that has no effect on this server (no
/// eviction, replication or slow log): validated as Redis does, remembered, reported.
const fn stored(name: &'static str, alias: Option<&'static str>, kind: Kind, default: &'static str) -> Param {
    Param { name, alias, kind, immutable: false, protected: false, stored: Some(default) }
}

/// A [`stored`] parameter CONFIG SET refuses (immutable in Redis).
const fn stored_fixed(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, alias: None, kind, immutable: true, protected: false, stored: Some(default) }
}

const fn alias(name: &'static str, alias: &'static str, kind: Kind) -> Param {
    Param { name, alias: Some(alias), kind, immutable: false, protected: false, stored: None }
}

const fn fixed(name: &'static str, kind: Kind) -> Param {
    Param { name, alias: None, kind, immutable: true, protected: false, stored: None }
}

const fn protected(name: &'static str, kind: Kind) -> Param {
    Param { name, alias: None, kind, immutable: false, protected: true, stored: None }
}

const INT_MAX: i64 = i32::MAX as i64;
const SIZE_MAX: i64 = i64::MAX;
const YES_NO_LOCAL: &[&str] = &["no", "yes", "local"];
const SHUTDOWN_FLAGS: &[&str] = &["default", "save", "nosave", "now", "force"];

const PARAMS: &[Param] = &[
    // ferrokv's own: the Redis it stands in for (commands, INFO, the RDB it writes).
    fixed("redis-version", Kind::Special),
    Param {
        name: "replicaof",
        alias: Some("slaveof"),
        kind: Kind::Special,
        immutable: true,
        protected: false,
        stored: None,
    },
    p("port", Kind::Int { min: 0, max: 65535 }),
    p("bind", Kind::Special),
    p("protected-mode", Kind::Bool),
    protected("dir", Kind::Special),
    protected("dbfilename", Kind::Str),
    p("save", Kind::Special),
    p("appendonly", Kind::Bool),
    p("appendfsync", Kind::Enum(&["everysec", "always", "no"])),
    fixed("appendfilename", Kind::Str),
    fixed("appenddirname", Kind::Str),
    p("aof-use-rdb-preamble", Kind::Bool),
    p("aof-timestamp-enabled", Kind::Bool),
    p("aof-load-truncated", Kind::Bool),
    p("aof-disable-auto-gc", Kind::Bool),
    // Read by the timer's automatic rewrite (persistence/schedule.rs).
    stored("auto-aof-rewrite-percentage", None, Kind::Int { min: 0, max: INT_MAX }, "100"),
    stored("auto-aof-rewrite-min-size", None, Kind::Memory { min: 0, max: i64::MAX }, "67108864"),
    p("rdbcompression", Kind::Bool),
    fixed("rdbchecksum", Kind::Bool),
    fixed("databases", Kind::Int { min: 1, max: INT_MAX }),
    p("hz", Kind::Int { min: 0, max: INT_MAX }),
    p("requirepass", Kind::Str),
    p("maxclients", Kind::Int { min: 1, max: u32::MAX as i64 }),
    p("timeout", Kind::Int { min: 0, max: INT_MAX }),
    p("proto-max-bulk-len", Kind::Memory { min: 1024 * 1024, max: i64::MAX }),
    p("lazyfree-lazy-expire", Kind::Bool),
    alias("hash-max-listpack-entries", "hash-max-ziplist-entries", Kind::Int { min: 0, max: SIZE_MAX }),
    alias("hash-max-listpack-value", "hash-max-ziplist-value", Kind::Memory { min: 0, max: SIZE_MAX }),
    p("set-max-intset-entries", Kind::Int { min: 0, max: SIZE_MAX }),
    p("hll-sparse-max-bytes", Kind::Memory { min: 0, max: i64::MAX }),
    // Redis 7.2's listpack sets (taken by every version here; 7.0 starts with none).
    p("set-max-listpack-entries", Kind::Int { min: 0, max: SIZE_MAX }),
    p("set-max-listpack-value", Kind::Memory { min: 0, max: SIZE_MAX }),
    alias("zset-max-listpack-entries", "zset-max-ziplist-entries", Kind::Int { min: 0, max: SIZE_MAX }),
    alias("zset-max-listpack-value", "zset-max-ziplist-value", Kind::Memory { min: 0, max: SIZE_MAX }),
    alias("list-max-listpack-size", "list-max-ziplist-size", Kind::Int { min: i32::MIN as i64, max: INT_MAX }),
    fixed("enable-protected-configs", Kind::Enum(YES_NO_LOCAL)),
    fixed("enable-debug-command", Kind::Enum(YES_NO_LOCAL)),
    fixed("enable-module-command", Kind::Enum(YES_NO_LOCAL)),
    fixed("daemonize", Kind::Bool),
    p("loglevel", Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"])),
    p("notify-keyspace-events", Kind::Special),
    p("client-output-buffer-limit", Kind::Special),
    p("list-compress-depth", Kind::Int { min: 0, max: INT_MAX }),
    p("maxmemory", Kind::MemoryU64),
    p("maxmemory-samples", Kind::Int { min: 1, max: INT_MAX }),
    p("maxmemory-eviction-tenacity", Kind::Int { min: 0, max: 100 }),
    stored("maxmemory-clients", None, Kind::MemoryOrPercent, "0"),
    p("stream-node-max-entries", Kind::Int { min: 0, max: i64::MAX }),
    p("stream-node-max-bytes", Kind::Memory { min: 0, max: i64::MAX }),
    alias("min-replicas-to-write", "min-slaves-to-write", Kind::Int { min: 0, max: INT_MAX }),
    alias("min-replicas-max-lag", "min-slaves-max-lag", Kind::Int { min: 0, max: INT_MAX }),
    p("client-query-buffer-limit", Kind::Memory { min: 1024 * 1024, max: i64::MAX }),
    // Read by RESTORE (and kept for CONFIG GET): deep checks of DUMP payloads.
    stored("sanitize-dump-payload", None, Kind::Enum(&["no", "yes", "clients"]), "no"),
    stored("replica-serve-stale-data", Some("slave-serve-stale-data"), Kind::Bool, "yes"),
    stored("replica-read-only", Some("slave-read-only"), Kind::Bool, "yes"),
    p("slowlog-log-slower-than", Kind::Int { min: -1, max: i64::MAX }),
    p("slowlog-max-len", Kind::Int { min: 0, max: i64::MAX }),
    stored("latency-tracking", None, Kind::Bool, "yes"),
    stored("latency-tracking-info-percentiles", None, Kind::Percentiles, "50 99 99.9"),
    stored("latency-monitor-threshold", None, Kind::Int { min: 0, max: i64::MAX }, "0"),
    stored("active-expire-effort", None, Kind::Int { min: 1, max: 10 }, "1"),
    stored("activerehashing", None, Kind::Bool, "yes"),
    p("lazyfree-lazy-eviction", Kind::Bool),
    p("lazyfree-lazy-server-del", Kind::Bool),
    p("lazyfree-lazy-user-del", Kind::Bool),
    p("lazyfree-lazy-user-flush", Kind::Bool),
    stored("tracking-table-max-keys", None, Kind::Int { min: 0, max: i64::MAX }, "1000000"),
    stored("stop-writes-on-bgsave-error", None, Kind::Bool, "yes"),
    p("rdb-key-save-delay", Kind::Int { min: i32::MIN as i64, max: INT_MAX }),
    // Crash reports are always logged (crash::install); no memory test, no watchdog.
    stored("crash-log-enabled", None, Kind::Bool, "yes"),
    stored("crash-memcheck-enabled", None, Kind::Bool, "yes"),
    stored("watchdog-period", None, Kind::Int { min: 0, max: INT_MAX }, "0"),
    // Accepted as Redis 7.0 takes them, no effect here: no defragmenter (not jemalloc), a
    // fixed hz, no OOM score changes, no diskless load yet.
    // No cluster mode: `cluster-enabled yes` is refused.
    stored_fixed("cluster-enabled", Kind::Enum(&["no"]), "no"),
    stored("activedefrag", None, Kind::Bool, "no"),
    stored("active-defrag-cycle-min", None, Kind::Int { min: 1, max: 99 }, "1"),
    stored("active-defrag-cycle-max", None, Kind::Int { min: 1, max: 99 }, "25"),
    stored("active-defrag-ignore-bytes", None, Kind::Memory { min: 1, max: i64::MAX }, "104857600"),
    stored("active-defrag-max-scan-fields", None, Kind::Int { min: 1, max: i64::MAX }, "1000"),
    stored("active-defrag-threshold-lower", None, Kind::Int { min: 0, max: 1000 }, "10"),
    stored("active-defrag-threshold-upper", None, Kind::Int { min: 0, max: 1000 }, "100"),
    stored("dynamic-hz", None, Kind::Bool, "yes"),
    stored("oom-score-adj", None, Kind::Enum(&["no", "yes", "relative", "absolute"]), "no"),
    stored("oom-score-adj-values", None, Kind::Str, "0 200 800"),
    stored("repl-diskless-load", None, Kind::Enum(&["disabled", "on-empty-db", "swapdb"]), "disabled"),
    stored("repl-diskless-sync-max-replicas", None, Kind::Int { min: 0, max: INT_MAX }, "0"),
    stored("shutdown-timeout", None, Kind::Int { min: 0, max: INT_MAX }, "10"),
    // A panic always ends the process with exit code 1, as this asks of Redis.
    stored("use-exit-on-panic", None, Kind::Bool, "no"),
    stored("loading-process-events-interval-bytes", None, Kind::Memory { min: 1024, max: INT_MAX }, "2097152"),
    stored("bind-source-addr", None, Kind::Str, ""),
    p("key-load-delay", Kind::Int { min: i32::MIN as i64, max: INT_MAX }),
    // ACL (server/src/acl/): read where used.
    stored("acllog-max-len", None, Kind::Int { min: 0, max: i64::MAX }, "128"),
    stored("acl-pubsub-default", None, Kind::Enum(&["allchannels", "resetchannels"]), "resetchannels"),
    Param { name: "aclfile", alias: None, kind: Kind::Str, immutable: true, protected: false, stored: Some("") },
    // Accepted as Redis 7 accepts them (its test configuration sets them), no effect here:
    // the log goes to stdout, there is no unix socket, replica or pid file yet.
    stored_fixed("always-show-logo", Kind::Bool, "no"),
    stored_fixed("pidfile", Kind::Str, ""),
    stored_fixed("logfile", Kind::Str, ""),
    stored_fixed("unixsocket", Kind::Str, ""),
    stored_fixed("unixsocketperm", Kind::Octal { max: 0o777 }, "0"),
    stored("repl-diskless-sync-delay", None, Kind::Int { min: 0, max: INT_MAX }, "5"),
    // The rest of Redis 7.0's stock redis.conf. Used: tcp-backlog (the listen queue of the
    // TCP listeners opened from now on) and tcp-keepalive (TCP keepalive on every accepted
    // connection, as Redis sets it). Accepted with Redis's checks, no effect here: no process
    // title, no jemalloc, no transparent huge pages to disable, no fork whose files or fsync
    // pace they would set, no failover election (replica-priority).
    stored_fixed("tcp-backlog", Kind::Int { min: 0, max: INT_MAX }, "511"),
    stored("tcp-keepalive", None, Kind::Int { min: 0, max: INT_MAX }, "300"),
    stored_fixed("set-proc-title", Kind::Bool, "yes"),
    stored("proc-title-template", None, Kind::Str, "{title} {listen-addr} {server-mode}"),
    stored("rdb-del-sync-files", None, Kind::Bool, "no"),
    stored("replica-priority", Some("slave-priority"), Kind::Int { min: 0, max: INT_MAX }, "100"),
    stored("replica-lazy-flush", Some("slave-lazy-flush"), Kind::Bool, "no"),
    stored_fixed("disable-thp", Kind::Bool, "yes"),
    stored("aof-rewrite-incremental-fsync", None, Kind::Bool, "yes"),
    stored("rdb-save-incremental-fsync", None, Kind::Bool, "yes"),
    stored("jemalloc-bg-thread", None, Kind::Bool, "yes"),
    // Replication (the master side streams to replicas; see replication.rs).
    stored("repl-ping-replica-period", Some("repl-ping-slave-period"), Kind::Int { min: 1, max: INT_MAX }, "10"),
    stored("repl-timeout", None, Kind::Int { min: 1, max: INT_MAX }, "60"),
    stored("repl-backlog-size", None, Kind::Memory { min: 1, max: i64::MAX }, "1048576"),
    stored("repl-backlog-ttl", None, Kind::Int { min: 0, max: i64::MAX }, "3600"),
    stored("repl-diskless-sync", None, Kind::Bool, "yes"),
    stored("masterauth", None, Kind::Str, ""),
    stored("masteruser", None, Kind::Str, ""),
    stored("repl-disable-tcp-nodelay", None, Kind::Bool, "no"),
    stored("no-appendfsync-on-rewrite", None, Kind::Bool, "no"),
    stored("propagation-error-behavior", None, Kind::Enum(&["ignore", "panic", "panic-on-replicas"]), "ignore"),
    stored("shutdown-on-sigterm", None, Kind::Flags(SHUTDOWN_FLAGS), "default"),
    stored("shutdown-on-sigint", None, Kind::Flags(SHUTDOWN_FLAGS), "default"),
    p(
        "maxmemory-policy",
        Kind::Enum(&[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ]),
    ),
    // TLS (server/src/net/): read when the TLS context is built (TlsSettings::of).
    stored("tls-port", None, Kind::Int { min: 0, max: 65535 }, "0"),
    stored("tls-cert-file", None, Kind::Str, ""),
    stored("tls-key-file", None, Kind::Str, ""),
    stored("tls-key-file-pass", None, Kind::Str, ""),
    stored("tls-ca-cert-file", None, Kind::Str, ""),
    stored("tls-ca-cert-dir", None, Kind::Str, ""),
    stored("tls-auth-clients", None, Kind::Enum(&["no", "yes", "optional"]), "yes"),
    stored("tls-protocols", None, Kind::Str, ""),
    stored("tls-session-caching", None, Kind::Bool, "yes"),
    stored("tls-session-cache-size", None, Kind::Int { min: 0, max: INT_MAX }, "20480"),
    // Accepted and reported; rustls chooses its own cipher suites, and there is no TLS for
    // replication or cluster links, no client certificate of our own, no DH parameters.
    stored("tls-session-cache-timeout", None, Kind::Int { min: 0, max: INT_MAX }, "300"),
    stored("tls-ciphers", None, Kind::Str, ""),
    stored("tls-ciphersuites", None, Kind::Str, ""),
    stored("tls-prefer-server-ciphers", None, Kind::Bool, "no"),
    stored("tls-replication", None, Kind::Bool, "no"),
    stored("tls-cluster", None, Kind::Bool, "no"),
    stored("tls-client-cert-file", None, Kind::Str, ""),
    stored("tls-client-key-file", None, Kind::Str, ""),
    stored("tls-client-key-file-pass", None, Kind::Str, ""),
    stored("tls-dh-params-file", None, Kind::Str, ""),
    p("lfu-log-factor", Kind::Int { min: 0, max: INT_MAX }),
    p("lfu-decay-time", Kind::Int { min: 0, max: INT_MAX }),
    alias("busy-reply-threshold", "lua-time-limit", Kind::Int { min: 0, max: i64::MAX }),
];

mod rewrite;

fn find(name: &str) -> Option<&'static Param> {
    let name = name.to_ascii_lowercase();
    PARAMS.iter().find(|p| p.name == name || p.alias == Some(name.as_str()))
}

/// Why a value was refused (the text after "argument 'x' - ").
pub type SetError = String;

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn protected_name(p: Protected) -> String {
    match p {
        Protected::No => "no",
        Protected::Yes => "yes",
        Protected::Local => "local",
    }
    .into()
}

impl ServerConfig {
    /// `tls-port` (0: no TLS listener).
    pub fn tls_port(&self) -> u16 {
        self.get("tls-port").and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Every parameter name and alias CONFIG GET knows.
    pub fn names() -> impl Iterator<Item = &'static str> {
        PARAMS.iter().flat_map(|p| std::iter::once(p.name).chain(p.alias))
    }

    /// The value of `name` as CONFIG GET prints it.
    pub fn get(&self, name: &str) -> Option<String> {
        let p = find(name)?;
        if let Some(default) = p.stored {
            return Some(self.stored.get(p.name).cloned().unwrap_or_else(|| default.to_string()));
        }
        let e = &self.engine;
        let l = &e.limits;
        Some(match p.name {
            "redis-version" => e.version.tag().trim_start_matches("redis-").to_string(),
            "port" => self.port.to_string(),
            "bind" => self.bind.join(" "),
            "replicaof" => self.replicaof.as_ref().map(|(h, p)| format!("{h} {p}")).unwrap_or_default(),
            "protected-mode" => yes_no(self.protected_mode),
            "dir" => e.dir.display().to_string(),
            "dbfilename" => e.dbfilename.clone(),
            "save" => e.save.iter().map(|(s, c)| format!("{s} {c}")).collect::<Vec<_>>().join(" "),
            "appendonly" => yes_no(e.appendonly),
            "appendfsync" => e.appendfsync.name().into(),
            "appendfilename" => e.appendfilename.clone(),
            "appenddirname" => e.appenddirname.clone(),
            "aof-use-rdb-preamble" => yes_no(e.aof_use_rdb_preamble),
            "aof-timestamp-enabled" => yes_no(e.aof_timestamp_enabled),
            "aof-disable-auto-gc" => yes_no(e.aof_disable_auto_gc),
            "aof-load-truncated" => yes_no(e.aof_load_truncated),
            "rdbcompression" => yes_no(e.rdbcompression),
            "rdbchecksum" => yes_no(e.rdbchecksum),
            "databases" => e.databases.to_string(),
            "hz" => e.hz.to_string(),
            "requirepass" => {
                self.requirepass.as_deref().map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_default()
            }
            "maxclients" => self.maxclients.to_string(),
            "timeout" => self.timeout.to_string(),
            "proto-max-bulk-len" => self.proto_max_bulk_len.to_string(),
            "client-query-buffer-limit" => self.client_query_buffer_limit.to_string(),
            "lazyfree-lazy-expire" => yes_no(e.lazyfree_lazy_expire),
            "lazyfree-lazy-server-del" => yes_no(e.lazyfree_lazy_server_del),
            "lazyfree-lazy-user-del" => yes_no(e.lazyfree_lazy_user_del),
            "lazyfree-lazy-user-flush" => yes_no(e.lazyfree_lazy_user_flush),
            "enable-protected-configs" => protected_name(self.enable_protected_configs),
            "enable-debug-command" => protected_name(self.enable_debug_command),
            "enable-module-command" => protected_name(self.enable_module_command),
            "daemonize" => "no".into(),
            "loglevel" => self.loglevel.clone(),
            "notify-keyspace-events" => crate::notify::flags_to_string(self.notify_keyspace_events),
            "client-output-buffer-limit" => self.obuf_limits.to_config(),
            "maxmemory-policy" => self.maxmemory_policy.clone(),
            "maxmemory" => self.maxmemory.to_string(),
            "maxmemory-samples" => self.maxmemory_samples.to_string(),
            "slowlog-log-slower-than" => self.slowlog_log_slower_than.to_string(),
            "slowlog-max-len" => self.slowlog_max_len.to_string(),
            "maxmemory-eviction-tenacity" => self.maxmemory_eviction_tenacity.to_string(),
            "lazyfree-lazy-eviction" => yes_no(self.lazyfree_lazy_eviction),
            "min-replicas-to-write" => self.min_replicas_to_write.to_string(),
            "min-replicas-max-lag" => self.min_replicas_max_lag.to_string(),
            "lfu-log-factor" => e.lfu_log_factor.to_string(),
            "lfu-decay-time" => e.lfu_decay_time.to_string(),
            "rdb-key-save-delay" => e.rdb_key_save_delay.to_string(),
            "key-load-delay" => e.key_load_delay_us.to_string(),
            "list-compress-depth" => self.list_compress_depth.to_string(),
            "busy-reply-threshold" => self.busy_reply_threshold.to_string(),
            other => return l.get_by_name(other).map(|n| n.to_string()),
        })
    }

    /// Whether `name` is a known parameter.
    pub fn knows(name: &str) -> bool {
        find(name).is_some()
    }

    /// The canonical name of `name` (aliases resolved).
    pub fn canonical(name: &str) -> Option<&'static str> {
        find(name).map(|p| p.name)
    }

    pub fn is_immutable(name: &str) -> bool {
        find(name).is_some_and(|p| p.immutable)
    }

    pub fn is_protected(name: &str) -> bool {
        find(name).is_some_and(|p| p.protected)
    }

    /// Set `name` from its arguments (one value, or several for a multi-value line in a
    /// config file). The error is the reason Redis gives.
    pub fn set(&mut self, name: &str, args: &[String]) -> Result<(), SetError> {
        let p = find(name).ok_or_else(|| "Bad directive or wrong number of arguments".to_string())?;
        if let Kind::Special = p.kind {
            return self.set_special(p.name, args);
        }
        // Redis's multi-argument configs take their words as separate arguments in a file
        // and as one in CONFIG SET.
        let multi_arg = matches!(p.kind, Kind::Flags(_)) || p.stored.is_some_and(|d| d.contains(' '));
        let joined;
        let v = match args {
            [v] => v,
            // No value at all: a flag list judges the empty list itself (its "must be one
            // of" error), as Redis's multi-argument enums do.
            _ if multi_arg && (!args.is_empty() || matches!(p.kind, Kind::Flags(_))) => {
                joined = args.join(" ");
                &joined
            }
            _ => return Err("wrong number of arguments".into()),
        };
        if p.stored.is_some() {
            let canonical = validate(p.kind, v)?;
            if p.name == "sanitize-dump-payload" {
                // `clients`: every RESTORE here comes from a client.
                self.engine.sanitize_dump_payload = canonical != "no";
            }
            self.stored.insert(p.name, canonical);
            return Ok(());
        }
        match p.kind {
            Kind::Bool => {
                let b = match v.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("argument must be 'yes' or 'no'".into()),
                };
                self.set_bool(p.name, b)
            }
            Kind::Int { .. } | Kind::Memory { .. } | Kind::MemoryU64 => {
                let n = parse_number(p.kind, v)?;
                self.set_int(p.name, n)
            }
            Kind::Enum(values) => {
                let lower = v.to_ascii_lowercase();
                if !values.contains(&lower.as_str()) {
                    return Err(format!("argument(s) must be one of the following: {}", values.join(", ")));
                }
                self.set_enum(p.name, &lower)
            }
            Kind::Str => self.set_str(p.name, v),
            Kind::Special | Kind::Flags(_) | Kind::Octal { .. } | Kind::MemoryOrPercent | Kind::Percentiles => Ok(()),
        }
    }

    fn set_bool(&mut self, name: &str, b: bool) -> Result<(), SetError> {
        let e = &mut self.engine;
        match name {
            "protected-mode" => self.protected_mode = b,
            "appendonly" => e.appendonly = b,
            "aof-use-rdb-preamble" => e.aof_use_rdb_preamble = b,
            "aof-timestamp-enabled" => e.aof_timestamp_enabled = b,
            "aof-disable-auto-gc" => e.aof_disable_auto_gc = b,
            "aof-load-truncated" => e.aof_load_truncated = b,
            "rdbcompression" => e.rdbcompression = b,
            "rdbchecksum" => e.rdbchecksum = b,
            "lazyfree-lazy-expire" => e.lazyfree_lazy_expire = b,
            "lazyfree-lazy-server-del" => e.lazyfree_lazy_server_del = b,
            "lazyfree-lazy-user-del" => e.lazyfree_lazy_user_del = b,
            "lazyfree-lazy-user-flush" => e.lazyfree_lazy_user_flush = b,
            "lazyfree-lazy-eviction" => self.lazyfree_lazy_eviction = b,
            "daemonize" if b => return Err("daemonize is not supported".into()),
            _ => {}
        }
        Ok(())
    }

    fn set_int(&mut self, name: &str, n: i64) -> Result<(), SetError> {
        let e = &mut self.engine;
        let u = n.max(0) as usize;
        match name {
            "port" => self.port = n as u16,
            "databases" => e.databases = u,
            // Redis caps hz at 500.
            "hz" => e.hz = n.min(500) as u32,
            "maxclients" => self.maxclients = n as u64,
            "timeout" => self.timeout = n as u64,
            "busy-reply-threshold" => self.busy_reply_threshold = n.max(0) as u64,
            "maxmemory" => self.maxmemory = n as u64,
            "maxmemory-samples" => self.maxmemory_samples = n.clamp(1, INT_MAX) as u32,
            "slowlog-log-slower-than" => self.slowlog_log_slower_than = n.max(-1),
            "slowlog-max-len" => self.slowlog_max_len = n.max(0) as u64,
            "maxmemory-eviction-tenacity" => self.maxmemory_eviction_tenacity = n.clamp(0, 100) as u32,
            "min-replicas-to-write" => self.min_replicas_to_write = n.clamp(0, INT_MAX) as u32,
            "min-replicas-max-lag" => self.min_replicas_max_lag = n.clamp(0, INT_MAX) as u32,
            "proto-max-bulk-len" => self.proto_max_bulk_len = n,
            "client-query-buffer-limit" => self.client_query_buffer_limit = n as u64,
            "lfu-log-factor" => e.lfu_log_factor = n as u32,
            "lfu-decay-time" => e.lfu_decay_time = n as u32,
            "rdb-key-save-delay" => e.rdb_key_save_delay = n as i32,
            "key-load-delay" => e.key_load_delay_us = n as i32,
            "list-compress-depth" => self.list_compress_depth = n,
            _ => {
                e.limits.set_by_name(name, n);
            }
        }
        Ok(())
    }

    fn set_enum(&mut self, name: &str, v: &str) -> Result<(), SetError> {
        let prot = || match v {
            "yes" => Protected::Yes,
            "local" => Protected::Local,
            _ => Protected::No,
        };
        match name {
            "appendfsync" => self.engine.appendfsync = Fsync::parse(v).unwrap_or_default(),
            "enable-protected-configs" => self.enable_protected_configs = prot(),
            "enable-debug-command" => self.enable_debug_command = prot(),
            "enable-module-command" => self.enable_module_command = prot(),
            "loglevel" => self.loglevel = v.into(),
            "maxmemory-policy" => {
                self.maxmemory_policy = v.into();
                self.eviction_policy = crate::maxmemory::Policy::parse(v).unwrap_or_default();
                self.engine.lfu = v.ends_with("-lfu");
            }
            _ => {}
        }
        Ok(())
    }

    fn set_str(&mut self, name: &str, v: &str) -> Result<(), SetError> {
        let e = &mut self.engine;
        let plain_name = |v: &str, what: &str| {
            if v.contains('/') {
                Err(format!("{what} can't be a path, just a filename"))
            } else {
                Ok(v.to_string())
            }
        };
        match name {
            "dbfilename" => e.dbfilename = plain_name(v, "dbfilename")?,
            "appendfilename" => e.appendfilename = plain_name(v, "appendfilename")?,
            "appenddirname" => e.appenddirname = plain_name(v, "appenddirname")?,
            "requirepass" => self.requirepass = (!v.is_empty()).then(|| v.as_bytes().to_vec()),
            _ => {}
        }
        Ok(())
    }

    fn set_special(&mut self, name: &str, args: &[String]) -> Result<(), SetError> {
        match name {
            "redis-version" => {
                let v = match args {
                    [v] => ServerVersion::parse(v),
                    _ => None,
                };
                self.engine.set_version(v.ok_or("argument must be one of 6.2, 7.0, 7.2, 7.4, valkey-7.2, valkey-8.0")?);
            }
            "save" => {
                // One string of "seconds changes" pairs (CONFIG SET), or the words of a line.
                let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                if !words.len().is_multiple_of(2) {
                    return Err("Invalid save parameters".into());
                }
                let mut points = Vec::new();
                for pair in words.chunks(2) {
                    let (Ok(s), Ok(c)) = (pair[0].parse::<i64>(), pair[1].parse::<i64>()) else {
                        return Err("Invalid save parameters".into());
                    };
                    if s < 1 || c < 0 {
                        return Err("Invalid save parameters".into());
                    }
                    points.push((s as u64, c as u64));
                }
                self.engine.save = points;
            }
            "notify-keyspace-events" => {
                let [v] = args else {
                    return Err("wrong number of arguments".into());
                };
                self.notify_keyspace_events =
                    crate::notify::parse_flags(v).ok_or_else(|| crate::notify::INVALID.to_string())?;
            }
            "client-output-buffer-limit" => self.obuf_limits.set(args)?,
            "replicaof" => {
                let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                let [host, port] = words[..] else {
                    return Err("wrong number of arguments".into());
                };
                self.replicaof = if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
                    None
                } else {
                    let port = port.parse::<u16>().map_err(|_| "Invalid master port")?;
                    Some((host.to_string(), port))
                };
            }
            "bind" => {
                // One empty argument: no address at all.
                let addrs: Vec<String> = args.iter().flat_map(|a| a.split_whitespace()).map(str::to_string).collect();
                if addrs.len() > 16 {
                    return Err("Too many bind addresses specified.".into());
                }
                self.bind = addrs;
            }
            "dir" => {
                let [d] = args else {
                    return Err("wrong number of arguments".into());
                };
                let path = PathBuf::from(d);
                let abs = std::fs::canonicalize(&path).map_err(|e| crate::log::strerror(&e))?;
                if !abs.is_dir() {
                    return Err("Not a directory".into());
                }
                self.engine.dir = abs;
            }
            _ => {}
        }
        Ok(())
    }

    /// Read a redis.conf-style text: one directive a line, `#` comments, arguments split
    /// as inline commands are. The first `save` line replaces the default save points.
    pub fn load_text(&mut self, text: &str, saw_save: &mut bool) -> Result<(), String> {
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail =
                |why: &str| format!("Reading the configuration file, at line {}\n>>> '{}'\n{}", i + 1, line, why);
            let Some(words) = crate::resp::split_args(line.as_bytes()) else {
                return Err(fail("Unbalanced quotes in configuration line"));
            };
            let words: Vec<String> = words.iter().map(|w| String::from_utf8_lossy(w).into_owned()).collect();
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            self.apply(name, args, saw_save).map_err(|why| fail(&why))?;
        }
        Ok(())
    }

    /// Apply one directive (from a file line or a `--name value` flag).
    pub fn apply(&mut self, name: &str, args: &[String], saw_save: &mut bool) -> Result<(), String> {
        if name.eq_ignore_ascii_case("user") && !args.is_empty() {
            if self.acl_users.iter().any(|u| u[0] == args[0]) {
                return Err(format!(
                    "Error in user declaration '{}': Duplicate user found. A user can only be defined once in \
                     config files",
                    args[0]
                ));
            }
            self.acl_users.push(args.to_vec());
            return Ok(());
        }
        if name.eq_ignore_ascii_case("rename-command") && args.len() == 2 {
            self.renames.push((args[0].clone(), args[1].clone()));
            return Ok(());
        }
        if !ServerConfig::knows(name) {
            return Err("Bad directive or wrong number of arguments".into());
        }
        if name.eq_ignore_ascii_case("save") {
            // `save ""` resets every save point, wherever it comes.
            if args.iter().all(|a| a.is_empty()) && !args.is_empty() {
                self.engine.save.clear();
                *saw_save = true;
                return Ok(());
            }
            // Lines accumulate; the first replaces the defaults.
            let before = if *saw_save { self.engine.save.clone() } else { Vec::new() };
            self.set(name, args)?;
            let mut all = before;
            all.append(&mut self.engine.save);
            self.engine.save = all;
            *saw_save = true;
            return Ok(());
        }
        self.set(name, args)
    }

    /// Build the configuration from the command line: an optional config file first, then
    /// stdin's with `-`, then the `--name value...` options as Redis reads them
    /// ([`options_text`]).
    pub fn from_args(args: &[String]) -> Result<ServerConfig, String> {
        let stdin = args.iter().any(|a| a == "-");
        let args: Vec<String> = args.iter().filter(|a| *a != "-").cloned().collect();
        let mut cfg = ServerConfig::default();
        let mut saw_save = false;
        let mut rest = &args[..];
        match args.first() {
            Some(first) if !first.starts_with("--") => {
                let text = std::fs::read_to_string(first)
                    .map_err(|e| format!("Fatal error, can't open config file '{first}': {e}"))?;
                cfg.load_text(&text, &mut saw_save)?;
                cfg.config_file = Some(std::path::absolute(first).unwrap_or_else(|_| first.into()));
                rest = &args[1..];
            }
            _ => {
                // No file: the embedded defaults. They restate Redis's, so a `--save` flag
                // still replaces the save points rather than adding to them.
                cfg.load_text(EMBEDDED_CONFIG, &mut false)?;
            }
        }
        // `-`: the configuration on stdin, after the file and before the options (Redis's order).
        if stdin {
            let text =
                std::io::read_to_string(std::io::stdin()).map_err(|e| format!("Reading config from stdin: {e}"))?;
            cfg.load_text(&text, &mut saw_save)?;
        }
        cfg.load_text(&options_text(rest), &mut saw_save)?;
        if cfg.engine.dir.is_relative() {
            if let Ok(abs) = std::fs::canonicalize(&cfg.engine.dir) {
                cfg.engine.dir = abs;
            }
        }
        Ok(cfg)
    }
}

/// The command line's options as configuration text, as Redis's main() makes it: each
/// `--name` starts a line, and the arguments after it are its values, quoted; an argument
/// starting with `--` is a value when the name before it has none yet (`--logfile
/// --my-file`); a name and values in one argument (`"--maxmemory 700mb"`) make a whole line;
/// a `--save` with no value is `save ""`.
fn options_text(args: &[String]) -> String {
    let mut text = String::new();
    // Whether the last option already has a value (or none is pending).
    let mut has_value = true;
    for (j, arg) in args.iter().enumerate() {
        if has_value && arg.starts_with("--") {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&arg[2..]);
            text.push(' ');
            let words = crate::resp::split_args(arg.as_bytes()).map_or(0, |w| w.len());
            has_value = words != 1;
            let next_is_option = args.get(j + 1).is_some_and(|n| n.starts_with("--"));
            if words == 1 && arg.eq_ignore_ascii_case("--save") && (next_is_option || j + 1 == args.len()) {
                text.push_str("\"\"");
                has_value = true;
            }
        } else {
            text.push_str(&ferrokv::format::args::repr(arg.as_bytes()));
            text.push(' ');
            has_value = true;
        }
    }
    text
}

/// An integer or memory parameter's value, checked against its range.
fn parse_number(kind: Kind, v: &str) -> Result<i64, SetError> {
    let (n, min, max) = match kind {
        Kind::Memory { min, max } => {
            (parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string())?, min, max)
        }
        Kind::MemoryU64 => return parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string()),
        Kind::Int { min, max } => {
            (v.parse::<i64>().map_err(|_| "argument couldn't be parsed into an integer".to_string())?, min, max)
        }
        _ => return Err("argument couldn't be parsed into an integer".into()),
    };
    if n < min || n > max {
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(n)
}

/// An octal number as strtoll reads one in base 8 (leading blanks, a sign, nothing after).
pub fn parse_octal(v: &str) -> Option<i64> {
    let t = v.trim_start();
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() {
        // strtoll reads nothing from an empty string and stops at its end: 0.
        return t.is_empty().then_some(0);
    }
    if !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    let n = i64::from_str_radix(digits, 8).ok()?;
    Some(if negative { -n } else { n })
}

/// Check a stored parameter's value and give it as CONFIG GET prints it.
fn validate(kind: Kind, v: &str) -> Result<String, SetError> {
    match kind {
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int { .. } | Kind::Memory { .. } => parse_number(kind, v).map(|n| n.to_string()),
        Kind::MemoryU64 => parse_number(kind, v).map(|n| (n as u64).to_string()),
        Kind::MemoryOrPercent => match v.strip_suffix('%').filter(|n| !n.is_empty()) {
            Some(pct) => {
                let n: i64 = pct.parse().map_err(|_| "argument must be a memory or percent value".to_string())?;
                if n > 100 {
                    return Err("percentage argument must be less or equal to 100".into());
                }
                Ok(format!("{n}%"))
            }
            None => {
                let n = parse_memory(v).ok_or_else(|| "argument must be a memory or percent value".to_string())?;
                if n < 0 {
                    return Err(format!("argument must be between 0 and {} inclusive", i64::MAX));
                }
                Ok(n.to_string())
            }
        },
        Kind::Octal { max } => {
            let n = parse_octal(v).ok_or_else(|| "argument couldn't be parsed as an octal number".to_string())?;
            if !(0..=max).contains(&n) {
                return Err(format!("argument must be between 0 and {max:o} inclusive"));
            }
            Ok(format!("{n:o}"))
        }
        Kind::Enum(values) => {
            let lower = v.to_ascii_lowercase();
            if values.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err(format!("argument(s) must be one of the following: {}", values.join(", ")))
            }
        }
        Kind::Flags(values) => {
            let words: Vec<String> = v.split_whitespace().map(str::to_ascii_lowercase).collect();
            if words.is_empty() || words.iter().any(|w| !values.contains(&w.as_str())) {
                return Err(format!("argument(s) must be one of the following: {}", values.join(", ")));
            }
            // Printed in the table's order, as Redis prints its flags.
            let set: Vec<&str> = values.iter().copied().filter(|v| words.iter().any(|w| w == v)).collect();
            Ok(set.join(" "))
        }
        Kind::Percentiles => {
            let mut out = Vec::new();
            for word in v.split_whitespace() {
                let p = ferrokv::command::parse_f64(word.as_bytes())
                    .filter(|p| p.is_finite())
                    .ok_or_else(|| "Invalid latency-tracking-info-percentiles parameters".to_string())?;
                if !(0.0..=100.0).contains(&p) {
                    return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                }
                out.push(percentile_text(p));
            }
            Ok(out.join(" "))
        }
        Kind::Str | Kind::Special => Ok(v.to_string()),
    }
}

/// server/ferrokv.conf, compiled in: the configuration used when no file is given.
pub const EMBEDDED_CONFIG: &str = include_str!("../../ferrokv.conf");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_options_become_config_lines_as_in_redis() {
        let text = |args: &[&str]| options_text(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert_eq!(
            text(&["--maxmemory 700mb", "--maxmemory-policy volatile-lru"]),
            "maxmemory 700mb \nmaxmemory-policy volatile-lru "
        );
        assert_eq!(
            text(&["--logfile", "--my--log", "--loglevel", "--bla"]),
            "logfile \"--my--log\" \nloglevel \"--bla\" "
        );
        assert_eq!(text(&["--port", "6379", "6380"]), "port \"6379\" \"6380\" ");
        assert_eq!(text(&["--save", "--loglevel", "verbose"]), "save \"\"\nloglevel \"verbose\" ");
        assert_eq!(text(&["--loglevel", "verbose", "--save"]), "loglevel \"verbose\" \nsave \"\"");
        assert_eq!(
            text(&["--proc-title-template", "--save", "--save", ""]),
            "proc-title-template \"--save\" \nsave \"\" "
        );
        assert_eq!(
            text(&["loglevel", "verbose", "--maxmemory '700mb'"]),
            "\"loglevel\" \"verbose\" \nmaxmemory '700mb' "
        );
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn file_then_flags() {
        let dir = std::env::temp_dir().join(format!("ferrokv-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("test.conf");
        std::fs::write(&file, "# comment\nport 7000\nsave 900 1\nsave 300 10\nhash-max-ziplist-entries 64\n").unwrap();
        let args = strings(&[file.to_str().unwrap(), "--port", "7001", "--appendonly", "yes"]);
        let cfg = ServerConfig::from_args(&args).unwrap();
        assert_eq!(cfg.port, 7001);
        assert!(cfg.engine.appendonly);
        assert_eq!(cfg.engine.save, vec![(900, 1), (300, 10)]);
        assert_eq!(cfg.get("hash-max-listpack-entries").as_deref(), Some("64"));
        let cfg = ServerConfig::from_args(&strings(&["--save", ""])).unwrap();
        assert!(cfg.engine.save.is_empty());
        assert!(ServerConfig::from_args(&strings(&["--nosuch", "1"])).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn set_errors_are_redis_texts() {
        let mut cfg = ServerConfig::default();
        let one = |v: &str| vec![v.to_string()];
        assert_eq!(cfg.set("hz", &one("abc")).unwrap_err(), "argument couldn't be parsed into an integer");
        assert_eq!(cfg.set("timeout", &one("-1")).unwrap_err(), "argument must be between 0 and 2147483647 inclusive");
        assert_eq!(
            cfg.set("appendfsync", &one("x")).unwrap_err(),
            "argument(s) must be one of the following: everysec, always, no"
        );
        assert_eq!(cfg.set("save", &one("1 2 3")).unwrap_err(), "Invalid save parameters");
        cfg.set("proto-max-bulk-len", &one("2mb")).unwrap();
        assert_eq!(cfg.proto_max_bulk_len, 2 * 1024 * 1024);
        cfg.set("hz", &one("1000")).unwrap();
        assert_eq!(cfg.get("hz").as_deref(), Some("500"));
    }

    #[test]
    fn embedded_config_restates_the_defaults() {
        let mut embedded = ServerConfig::default();
        embedded.load_text(EMBEDDED_CONFIG, &mut false).unwrap();
        let plain = ServerConfig::default();
        for name in ServerConfig::names() {
            if name == "bind" {
                // The one difference: loopback only without a file.
                assert_eq!(embedded.get(name).as_deref(), Some("127.0.0.1"));
                continue;
            }
            assert_eq!(embedded.get(name), plain.get(name), "{name}");
        }
    }
}
