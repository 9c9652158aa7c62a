//! Engine configuration: the redis.conf settings the engine itself reads.

use std::path::PathBuf;

use crate::command::catalog::ServerVersion;
use crate::format::rdb::Target;
use crate::value::Limits;

/// When the AOF is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    Always,
    #[default]
    EverySec,
    No,
}

impl Fsync {
    pub fn parse(s: &str) -> Option<Fsync> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(Fsync::Always),
            "everysec" => Some(Fsync::EverySec),
            "no" => Some(Fsync::No),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The Redis (or Valkey) this engine stands in for: the RDB version it writes and the
    /// DUMP payloads it takes.
    pub version: ServerVersion,
    pub databases: usize,
    pub limits: Limits,
    /// Expired keys propagate as UNLINK instead of DEL.
    pub lazyfree_lazy_expire: bool,
    /// lazyfree-lazy-server-del: SPOP emptying a set propagates UNLINK rather than DEL.
    pub lazyfree_lazy_server_del: bool,
    /// DEL frees big values on the lazyfree thread, as UNLINK does.
    pub lazyfree_lazy_user_del: bool,
    /// FLUSHALL/FLUSHDB without SYNC or ASYNC free in the background.
    pub lazyfree_lazy_user_flush: bool,
    /// Active expiry ticks per second.
    pub hz: u32,
    /// Data directory: the RDB file and the AOF directory live here.
    pub dir: PathBuf,
    pub dbfilename: String,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appenddirname: String,
    pub appendfsync: Fsync,
    pub aof_use_rdb_preamble: bool,
    pub aof_timestamp_enabled: bool,
    /// Load an AOF whose last command was cut short (truncating it), instead of failing.
    pub aof_load_truncated: bool,
    pub rdbcompression: bool,
    pub rdbchecksum: bool,
    /// `save` points: (seconds, changes).
    pub save: Vec<(u64, u64)>,
    /// An LFU maxmemory-policy is selected: a key's `lru` field holds its LFU data
    /// (keyspace::lfu), OBJECT FREQ answers and OBJECT IDLETIME refuses.
    pub lfu: bool,
    pub lfu_log_factor: u32,
    /// Minutes per halving step of the LFU counter (0: never decays).
    pub lfu_decay_time: u32,
    /// Microseconds each key written by a snapshot or rewrite waits (Redis's
    /// `rdb-key-save-delay`, a testing aid: it keeps a BGSAVE in progress long enough to
    /// kill). Negative: wait 1 µs with probability 1/-n.
    pub rdb_key_save_delay: i32,
    /// DEBUG AOF-FLUSH-SLEEP, a testing aid: microseconds to sleep before each write of
    /// the AOF buffer.
    pub aof_flush_sleep_us: u64,
    /// `key-load-delay`: microseconds each key waits while loading (negative: 1 µs once in
    /// -n keys), a testing aid that makes a load last.
    pub key_load_delay_us: i32,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE takes payloads whatever their CRC.
    pub skip_checksum_validation: bool,
    /// `sanitize-dump-payload`: RESTORE checks a payload deeply, as Redis (repeated fields
    /// or members in listpacks and intsets are refused).
    pub sanitize_dump_payload: bool,
    /// `aof-disable-auto-gc`: history files stay after a rewrite (named as history).
    pub aof_disable_auto_gc: bool,
}

impl Config {
    /// Stand in for `version`: what SAVE and DUMP write, and the behaviours that follow the
    /// version rather than a setting (how a zset keeps a -0 score).
    pub fn set_version(&mut self, version: ServerVersion) {
        self.version = version;
        self.limits.zset_listpack_keeps_negative_zero = version == ServerVersion::Redis62;
        self.limits.zset_created_by_size = version.behaves_as() >= ServerVersion::Redis72;
        self.limits.list_packed = version.behaves_as() >= ServerVersion::Redis72;
        self.limits.zset_sized_by_longest = version == ServerVersion::Valkey80;
        self.limits.hash_ziplist_keeps_long = version == ServerVersion::Redis62;
    }

    /// Whether the AOF is one file, `dir/appendfilename`, as Redis 6.2 keeps it (an RDB
    /// preamble and the commands after it, rewritten whole) rather than 7.0's directory
    /// of base and incr files under a manifest.
    pub fn aof_is_single_file(&self) -> bool {
        self.version == ServerVersion::Redis62
    }

    /// What a key the server deletes itself is propagated as (SPOP emptying its set,
    /// RESTORE REPLACE with a TTL already past): UNLINK under lazyfree-lazy-server-del from
    /// Redis 7.2 on, DEL in 7.0 and before.
    pub fn server_del_command(&self) -> &'static [u8] {
        if self.lazyfree_lazy_server_del && self.version.behaves_as() >= ServerVersion::Redis72 {
            b"UNLINK"
        } else {
            b"DEL"
        }
    }

    /// What GETDEL is propagated as: UNLINK under lazyfree-lazy-user-del in 6.2 and 7.0,
    /// DEL from 7.2 on (the deletion there is always synchronous).
    pub fn getdel_command(&self) -> &'static [u8] {
        if self.lazyfree_lazy_user_del && self.version.behaves_as() < ServerVersion::Redis72 {
            b"UNLINK"
        } else {
            b"DEL"
        }
    }

    /// Whether a propagated transaction's MULTI says no database, so its SELECT comes
    /// after it (Redis 7.2 on) rather than before it.
    pub fn dbless_multi(&self) -> bool {
        self.version.behaves_as() >= ServerVersion::Redis72
    }

    /// Whether SET with PXAT is propagated as the client wrote it (Redis 7.2 on) rather
    /// than rewritten to `SET key value PXAT ms`.
    pub fn set_pxat_verbatim(&self) -> bool {
        self.version.behaves_as() >= ServerVersion::Redis72
    }

    /// What this version's SAVE and DUMP write (Valkey 7.2 and 8.0 write RDB 11 as Redis
    /// 7.2 does).
    pub fn rdb_target(&self) -> Target {
        rdb_target_of(self.version)
    }
}

/// What `version`'s SAVE and DUMP write.
pub fn rdb_target_of(version: ServerVersion) -> Target {
    match version {
        ServerVersion::Redis62 => Target::Redis62,
        ServerVersion::Redis70 => Target::Redis70,
        ServerVersion::Redis72 | ServerVersion::Valkey72 | ServerVersion::Valkey80 => Target::Redis72,
        ServerVersion::Redis74 => Target::Redis74,
    }
}

impl Default for Config {
    /// Redis 7.0's defaults, with the data in the current directory.
    fn default() -> Self {
        Config {
            version: ServerVersion::Redis70,
            databases: 16,
            limits: Limits::default(),
            lazyfree_lazy_expire: false,
            lazyfree_lazy_server_del: false,
            lazyfree_lazy_user_del: false,
            lazyfree_lazy_user_flush: false,
            hz: 10,
            dir: PathBuf::from("."),
            dbfilename: "dump.rdb".into(),
            appendonly: false,
            appendfilename: "appendonly.aof".into(),
            appenddirname: "appendonlydir".into(),
            appendfsync: Fsync::EverySec,
            aof_use_rdb_preamble: true,
            aof_timestamp_enabled: false,
            aof_load_truncated: true,
            rdbcompression: true,
            rdbchecksum: true,
            save: vec![(3600, 1), (300, 100), (60, 10000)],
            lfu: false,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            rdb_key_save_delay: 0,
            aof_flush_sleep_us: 0,
            key_load_delay_us: 0,
            skip_checksum_validation: false,
            sanitize_dump_payload: false,
            aof_disable_auto_gc: false,
        }
    }
}

/// Threads a parallel step may use: `FERROKV_THREADS` when set to a positive number, else
/// `default` (the core count, or 1 where extra threads did not pay on the bench machine).
pub fn threads(default: impl FnOnce() -> usize) -> usize {
    std::env::var("FERROKV_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(default)
}

/// The machine's core count (1 when unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
