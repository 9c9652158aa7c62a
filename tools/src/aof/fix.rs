//! `aoftool fix`: make an AOF loadable again.
//!
//! - By default, as `redis-check-aof --fix`: when the last file ends inside a command (or
//!   inside a MULTI block), cut it after the last whole command. Anything else is refused.
//! - `--salvage`: in every file, each region that cannot be replayed (bad framing, an
//!   unknown command or a wrong argument count, a MULTI block left open by damage, a cut
//!   tail) is dropped, reading on from the next valid command boundary; a report lists
//!   every byte range dropped and the commands that could still be read in it.
//!
//! A changed file is written to a temp file beside it and renamed over it; the original
//! stays as `<name>.bak` (or `.bak.N`).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use ferrokv::format::aof::{has_rdb_preamble, AofPart, Command, CommandReader};
use serde_json::{json, Value};

use super::check::{check_file, command_problem, manifest_problem, open_part, CommandCheck, Txn};
use super::{file_name, open, show_argv, Kind, Problem};
use crate::out::ToolError;
use crate::verify::{walk, Depth};

/// A command (or what is left of one) inside a dropped region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostCommand {
    pub offset: usize,
    /// The argument count its header claims.
    pub argc: u64,
    /// The arguments that could be read, name first.
    pub argv: Vec<Vec<u8>>,
}

impl LostCommand {
    pub fn whole(&self) -> bool {
        self.argv.len() as u64 == self.argc
    }
}

/// A dropped byte range of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    pub start: usize,
    pub end: usize,
    pub why: String,
    pub commands: Vec<LostCommand>,
}

/// What fixing one file did.
#[derive(Debug, Clone)]
pub struct FileFix {
    pub name: String,
    pub path: PathBuf,
    pub old_size: u64,
    pub new_size: u64,
    pub lost: Vec<Lost>,
    pub backup: Option<PathBuf>,
}

#[derive(Debug)]
pub enum Outcome {
    /// verify found nothing wrong.
    NothingToFix,
    /// The files were rewritten (backups kept).
    Fixed(Vec<FileFix>),
    /// The user said no.
    Declined(Vec<FileFix>),
    /// The problem is not one fix can repair.
    CannotFix(Problem),
}

pub struct Options {
    pub salvage: bool,
    /// Do it without asking.
    pub yes: bool,
}

/// Fix the AOF at `path`. `confirm` is asked before anything is written (unless `yes`).
pub fn run(path: &Path, opts: &Options, confirm: &mut dyn FnMut(&[FileFix]) -> bool) -> Result<Outcome, ToolError> {
    let set = match open(path)? {
        Ok(set) => set,
        Err(p) => return Ok(Outcome::CannotFix(p)),
    };
    if let Some(p) = manifest_problem(&set)? {
        return Ok(Outcome::CannotFix(p));
    }
    let n = set.parts.len();
    let mut plans: Vec<Plan> = Vec::new();
    for (i, part) in set.parts.iter().enumerate() {
        let src = open_part(part)?;
        let last = i + 1 == n;
        if opts.salvage {
            if let Some(plan) = salvage_plan(part, &src)? {
                plans.push(plan);
            }
            continue;
        }
        let (_, problem) = check_file(&part.name, None, &src, last);
        let Some(problem) = problem else { continue };
        match problem.cut {
            Some(cut) if problem.kind == Kind::Truncated && last => {
                let lost = vec![lost_region(&src, cut, src.len(), problem.what.clone())];
                plans.push((fix_of(part, src.len(), cut, lost), vec![(0, cut)]));
            }
            _ => return Ok(Outcome::CannotFix(problem)),
        }
    }
    if plans.is_empty() {
        return Ok(Outcome::NothingToFix);
    }
    let fixes: Vec<FileFix> = plans.iter().map(|(f, _)| f.clone()).collect();
    if !opts.yes && !confirm(&fixes) {
        return Ok(Outcome::Declined(fixes));
    }
    let mut done = Vec::new();
    for (mut fix, keep) in plans {
        let src = fs::read(&fix.path).map_err(|e| io_err(&fix.path, "read", e))?;
        let chunks: Vec<&[u8]> = keep.iter().map(|&(a, b)| &src[a..b]).collect();
        fix.backup = Some(replace_file(&fix.path, &chunks)?);
        done.push(fix);
    }
    Ok(Outcome::Fixed(done))
}

fn fix_of(part: &AofPart, old: usize, new: usize, lost: Vec<Lost>) -> FileFix {
    FileFix {
        name: part.name.clone(),
        path: part.path.clone(),
        old_size: old as u64,
        new_size: new as u64,
        lost,
        backup: None,
    }
}

fn io_err(path: &Path, op: &str, e: std::io::Error) -> ToolError {
    ToolError::Usage(format!("cannot {op} {}: {e}", path.display()))
}

/// The byte ranges of a file to keep, in order, and the regions lost.
pub type Salvaged = (Vec<(usize, usize)>, Vec<Lost>);

/// A file's fix and the byte ranges it keeps.
type Plan = (FileFix, Vec<(usize, usize)>);

/// One unit of a file being salvaged.
enum Unit {
    Keep(usize, usize),
    Lose(usize, usize, String),
}

/// The byte ranges of `part` to keep and what is lost; None when nothing is.
fn salvage_plan(part: &AofPart, data: &[u8]) -> Result<Option<Plan>, ToolError> {
    let (keep, lost) = salvage(data).map_err(|e| {
        ToolError::Data(ferrokv::format::rdb::RdbError::at(
            e.offset,
            format!("{}: the RDB part cannot be salvaged: {}", part.name, e.what),
        ))
    })?;
    if lost.is_empty() {
        return Ok(None);
    }
    let new = keep.iter().map(|(a, b)| b - a).sum();
    Ok(Some((fix_of(part, data.len(), new, lost), keep)))
}

/// Salvage one file's bytes: the byte ranges to keep, in order, and the regions lost.
/// The kept bytes put together verify without a problem. An RDB part that does not
/// decode is the error. A file that verifies is kept whole: its warnings (an EXEC without
/// MULTI, a MULTI inside MULTI) are what Redis's loader takes and goes on from.
pub fn salvage(data: &[u8]) -> Result<Salvaged, ferrokv::format::rdb::RdbError> {
    if check_file("salvage", None, data, true).1.is_none() {
        let whole = if data.is_empty() { Vec::new() } else { vec![(0, data.len())] };
        return Ok((whole, Vec::new()));
    }
    let mut start = 0;
    if has_rdb_preamble(data) {
        match walk(data, Depth::Deep, 0) {
            Ok(r) => start = data.len() - r.trailing_bytes as usize,
            Err((_, e)) => return Err(e),
        }
    }
    let units = salvage_units(data, start);
    let mut keep = vec![(0, start)];
    let mut lost: Vec<Lost> = Vec::new();
    for u in units {
        match u {
            Unit::Keep(a, b) => match keep.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => keep.push((a, b)),
            },
            Unit::Lose(a, b, why) => match lost.last_mut() {
                Some(l) if l.end == a => {
                    l.end = b;
                    l.why = format!("{}; {why}", l.why);
                }
                _ => lost.push(Lost { start: a, end: b, why, commands: Vec::new() }),
            },
        }
    }
    for l in &mut lost {
        *l = lost_region(data, l.start, l.end, std::mem::take(&mut l.why));
    }
    keep.retain(|&(a, b)| b > a);
    Ok((keep, lost))
}

/// Walk the commands from `start`, resynchronising past every bad region.
fn salvage_units(data: &[u8], start: usize) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut txn = Txn::default();
    // Index in `units` where the open MULTI block starts.
    let mut block = 0;
    let mut last_end = start;
    let mut k = 0;
    let mut reader = CommandReader::at(data, start);
    let drop_block = |units: &mut Vec<Unit>, from: usize, why: String| {
        let tail: Vec<Unit> = units.drain(from..).collect();
        let (a, b) = tail.iter().fold((usize::MAX, 0), |(a, b), u| match u {
            Unit::Keep(x, y) | Unit::Lose(x, y, _) => (a.min(*x), b.max(*y)),
        });
        if a < b {
            units.push(Unit::Lose(a, b, why));
        }
    };
    while let Some(next) = reader.next() {
        k += 1;
        match next {
            Ok(cmd) => {
                units.push(Unit::Keep(last_end, cmd.offset));
                last_end = cmd.end;
                // Salvage keeps a command some version has: only the unreadable go.
                if let CommandCheck::Problem(why) = command_problem(&cmd, None) {
                    units.push(Unit::Lose(cmd.offset, cmd.end, why));
                    continue;
                }
                if cmd.is("multi") {
                    if let Some((at, _)) = txn.open.take() {
                        drop_block(&mut units, block, format!("MULTI at offset {at} without EXEC"));
                    }
                    block = units.len();
                } else if cmd.is("exec") && txn.open.is_none() {
                    units.push(Unit::Lose(cmd.offset, cmd.end, "EXEC without MULTI".into()));
                    continue;
                }
                let _ = txn.step(&cmd, k);
                units.push(Unit::Keep(cmd.offset, cmd.end));
            }
            Err(e) => {
                let s = e.start();
                units.push(Unit::Keep(last_end, s));
                let r = resync(data, s + 1);
                units.push(Unit::Lose(s, r, e.what().to_string()));
                if let Some((at, _)) = txn.open.take() {
                    drop_block(&mut units, block, format!("the MULTI block at offset {at} is damaged"));
                }
                last_end = r;
                reader.resume_at(r);
            }
        }
    }
    units.push(Unit::Keep(last_end, data.len()));
    if let Some((at, _)) = txn.open.take() {
        drop_block(&mut units, block, format!("MULTI at offset {at} without EXEC at the end of the file"));
    }
    units
}

/// The next line start at or after `from` where a whole, replayable command begins.
fn resync(data: &[u8], from: usize) -> usize {
    let mut p = from;
    while p < data.len() {
        let Some(i) = data[p..].iter().position(|&c| c == b'*') else { break };
        p += i;
        if data[p - 1] == b'\n' {
            if let Some((argv, end)) = CommandReader::command_at(data, p) {
                let cmd = Command { offset: p, end, db: 0, ts: None, argv, anomaly: None };
                if command_problem(&cmd, None) == CommandCheck::Ok {
                    return p;
                }
            }
        }
        p += 1;
    }
    data.len()
}

/// The dropped range [start, end) with the commands that can still be read in it.
fn lost_region(data: &[u8], start: usize, end: usize, why: String) -> Lost {
    let mut commands = Vec::new();
    let mut p = start;
    while p < end {
        if data[p] == b'*' && (p == start || data[p - 1] == b'\n') {
            if let Some((argc, argv)) = CommandReader::partial_at(&data[..end], p) {
                commands.push(LostCommand { offset: p, argc, argv: argv.iter().map(|a| a.to_vec()).collect() });
                if let Some((_, e)) = CommandReader::command_at(&data[..end], p) {
                    p = e;
                    continue;
                }
            }
        }
        p += 1;
    }
    Lost { start, end, why, commands }
}

/// Write `chunks` to a temp file beside `path`, keep the original as a backup, and
/// rename the temp file over it. Returns the backup's path.
fn replace_file(path: &Path, chunks: &[&[u8]]) -> Result<PathBuf, ToolError> {
    let name = file_name(path);
    let tmp = path.with_file_name(format!("{name}.aoftool-tmp"));
    {
        let mut f = File::create(&tmp).map_err(|e| io_err(&tmp, "create", e))?;
        for c in chunks {
            f.write_all(c).map_err(|e| io_err(&tmp, "write", e))?;
        }
        f.sync_all().map_err(|e| io_err(&tmp, "sync", e))?;
    }
    let mut backup = path.with_file_name(format!("{name}.bak"));
    let mut n = 1;
    while backup.exists() {
        backup = path.with_file_name(format!("{name}.bak.{n}"));
        n += 1;
    }
    if fs::hard_link(path, &backup).is_err() {
        fs::copy(path, &backup).map_err(|e| io_err(&backup, "write the backup", e))?;
    }
    fs::rename(&tmp, path).map_err(|e| io_err(path, "replace", e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(backup)
}

/// The report of what was (or would be) dropped.
pub fn text(fixes: &[FileFix]) -> String {
    let mut s = String::new();
    for f in fixes {
        let dropped = f.old_size - f.new_size;
        s.push_str(&format!("file {}: {} -> {} bytes ({dropped} bytes dropped", f.name, f.old_size, f.new_size));
        let cmds: usize = f.lost.iter().map(|l| l.commands.len()).sum();
        s.push_str(&format!(", {} regions, {cmds} command starts in them)\n", f.lost.len()));
        for l in &f.lost {
            s.push_str(&format!("  lost [{}, {}) ({} bytes): {}\n", l.start, l.end, l.end - l.start, l.why));
            for c in &l.commands {
                let argv: Vec<&[u8]> = c.argv.iter().map(Vec::as_slice).collect();
                let state = if c.whole() {
                    String::new()
                } else {
                    format!(" (damaged: {} of {} arguments)", c.argv.len(), c.argc)
                };
                s.push_str(&format!("    command at offset {}: {}{state}\n", c.offset, show_argv(&argv, 6)));
            }
        }
        if let Some(b) = &f.backup {
            s.push_str(&format!("  original kept as {}\n", b.display()));
        }
    }
    s
}

pub fn json(fixes: &[FileFix]) -> Value {
    let bytes = |b: &[u8]| {
        let mut out = Vec::new();
        crate::jsonw::bytes(&mut out, b);
        serde_json::from_slice::<Value>(&out).unwrap_or(Value::Null)
    };
    Value::Array(
        fixes
            .iter()
            .map(|f| {
                json!({
                    "file": f.name,
                    "old_size": f.old_size,
                    "new_size": f.new_size,
                    "backup": f.backup.as_ref().map(|b| b.display().to_string()),
                    "lost": f.lost.iter().map(|l| json!({
                        "start": l.start,
                        "end": l.end,
                        "why": l.why,
                        "commands": l.commands.iter().map(|c| json!({
                            "offset": c.offset,
                            "argc": c.argc,
                            "whole": c.whole(),
                            "argv": c.argv.iter().map(|a| bytes(a)).collect::<Vec<_>>(),
                        })).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}
