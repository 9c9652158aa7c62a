//! The server dies at every system call of the write path: started with
//! `FERROKV_FAULT=any:N:die` (persist::disk), it exits on the spot at its Nth call
//! (create, write, fsync, rename, directory fsync, truncate) while a client writes under
//! `appendfsync always`, with a BGREWRITEAOF and a BGSAVE in the workload; N runs from 1
//! until a run ends without the fault being reached. After each death the server is
//! started again on the directory: every write it acknowledged must be there, and the
//! directory must load in a real redis-server 7.0 (a sample; every run under `make faults`,
//! `FERROKV_FAULTS=full`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrokv_testkit::{encode_command, free_port, spawn_on_free_port, Server as Redis, TempDir};

fn full() -> bool {
    std::env::var("FERROKV_FAULTS").is_ok_and(|v| v == "full")
}

const ARGS: [&str; 8] = ["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--dbfilename", "dump.rdb"];

/// A child process killed when dropped (a failed assertion must not leave a server
/// holding the test's stderr open).
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real server's DBSIZE once it has loaded its data (it answers LOADING before).
fn loaded_dbsize(redis: &Redis) -> String {
    let start = Instant::now();
    loop {
        let n = redis.cli(&["DBSIZE"]);
        if !n.starts_with("LOADING") {
            return n;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "real Redis still loading");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Our server on `dir`; its port.
fn start(dir: &Path) -> (Guard, u16) {
    let spawn = |port: u16| {
        Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
            .args(["--port", &port.to_string()])
            .arg("--dir")
            .arg(dir)
            .args(ARGS)
            .stdout(Stdio::null())
            .spawn()
            .expect("start ferrokv-server")
    };
    let (child, port) = spawn_on_free_port("ferrokv-server", spawn, Duration::from_secs(60));
    (Guard(child), port)
}

/// Our server with a fault plan: running and answering, or dead already (the fault hit
/// while it started).
fn start_faulty(dir: &Path, fault: &str) -> (Guard, Option<u16>) {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
        .args(["--port", &port.to_string()])
        .arg("--dir")
        .arg(dir)
        .args(ARGS)
        .env("FERROKV_FAULT", fault)
        .stdout(Stdio::null())
        .spawn()
        .expect("start ferrokv-server");
    let start = Instant::now();
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return (Guard(child), None);
        }
        if let Some(mut c) = Conn::connect(port) {
            if c.call(&["PING"]).as_deref() == Some("+PONG") {
                return (Guard(child), Some(port));
            }
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the server neither answered nor died");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One-line replies and bulks; None once the connection is gone.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn connect(port: u16) -> Option<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
        Some(Conn { r: BufReader::new(s.try_clone().ok()?), w: s })
    }

    fn call(&mut self, args: &[&str]) -> Option<String> {
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.w.write_all(&encode_command(&argv)).ok()?;
        let mut line = String::new();
        match self.r.read_line(&mut line) {
            Ok(n) if n > 2 => {}
            _ => return None,
        }
        let line = line.trim_end().to_string();
        match line.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => {
                let mut body = vec![0u8; n + 2];
                std::io::Read::read_exact(&mut self.r, &mut body).ok()?;
                body.truncate(n);
                String::from_utf8(body).ok()
            }
            None => Some(line),
        }
    }

    /// Wait until INFO persistence says no job runs.
    fn wait_jobs(&mut self) -> Option<()> {
        let start = Instant::now();
        loop {
            let info = self.call(&["INFO", "persistence"])?;
            if info.contains("rdb_bgsave_in_progress:0") && info.contains("aof_rewrite_in_progress:0") {
                return Some(());
            }
            if start.elapsed() > Duration::from_secs(30) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Writes, a rewrite, writes during and after it, a BGSAVE, more writes. Returns what was
/// acknowledged, and whether the server lived to the end.
fn workload(port: u16) -> (BTreeMap<String, String>, bool) {
    let mut acked = BTreeMap::new();
    let Some(mut c) = Conn::connect(port) else { return (acked, false) };
    let sets = |c: &mut Conn, from: usize, to: usize, acked: &mut BTreeMap<String, String>| -> bool {
        for i in from..to {
            let (k, v) = (format!("k:{i}"), format!("v{i}:{}", "z".repeat(i % 40)));
            match c.call(&["SET", &k, &v]).as_deref() {
                Some("+OK") => {
                    acked.insert(k, v);
                }
                Some(_) => {}
                None => return false,
            }
        }
        true
    };
    let lived = sets(&mut c, 0, 20, &mut acked)
        && c.call(&["BGREWRITEAOF"]).is_some()
        && sets(&mut c, 20, 30, &mut acked)
        && c.wait_jobs().is_some()
        && c.call(&["BGSAVE"]).is_some()
        && sets(&mut c, 30, 40, &mut acked)
        && c.wait_jobs().is_some()
        && sets(&mut c, 40, 45, &mut acked);
    (acked, lived)
}

#[test]
fn a_death_at_any_write_path_call_loses_no_acknowledged_write() {
    let stride = if full() { 1 } else { 4 };
    let mut deaths = 0;
    let mut nth = 1;
    loop {
        let dir = TempDir::new("faults-die");
        let (mut child, port) = start_faulty(dir.path(), &format!("any:{nth}:die"));
        let (acked, lived) = match port {
            Some(port) => workload(port),
            None => (BTreeMap::new(), false),
        };
        if lived {
            break;
        }
        let status = child.0.wait().expect("wait");
        assert_eq!(status.code(), Some(137), "call {nth}: the server ended otherwise: {status:?}");
        deaths += 1;
        let (again, port) = start(dir.path());
        let mut c = Conn::connect(port).expect("restarted server");
        for (k, v) in &acked {
            assert_eq!(c.call(&["GET", k]).as_deref(), Some(v.as_str()), "call {nth}: acknowledged SET {k} lost");
        }
        let ours = c.call(&["DBSIZE"]).unwrap_or_default();
        drop(again);
        if full() || deaths % 5 == 1 {
            let copy = TempDir::new("faults-die-redis");
            let cp = Command::new("cp").arg("-a").arg(format!("{}/.", dir.path().display())).arg(copy.path()).status();
            assert!(cp.is_ok_and(|s| s.success()));
            let redis = Redis::start_in(copy, &["--appendonly", "yes"]);
            assert_eq!(loaded_dbsize(&redis), ours.trim_start_matches(':'), "call {nth}: real Redis loads otherwise");
        }
        nth += stride;
        assert!(nth < 5000, "the workload never ends without the fault");
    }
    assert!(deaths > 20, "only {deaths} deaths");
    eprintln!("{deaths} deaths, every call up to {nth}");
}

/// kill -9 at a random moment of mixed writes from three clients while BGREWRITEAOF and
/// BGSAVE run back to back, on the same directory trial after trial (100 trials under
/// `make faults`, 8 here): after each restart every acknowledged write of every trial is
/// there, and the directory loads in a real redis-server 7.0 with the same key count.
#[test]
fn kill9_during_writes_rewrites_and_saves() {
    let trials = if full() { 100 } else { 8 };
    let dir = TempDir::new("faults-kill9");
    let mut rng = fastrand::Rng::with_seed(20);
    let mut acked: BTreeMap<String, String> = BTreeMap::new();
    for trial in 0..trials {
        let (child, port) = start(dir.path());
        let mut c = Conn::connect(port).expect("connect");
        for (k, v) in &acked {
            assert_eq!(c.call(&["GET", k]).as_deref(), Some(v.as_str()), "trial {trial}: acknowledged SET {k} lost");
        }
        let dbsize = c.call(&["DBSIZE"]).unwrap_or_default();
        if full() || trial % 4 == 0 {
            let copy = TempDir::new("faults-kill9-redis");
            let cp = Command::new("cp").arg("-a").arg(format!("{}/.", dir.path().display())).arg(copy.path()).status();
            assert!(cp.is_ok_and(|s| s.success()));
            let redis = Redis::start_in(copy, &["--appendonly", "yes"]);
            assert_eq!(loaded_dbsize(&redis), dbsize.trim_start_matches(':'), "trial {trial}: real Redis differs");
        }
        // Slow the jobs down so the kill lands inside them.
        c.call(&["CONFIG", "SET", "rdb-key-save-delay", "20"]);
        let writers: Vec<_> = (0..3)
            .map(|w| {
                std::thread::spawn(move || {
                    let mut got = BTreeMap::new();
                    let Some(mut c) = Conn::connect(port) else { return got };
                    for i in 0.. {
                        let (k, v) = (format!("t{trial}:w{w}:{i}"), format!("{i}:{}", "q".repeat(i % 300)));
                        match c.call(&["SET", &k, &v]).as_deref() {
                            Some("+OK") => {
                                got.insert(k, v);
                            }
                            Some(_) => {}
                            None => return got,
                        }
                    }
                    got
                })
            })
            .collect();
        let jobs = std::thread::spawn(move || {
            let Some(mut c) = Conn::connect(port) else { return };
            for i in 0.. {
                let cmd = if i % 2 == 0 { "BGREWRITEAOF" } else { "BGSAVE" };
                if c.call(&[cmd]).is_none() || c.wait_jobs().is_none() {
                    return;
                }
            }
        });
        std::thread::sleep(Duration::from_millis(rng.u64(50..400)));
        drop(child);
        for w in writers {
            acked.extend(w.join().expect("writer"));
        }
        jobs.join().expect("jobs");
    }
    let (_server, port) = start(dir.path());
    let mut c = Conn::connect(port).expect("connect");
    for (k, v) in &acked {
        assert_eq!(c.call(&["GET", k]).as_deref(), Some(v.as_str()), "acknowledged SET {k} lost");
    }
    eprintln!("{trials} kill -9 trials, {} acknowledged writes, all present", acked.len());
    assert!(acked.len() > 100 * trials, "the load wrote too little to mean anything");
}
