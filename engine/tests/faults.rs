//! Fault injection on the write path, in the spirit of SQLite's I/O-error tests: a
//! scripted workload (open, writes, MULTI/EXEC units, an AOF rewrite, more writes, SAVE)
//! runs with the Nth system call of one kind failing (`persist::disk`), for every N the
//! workload reaches, each kind of call and each kind of failure, once or for good (a disk
//! that stays full). After each run the process "crashes" (the engine is dropped without
//! closing), and the directory is opened again. What must hold:
//! - it opens, in ferrokv and (for a sample here, every run under `make faults`) in a real
//!   redis-server 7.0;
//! - every write the engine acknowledged is there (appendfsync always: a write is
//!   acknowledged when its unit was written and fsynced);
//! - no unit is half there: the two INCRBYs of each MULTI/EXEC unit are both applied or
//!   neither;
//! - with the AOF off, dump.rdb is exactly the last SAVE that succeeded.
//!
//! `FERROKV_FAULTS=full` (make faults) runs every case; otherwise a reduced set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::config::Fsync;
use ferrokv::keyspace::Clock;
use ferrokv::persist::disk::{self, Fault, Op, Plan};
use ferrokv::{Config, Engine, Reply, Session};
use ferrokv_testkit::{free_port, TempDir};

/// The fault plan is global: one test at a time arms it.
static SERIAL: Mutex<()> = Mutex::new(());

fn full() -> bool {
    std::env::var("FERROKV_FAULTS").is_ok_and(|v| v == "full")
}

fn argv(a: &[&str]) -> Vec<Vec<u8>> {
    a.iter().map(|x| x.as_bytes().to_vec()).collect()
}

fn config(dir: &Path, appendonly: bool, preamble: bool) -> Config {
    Config {
        dir: dir.to_path_buf(),
        appendonly,
        appendfsync: Fsync::Always,
        aof_use_rdb_preamble: preamble,
        save: Vec::new(),
        ..Config::default()
    }
}

/// How the AOF is kept: Redis 7.0's directory, or Redis 6.2's one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Dir,
    SingleFile,
}

impl Layout {
    fn config(self, dir: &Path, preamble: bool) -> Config {
        let mut cfg = config(dir, true, preamble);
        if self == Layout::SingleFile {
            cfg.set_version(ServerVersion::Redis62);
        }
        cfg
    }

    /// The real server that checks a directory: Debian's 7.0, or 6.2.16 of ../shared/bin
    /// for its own layout when it is there (7.0 reads a 6.2 file too).
    fn redis_server(self) -> PathBuf {
        let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/bin/redis-server-6.2.16");
        match self {
            Layout::SingleFile if shared.exists() => shared,
            _ => PathBuf::from("redis-server"),
        }
    }
}

/// What the workload saw acknowledged.
#[derive(Default, Debug)]
struct Acked {
    /// key -> value of acknowledged SETs.
    sets: BTreeMap<String, String>,
    /// Acknowledged MULTI/EXEC units (each adds 1 to `pair:a` and `pair:b`).
    units: i64,
}

/// A write as the server runs it: refused while the AOF is failing (MISCONF), retried by
/// the timer first; acknowledged when it ran and its unit is on disk.
fn write(e: &mut Engine, s: &mut Session, cmd: &[&str]) -> bool {
    e.cron();
    if e.aof_failure().is_some() {
        return false;
    }
    let r = e.execute(s, &argv(cmd));
    e.take_unacknowledged().is_none() && !r.is_error()
}

/// Two INCRBYs propagated as one MULTI/EXEC unit, as EXEC runs them.
fn unit(e: &mut Engine, s: &mut Session) -> bool {
    e.cron();
    if e.aof_failure().is_some() {
        return false;
    }
    e.call(s, &argv(&["INCRBY", "pair:a", "1"]));
    e.call(s, &argv(&["INCRBY", "pair:b", "1"]));
    e.flush();
    e.take_unacknowledged().is_none()
}

/// The AOF workload; stops at the first step that cannot go on (the open failed).
fn aof_workload(dir: &Path, preamble: bool, layout: Layout) -> Acked {
    let mut acked = Acked::default();
    let Ok(mut e) = Engine::open(layout.config(dir, preamble), Clock::System) else { return acked };
    let mut s = Session::default();
    let mut round = |e: &mut Engine, tag: &str, n: usize, acked: &mut Acked| {
        for i in 0..n {
            let (k, v) = (format!("{tag}:{i}"), format!("v{i}-{}", "x".repeat(i * 7 % 90)));
            if write(e, &mut s, &["SET", &k, &v]) {
                acked.sets.insert(k, v);
            }
            if i % 4 == 3 && unit(e, &mut s) {
                acked.units += 1;
            }
        }
    };
    round(&mut e, "a", 12, &mut acked);
    // A rewrite with writes while its base is built and before it is installed (they go
    // to the new incr file, or to the one file and the buffer that follows its new base).
    if let Ok(job) = e.start_rewrite() {
        round(&mut e, "m", 8, &mut acked);
        let built = job.run();
        round(&mut e, "n", 4, &mut acked);
        let _ = e.finish_rewrite(built);
    }
    round(&mut e, "b", 12, &mut acked);
    let _ = e.save();
    round(&mut e, "c", 6, &mut acked);
    // A crash: the engine goes without closing.
    drop(e);
    acked
}

/// Every key of an engine, as text.
fn contents(e: &Engine) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for s in e.keyspace().db(0).slots() {
        let v = match s.value.to_logical() {
            ferrokv::logical::Logical::String(b) => String::from_utf8_lossy(&b).into_owned(),
            other => format!("{other:?}"),
        };
        out.insert(String::from_utf8_lossy(&s.key).into_owned(), v);
    }
    out
}

/// Open `dir` in a real redis-server 7.0 (a copy of it): its key count, or why it failed.
fn redis_load(dir: &Path, appendonly: bool) -> Result<u64, String> {
    redis_load_with(Path::new("redis-server"), dir, appendonly)
}

/// [`redis_load`] by the redis-server `bin`.
fn redis_load_with(bin: &Path, dir: &Path, appendonly: bool) -> Result<u64, String> {
    let copy = TempDir::new("faults-redis");
    let status = Command::new("cp").arg("-a").arg(format!("{}/.", dir.display())).arg(copy.path()).status();
    assert!(status.is_ok_and(|s| s.success()), "copy the directory");
    let port = free_port();
    let log = copy.path().join("redis.log");
    let mut child = Command::new(bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
        .args(["--appendonly", if appendonly { "yes" } else { "no" }, "--logfile"])
        .arg(&log)
        .arg("--dir")
        .arg(copy.path())
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server is installed (make deps)");
    let start = Instant::now();
    let result = loop {
        if let Ok(Some(_)) = child.try_wait() {
            break Err(std::fs::read_to_string(&log).unwrap_or_default());
        }
        let out = Command::new("redis-cli").args(["-p", &port.to_string(), "DBSIZE"]).output();
        if let Ok(o) = out {
            let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if let Ok(n) = text.parse::<u64>() {
                break Ok(n);
            }
        }
        if start.elapsed() > Duration::from_secs(20) {
            break Err("redis-server did not answer".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn check_aof_dir(dir: &Path, acked: &Acked, plan: &Plan, with_redis: bool, layout: Layout) {
    let e = Engine::open(layout.config(dir, true), Clock::System)
        .unwrap_or_else(|err| panic!("{plan:?}: the directory does not open: {err}"));
    let got = contents(&e);
    for (k, v) in &acked.sets {
        assert_eq!(got.get(k), Some(v), "{plan:?}: acknowledged SET {k} lost");
    }
    let num = |k: &str| got.get(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    assert_eq!(num("pair:a"), num("pair:b"), "{plan:?}: a MULTI/EXEC unit is half there");
    assert!(num("pair:a") >= acked.units, "{plan:?}: acknowledged units lost");
    if with_redis {
        match redis_load_with(&layout.redis_server(), dir, true) {
            Ok(n) => assert_eq!(n, got.len() as u64, "{plan:?}: real Redis loads another key count"),
            Err(log) => panic!("{plan:?}: real Redis cannot load the directory:\n{log}"),
        }
    }
}

/// The cases: each kind of call, each failure, once or sticky, every N up to the calls
/// the workload makes (the reduced set takes fewer Ns for the rarer combinations).
fn cases(calls: &BTreeMap<&'static str, u64>) -> Vec<Plan> {
    let ops = [Op::Create, Op::Write, Op::Fsync, Op::Rename, Op::DirSync, Op::Truncate];
    let faults = [Fault::NoSpace, Fault::Io, Fault::Short, Fault::ShortStuck];
    let mut out = Vec::new();
    for op in ops {
        let n = calls.get(op.name()).copied().unwrap_or(0);
        for fault in faults {
            if matches!(fault, Fault::Short | Fault::ShortStuck) && op != Op::Write {
                continue;
            }
            for sticky in [false, true] {
                // Reduced: every N for ENOSPC on writes and fsyncs, a stride elsewhere.
                let stride = if full() || (fault == Fault::NoSpace && !sticky) { 1 } else { 3 };
                for nth in (1..=n).step_by(stride) {
                    out.push(Plan { op: Some(op), nth, fault, sticky });
                }
            }
        }
    }
    out
}

/// How many calls of each kind a clean run of `work` makes.
fn count_calls(work: impl Fn(&Path)) -> BTreeMap<&'static str, u64> {
    let dir = TempDir::new("faults-count");
    disk::arm(Some(Plan { op: None, nth: u64::MAX, fault: Fault::Io, sticky: false }));
    work(dir.path());
    let ops = [Op::Create, Op::Write, Op::Fsync, Op::Rename, Op::DirSync, Op::Truncate];
    let counts = ops.iter().map(|o| (o.name(), disk::calls(Some(*o)))).collect();
    disk::arm(None);
    counts
}

fn run_aof_campaign(preamble: bool, layout: Layout) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let calls = count_calls(|d| {
        aof_workload(d, preamble, layout);
    });
    assert!(calls["write"] > 20 && calls["fsync"] > 20 && calls["rename"] >= 2, "{calls:?}");
    let cases = cases(&calls);
    for (i, plan) in cases.iter().enumerate() {
        let dir = TempDir::new("faults-aof");
        disk::arm(Some(*plan));
        let acked = aof_workload(dir.path(), preamble, layout);
        disk::arm(None);
        let with_redis = full() || i % 25 == 0;
        check_aof_dir(dir.path(), &acked, plan, with_redis, layout);
    }
    eprintln!("{} fault cases over {calls:?}", cases.len());
}

#[test]
fn aof_with_rdb_preamble_survives_every_injected_fault() {
    run_aof_campaign(true, Layout::Dir);
}

#[test]
fn aof_with_resp_base_survives_every_injected_fault() {
    run_aof_campaign(false, Layout::Dir);
}

/// Redis 6.2's one file (`--redis-version 6.2`): the rewrite renames a new file, holding
/// the writes made during it, over the one in use.
#[test]
fn single_aof_file_of_redis_6_2_survives_every_injected_fault() {
    run_aof_campaign(true, Layout::SingleFile);
}

/// SAVE with the AOF off: a failed SAVE leaves the previous dump.rdb whole, and the dump
/// always loads as one whole snapshot: the last SAVE that succeeded, or a later one whose
/// rename was done when only the directory's fsync failed.
#[test]
fn rdb_saves_survive_every_injected_fault() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Each SAVE's dataset, and the last one that succeeded.
    let workload = |dir: &Path| -> (Vec<BTreeMap<String, String>>, Option<usize>) {
        let Ok(mut e) = Engine::open(config(dir, false, true), Clock::System) else { return (Vec::new(), None) };
        let mut s = Session::default();
        let (mut attempts, mut last_ok) = (Vec::new(), None);
        for round in 0..4 {
            for i in 0..20 {
                let r = e.execute(&mut s, &argv(&["SET", &format!("r{round}:{i}"), &"y".repeat(i * 11)]));
                assert_eq!(r, Reply::ok());
            }
            attempts.push(contents(&e));
            if e.save().is_ok() {
                last_ok = Some(attempts.len() - 1);
            }
        }
        (attempts, last_ok)
    };
    let calls = count_calls(|d| {
        workload(d);
    });
    let cases = cases(&calls);
    for (i, plan) in cases.iter().enumerate() {
        let dir = TempDir::new("faults-rdb");
        disk::arm(Some(*plan));
        let (attempts, last_ok) = workload(dir.path());
        disk::arm(None);
        let e = Engine::open(config(dir.path(), false, true), Clock::System)
            .unwrap_or_else(|err| panic!("{plan:?}: dump.rdb does not load: {err}"));
        let got = contents(&e);
        let whole = match last_ok {
            Some(k) => attempts[k..].contains(&got),
            None => got.is_empty() || attempts.contains(&got),
        };
        assert!(whole, "{plan:?}: dump.rdb is not a whole snapshot at least as new as the last SAVE that succeeded");
        if !got.is_empty() && (full() || i % 25 == 0) {
            match redis_load(dir.path(), false) {
                Ok(n) => assert_eq!(n, e.keyspace().len() as u64, "{plan:?}"),
                Err(log) => panic!("{plan:?}: real Redis cannot load dump.rdb:\n{log}"),
            }
        }
    }
    eprintln!("{} fault cases over {calls:?}", cases.len());
}
