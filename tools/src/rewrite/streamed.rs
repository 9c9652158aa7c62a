//! aof-rewrite without the dataset in memory. When the AOF's base is an RDB, only the keys
//! its later commands touch are loaded from it and replayed; the rest of the base is copied
//! into the output as it is ([`ferrokv::persist::merge`]). Memory is bounded by the keys
//! the incremental files touch, not by the dataset.

use std::path::PathBuf;
use std::sync::Arc;

use ferrokv::command::eq_ic;
use ferrokv::format::aof::{has_rdb_preamble, AofSet, CommandReader, FileKind};
use ferrokv::format::rdb::{Dialect, RdbReader, ReadOptions, Record};
use ferrokv::Source;

use crate::replay::{command_keys, Input, KeySet};

/// What a streamed rewrite needs to know before it replays.
pub struct Plan {
    /// The base RDB file.
    pub base: PathBuf,
    pub dialect: Dialect,
    /// Keys the commands after the base touch: loaded from the base and replayed.
    pub touched: Arc<KeySet>,
    /// Databases a FLUSHDB emptied, or all of them after a FLUSHALL: none of their base
    /// keys is copied.
    flushed: Vec<usize>,
    flushed_all: bool,
}

impl Plan {
    /// Whether the base's record of `key` stays out of the output (the replay has its state).
    pub fn replaced(&self, db: usize, key: &[u8]) -> bool {
        self.flushed_all || self.flushed.contains(&db) || self.touched.contains(db, key)
    }
}

/// The plan for `input`, or None when it must be replayed whole: no RDB base, an RDB
/// given before the AOF, commands that reach keys their arguments do not name (SWAPDB,
/// SORT with BY or GET, scripts), or a base that does not read cleanly (the whole replay
/// then reports it as it always does).
pub fn plan(input: &Input) -> Option<Plan> {
    if input.rdb.is_some() {
        return None;
    }
    let set = AofSet::open(&input.aof).ok()?;
    let first = set.parts.first().filter(|p| p.kind == FileKind::Base)?;
    if !set.missing().is_empty() {
        return None;
    }
    let src = Source::open(&first.path).ok()?;
    if !(has_rdb_preamble(&src) || src.starts_with(b"VALKEY")) {
        return None;
    }
    let (dialect, end) = base_end(&src)?;
    let mut scan = Scan::default();
    scan.file(&src, end)?;
    drop(src);
    for part in &set.parts[1..] {
        scan.file(&Source::open(&part.path).ok()?, 0)?;
    }
    Some(Plan {
        base: first.path.clone(),
        dialect,
        touched: Arc::new(scan.touched),
        flushed: scan.flushed,
        flushed_all: scan.flushed_all,
    })
}

/// The base's format and where its RDB ends, when its databases come in order.
fn base_end(src: &Source) -> Option<(Dialect, usize)> {
    let reader = RdbReader::with_options(src, ReadOptions { check_crc: false }).ok()?;
    let dialect = reader.dialect();
    let mut last_db = None;
    for rec in reader {
        match rec.ok()? {
            Record::SelectDb { db, .. } => {
                if last_db.is_some_and(|d| db <= d) {
                    return None;
                }
                last_db = Some(db);
            }
            Record::Key(k) => src.release_before(k.end),
            Record::Eof { end, .. } => return Some((dialect, end)),
            _ => {}
        }
    }
    None
}

#[derive(Default)]
struct Scan {
    touched: KeySet,
    flushed: Vec<usize>,
    flushed_all: bool,
}

impl Scan {
    /// Every key the commands of `src` from `from` touch; None for a command that reaches
    /// keys it does not name.
    fn file(&mut self, src: &Source, from: usize) -> Option<()> {
        for cmd in CommandReader::at(src, from) {
            // A damaged tail: the replay stops there too (or reports it).
            let Ok(cmd) = cmd else { break };
            let db = usize::try_from(cmd.db).ok()?;
            let name = cmd.name();
            let argv = cmd.to_argv();
            if ["swapdb", "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"]
                .iter()
                .any(|n| eq_ic(name, n))
            {
                return None;
            }
            if (eq_ic(name, "sort") || eq_ic(name, "sort_ro"))
                && argv.iter().skip(2).any(|a| eq_ic(a, "by") || eq_ic(a, "get"))
            {
                return None;
            }
            if eq_ic(name, "flushall") {
                self.flushed_all = true;
            } else if eq_ic(name, "flushdb") {
                self.flushed.push(db);
            }
            for i in command_keys(&argv) {
                self.touched.insert(db, &argv[i]);
            }
            // Keys written in another database.
            if eq_ic(name, "move") && argv.len() == 3 {
                self.touched.insert(number(&argv[2])?, &argv[1]);
            }
            if eq_ic(name, "copy") {
                if let Some(i) = argv.iter().position(|a| eq_ic(a, "db")).filter(|&i| i >= 3) {
                    self.touched.insert(number(argv.get(i + 1)?)?, &argv[2]);
                }
            }
            src.release_before(cmd.end);
        }
        Some(())
    }
}

fn number(b: &[u8]) -> Option<usize> {
    std::str::from_utf8(b).ok()?.parse().ok()
}
