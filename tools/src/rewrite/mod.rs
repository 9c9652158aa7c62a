//! `aof-rewrite IN OUT`: BGREWRITEAOF offline. IN is replayed ([`crate::replay`]), keys
//! already expired at `--now` are left out, and OUT is written as Redis 7.0's rewrite leaves
//! an AOF directory (a manifest naming one base and one empty incr file) or as one file
//! holding just the base. The base is RESP (RPUSH/SADD/ZADD/HMSET in batches of 64,
//! PEXPIREAT; streams as XADD/XSETID/XGROUP/XCLAIM) or an RDB with `aof-base` set.
//! With `until`, the dataset as it was at that time (see [`crate::replay`]).
//! An RDB base is streamed through when it can be ([`streamed`]): only the keys the log
//! touches are held, so memory follows the log, not the dataset.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use ferrokv::format::aof::{AofInfo, FileKind, Manifest};
use ferrokv::persist::aof::persist_manifest;
use ferrokv::persist::rewrite::write_keyspace;
use ferrokv::persist::snapshot::{write_atomically, write_rdb};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::persist::merge::{write_merged_rdb, Merged};
use ferrokv::persist::snapshot::config_for;
use ferrokv::Source;

use crate::out::ToolError;
use crate::replay::{input_version, Input, Options, Replay};

mod streamed;
use streamed::Plan;

/// The form of the base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BaseKind {
    /// An RDB (as with aof-use-rdb-preamble yes, Redis 7.0's default).
    Rdb,
    /// RESP commands (aof-use-rdb-preamble no).
    Resp,
}

/// How OUT is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A multi-part AOF directory.
    Dir,
    /// One file: the base alone (an RDB-preamble AOF or a RESP AOF).
    File,
}

/// What a rewrite wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// Files written (the manifest last), or OUT itself for one file.
    pub files: Vec<PathBuf>,
    pub keys: u64,
    /// Keys left out because they were expired at `now`.
    pub expired_left_out: u64,
    /// When the base RDB was streamed through: how many keys the log touches were held.
    pub held: Option<u64>,
    /// With `until`: where the replay stopped (the line `replay` prints).
    pub until: Option<String>,
}

/// The layout for OUT: a name ending in `.aof` or `.rdb` is one file, anything else a
/// directory.
pub fn layout_for(out: &Path) -> Layout {
    match out.extension().and_then(|e| e.to_str()) {
        Some("aof" | "rdb") if !out.is_dir() => Layout::File,
        _ => Layout::Dir,
    }
}

/// Replay `input` (up to `until`, unix ms, when given), then write OUT for `version`
/// (None: the input's, see [`input_version`]).
pub fn run(
    input: &Input,
    out: &Path,
    base: BaseKind,
    layout: Layout,
    now_ms: i64,
    version: Option<ServerVersion>,
    until: Option<i64>,
) -> Result<Written, ToolError> {
    // An RDB base is streamed through when the output is an RDB in its format: only the
    // keys the later commands touch are held.
    let plan = if base == BaseKind::Rdb { streamed::plan(input) } else { None };
    let mut replay = replay_for(input, until, version, plan.as_ref())?;
    let plan = match plan {
        Some(p) if output_dialect(&replay) != p.dialect => {
            // The replay made something the base's format cannot hold (field TTLs in an RDB
            // 10 base): the whole dataset then, as without a base to stream.
            replay = replay_for(input, until, version, None)?;
            None
        }
        p => p,
    };
    let expired_left_out = drop_expired(&mut replay, now_ms);
    let keys: u64 = replay.engine.keyspace().dbs.iter().map(|d| d.len() as u64).sum();
    let content = Content { replay: &replay, plan: plan.as_ref() };
    let (files, merged) = match layout {
        Layout::File => (vec![out.to_path_buf()], write_base(&content, out, base, now_ms)?),
        Layout::Dir => write_dir(&content, out, base, now_ms, previous_manifest(&input.aof))?,
    };
    Ok(Written {
        files,
        keys: keys + merged.copied,
        expired_left_out: expired_left_out + merged.expired,
        held: plan.as_ref().map(|p| p.touched.len() as u64),
        until: replay.until_text(),
    })
}

/// Replay `input` for a rewrite: checked for lost writes and `until`, on the output's version.
fn replay_for(
    input: &Input,
    until: Option<i64>,
    version: Option<ServerVersion>,
    plan: Option<&Plan>,
) -> Result<Replay, ToolError> {
    let opts = Options { until, base_keys: plan.map(|p| std::sync::Arc::clone(&p.touched)), ..Options::default() };
    let mut replay = Replay::run(input, &opts)?;
    refuse_lost_writes(&replay)?;
    if until.is_some() && !replay.annotated {
        return Err(ToolError::Usage(
            "--until: the AOF has no #TS: annotations (aof-timestamp-enabled yes, or a directory `aoftool \
             capture` wrote), so where that time falls in it is unknown; nothing was written"
                .to_string(),
        ));
    }
    if let Some(v) = version.or_else(|| input_version(input)) {
        replay.engine.config_mut().set_version(v);
    }
    Ok(replay)
}

/// The format an RDB of the replay's keys is written in.
fn output_dialect(replay: &Replay) -> ferrokv::format::rdb::Dialect {
    config_for(replay.engine.config(), replay.engine.keyspace()).rdb_target().dialect()
}

/// What a rewrite writes: the replay's keys, merged into a streamed base when there is one.
struct Content<'r> {
    replay: &'r Replay,
    plan: Option<&'r Plan>,
}

/// Scripts logged verbatim (EVAL, EVALSHA: Redis before 7.0 could write them) change data
/// this tool cannot rebuild without running them: no output rather than one that lacks
/// their writes. ferrokv-server runs them when it loads such an AOF.
fn refuse_lost_writes(replay: &Replay) -> Result<(), ToolError> {
    let scripts: Vec<String> = ["eval", "evalsha"]
        .iter()
        .filter_map(|name| replay.summary.skipped.get(*name).map(|n| format!("{} x{n}", name.to_uppercase())))
        .collect();
    if scripts.is_empty() {
        return Ok(());
    }
    Err(ToolError::Usage(format!(
        "the AOF runs scripts ({}) that aof-rewrite does not run: their writes would be missing from the \
         output, so none was written. Load the AOF in ferrokv-server (which runs them) or Redis, and \
         BGREWRITEAOF there.",
        scripts.join(", ")
    )))
}

/// Remove keys whose TTL is before `now` (Redis's rewrite skips them the same way).
fn drop_expired(replay: &mut Replay, now_ms: i64) -> u64 {
    let mut n = 0;
    for db in &mut replay.engine.keyspace_mut().dbs {
        let gone: Vec<Vec<u8>> =
            db.iter().filter(|(_, t)| t.is_some_and(|t| t < now_ms)).map(|(s, _)| s.key.to_vec()).collect();
        for k in gone {
            db.remove(&k);
            n += 1;
        }
    }
    n
}

/// The input's manifest and appendfilename, when it is a multi-part AOF.
fn previous_manifest(aof: &Path) -> Option<(String, Manifest)> {
    let set = ferrokv::format::aof::AofSet::open(aof).ok()?;
    let m = set.manifest?;
    Some((m.appendfilename, m.manifest))
}

fn out_err(path: &Path, err: impl std::fmt::Display) -> ToolError {
    ToolError::Usage(format!("{}: {err}", path.display()))
}

/// The base at `path` (temp file, fsync, rename).
fn write_base(content: &Content<'_>, path: &Path, base: BaseKind, now_ms: i64) -> Result<Merged, ToolError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!("temp-rewriteaof-{}-{name}", std::process::id()));
    let replay = content.replay;
    let ks = replay.engine.keyspace();
    let cfg = replay.engine.config();
    let mut merged = Merged::default();
    let r = match (base, content.plan) {
        (BaseKind::Rdb, Some(plan)) => {
            let src = Source::open(&plan.base).map_err(|e| out_err(&plan.base, e))?;
            let replaced = |db: usize, key: &[u8]| plan.replaced(db, key);
            write_atomically(&tmp, path, |w| {
                let (w, m) = write_merged_rdb(w, &src, &replaced, ks, cfg, now_ms, true)?;
                merged = m;
                Ok(w)
            })
        }
        (BaseKind::Rdb, None) => write_atomically(&tmp, path, |w| write_rdb(w, ks, cfg, now_ms, true)),
        (BaseKind::Resp, _) => write_atomically(&tmp, path, |w| write_keyspace(w, ks, None)),
    };
    r.map_err(|err| {
        let _ = fs::remove_file(&tmp);
        ToolError::Usage(err.to_string())
    })?;
    Ok(merged)
}

/// OUT as an AOF directory. Sequence numbers follow the input's manifest (as a rewrite of
/// that directory would number them), else start at 1. The directory is built beside OUT
/// and renamed into place, so OUT is either absent or whole.
fn write_dir(
    content: &Content<'_>,
    out: &Path,
    base: BaseKind,
    now_ms: i64,
    previous: Option<(String, Manifest)>,
) -> Result<(Vec<PathBuf>, Merged), ToolError> {
    if out.exists() {
        let empty = fs::read_dir(out).map_err(|e| out_err(out, e))?.next().is_none();
        if !empty {
            return Err(ToolError::Usage(format!("{}: exists and is not empty", out.display())));
        }
        fs::remove_dir(out).map_err(|e| out_err(out, e))?;
    }
    let (appendfilename, old) = previous.unwrap_or_else(|| ("appendonly.aof".to_string(), Manifest::default()));
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let building = out.with_file_name(format!("temp-rewriteaof-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&building);
    fs::create_dir_all(&building).map_err(|e| out_err(&building, e))?;
    let result = fill_dir(content, &building, base, now_ms, &appendfilename, &old);
    let (names, merged) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = fs::remove_dir_all(&building);
            return Err(e);
        }
    };
    fs::rename(&building, out).map_err(|e| {
        let _ = fs::remove_dir_all(&building);
        out_err(out, e)
    })?;
    Ok((names.iter().map(|n| out.join(n)).collect(), merged))
}

fn fill_dir(
    content: &Content<'_>,
    dir: &Path,
    base: BaseKind,
    now_ms: i64,
    appendfilename: &str,
    old: &Manifest,
) -> Result<(Vec<String>, Merged), ToolError> {
    let base_seq = old.base_seq + 1;
    let incr_seq = old.incr_seq + 1;
    let ext = if base == BaseKind::Rdb { "rdb" } else { "aof" };
    let base_name = format!("{appendfilename}.{base_seq}.base.{ext}");
    let incr_name = format!("{appendfilename}.{incr_seq}.incr.aof");
    let merged = write_base(content, &dir.join(&base_name), base, now_ms)?;
    let incr = dir.join(&incr_name);
    let f = File::create(&incr).map_err(|e| out_err(&incr, e))?;
    f.sync_all().map_err(|e| out_err(&incr, e))?;
    let m = Manifest {
        base: Some(AofInfo { name: base_name.clone(), seq: base_seq, kind: FileKind::Base }),
        history: Vec::new(),
        incr: vec![AofInfo { name: incr_name.clone(), seq: incr_seq, kind: FileKind::Incr }],
        base_seq,
        incr_seq,
    };
    persist_manifest(dir, appendfilename, &m).map_err(|e| ToolError::Usage(e.to_string()))?;
    Ok((vec![base_name, incr_name, format!("{appendfilename}.manifest")], merged))
}

/// The one-line summary `aof-rewrite` prints.
pub fn summary(w: &Written, mut out: impl Write) -> std::io::Result<()> {
    let files: Vec<String> = w.files.iter().map(|p| p.display().to_string()).collect();
    if let Some(line) = &w.until {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "wrote {} keys ({} expired left out): {}", w.keys, w.expired_left_out, files.join(", "))?;
    if let Some(held) = w.held {
        writeln!(out, "the base RDB was streamed through: {held} keys the log touches were held in memory")?;
    }
    Ok(())
}
