//! ferrokv: a Redis-compatible storage engine and the format layer its tools stand on.
//!
//! Today this crate holds the format layer (`format`): streaming, zero-copy decoders and
//! encoders for RDB files, DUMP payloads and the compact encodings inside them; and the
//! encoding-free view of values (`logical`) that comparing and converting use.
//!
//! ```
//! use ferrokv::format::rdb::{RdbReader, Record};
//! // An empty RDB 9 file: magic, EOF, checksum.
//! let mut file = b"REDIS0009\xff".to_vec();
//! file.extend_from_slice(&ferrokv::format::crc::crc64(&file).to_le_bytes());
//! let records: Vec<_> = RdbReader::new(&file).unwrap().collect::<Result<_, _>>().unwrap();
//! assert!(matches!(records[0], Record::Eof { .. }));
//! ```

pub mod format;
pub mod logical;
pub mod source;

pub use source::Source;
