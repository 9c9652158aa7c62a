//! `replay --against`: a replayed log compared with a snapshot by `rdbtool diff`.

use std::path::Path;

use crate::dataset::stage_as_rdb;
use crate::diff::{diff_files, DiffReport, Options as DiffOptions, TempDir};
use crate::out::ToolError;
use crate::replay::Replay;

/// `replay --against SNAPSHOT`: the replayed state compared with a snapshot (an RDB, an AOF
/// file or directory, replayed the same way, or a jsonl dump) by `rdbtool diff`'s machinery.
/// Both sides are staged as RDB files in a temporary directory.
pub fn against(replayed: &Replay, replayed_name: &str, snapshot: &Path) -> Result<DiffReport, ToolError> {
    let tmp = TempDir::new(&std::env::temp_dir())?;
    let a = tmp.0.join("replayed.rdb");
    replayed.write_rdb(&a)?;
    let b = stage_as_rdb(snapshot, &tmp.0, "snapshot.rdb")?;
    let mut report = diff_files(&a, &b, &DiffOptions::default())?;
    report.a_name = replayed_name.to_string();
    report.b_name = snapshot.display().to_string();
    Ok(report)
}
