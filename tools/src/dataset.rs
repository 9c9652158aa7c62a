//! What a dataset path holds (RDB, jsonl dump, AOF) and staging any of them as an RDB file
//! for `rdbtool diff`.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use ferrokv::format::rdb::{RdbReader, Record, Target};
use ferrokv::Source;

use crate::convert::jsonl_to_rdb;
use crate::out::ToolError;
use crate::replay::{Input, Options, Replay};

/// Whether `data` is an RDB file and nothing else (an RDB-preamble AOF goes on after it).
pub fn is_plain_rdb(data: &[u8]) -> bool {
    if !(data.starts_with(b"REDIS") || data.starts_with(b"VALKEY")) {
        return false;
    }
    let Ok(reader) = RdbReader::new(data) else { return false };
    for rec in reader {
        match rec {
            Ok(Record::Eof { end, .. }) => return end >= data.len(),
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// What a dataset path holds, for `rdbtool diff` and `replay --against`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetKind {
    Rdb,
    /// A jsonl written by `rdbtool dump`.
    Jsonl,
    /// An AOF: a directory, a manifest, or one file (RESP, or RDB preamble plus RESP).
    Aof,
}

/// Detect what `path` holds: a directory or a `.manifest` is an AOF; a file by its first
/// bytes (`REDIS`/`VALKEY` an RDB, unless a `.aof` file goes on after its RDB part; `{` a
/// jsonl; `*` or `#` an AOF). Anything else (or unreadable) is left to the RDB reader,
/// whose error names the file.
pub fn dataset_kind(path: &Path) -> DatasetKind {
    if path.is_dir() || path.extension().is_some_and(|e| e == "manifest") {
        return DatasetKind::Aof;
    }
    let Ok(src) = Source::open(path) else { return DatasetKind::Rdb };
    let aof_name = path.extension().is_some_and(|e| e == "aof");
    match src.first() {
        Some(b'R' | b'V') if aof_name && !is_plain_rdb(&src) => DatasetKind::Aof,
        Some(b'{') => DatasetKind::Jsonl,
        Some(b'*' | b'#') => DatasetKind::Aof,
        None if aof_name => DatasetKind::Aof,
        _ => DatasetKind::Rdb,
    }
}

/// `path` as an RDB file for `rdbtool diff`: an RDB as it is; a jsonl encoded, and an AOF
/// replayed (as `replay` does, expired keys kept: the log's state at its end) into
/// `dir/name`.
pub fn stage_as_rdb(path: &Path, dir: &Path, name: &str) -> Result<PathBuf, ToolError> {
    let staged = dir.join(name);
    match dataset_kind(path) {
        DatasetKind::Rdb => return Ok(path.to_path_buf()),
        DatasetKind::Aof => {
            Replay::run(&Input { aof: path.to_path_buf(), rdb: None }, &Options::default())?.write_rdb(&staged)?;
        }
        DatasetKind::Jsonl => {
            let src = Source::open(path)
                .map_err(|err| ToolError::Usage(format!("{}: cannot read: {err}", path.display())))?;
            let file = File::create(&staged).map_err(|err| ToolError::Usage(format!("{}: {err}", staged.display())))?;
            let (w, _) =
                jsonl_to_rdb(&src, Target::Redis74, BufWriter::new(file), crate::now_ms() / 1000).map_err(|err| {
                    match err {
                        ToolError::Usage(m) => ToolError::Usage(format!("{}: {m}", path.display())),
                        other => other,
                    }
                })?;
            w.into_inner().map_err(|err| ToolError::Usage(format!("{}: {}", staged.display(), err.error())))?;
        }
    }
    Ok(staged)
}
