//! The AOF manifest lives in the format layer ([`crate::format::aof::manifest`]); this
//! module keeps the old path working.

pub use crate::format::aof::manifest::*;
