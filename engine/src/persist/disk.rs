//! Every system call the write path makes to the data directory, through one seam where
//! tests make the Nth call of a kind fail (as SQLite's I/O-error tests do).
//!
//! A fault plan is armed by [`arm`] (in-process tests) or read once from the environment
//! variable `FERROKV_FAULT` (a spawned server), written `OP:N:KIND[:sticky]`:
//! - `OP`: `create`, `write`, `fsync`, `rename`, `dirsync`, `truncate`, or `any`;
//! - `N`: the 1-based call of that kind that fails;
//! - `KIND`: `enospc`, `eio`, `short` (half the bytes are written, then ENOSPC),
//!   `short-stuck` (the same, and the truncate that would cut the half off fails too), or
//!   `die` (the process exits at once with status 137, as after kill -9);
//! - `sticky`: every later call of that kind fails too (a disk that stays full).
//!
//! Unarmed, a call costs one relaxed atomic load.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// A kind of system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create,
    Write,
    Fsync,
    Rename,
    DirSync,
    Truncate,
}

const OPS: [Op; 6] = [Op::Create, Op::Write, Op::Fsync, Op::Rename, Op::DirSync, Op::Truncate];

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Write => "write",
            Op::Fsync => "fsync",
            Op::Rename => "rename",
            Op::DirSync => "dirsync",
            Op::Truncate => "truncate",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How an injected call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    NoSpace,
    Io,
    /// A write that stores half its bytes, then ENOSPC (other calls: ENOSPC).
    Short,
    /// [`Fault::Short`], and the next truncate fails (the half cannot be cut off).
    ShortStuck,
    /// The process exits on the spot (status 137), as if killed.
    Die,
}

/// Which call fails, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// None: any kind of call counts.
    pub op: Option<Op>,
    /// The 1-based call (of `op`) that fails.
    pub nth: u64,
    pub fault: Fault,
    /// Every call after the Nth fails too.
    pub sticky: bool,
}

impl Plan {
    /// `OP:N:KIND[:sticky]`, as `FERROKV_FAULT` holds it.
    pub fn parse(text: &str) -> Result<Plan, String> {
        let parts: Vec<&str> = text.trim().split(':').collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(format!("FERROKV_FAULT '{text}': expected OP:N:KIND[:sticky]"));
        }
        let op = match parts[0] {
            "any" => None,
            name => Some(*OPS.iter().find(|o| o.name() == name).ok_or_else(|| format!("unknown operation '{name}'"))?),
        };
        let nth = parts[1].parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| format!("bad count '{}'", parts[1]))?;
        let fault = match parts[2] {
            "enospc" => Fault::NoSpace,
            "eio" => Fault::Io,
            "short" => Fault::Short,
            "short-stuck" => Fault::ShortStuck,
            "die" => Fault::Die,
            other => return Err(format!("unknown fault '{other}'")),
        };
        let sticky = match parts.get(3) {
            None => false,
            Some(&"sticky") => true,
            Some(other) => return Err(format!("unknown flag '{other}'")),
        };
        Ok(Plan { op, nth, fault, sticky })
    }
}

static ARMED: AtomicBool = AtomicBool::new(false);
static PLAN: Mutex<Option<Plan>> = Mutex::new(None);
/// Calls per kind since the plan was armed; the last slot counts every kind.
static CALLS: [AtomicU64; 7] = [const { AtomicU64::new(0) }; 7];
static FROM_ENV: OnceLock<()> = OnceLock::new();
/// Set by a [`Fault::ShortStuck`] write: the next truncate fails.
static FAIL_NEXT_TRUNCATE: AtomicBool = AtomicBool::new(false);

/// Arm `plan` (or disarm with None) and reset the call counts.
pub fn arm(plan: Option<Plan>) {
    FROM_ENV.get_or_init(|| ());
    for c in &CALLS {
        c.store(0, Ordering::SeqCst);
    }
    if let Ok(mut p) = PLAN.lock() {
        *p = plan;
    }
    FAIL_NEXT_TRUNCATE.store(false, Ordering::SeqCst);
    ARMED.store(plan.is_some(), Ordering::SeqCst);
}

/// Calls of `op` (None: of every kind) since the plan was armed; counted only while armed.
pub fn calls(op: Option<Op>) -> u64 {
    CALLS[op.map_or(OPS.len(), Op::index)].load(Ordering::SeqCst)
}

fn armed() -> bool {
    FROM_ENV.get_or_init(|| {
        if let Ok(text) = std::env::var("FERROKV_FAULT") {
            match Plan::parse(&text) {
                Ok(plan) => {
                    if let Ok(mut p) = PLAN.lock() {
                        *p = Some(plan);
                    }
                    ARMED.store(true, Ordering::SeqCst);
                }
                Err(e) => eprintln!("ignoring {e}"),
            }
        }
    });
    ARMED.load(Ordering::Relaxed)
}

/// The fault for this call of `op`, if the plan says it fails.
fn check(op: Op) -> Option<Fault> {
    if !armed() {
        return None;
    }
    let of_kind = CALLS[op.index()].fetch_add(1, Ordering::SeqCst) + 1;
    let any = CALLS[OPS.len()].fetch_add(1, Ordering::SeqCst) + 1;
    let plan = (*PLAN.lock().ok()?)?;
    let n = match plan.op {
        Some(o) if o != op => return None,
        Some(_) => of_kind,
        None => any,
    };
    let hit = if plan.sticky { n >= plan.nth } else { n == plan.nth };
    if !hit {
        return None;
    }
    if plan.fault == Fault::Die {
        // As abrupt as kill -9: no destructors, no buffered output.
        std::process::exit(137);
    }
    Some(plan.fault)
}

fn injected(f: Fault) -> io::Error {
    match f {
        Fault::Io => io::Error::from_raw_os_error(5),
        _ => io::Error::from_raw_os_error(28),
    }
}

fn fail(op: Op) -> io::Result<()> {
    match check(op) {
        Some(f) => Err(injected(f)),
        None => Ok(()),
    }
}

/// Create (truncate) a file for writing.
pub fn create(path: &Path) -> io::Result<File> {
    fail(Op::Create)?;
    File::create(path)
}

/// Open a file for appending, creating it if needed.
pub fn open_append(path: &Path) -> io::Result<File> {
    fail(Op::Create)?;
    OpenOptions::new().append(true).create(true).open(path)
}

/// fsync a file's data (and the metadata needed to read it back).
pub fn fsync(file: &File) -> io::Result<()> {
    fail(Op::Fsync)?;
    file.sync_data()
}

/// fsync a file with all its metadata.
pub fn fsync_all(file: &File) -> io::Result<()> {
    fail(Op::Fsync)?;
    file.sync_all()
}

pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    fail(Op::Rename)?;
    fs::rename(from, to)
}

/// fsync a directory, so renames and creations in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fail(Op::DirSync)?;
    File::open(dir)?.sync_all()
}

pub fn truncate(file: &File, len: u64) -> io::Result<()> {
    if armed() && FAIL_NEXT_TRUNCATE.swap(false, Ordering::SeqCst) {
        return Err(injected(Fault::Io));
    }
    fail(Op::Truncate)?;
    file.set_len(len)
}

/// A writer whose every `write` call goes through the seam (wrap a file in it; a
/// `BufWriter` above it turns each buffer flush into one call).
#[derive(Debug)]
pub struct Checked<W>(pub W);

impl<W: Write> Write for Checked<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match check(Op::Write) {
            None => self.0.write(buf),
            Some(Fault::Short) if buf.len() > 1 => self.0.write(&buf[..buf.len() / 2]),
            Some(Fault::ShortStuck) if buf.len() > 1 => {
                FAIL_NEXT_TRUNCATE.store(true, Ordering::SeqCst);
                self.0.write(&buf[..buf.len() / 2])
            }
            Some(f) => Err(injected(f)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Checked<File> {
    pub fn file(&self) -> &File {
        &self.0
    }
}

/// The text of an OS error as strerror gives it (Rust's adds " (os error N)").
pub fn strerror(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse() {
        let p = Plan::parse("write:3:short:sticky").unwrap();
        assert_eq!(p, Plan { op: Some(Op::Write), nth: 3, fault: Fault::Short, sticky: true });
        assert_eq!(Plan::parse("any:1:eio").unwrap().op, None);
        assert!(Plan::parse("write:0:eio").is_err());
        assert!(Plan::parse("seek:1:eio").is_err());
        assert!(Plan::parse("write:1").is_err());
    }

    #[test]
    fn strerror_drops_the_code() {
        assert_eq!(strerror(&io::Error::from_raw_os_error(28)), "No space left on device");
    }
}
