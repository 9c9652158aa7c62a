//! `aoftool verify`: every file of the AOF in load order, stopping at the first problem.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ferrokv::command::catalog::{Catalog, Checked, ServerVersion};
use ferrokv::command::{self, eq_ic};
use ferrokv::format::aof::{has_rdb_preamble, AofError, AofPart, AofSet, Command, CommandReader, FileKind};
use ferrokv::Source;
use serde_json::{json, Value};

use super::{file_name, open, show_argv, Kind, Problem};
use crate::out::ToolError;
use crate::pipeline::Pipeline;
use crate::verify::{walk_with, Depth};

/// The RDB part of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbPart {
    pub keys: u64,
    /// Offset just past its checksum: where commands start.
    pub end: usize,
}

/// What one file holds.
#[derive(Debug, Clone, Default)]
pub struct FileSummary {
    pub name: String,
    pub kind: Option<FileKind>,
    pub size: u64,
    pub rdb: Option<RdbPart>,
    pub commands: u64,
    pub transactions: u64,
    pub dbs: BTreeSet<u64>,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    /// Commands the file's server version does not have (known to others): warnings,
    /// problems under `strict`.
    pub warnings: Vec<Problem>,
}

/// What verify checks commands against.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// The server version the AOF is for (`--redis-version`); else the one its base names,
    /// else any.
    pub version: Option<ServerVersion>,
    /// Warnings are problems (a command the version does not have, a cut tail, ...).
    pub strict: bool,
    /// The version is the one the file itself names (its writer's): a command it does not
    /// have is one its loader refuses, a problem whatever `strict` says.
    pub writer: bool,
    /// The server's `databases` (default 16): a base selecting one past it is refused.
    pub databases: Option<u64>,
}

/// What verify found.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub path: String,
    pub manifest: Option<String>,
    /// The server version commands were checked against, and where it came from.
    pub version: Option<(ServerVersion, &'static str)>,
    /// Of the directory as a whole (files the manifest does not name).
    pub warnings: Vec<Problem>,
    pub files: Vec<FileSummary>,
    pub problem: Option<Problem>,
}

impl VerifyReport {
    pub fn commands(&self) -> u64 {
        self.files.iter().map(|f| f.commands).sum()
    }
}

/// Why a whole command cannot be replayed, as Redis's loader would refuse it: not a
/// command of any version, a container's unknown subcommand, a wrong arity, a bad SELECT.
/// A command only other versions have is [`CommandCheck::OtherVersion`].
pub fn command_problem(cmd: &Command<'_>, version: Option<ServerVersion>) -> CommandCheck {
    if cmd.is("multi") || cmd.is("exec") {
        return match cmd.argv.len() {
            1 => CommandCheck::Ok,
            _ => CommandCheck::Tolerated(format!("{} takes no arguments (Redis ignores them)", lower(cmd.name()))),
        };
    }
    match Catalog::get().check(&cmd.argv, version) {
        Checked::Known => {}
        // Redis's loader does not check arity: the command runs with what it has. Extra
        // arguments are mostly ignored; missing ones are read past the end (a crash).
        Checked::WrongArity { name, given, too_many: true } => {
            return CommandCheck::Tolerated(format!(
                "wrong number of arguments for '{name}' ({given} given; Redis's loader runs it anyway)"
            ))
        }
        Checked::WrongArity { name, given, too_many: false } => {
            if checks_own_arguments(&name, given) {
                return CommandCheck::Tolerated(format!(
                    "wrong number of arguments for '{name}' ({given} given; it counts its own arguments, so Redis's loader gets an error back and goes on)"
                ));
            }
            return CommandCheck::Problem(format!("wrong number of arguments for '{name}' ({given} given)"));
        }
        Checked::OtherVersions { name, known_in } => {
            let v = version.map(|v| v.display()).unwrap_or_default();
            let others: Vec<String> = known_in.iter().map(|v| v.display()).collect();
            return CommandCheck::OtherVersion(format!(
                "'{name}' is not a command of {v} (it is of {})",
                others.join(", ")
            ));
        }
        Checked::Unknown => {
            let name = cmd.name();
            return CommandCheck::Problem(format!(
                "unknown command '{}'",
                String::from_utf8_lossy(&name[..name.len().min(128)])
            ));
        }
    }
    if cmd.is("select") && cmd.argv.get(1).and_then(|a| command::parse_i64(a)).is_none_or(|db| db < 0) {
        return CommandCheck::Tolerated(format!(
            "invalid database index '{}' (Redis's loader answers it with an error and goes on in the same database)",
            String::from_utf8_lossy(cmd.argv[1])
        ));
    }
    CommandCheck::Ok
}

/// Whether a command given too few arguments is still safe to run as Redis's loader runs
/// it (no arity check): its implementation walks or counts the arguments it has, so it
/// answers with an error or does nothing. Others read past their arguments: the loader
/// crashes or reads a stale one (measured on Redis 7.0, 7.4 and Valkey 8.0:
/// `SADD s`, `SETEX k 10`, `APPEND k`, `HINCRBY h f` crash some or all of them). `LPUSH k`
/// is left out though Redis loads it: Redis 7.0 leaves an empty list at the key.
fn checks_own_arguments(name: &str, given: usize) -> bool {
    const WALKS_KEYS: [&str; 4] = ["del", "unlink", "mset", "msetnx"];
    const WALKS_AFTER_KEY: [&str; 10] =
        ["xadd", "xtrim", "xdel", "zadd", "zincrby", "zrem", "hset", "hmset", "hdel", "srem"];
    WALKS_KEYS.contains(&name) || (given >= 1 && WALKS_AFTER_KEY.contains(&name))
}

/// What [`command_problem`] says of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandCheck {
    Ok,
    /// The version given does not have it; another does.
    OtherVersion(String),
    /// Redis's loader runs it, gets an error back and goes on: a warning.
    Tolerated(String),
    Problem(String),
}

/// The server version an AOF's base names: its RDB version and `redis-ver` /
/// `valkey-ver` aux field (a RESP base says nothing).
pub fn base_version(set: &AofSet) -> Option<ServerVersion> {
    let base = set.parts.first()?;
    let src = open_part(base).ok()?;
    rdb_server_version(&src)
}

/// The version an RDB's header and aux fields name.
pub fn rdb_server_version(data: &[u8]) -> Option<ServerVersion> {
    use ferrokv::format::rdb::{RdbReader, Record};
    if !has_rdb_preamble(data) && !data.starts_with(b"VALKEY") {
        return None;
    }
    let reader = RdbReader::new(data).ok()?;
    let rdb_version = reader.dialect().version;
    let mut ver = None;
    for rec in reader {
        match rec {
            Ok(Record::Aux { key, value }) => {
                let k = key.to_bytes();
                if eq_ic(&k, "redis-ver") || eq_ic(&k, "valkey-ver") {
                    ver = Some((String::from_utf8_lossy(&k).to_ascii_lowercase(), value.to_bytes().into_owned()));
                }
            }
            _ => break,
        }
    }
    let ver = ver.map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()));
    ServerVersion::of_file(rdb_version, ver.as_ref().map(|(k, v)| (k.as_str(), v.as_str())))
}

fn lower(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_lowercase()
}

/// MULTI/EXEC nesting: the open MULTI's (offset, command number).
#[derive(Debug, Default)]
pub struct Txn {
    pub open: Option<(usize, u64)>,
}

impl Txn {
    /// Account for `cmd` (number `k`); the error says what is unbalanced.
    pub fn step(&mut self, cmd: &Command<'_>, k: u64) -> Result<(), String> {
        if cmd.is("multi") {
            if let Some((at, n)) = self.open {
                return Err(format!("MULTI inside the MULTI at offset {at} (command #{n})"));
            }
            self.open = Some((cmd.offset, k));
        } else if cmd.is("exec") && self.open.take().is_none() {
            return Err("EXEC without MULTI".into());
        }
        Ok(())
    }
}

/// Check one file's bytes; `last` says whether it is the last file of the AOF.
pub fn check_file(name: &str, kind: Option<FileKind>, data: &[u8], last: bool) -> (FileSummary, Option<Problem>) {
    check_file_with(name, kind, data, last, Options::default(), &|_| {})
}

/// [`check_file`], calling `done(offset)` as the bytes before `offset` are checked (to
/// release mapped pages behind the reader).
pub fn check_file_with(
    name: &str,
    kind: Option<FileKind>,
    data: &[u8],
    last: bool,
    opts: Options,
    done: &dyn Fn(usize),
) -> (FileSummary, Option<Problem>) {
    let mut sum = FileSummary { name: name.to_string(), kind, size: data.len() as u64, ..Default::default() };
    let problem = |kind, offset, command, what: String| Problem {
        kind,
        file: name.to_string(),
        offset: Some(offset),
        command,
        line: None,
        what,
        cut: None,
    };
    let mut start = 0;
    if has_rdb_preamble(data) {
        let databases = opts.databases.unwrap_or(crate::verify::DEFAULT_DATABASES);
        match walk_with(data, Depth::Deep, 0, databases, &Pipeline::default(), done) {
            Ok(r) => {
                let end = data.len() - r.trailing_bytes as usize;
                sum.rdb = Some(RdbPart { keys: r.keys(), end });
                start = end;
            }
            Err((_, e)) => {
                let part = if name.ends_with(".rdb") { "base" } else { "preamble" };
                let what = format!("RDB {part}: {}", rdb_message(&e));
                return (sum, Some(problem(Kind::Rdb, e.offset, None, what)));
            }
        }
    } else if name.ends_with(".rdb") && !data.is_empty() {
        return (sum, Some(problem(Kind::Rdb, 0, None, "an RDB base that does not start with 'REDIS'".into())));
    }
    let mut txn = Txn::default();
    let mut k = 0u64;
    for cmd in CommandReader::at(data, start) {
        k += 1;
        let cmd = match cmd {
            Ok(c) => c,
            Err(e) => {
                let (kind, what) = match &e {
                    AofError::Truncated { .. } if !last => {
                        (Kind::Truncated, format!("{}, and it is not the last file", e.what()))
                    }
                    AofError::Truncated { .. } => (Kind::Truncated, e.what().to_string()),
                    _ => (Kind::Framing, e.what().to_string()),
                };
                let mut p = problem(kind, e.offset(), Some(k), what);
                if e.is_truncated() {
                    p.cut = Some(txn.open.map_or(e.start(), |(at, _)| at));
                }
                return (sum, Some(p));
            }
        };
        if let Some(a) = &cmd.anomaly {
            let what = format!("{a}: Redis's loader reads it so; {}", show_argv(&cmd.argv, 4));
            sum.warnings.push(problem(Kind::Framing, cmd.offset, Some(k), what));
        }
        match command_problem(&cmd, opts.version) {
            CommandCheck::Ok => {}
            CommandCheck::OtherVersion(what) if !opts.strict && !opts.writer => {
                let what = format!("{what}: {}", show_argv(&cmd.argv, 4));
                sum.warnings.push(problem(Kind::Command, cmd.offset, Some(k), what));
            }
            CommandCheck::Tolerated(what) if !opts.strict => {
                let what = format!("{what}: {}", show_argv(&cmd.argv, 4));
                sum.warnings.push(problem(Kind::Command, cmd.offset, Some(k), what));
            }
            CommandCheck::OtherVersion(what) | CommandCheck::Tolerated(what) | CommandCheck::Problem(what) => {
                let what = format!("{what}: {}", show_argv(&cmd.argv, 4));
                return (sum, Some(problem(Kind::Command, cmd.offset, Some(k), what)));
            }
        }
        // Redis's loader queues a MULTI inside MULTI and answers EXEC without MULTI with an
        // error: it goes on.
        if let Err(what) = txn.step(&cmd, k) {
            let what = format!("{what} (Redis's loader goes on)");
            sum.warnings.push(problem(Kind::Command, cmd.offset, Some(k), what));
        }
        done(cmd.end);
        sum.commands += 1;
        sum.transactions += u64::from(cmd.is("exec"));
        if !cmd.is("select") {
            sum.dbs.insert(cmd.db);
        }
        if cmd.ts.is_some() {
            sum.first_ts = sum.first_ts.or(cmd.ts);
            sum.last_ts = cmd.ts;
        }
    }
    if let Some((at, n)) = txn.open {
        let what = "the file ends inside the MULTI/EXEC transaction started here";
        let what = if last { what.to_string() } else { format!("{what}, and it is not the last file") };
        let mut p = problem(Kind::Truncated, at, Some(n), what);
        p.cut = Some(at);
        return (sum, Some(p));
    }
    (sum, None)
}

fn rdb_message(e: &ferrokv::format::rdb::RdbError) -> String {
    let full = e.to_string();
    let prefix = format!("offset {}: ", e.offset);
    full.strip_prefix(&prefix).map(str::to_string).unwrap_or(full)
}

/// Problems of the manifest against the directory: files it names that are missing.
pub fn manifest_problem(set: &AofSet) -> Result<Option<Problem>, ToolError> {
    let Some(m) = &set.manifest else { return Ok(None) };
    let mfile = file_name(&m.path);
    let line_of = |name: &str| -> (Option<usize>, Option<usize>) {
        let mut off = 0;
        for (i, l) in m.text.split(|&c| c == b'\n').enumerate() {
            if l.windows(name.len()).any(|w| w == name.as_bytes()) {
                return (Some(off), Some(i + 1));
            }
            off += l.len() + 1;
        }
        (None, None)
    };
    let manifest = |offset, line, what| Problem {
        kind: Kind::Manifest,
        file: mfile.clone(),
        offset,
        command: None,
        line,
        what,
        cut: None,
    };
    if let Some(p) = set.missing().first() {
        let (offset, line) = line_of(&p.name);
        let kind = if p.kind == FileKind::Base { "base" } else { "incr" };
        return Ok(Some(manifest(offset, line, format!("names the {kind} file {}, which does not exist", p.name))));
    }
    Ok(None)
}

/// What Redis loads but leaves out: AOF files of the directory the manifest does not name,
/// or a base when the manifest names none.
pub fn manifest_warnings(set: &AofSet) -> Result<Vec<Problem>, ToolError> {
    let Some(m) = &set.manifest else { return Ok(Vec::new()) };
    let extra = set.extra_files().map_err(|e| ToolError::Usage(format!("cannot list {e}")))?;
    let warning = |what: String| Problem {
        kind: Kind::Manifest,
        file: file_name(&m.path),
        offset: None,
        command: None,
        line: None,
        what,
        cut: None,
    };
    let mut out = Vec::new();
    if m.manifest.base.is_none() {
        out.push(warning(
            "the manifest names no base file: Redis loads the incr files alone, onto an empty dataset".into(),
        ));
    }
    out.extend(
        extra
            .iter()
            .map(|x| warning(format!("{x} is in the AOF directory but not in the manifest: Redis does not load it"))),
    );
    Ok(out)
}

/// Verify the AOF at `path` (a file, a manifest or a directory).
pub fn verify(path: &std::path::Path, opts: Options) -> Result<VerifyReport, ToolError> {
    let mut rep = VerifyReport { path: path.display().to_string(), ..Default::default() };
    let set = match open(path)? {
        Ok(set) => set,
        Err(p) => {
            rep.problem = Some(p);
            return Ok(rep);
        }
    };
    rep.manifest = set.manifest.as_ref().map(|m| m.path.display().to_string());
    if let Some(p) = manifest_problem(&set)? {
        rep.problem = Some(p);
        return Ok(rep);
    }
    rep.warnings = manifest_warnings(&set)?;
    // The version the base names is the writer's: a command it does not have is one its
    // loader refuses (strict); one given with --redis-version is a question asked.
    let (version, writer) = match opts.version {
        Some(v) => (Some((v, "--redis-version")), opts.writer),
        None => match base_version(&set) {
            Some(v) => (Some((v, "the base")), true),
            None => (None, false),
        },
    };
    rep.version = version;
    let opts = Options { version: version.map(|(v, _)| v), writer, ..opts };
    // Files are independent (each starts in db 0 with no MULTI open), so they are checked
    // in parallel, one per core; the report stops at the first problem in load order.
    let n = set.parts.len();
    let workers = Pipeline::default().workers.clamp(1, n.max(1));
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<FileResult>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let check = |i: usize| -> FileResult {
        let part = &set.parts[i];
        let src = open_part(part)?;
        let kind = set.manifest.as_ref().map(|_| part.kind);
        Ok(check_file_with(&part.name, kind, &src, i + 1 == n, opts, &|o| src.release_before(o)))
    };
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        let r = check(i);
        if let Ok(mut slot) = results[i].lock() {
            *slot = Some(r);
        }
    };
    if workers == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    for (i, slot) in results.into_iter().enumerate() {
        let r = slot.into_inner().ok().flatten().ok_or_else(|| ToolError::Usage("a verify worker failed".into()))?;
        let (mut sum, problem) = r?;
        // An incomplete tail of the last file: Redis's loader (aof-load-truncated yes, its
        // default) cuts it and loads the rest. A warning, unless --strict.
        let problem = match problem {
            Some(mut p) if p.kind == Kind::Truncated && i + 1 == n && !opts.strict => {
                let cut = p.cut.unwrap_or(0);
                p.what = format!(
                    "{}: Redis loads the file, cutting it at offset {cut} (aof-load-truncated); aoftool fix does the same",
                    p.what
                );
                sum.warnings.push(p);
                None
            }
            other => other,
        };
        rep.files.push(sum);
        if problem.is_some() {
            rep.problem = problem;
            break;
        }
    }
    Ok(rep)
}

type FileResult = Result<(FileSummary, Option<Problem>), ToolError>;

pub fn open_part(part: &AofPart) -> Result<Source, ToolError> {
    Source::open(&part.path).map_err(|e| ToolError::Usage(format!("cannot read {}: {e}", part.path.display())))
}

fn kind_name(k: Option<FileKind>) -> &'static str {
    match k {
        None => "file",
        Some(FileKind::Base) => "base",
        Some(FileKind::History) => "history",
        Some(FileKind::Incr) => "incr",
    }
}

pub fn text(r: &VerifyReport) -> String {
    let mut s = String::new();
    match &r.problem {
        None => s.push_str(&format!("OK: {}\n", r.path)),
        Some(p) => s.push_str(&format!("{p}\n")),
    }
    if let Some(m) = &r.manifest {
        s.push_str(&format!("manifest: {m}\n"));
    }
    if let Some((v, from)) = r.version {
        s.push_str(&format!("commands checked against: {} (from {from})\n", v.display()));
    }
    for w in r.warnings.iter().chain(r.files.iter().flat_map(|f| &f.warnings)) {
        s.push_str(&format!("warning: {w}\n"));
    }
    for f in &r.files {
        s.push_str(&format!("{} {}: {} bytes", kind_name(f.kind), f.name, f.size));
        if let Some(rdb) = &f.rdb {
            s.push_str(&format!(", RDB part of {} bytes with {} keys", rdb.end, rdb.keys));
        }
        s.push_str(&format!(", {} commands, {} transactions", f.commands, f.transactions));
        if let (Some(a), Some(b)) = (f.first_ts, f.last_ts) {
            s.push_str(&format!(", timestamps {a}..{b}"));
        }
        s.push('\n');
    }
    if r.problem.is_none() {
        s.push_str(&format!("commands: {}\n", r.commands()));
    }
    s
}

pub fn problem_json(p: &Problem) -> Value {
    json!({
        "kind": p.kind.name(),
        "file": p.file,
        "offset": p.offset,
        "command": p.command,
        "line": p.line,
        "message": p.what,
        "text": p.to_string(),
    })
}

pub fn json(r: &VerifyReport) -> Value {
    let files: Vec<Value> = r
        .files
        .iter()
        .map(|f| {
            json!({
                "name": f.name,
                "kind": kind_name(f.kind),
                "size": f.size,
                "rdb": f.rdb.as_ref().map(|p| json!({"keys": p.keys, "end": p.end})),
                "commands": f.commands,
                "transactions": f.transactions,
                "dbs": f.dbs,
                "first_ts": f.first_ts,
                "last_ts": f.last_ts,
                "warnings": f.warnings.iter().map(problem_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "path": r.path,
        "ok": r.problem.is_none(),
        "manifest": r.manifest,
        "files": files,
        "commands": r.commands(),
        "version": r.version.map(|(v, from)| json!({"version": v.tag(), "from": from})),
        "warnings": r.warnings.iter().map(problem_json).collect::<Vec<_>>(),
        "problem": r.problem.as_ref().map(problem_json),
    })
}
