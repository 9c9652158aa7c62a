//! Bytes <-> records. Knows nothing of the keyspace, the network or the command set.

pub mod aof;
pub mod args;
pub mod blob;
pub mod crc;
pub mod double;
pub mod grisu;
pub mod input;
pub mod intset;
pub mod listpack;
pub mod logical;
pub mod lzf;
pub mod rdb;
pub mod ziplist;
pub mod zipmap;

pub use blob::Elem;
pub use input::{ErrorKind, FormatError, Input};
