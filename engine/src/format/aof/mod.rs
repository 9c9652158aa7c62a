//! AOF: Redis's append-only file, a stream of RESP commands, possibly after an RDB
//! preamble, possibly split into Redis 7.0's multi-part directory (a manifest naming one
//! base and the incr files written after it).
//!
//! - [`resp`]: the command stream of one file ([`CommandReader`]).
//! - [`manifest`]: the manifest's text format.
//! - [`dir`]: which files make up an AOF, in load order ([`AofSet`]).
//!
//! An RDB preamble ([`has_rdb_preamble`]) is read with [`crate::format::rdb::RdbReader`];
//! its `Eof` record's end is where [`CommandReader::at`] starts.

pub mod dir;
pub mod manifest;
pub mod resp;

pub use dir::{AofPart, AofSet, DirError, ManifestFile};
pub use manifest::{AofInfo, FileKind, Manifest};
pub use resp::{has_rdb_preamble, AofError, Command, CommandReader};
