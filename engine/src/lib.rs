//! ferrokv: a Redis-compatible storage engine and the format layer its tools stand on.
//!
//! - `format`: streaming, zero-copy decoders and encoders for RDB files, DUMP payloads and
//!   the compact encodings inside them.
//! - `logical`: the encoding-free view of values that comparing and converting use.
//! - `value`, `keyspace`, `command`, `persist`: the engine: values with Redis's encodings,
//!   databases with expiry, the command table, and the write path. [`Engine`] ties them
//!   together (see docs/library.md).
//!
//! ```
//! use ferrokv::format::rdb::{RdbReader, Record};
//! // An empty RDB 9 file: magic, EOF, checksum.
//! let mut file = b"REDIS0009\xff".to_vec();
//! file.extend_from_slice(&ferrokv::format::crc::crc64(&file).to_le_bytes());
//! let records: Vec<_> = RdbReader::new(&file).unwrap().collect::<Result<_, _>>().unwrap();
//! assert!(matches!(records[0], Record::Eof { .. }));
//! ```

pub mod command;
pub mod config;
pub mod digest;
pub mod engine;
pub mod format;
pub mod functions;
pub mod glob;
pub mod keyspace;
pub mod memory;
pub mod persist;
pub mod source;
pub mod value;

pub use command::Reply;
pub use config::Config;
pub use engine::{Engine, Session};
/// Canonical values (the format layer's): what the tools compare and print.
pub use format::logical;
pub use source::Source;
