//! `aoftool`: verify, fix and dump AOFs (a single file, a manifest, or a multi-part
//! directory), over [`ferrokv::format::aof`].
//!
//! - [`check`]: `verify`: framing, MULTI/EXEC balance, the manifest, the RDB base or
//!   preamble, unknown commands and arity; the first problem found.
//! - [`fix`]: `fix`: truncate an incomplete tail, or `--salvage` corrupt regions anywhere.
//! - [`dump`]: `dump`: one command per line.
//! - [`capture`]: `capture`: a live server's data as a multi-part AOF directory, kept
//!   current as its replica.

pub mod capture;
pub mod check;
pub mod dump;
pub mod fix;

use std::fmt;

use ferrokv::format::aof::{AofSet, DirError};

use crate::out::ToolError;

/// What kind of problem verify found; `fix` acts on [`Kind::Truncated`] alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The file ends inside a command or inside a MULTI block.
    Truncated,
    /// Bytes that are not RESP commands.
    Framing,
    /// A whole command that cannot be replayed: unknown, wrong arity, MULTI/EXEC misuse.
    Command,
    /// The RDB base or preamble does not decode.
    Rdb,
    /// The manifest is malformed, or does not match the directory.
    Manifest,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Truncated => "truncated",
            Kind::Framing => "framing",
            Kind::Command => "command",
            Kind::Rdb => "rdb",
            Kind::Manifest => "manifest",
        }
    }
}

/// The first thing wrong: `file F offset N (command #K): what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: Kind,
    /// The file's name as the manifest gives it (or the path given).
    pub file: String,
    pub offset: Option<usize>,
    /// 1-based index of the command in its file.
    pub command: Option<u64>,
    /// A line of the manifest.
    pub line: Option<usize>,
    pub what: String,
    /// For [`Kind::Truncated`]: where the file is cut to keep every whole command (before
    /// an unfinished MULTI block).
    pub cut: Option<usize>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file {}", self.file)?;
        if let Some(o) = self.offset {
            write!(f, " offset {o}")?;
        }
        match (self.command, self.line) {
            (Some(k), _) => write!(f, " (command #{k})")?,
            (None, Some(l)) => write!(f, " (line {l})")?,
            (None, None) => {}
        }
        write!(f, ": {}", self.what)
    }
}

/// Open `path` as an AOF; a manifest that does not parse is a [`Problem`], not a usage error.
pub fn open(path: &std::path::Path) -> Result<Result<AofSet, Problem>, ToolError> {
    match AofSet::open(path) {
        Ok(set) => Ok(Ok(set)),
        Err(DirError::Manifest { path, offset, line, what }) => Ok(Err(Problem {
            kind: Kind::Manifest,
            file: file_name(&path),
            offset: Some(offset),
            command: None,
            line: Some(line),
            what,
            cut: None,
        })),
        Err(e @ DirError::NoManifest { .. }) => Err(ToolError::Usage(e.to_string())),
        Err(e @ DirError::Io { .. }) => Err(ToolError::Usage(format!("cannot read {e}"))),
    }
}

pub(crate) fn file_name(p: &std::path::Path) -> String {
    p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// An argument as redis-cli shows it (sdscatrepr): double-quoted, non-printable bytes as
/// `\xNN`.
pub fn repr(out: &mut String, b: &[u8]) {
    ferrokv::format::args::repr_into(out, b);
}

/// `argv` shown on one line, long arguments and long commands shortened.
pub fn show_argv(argv: &[&[u8]], max_args: usize) -> String {
    let mut s = String::new();
    for (i, a) in argv.iter().take(max_args).enumerate() {
        if i > 0 {
            s.push(' ');
        }
        repr(&mut s, &a[..a.len().min(64)]);
        if a.len() > 64 {
            s.push_str("...");
        }
    }
    if argv.len() > max_args {
        s.push_str(&format!(" ... ({} more)", argv.len() - max_args));
    }
    s
}
