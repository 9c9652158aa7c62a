//! Crash safety: ferrokv-server killed with SIGKILL (kill -9) under a write load, during
//! BGSAVE and during BGREWRITEAOF, then restarted on the same directory. Every write the
//! server acknowledged must be there after the restart, and a half-written snapshot (its
//! temp file left behind) must never be what loads.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;
use support::Ours;

use ferrokv_testkit::{cli, encode_command, info_field, wait_for, TempDir};

/// A blocking RESP client for simple and integer replies; None once the server is gone.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn connect(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        Conn { r: BufReader::new(s.try_clone().expect("clone")), w: s }
    }

    /// The reply's first line (`+OK`, `:5`), or a bulk's contents (`$-1` for nil).
    fn call(&mut self, args: &[&str]) -> Option<String> {
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.w.write_all(&encode_command(&argv)).ok()?;
        let mut line = String::new();
        match self.r.read_line(&mut line) {
            Ok(n) if n > 2 && line.ends_with("\r\n") => {}
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
}

/// What one writer saw acknowledged.
#[derive(Default, Debug)]
struct Acked {
    /// SET key -> value.
    sets: HashMap<String, String>,
    /// The counter's last INCR reply.
    counter: i64,
    /// The list's length after the last acknowledged RPUSH.
    pushes: i64,
    /// HSET field -> value.
    fields: HashMap<String, String>,
}

/// Write SET/INCR/RPUSH/HSET in turn until the connection dies or `stop`; keys are
/// `t{trial}:w{id}:...`.
fn writer(port: u16, trial: usize, id: usize, stop: Arc<AtomicBool>) -> Acked {
    let mut acked = Acked::default();
    let mut c = Conn::connect(port);
    let p = format!("t{trial}:w{id}");
    let (counter, list, hash) = (format!("{p}:counter"), format!("{p}:list"), format!("{p}:hash"));
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (k, v) = (format!("{p}:k{i}"), format!("v{i}-{}", "x".repeat(i % 50)));
        let ok = match i % 4 {
            0 => c.call(&["SET", &k, &v]).map(|r| {
                assert_eq!(r, "+OK");
                acked.sets.insert(k, v);
            }),
            1 => c.call(&["INCR", &counter]).map(|r| acked.counter = r[1..].parse().expect("INCR reply")),
            2 => c.call(&["RPUSH", &list, &i.to_string()]).map(|r| acked.pushes = r[1..].parse().expect("RPUSH reply")),
            _ => c.call(&["HSET", &hash, &format!("f{i}"), &v]).map(|r| {
                assert!(r.starts_with(':'), "{r}");
                acked.fields.insert(format!("f{i}"), v);
            }),
        };
        if ok.is_none() {
            break;
        }
    }
    acked
}

fn check(port: u16, trial: usize, id: usize, acked: &Acked) {
    let p = format!("t{trial}:w{id}");
    let mut c = Conn::connect(port);
    for (k, v) in &acked.sets {
        assert_eq!(c.call(&["GET", k]).as_deref(), Some(v.as_str()), "trial {trial}: acknowledged SET {k} lost");
    }
    for (f, v) in &acked.fields {
        let got = c.call(&["HGET", &format!("{p}:hash"), f]);
        assert_eq!(got.as_deref(), Some(v.as_str()), "trial {trial}: acknowledged HSET {f} lost");
    }
    let n = |r: Option<String>| r.and_then(|r| r.strip_prefix(':').map(str::to_string)).and_then(|r| r.parse().ok());
    let counter: i64 = match c.call(&["GET", &format!("{p}:counter")]).as_deref() {
        Some("$-1") => 0,
        Some(v) => v.parse().unwrap_or(-1),
        None => -1,
    };
    assert!(counter >= acked.counter, "trial {trial}: counter {counter} < acknowledged {}", acked.counter);
    assert!(counter <= acked.counter + 1, "trial {trial}: counter {counter} ran ahead of {}", acked.counter);
    let len: i64 = n(c.call(&["LLEN", &format!("{p}:list")])).unwrap_or(-1);
    assert!(len >= acked.pushes, "trial {trial}: list length {len} < acknowledged {}", acked.pushes);
    assert!(len <= acked.pushes + 1, "trial {trial}: list length {len} ran ahead of {}", acked.pushes);
}

/// kill -9 at a random moment of a write load with `appendfsync always`, 20 times on the
/// same directory: after each restart every acknowledged write is there (and at most
/// the one unacknowledged write per client in flight).
#[test]
fn kill9_under_write_load_loses_no_acknowledged_write() {
    let dir = TempDir::new("persist-kill9");
    let mut rng = fastrand::Rng::with_seed(6);
    let mut history: Vec<(usize, Vec<Acked>)> = Vec::new();
    let started = Instant::now();
    let mut total_acked = 0;
    for trial in 0..20 {
        let server = Ours::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
        // Everything acknowledged in earlier trials survived this restart too.
        for (t, acks) in &history {
            for (id, a) in acks.iter().enumerate() {
                check(server.port, *t, id, a);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..3)
            .map(|id| {
                let (port, stop) = (server.port, Arc::clone(&stop));
                std::thread::spawn(move || writer(port, trial, id, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.u64(50..400)));
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        let acks: Vec<Acked> = threads.into_iter().map(|t| t.join().expect("writer")).collect();
        total_acked +=
            acks.iter().map(|a| a.sets.len() + a.fields.len() + a.counter as usize + a.pushes as usize).sum::<usize>();
        history.push((trial, acks));
    }
    let server = Ours::start(dir.path(), &["--appendonly", "yes"]);
    for (t, acks) in &history {
        for (id, a) in acks.iter().enumerate() {
            check(server.port, *t, id, a);
        }
    }
    eprintln!("20 kill -9 trials, {total_acked} acknowledged writes, all present; {:?}", started.elapsed());
    assert!(total_acked > 100, "the load wrote too little to mean anything");
}

/// Temp files a killed save or rewrite leaves behind (Redis's names: `temp-<pid>.rdb`,
/// `temp-rewriteaof-bg-<pid>.aof`, `temp-rewriteaof-<pid>.aof`).
fn temp_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in [dir.to_path_buf(), dir.join("appendonlydir")] {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("temp-") {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// Wait until INFO `field` is `want` (generous: a loaded machine).
fn wait_info(s: &Ours, field: &str, want: &str) {
    let start = Instant::now();
    while s.info(field) != want {
        assert!(start.elapsed() < Duration::from_secs(120), "{field} never became {want}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// kill -9 while BGSAVE writes 300k keys: the restart loads the previous dump.rdb (or,
/// if the save won the race, the new one), never a torn file, whatever temp file is left.
#[test]
fn kill9_during_bgsave_keeps_the_previous_snapshot() {
    let mut killed_mid_save = 0;
    for round in 0..3 {
        let dir = TempDir::new("persist-bgsave");
        let s = Ours::start(dir.path(), &[]);
        assert_eq!(s.cli(&["DEBUG", "POPULATE", "300000", "k", "100"]), "OK");
        assert_eq!(s.cli(&["SAVE"]), "OK");
        let saved = s.cli(&["DEBUG", "DIGEST"]);
        // Change a slice of the keys, then BGSAVE and kill it.
        assert_eq!(s.cli(&["DEBUG", "POPULATE", "50000", "new", "100"]), "OK");
        assert_eq!(s.cli(&["SET", "k:1", "changed"]), "OK");
        let changed = s.cli(&["DEBUG", "DIGEST"]);
        assert_ne!(saved, changed);
        // 100 µs per key: the save outlasts the kill, however fast the machine.
        assert_eq!(s.cli(&["CONFIG", "SET", "rdb-key-save-delay", "100"]), "OK");
        assert_eq!(s.cli(&["BGSAVE"]), "Background saving started");
        let in_progress = s.info("rdb_bgsave_in_progress") == "1";
        s.kill9();
        killed_mid_save += usize::from(in_progress);
        let left = temp_files(dir.path());
        let s = Ours::start(dir.path(), &[]);
        let loaded = s.cli(&["DEBUG", "DIGEST"]);
        assert!(loaded == saved || loaded == changed, "round {round}: the restart loaded neither snapshot");
        eprintln!(
            "BGSAVE round {round}: killed {} the save; loaded the {} snapshot; temp files left: {left:?}",
            if in_progress { "during" } else { "after" },
            if loaded == saved { "previous" } else { "new" }
        );
    }
    assert_eq!(killed_mid_save, 3, "a BGSAVE with rdb-key-save-delay ended before the kill");
}

/// kill -9 while BGREWRITEAOF writes a new base: the manifest still names the old base
/// and every incr file, so the restart has every acknowledged write; the temp base left
/// behind is ignored.
#[test]
fn kill9_during_bgrewriteaof_keeps_every_acknowledged_write() {
    let mut killed_mid_rewrite = 0;
    for round in 0..3 {
        let dir = TempDir::new("persist-rewrite");
        let s = Ours::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
        assert_eq!(s.cli(&["DEBUG", "POPULATE", "300000", "k", "100"]), "OK");
        // POPULATE is not logged: a first rewrite puts the keys in a base.
        assert_eq!(s.cli(&["BGREWRITEAOF"]), "Background append only file rewriting started");
        wait_info(&s, "aof_rewrite_in_progress", "0");
        let mut c = Conn::connect(s.port);
        for i in 0..200 {
            assert_eq!(c.call(&["SET", &format!("before:{i}"), "1"]).as_deref(), Some("+OK"));
        }
        // 100 µs per key: the rewrite outlasts the writes below and the kill.
        assert_eq!(s.cli(&["CONFIG", "SET", "rdb-key-save-delay", "100"]), "OK");
        assert_eq!(s.cli(&["BGREWRITEAOF"]), "Background append only file rewriting started");
        // Writes during the rewrite land in the new incr file.
        for i in 0..200 {
            assert_eq!(c.call(&["INCR", "during"]).as_deref(), Some(format!(":{}", i + 1).as_str()));
        }
        assert_eq!(c.call(&["SET", "k:7", "overwritten"]).as_deref(), Some("+OK"));
        let expect = s.cli(&["DEBUG", "DIGEST"]);
        let in_progress = s.info("aof_rewrite_in_progress") == "1";
        s.kill9();
        killed_mid_rewrite += usize::from(in_progress);
        let left = temp_files(dir.path());
        let s = Ours::start(dir.path(), &["--appendonly", "yes"]);
        assert_eq!(s.cli(&["DEBUG", "DIGEST"]), expect, "round {round}: acknowledged writes lost");
        assert_eq!(s.cli(&["GET", "during"]), "200");
        assert_eq!(s.cli(&["DBSIZE"]), "300201");
        eprintln!(
            "BGREWRITEAOF round {round}: killed {} the rewrite; all writes present; temp files left: {left:?}",
            if in_progress { "during" } else { "after" }
        );
    }
    assert_eq!(killed_mid_rewrite, 3, "a BGREWRITEAOF with rdb-key-save-delay ended before the kill");
}

/// BGSAVE copies keys while clients keep writing: the file holds the dataset of the
/// moment BGSAVE ran (taken with DEBUG DIGEST in the same MULTI: the BGSAVE starts as the
/// EXEC ends), not a mix.
#[test]
fn bgsave_under_writes_is_a_point_in_time_snapshot() {
    let dir = TempDir::new("persist-pit");
    let s = Ours::start(dir.path(), &[]);
    assert_eq!(s.cli(&["DEBUG", "POPULATE", "300000", "k", "20"]), "OK");
    let mut c = Conn::connect(s.port);
    for i in 0..1000 {
        c.call(&["RPUSH", &format!("list:{}", i % 10), &i.to_string()]).unwrap();
        c.call(&["HSET", "h", &format!("f{i}"), "v"]).unwrap();
        c.call(&["SET", &format!("ttl:{i}"), "x", "EX", "1000"]).unwrap();
    }
    assert_eq!(c.call(&["MULTI"]).as_deref(), Some("+OK"));
    c.call(&["DEBUG", "DIGEST"]).unwrap();
    c.call(&["BGSAVE"]).unwrap();
    assert_eq!(c.call(&["EXEC"]).as_deref(), Some("*2"));
    let mut line = String::new();
    c.r.read_line(&mut line).unwrap();
    let at_start = line.trim_end().trim_start_matches('+').to_string();
    line.clear();
    c.r.read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), "+Background saving scheduled");
    // Overwrite, delete, expire, grow and flush while the copy runs.
    let (mut i, mut during) = (0, 0);
    loop {
        let running = s.info("rdb_bgsave_in_progress") == "1";
        if !running && i >= 200 {
            break;
        }
        during += usize::from(running);
        let k = format!("k:{}", (i * 7919) % 300000);
        c.call(&["SET", &k, "new"]).unwrap();
        c.call(&["DEL", &format!("k:{}", (i * 104729) % 300000)]).unwrap();
        c.call(&["EXPIRE", &format!("k:{}", (i * 31) % 300000), "1000"]).unwrap();
        c.call(&["RPUSH", "list:3", "more"]).unwrap();
        c.call(&["HDEL", "h", &format!("f{i}")]).unwrap();
        c.call(&["SET", &format!("added:{i}"), "x"]).unwrap();
        if i == 50 {
            c.call(&["SELECT", "1"]).unwrap();
            c.call(&["SET", "other", "db"]).unwrap();
            c.call(&["SWAPDB", "0", "1"]).unwrap();
            c.call(&["SWAPDB", "0", "1"]).unwrap();
            c.call(&["FLUSHDB"]).unwrap();
            c.call(&["SELECT", "0"]).unwrap();
        }
        i += 1;
    }
    assert_eq!(s.info("rdb_last_bgsave_status"), "ok");
    assert_ne!(s.cli(&["DEBUG", "DIGEST"]), at_start);
    assert_eq!(s.cli(&["DEBUG", "RELOAD", "NOSAVE"]), "OK");
    assert_eq!(s.cli(&["DEBUG", "DIGEST"]), at_start, "the snapshot is not the dataset of BGSAVE's moment");
    assert!(during > 0, "the BGSAVE ended before any write");
    eprintln!("{during} of {i} rounds of writes ran during the BGSAVE; the file matches the digest taken with BGSAVE");
}

/// BGREWRITEAOF while clients write: the new base (the snapshot of the rewrite's start)
/// plus the new incr file (everything after) reload to exactly the live dataset.
#[test]
fn bgrewriteaof_under_writes_reloads_to_the_live_dataset() {
    // The base as an RDB (the default) and as RESP commands.
    for preamble in ["yes", "no"] {
        rewrite_under_writes(preamble);
    }
}

fn rewrite_under_writes(preamble: &str) {
    let dir = TempDir::new("persist-rewrite-live");
    let s = Ours::start(dir.path(), &["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
    assert_eq!(s.cli(&["DEBUG", "POPULATE", "200000", "k", "50"]), "OK");
    let mut c = Conn::connect(s.port);
    assert_eq!(c.call(&["BGREWRITEAOF"]).as_deref(), Some("+Background append only file rewriting started"));
    let (mut i, mut during) = (0, 0);
    loop {
        let running = s.info("aof_rewrite_in_progress") == "1";
        if !running && i >= 200 {
            break;
        }
        during += usize::from(running);
        c.call(&["SET", &format!("k:{}", (i * 7919) % 200000), "new"]).unwrap();
        c.call(&["DEL", &format!("k:{}", (i * 104729) % 200000)]).unwrap();
        c.call(&["PEXPIRE", &format!("k:{}", (i * 31) % 200000), "100000000"]).unwrap();
        c.call(&["RPUSH", "list", &i.to_string()]).unwrap();
        c.call(&["HSET", "h", &format!("f{i}"), "v"]).unwrap();
        i += 1;
    }
    assert_eq!(s.info("aof_last_bgrewrite_status"), "ok");
    let live = s.cli(&["DEBUG", "DIGEST"]);
    assert_eq!(s.cli(&["DEBUG", "LOADAOF"]), "OK");
    assert_eq!(s.cli(&["DEBUG", "DIGEST"]), live, "base + incr after the rewrite differ from the live dataset");
    eprintln!("preamble {preamble}: {during} of {i} rounds of writes ran during the BGREWRITEAOF; the AOF reloads");
}

/// FLUSHALL with save points saves the empty dataset at once and drops a running BGSAVE,
/// as Redis does: a kill -9 right after it must not bring the keys back (checked against
/// a real redis-server the same way).
#[test]
fn flushall_during_bgsave_is_durable_as_in_redis() {
    let dir = TempDir::new("persist-flushall");
    let s = Ours::start(dir.path(), &["--save", "3600 1"]);
    let redis = ferrokv_testkit::Server::start_with(None, &["--save", "3600 1"]);
    for port in [s.port, redis.port] {
        assert_eq!(cli(port, &["DEBUG", "POPULATE", "300000", "k", "100"]), "OK");
        assert_eq!(cli(port, &["SAVE"]), "OK");
        assert_eq!(cli(port, &["BGSAVE"]), "Background saving started");
        assert_eq!(cli(port, &["FLUSHALL"]), "OK");
        assert_eq!(cli(port, &["SET", "after", "flush"]), "OK");
    }
    s.kill9();
    let s = Ours::start(dir.path(), &["--save", "3600 1"]);
    let redis = ferrokv_testkit::Server::start_in(redis.stop(), &["--save", "3600 1"]);
    for port in [s.port, redis.port] {
        assert_eq!(cli(port, &["DBSIZE"]), "0", "port {port}: FLUSHALL was not saved");
    }
}

/// CONFIG SET appendonly no while BGREWRITEAOF writes a slow base (10 s a key): the rewrite
/// stops at once, its temp file goes, it is not a failed rewrite, and the AOF turned on
/// again holds the data; as Redis kills its rewrite child (checked on a real redis-server).
#[test]
fn turning_the_aof_off_stops_a_running_rewrite_as_redis() {
    let dir = TempDir::new("persist-aof-off");
    let s = Ours::start(dir.path(), &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let redis = ferrokv_testkit::Server::start_with(None, &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    for (port, dir) in [(s.port, dir.path()), (redis.port, redis.dir.path())] {
        assert_eq!(cli(port, &["SET", "k", "v"]), "OK");
        assert_eq!(cli(port, &["CONFIG", "SET", "rdb-key-save-delay", "10000000"]), "OK");
        assert_eq!(cli(port, &["BGREWRITEAOF"]), "Background append only file rewriting started");
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(temp_files(dir).len(), 1, "port {port}: the rewrite's temp file");
        let t = Instant::now();
        assert_eq!(cli(port, &["CONFIG", "SET", "appendonly", "no"]), "OK");
        assert!(t.elapsed() < Duration::from_secs(5), "port {port}: waited for the rewrite");
        wait_for("the rewrite to be gone", || info_field(port, "persistence", "aof_rewrite_in_progress") == "0");
        assert_eq!(info_field(port, "persistence", "aof_last_bgrewrite_status"), "ok", "port {port}");
        wait_for("the temp file to go", || temp_files(dir).is_empty());
        assert_eq!(cli(port, &["CONFIG", "SET", "rdb-key-save-delay", "0"]), "OK");
        assert_eq!(cli(port, &["SET", "k2", "v2"]), "OK");
        assert_eq!(cli(port, &["CONFIG", "SET", "appendonly", "yes"]), "OK");
        wait_for("the AOF to be on", || info_field(port, "persistence", "aof_rewrite_in_progress") == "0");
        wait_for("the AOF to be on", || info_field(port, "persistence", "aof_enabled") == "1");
    }
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
    assert!(log.contains("Killing running AOF rewrite child"), "{log}");
    s.kill9();
    let s = Ours::start(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(s.cli(&["MGET", "k", "k2"]), "v\nv2");
}

/// BGREWRITEAOF and BGSAVE inside MULTI start after EXEC, as Redis 7.0 schedules them (a
/// snapshot taken midway would hold the transaction's first half). The EXEC replies, and
/// the data after a restart from the AOF and from the dump file, beside a real
/// redis-server.
#[test]
fn snapshots_asked_inside_multi_start_after_exec_as_redis() {
    let session = |port: u16| -> Vec<String> {
        let mut c = ferrokv_testkit::Client::connect(port);
        let mut out = Vec::new();
        for cmd in
            [&["MULTI"][..], &["INCR", "x"], &["BGREWRITEAOF"], &["INCR", "y"], &["BGSAVE"], &["INCR", "z"], &["EXEC"]]
        {
            out.push(String::from_utf8_lossy(&c.call_str(cmd)).into_owned());
        }
        wait_for("the rewrite and the save", || {
            info_field(port, "persistence", "aof_rewrite_in_progress") == "0"
                && info_field(port, "persistence", "aof_rewrite_scheduled") == "0"
                && info_field(port, "persistence", "rdb_bgsave_in_progress") == "0"
                && cli(port, &["BGSAVE"]) == "Background saving started"
        });
        wait_for("the last save", || info_field(port, "persistence", "rdb_bgsave_in_progress") == "0");
        out
    };
    let dir = TempDir::new("persist-multi-snap");
    let s = Ours::start(dir.path(), &["--appendonly", "yes"]);
    let redis = ferrokv_testkit::Server::start_with(None, &["--appendonly", "yes"]);
    let (theirs, mine) = (session(redis.port), session(s.port));
    assert_eq!(theirs, mine);
    s.kill9();
    let redis = ferrokv_testkit::Server::start_in(redis.stop(), &["--appendonly", "yes"]);
    let s = Ours::start(dir.path(), &["--appendonly", "yes"]);
    for port in [redis.port, s.port] {
        assert_eq!(cli(port, &["MGET", "x", "y", "z"]), "1\n1\n1", "port {port}");
    }
    // The dump file too.
    let dir2 = TempDir::new("persist-multi-rdb");
    std::fs::copy(dir.path().join("dump.rdb"), dir2.path().join("dump.rdb")).expect("dump.rdb");
    let s = Ours::start(dir2.path(), &[]);
    assert_eq!(s.cli(&["MGET", "x", "y", "z"]), "1\n1\n1");
}
