//! The write path: the AOF (Redis 7.0 multi-part: manifest, base, incr files; fsync
//! policy; rewrite), RDB snapshots, and loading both at startup.
//!
//! - [`aof`]: the open AOF directory and its incr file; rewrite jobs.
//! - the manifest format is the format layer's ([`crate::format::aof::manifest`]).
//! - [`rewrite`]: the RESP form of a base (shared with tools).
//! - [`snapshot`]: RDB snapshots.
//! - [`load`]: startup loading (RDB, or the AOF directory replayed through the commands).
//! - [`replication`]: the stream replicas are fed.

pub mod aof;
pub mod disk;
pub mod feed;
pub mod load;
pub mod merge;
pub mod replication;
pub mod rewrite;
pub mod snapshot;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

pub use crate::format::aof::manifest::{AofInfo, FileKind, Manifest};
pub use aof::{Aof, AofEvent, Failure, RewriteJob, RewrittenBase};
pub use feed::AofFeed;
pub use rewrite::{RespBaseWriter, AOF_REWRITE_ITEMS_PER_CMD};

use crate::command::Argv;
use crate::format::input::ErrorKind;
use crate::format::rdb::{escape_key, RdbError, ValueType};

/// Where propagated commands go, and what loading reported.
#[derive(Debug, Default)]
pub struct Persistence {
    /// The AOF being appended to (appendonly yes).
    pub aof: Option<Aof>,
    /// Warnings from loading (a truncated AOF tail, a dropped incomplete MULTI).
    pub warnings: Vec<String>,
    /// The stream fed to replicas, while any is attached.
    pub replication: Option<replication::ReplicationFeed>,
    /// What the start's RDB load kept and skipped.
    pub rdb_load: load::LoadCounts,
}

impl Persistence {
    /// No files.
    pub fn none() -> Persistence {
        Persistence::default()
    }

    /// Whether anything reads propagated commands (an AOF, or replicas).
    pub fn is_read(&self) -> bool {
        self.aof.is_some() || self.replication.is_some()
    }

    /// Append one unit of propagated commands (already MULTI/EXEC-wrapped) to the AOF;
    /// Err when the unit is not as durable as the fsync policy promises.
    pub fn feed(&mut self, ops: &[(usize, Argv)], now_ms: i64) -> Result<(), Failure> {
        self.feed_split(ops, ops, now_ms)
    }

    /// [`Persistence::feed`] of a unit whose AOF part differs from the replicas' (it
    /// leaves out what only replicas get, as PUBLISH).
    pub fn feed_split(
        &mut self,
        aof_ops: &[(usize, Argv)],
        replica_ops: &[(usize, Argv)],
        now_ms: i64,
    ) -> Result<(), Failure> {
        if let Some(r) = &mut self.replication {
            if !replica_ops.is_empty() {
                r.unit(replica_ops);
            }
        }
        match &mut self.aof {
            Some(aof) if !aof_ops.is_empty() => aof.feed(aof_ops, now_ms),
            _ => Ok(()),
        }
    }
}

/// The `op` of an [`PersistError::Io`] for a file the manifest names that cannot be found.
pub const MANIFEST_FILE_STAT: &str = "stat (named in the manifest)";

/// What kind of damage stopped an AOF's replay (Redis tells them apart in its log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AofFault {
    /// The file ends inside a command or a MULTI block.
    Truncated,
    /// A command the server does not know.
    UnknownCommand(String),
    /// Bytes that are not RESP.
    Format,
}

/// Why a file could not be written or loaded. Every variant names the file.
#[derive(Debug)]
#[non_exhaustive]
pub enum PersistError {
    /// A system call on `path` failed.
    Io { path: PathBuf, op: &'static str, source: io::Error },
    /// `path` was renamed into place, but the fsync of its directory failed: the new
    /// file is the one seen now, and the old one may come back after a power loss.
    RenameNotDurable { path: PathBuf, source: io::Error },
    /// The AOF manifest is malformed.
    Manifest { path: PathBuf, line: usize, what: String },
    /// An RDB (the dump file, or an AOF base in RDB form) is malformed.
    Rdb { path: PathBuf, source: RdbError },
    /// An AOF file (base or incr, RESP part) could not be replayed.
    Aof { path: PathBuf, offset: u64, fault: AofFault, what: String },
    /// A key holds what the engine cannot keep (streams, modules, hash field TTLs).
    Unsupported { path: PathBuf, offset: usize, db: u64, key: Vec<u8>, what: String },
    /// The operation does not apply in the current state.
    State(String),
}

impl PersistError {
    pub fn io(path: &Path, op: &'static str, source: io::Error) -> PersistError {
        PersistError::Io { path: path.to_path_buf(), op, source }
    }

    pub fn aof(path: &Path, offset: u64, fault: AofFault, what: impl Into<String>) -> PersistError {
        PersistError::Aof { path: path.to_path_buf(), offset, fault, what: what.into() }
    }

    /// The lines Redis logs when it cannot load what this error is about, when it has some
    /// (its test suites and operators' alerts look for them); the last is the reason.
    pub fn redis_load_message(&self) -> Vec<String> {
        let file_name = |path: &Path| path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match self {
            PersistError::Rdb { source, .. } => {
                vec![
                    format!("Internal error in RDB reading offset {} -> {}", source.offset, rdb_reason(source)),
                    "Terminating server after rdb file reading failure.".to_string(),
                ]
            }
            PersistError::Manifest { line, what, .. } => vec![
                "*** FATAL AOF MANIFEST FILE ERROR ***".to_string(),
                format!("Reading the manifest file, at line {line}"),
                what.clone(),
            ],
            PersistError::Io { path, op: MANIFEST_FILE_STAT, source } if source.kind() == io::ErrorKind::NotFound => {
                vec![format!("The append log file {} doesn't exist: No such file or directory", file_name(path))]
            }
            PersistError::Aof { path, fault, .. } => {
                let name = file_name(path);
                vec![match fault {
                    AofFault::Truncated => format!(
                        "Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of \
                         your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you \
                         can set the 'aof-load-truncated' configuration option to yes and restart the server."
                    ),
                    AofFault::UnknownCommand(cmd) => {
                        format!("Unknown command '{cmd}' reading the append only file {name}")
                    }
                    AofFault::Format => format!(
                        "Bad file format reading the append only file {name}: make a backup of your AOF file, then \
                         use ./redis-check-aof --fix <filename.manifest>"
                    ),
                }]
            }
            _ => Vec::new(),
        }
    }

    /// Whether [`PersistError::redis_load_message`] and [`PersistError::rdb_check_report`]
    /// already say all there is (a manifest's reason and line; an RDB's offset, db, key and
    /// type): the detail need not be logged beside them.
    pub fn redis_message_is_whole(&self) -> bool {
        matches!(self, PersistError::Manifest { .. } | PersistError::Rdb { .. })
    }

    /// For an RDB that cannot be loaded, what redis-check-rdb would report of it, in its
    /// layout (Redis runs its checker and prints this before it exits): where, and in
    /// which key.
    pub fn rdb_check_report(&self) -> Vec<String> {
        let PersistError::Rdb { path, source } = self else {
            return Vec::new();
        };
        let mut lines = vec![
            format!("[offset 0] Checking RDB file {}", path.display()),
            "--- RDB ERROR DETECTED ---".to_string(),
            format!("[offset {}] {}", source.offset, rdb_reason(source)),
        ];
        if let Some(db) = source.db {
            lines.push(format!("[additional info] In db {db}"));
        }
        if let Some(key) = &source.key {
            lines.push(format!("[additional info] Reading key '{}'", escape_key(key)));
        }
        if let Some(vtype) = source.vtype {
            lines.push(format!("[additional info] Reading type {vtype}"));
        }
        lines
    }

    /// The file the error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            PersistError::Io { path, .. }
            | PersistError::RenameNotDurable { path, .. }
            | PersistError::Manifest { path, .. }
            | PersistError::Rdb { path, .. }
            | PersistError::Aof { path, .. }
            | PersistError::Unsupported { path, .. } => Some(path),
            PersistError::State(_) => None,
        }
    }
}

impl fmt::Display for PersistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PersistError::Io { path, op, source } => write!(f, "{}: {op}: {source}", path.display()),
            PersistError::RenameNotDurable { path, source } => {
                write!(f, "{}: renamed, but the fsync of its directory failed: {source}", path.display())
            }
            PersistError::Manifest { path, line, what } => write!(f, "{}: line {line}: {what}", path.display()),
            PersistError::Rdb { path, source } => write!(f, "{}: {source}", path.display()),
            PersistError::Aof { path, offset, what, .. } => write!(f, "{}: offset {offset}: {what}", path.display()),
            PersistError::Unsupported { path, offset, db, key, what } => {
                write!(f, "{}: offset {offset}: db {db} key '{}': {what}", path.display(), escape_key(key))
            }
            PersistError::State(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for PersistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PersistError::Io { source, .. } | PersistError::RenameNotDurable { source, .. } => Some(source),
            PersistError::Rdb { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why an RDB cannot be loaded, in the words Redis's loader uses: a bad checksum, an early
/// end, or "<encoding> integrity check failed" with what is wrong in the value.
fn rdb_reason(e: &RdbError) -> String {
    let encoded = e.vtype.and_then(|name| ValueType::ALL.into_iter().find(|t| t.name() == name));
    match (e.kind, encoded.map(ValueType::integrity_name)) {
        (ErrorKind::Checksum, _) => "RDB CRC error".to_string(),
        (ErrorKind::Truncated, _) => "Unexpected EOF reading RDB file".to_string(),
        (_, Some(name)) if name != "Value" => format!("{name} integrity check failed: {}", e.what),
        _ => e.what.clone(),
    }
}
