//! `aoftool dump`: every command of every file in load order, one per line, with its
//! file, offset, database and timestamp.
//!
//! - text: `<file> <offset> db=<db> ts=<unix s|-> "ARG" "ARG" ...`
//! - jsonl: `{"file":..,"offset":..,"db":..,"ts":..,"argv":[..]}` (bytes as in
//!   docs/json-schema.md: a string, or `{"hex":..}` when not UTF-8).
//!
//! An RDB part (preamble or base) is one line: `<file> 0 rdb keys=<n> end=<offset>`, or
//! `{"file":..,"offset":0,"rdb":{"keys":..,"end":..}}`; `rdbtool dump` shows its keys.

use std::io;

use ferrokv::format::aof::{has_rdb_preamble, CommandReader};

use super::check::open_part;
use super::{open, repr, Problem};
use crate::jsonw;
use crate::out::{Out, ToolError};
use crate::verify::{walk, Depth};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Jsonl,
}

/// Dump the AOF at `path`; stops at the first framing or RDB error, returned as a
/// [`Problem`] after what came before it was written.
pub fn run(path: &std::path::Path, format: Format, out: &mut Out<'_>) -> Result<Option<Problem>, ToolError> {
    let set = match open(path)? {
        Ok(set) => set,
        Err(p) => return Ok(Some(p)),
    };
    for part in &set.parts {
        let data = open_part(part)?;
        let mut start = 0;
        if has_rdb_preamble(&data) {
            match walk(&data, Depth::Records, 0) {
                Ok(r) => {
                    start = data.len() - r.trailing_bytes as usize;
                    rdb_line(out, &part.name, r.keys(), start, format);
                }
                Err((_, e)) => return Ok(Some(problem(&part.name, e.offset, None, format!("RDB part: {}", e.what)))),
            }
        }
        let mut k = 0;
        for cmd in CommandReader::at(&data, start) {
            k += 1;
            let cmd = match cmd {
                Ok(c) => c,
                Err(e) => return Ok(Some(problem(&part.name, e.offset(), Some(k), e.what().to_string()))),
            };
            let b = &mut out.buf;
            match format {
                Format::Text => {
                    let mut s = format!("{} {} db={} ts=", part.name, cmd.offset, cmd.db);
                    match cmd.ts {
                        Some(t) => s.push_str(&t.to_string()),
                        None => s.push('-'),
                    }
                    for a in &cmd.argv {
                        s.push(' ');
                        repr(&mut s, a);
                    }
                    s.push('\n');
                    b.extend_from_slice(s.as_bytes());
                }
                Format::Jsonl => {
                    b.extend_from_slice(b"{\"file\":");
                    jsonw::string(b, &part.name);
                    b.extend_from_slice(b",\"offset\":");
                    jsonw::uint(b, cmd.offset as u64);
                    b.extend_from_slice(b",\"db\":");
                    jsonw::uint(b, cmd.db);
                    b.extend_from_slice(b",\"ts\":");
                    match cmd.ts {
                        Some(t) => jsonw::int(b, t),
                        None => b.extend_from_slice(b"null"),
                    }
                    b.extend_from_slice(b",\"argv\":[");
                    for (i, a) in cmd.argv.iter().enumerate() {
                        if i > 0 {
                            b.push(b',');
                        }
                        jsonw::bytes(b, a);
                    }
                    b.extend_from_slice(b"]}\n");
                }
            }
            out.check()?;
        }
        data.release_before(data.len());
    }
    Ok(None)
}

fn problem(file: &str, offset: usize, command: Option<u64>, what: String) -> Problem {
    Problem {
        kind: super::Kind::Framing,
        file: file.to_string(),
        offset: Some(offset),
        command,
        line: None,
        what,
        cut: None,
    }
}

fn rdb_line(out: &mut Out<'_>, file: &str, keys: u64, end: usize, format: Format) {
    let b = &mut out.buf;
    match format {
        Format::Text => b.extend_from_slice(format!("{file} 0 rdb keys={keys} end={end}\n").as_bytes()),
        Format::Jsonl => {
            b.extend_from_slice(b"{\"file\":");
            jsonw::string(b, file);
            b.extend_from_slice(format!(",\"offset\":0,\"rdb\":{{\"keys\":{keys},\"end\":{end}}}}}\n").as_bytes());
        }
    }
}

/// Whether an output error is a closed pipe (`aoftool dump | head`), which is not an error.
pub fn is_broken_pipe(e: &ToolError) -> bool {
    matches!(e, ToolError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe)
}
