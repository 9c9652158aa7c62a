//! A full disk, for real: a tmpfs of a few MB as the server's `dir`, 2 KB SETs until the
//! server refuses writes, then the tmpfs grown again. What must hold, for each fsync
//! policy and with a BGSAVE or BGREWRITEAOF running when space runs out:
//! - every write the server acknowledged is there after a restart (a SHUTDOWN, or kill -9
//!   under `appendfsync always`);
//! - while the disk is full, writes (and PING) are refused with Redis's MISCONF error and
//!   reads are served;
//! - once space returns the server accepts writes again, without a restart.
//!
//! Mounting needs root: without it each test says so and passes without running.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrokv_testkit::{encode_command, spawn_on_free_port, TempDir};

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
    _holder: TempDir,
}

impl Tmpfs {
    /// None (with a message) when this process may not mount.
    fn mount(tag: &str, size_kb: u64) -> Option<Tmpfs> {
        let holder = TempDir::new(tag);
        let path = holder.path().join("fs");
        std::fs::create_dir_all(&path).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_kb}k"), "tmpfs"])
            .arg(&path)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: cannot mount a tmpfs here (needs root)");
            return None;
        }
        Some(Tmpfs { path, _holder: holder })
    }

    fn resize(&self, size_kb: u64) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,size={size_kb}k")])
            .arg(&self.path)
            .status()
            .expect("remount");
        assert!(st.success(), "remount failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// ferrokv-server with its data on the tmpfs and its log beside it (not on it).
struct Server {
    child: Option<Child>,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(dir: &Path, log: &Path, extra: &[&str]) -> Server {
        Server::start_binary(env!("CARGO_BIN_EXE_ferrokv-server"), dir, log, extra)
    }

    fn start_binary(bin: &str, dir: &Path, log: &Path, extra: &[&str]) -> Server {
        let spawn = |port: u16| {
            let out = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("log file");
            Command::new(bin)
                .args(["--port", &port.to_string()])
                .arg("--dir")
                .arg(dir)
                .args(extra)
                .stdout(Stdio::from(out))
                .spawn()
                .expect("start ferrokv-server")
        };
        let (child, port) = spawn_on_free_port("ferrokv-server", spawn, Duration::from_secs(60));
        Server { child: Some(child), port, log: log.to_path_buf() }
    }

    fn conn(&self) -> Conn {
        Conn::connect(self.port)
    }

    fn kill9(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SHUTDOWN, and wait for the process to end.
    fn shutdown(mut self) {
        let reply = self.conn().call(&["SHUTDOWN"]);
        assert!(reply.is_none(), "SHUTDOWN answered {reply:?}; log:\n{}", self.log_text());
        let mut c = self.child.take().expect("running");
        let start = Instant::now();
        while c.try_wait().expect("wait").is_none() {
            assert!(start.elapsed() < Duration::from_secs(30), "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait for a line holding `text` in the log (the timer logs the AOF's status).
    fn wait_log(&self, text: &str) {
        let start = Instant::now();
        while !self.log_text().contains(text) {
            assert!(start.elapsed() < Duration::from_secs(10), "no '{text}' in the log:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A blocking RESP client reading one-line replies and bulks.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn connect(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        Conn { r: BufReader::new(s.try_clone().expect("clone")), w: s }
    }

    /// The reply as text: a line as sent (`+OK`, `-MISCONF ...`, `:1`), a bulk's contents,
    /// an array's elements in brackets; None when the connection closed.
    fn call(&mut self, args: &[&str]) -> Option<String> {
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.w.write_all(&encode_command(&argv)).ok()?;
        self.reply()
    }

    fn reply(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.r.read_line(&mut line) {
            Ok(n) if n > 2 => {}
            _ => return None,
        }
        let line = line.trim_end().to_string();
        if let Some(n) = line.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
            let mut body = vec![0u8; n + 2];
            std::io::Read::read_exact(&mut self.r, &mut body).ok()?;
            body.truncate(n);
            return String::from_utf8(body).ok();
        }
        if let Some(n) = line.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) {
            let items: Option<Vec<String>> = (0..n).map(|_| self.reply()).collect();
            return Some(format!("[{}]", items?.join(", ")));
        }
        Some(line)
    }

    fn info(&mut self, field: &str) -> String {
        let text = self.call(&["INFO", "persistence"]).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).unwrap_or_default().trim().to_string()
    }
}

const MISCONF_AOF: &str = "-MISCONF Errors writing to the AOF file: No space left on device";
const MISCONF_RDB: &str = "-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist";

/// A 2 KB value that says which key it belongs to.
fn value(key: &str) -> String {
    format!("{key}:{}", "x".repeat(2048))
}

/// SET keys `prefix:N` until the server refuses one; the acknowledged ones, and the
/// refusal. Panics when nothing is refused within `max` writes.
fn fill(c: &mut Conn, prefix: &str, max: usize, acked: &mut BTreeMap<String, String>) -> String {
    fill_paced(c, prefix, max, usize::MAX, acked)
}

/// [`fill`], pausing 50 ms after every `pace` writes (for the save points to fire).
fn fill_paced(c: &mut Conn, prefix: &str, max: usize, pace: usize, acked: &mut BTreeMap<String, String>) -> String {
    for i in 0..max {
        if i > 0 && i % pace == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        let key = format!("{prefix}:{i}");
        let v = value(&key);
        match c.call(&["SET", &key, &v]).as_deref() {
            Some("+OK") => {
                acked.insert(key, v);
            }
            Some(other) => return other.to_string(),
            None => panic!("the connection closed at write {i}"),
        }
    }
    panic!("no write was refused in {max} writes");
}

/// Write until a SET is accepted again (space came back); the time it took.
fn wait_accepting(c: &mut Conn, key: &str, acked: &mut BTreeMap<String, String>) -> Duration {
    let start = Instant::now();
    loop {
        let v = value(key);
        if c.call(&["SET", key, &v]).as_deref() == Some("+OK") {
            acked.insert(key.to_string(), v);
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "writes were not accepted again");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every acknowledged key, with its value, in the restarted server.
fn assert_all_present(s: &Server, acked: &BTreeMap<String, String>) {
    let mut c = s.conn();
    let mut missing = Vec::new();
    for (k, v) in acked {
        if c.call(&["GET", k]).as_deref() != Some(v.as_str()) {
            missing.push(k.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost, first: {:?}; log:\n{}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)],
        s.log_text()
    );
}

/// The AOF on a disk that fills: refused writes, reads served, recovery, nothing lost.
fn aof_disk_full(fsync: &str, kill9: bool) {
    let Some(fs) = Tmpfs::mount(&format!("diskfull-{fsync}"), 3 * 1024) else { return };
    let log = fs._holder.path().join("server.log");
    let args = ["--appendonly", "yes", "--appendfsync", fsync, "--save", ""];
    let s = Server::start(&fs.path, &log, &args);
    let mut c = s.conn();
    let mut acked = BTreeMap::new();
    let refusal = fill(&mut c, "k", 10_000, &mut acked);
    assert_eq!(refusal, MISCONF_AOF, "log:\n{}", s.log_text());
    // Refused while the disk is full: writes, PING; served: reads.
    assert_eq!(c.call(&["SET", "more", "x"]).as_deref(), Some(MISCONF_AOF));
    assert_eq!(c.call(&["PING"]).as_deref(), Some(MISCONF_AOF));
    let some = acked.keys().next().expect("some writes were acknowledged").clone();
    assert_eq!(c.call(&["GET", &some]), acked.get(&some).cloned());
    assert_eq!(c.info("aof_last_write_status"), "err");
    s.wait_log("writing to the AOF file");
    fs.resize(64 * 1024);
    wait_accepting(&mut c, "after-space", &mut acked);
    for i in 0..50 {
        let key = format!("later:{i}");
        let v = value(&key);
        assert_eq!(c.call(&["SET", &key, &v]).as_deref(), Some("+OK"));
        acked.insert(key, v);
    }
    assert_eq!(c.info("aof_last_write_status"), "ok");
    s.wait_log("AOF write error looks solved, Redis can write again.");
    if kill9 {
        s.kill9();
    } else {
        s.shutdown();
    }
    let s = Server::start(&fs.path, &log, &args);
    assert_all_present(&s, &acked);
}

#[test]
fn disk_full_appendfsync_always_loses_nothing_even_under_kill9() {
    aof_disk_full("always", true);
}

#[test]
fn disk_full_appendfsync_everysec_loses_nothing() {
    aof_disk_full("everysec", false);
}

#[test]
fn disk_full_appendfsync_no_loses_nothing() {
    aof_disk_full("no", false);
}

/// Acknowledged writes still buffered when the disk filled are not dropped by SHUTDOWN:
/// it is refused until they are written (Redis exits and loses them).
#[test]
fn shutdown_waits_for_buffered_writes() {
    let Some(fs) = Tmpfs::mount("diskfull-shutdown", 2 * 1024) else { return };
    let log = fs._holder.path().join("server.log");
    let args = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""];
    let s = Server::start(&fs.path, &log, &args);
    let mut c = s.conn();
    let mut acked = BTreeMap::new();
    fill(&mut c, "k", 10_000, &mut acked);
    assert_eq!(c.call(&["SHUTDOWN"]).as_deref(), Some("-ERR Errors trying to SHUTDOWN. Check logs."));
    s.wait_log("Error writing the AOF, can't exit");
    fs.resize(64 * 1024);
    s.shutdown();
    let s = Server::start(&fs.path, &log, &args);
    assert_all_present(&s, &acked);
}

/// BGSAVE on a full disk: with save points, writes are refused after it fails, until a
/// later BGSAVE (the save points retry it) succeeds.
#[test]
fn failed_bgsave_stops_writes_until_a_save_succeeds() {
    let Some(fs) = Tmpfs::mount("diskfull-bgsave", 3 * 1024) else { return };
    let log = fs._holder.path().join("server.log");
    let args = ["--appendonly", "no", "--save", "1 1", "--rdbcompression", "no"];
    let s = Server::start(&fs.path, &log, &args);
    let mut c = s.conn();
    let mut acked = BTreeMap::new();
    // The dump grows past the disk; the save point's BGSAVE then fails and writes stop.
    let refusal = fill_paced(&mut c, "k", 20_000, 100, &mut acked);
    assert!(refusal.starts_with(MISCONF_RDB), "{refusal}; log:\n{}", s.log_text());
    assert_eq!(c.info("rdb_last_bgsave_status"), "err");
    assert!(c.call(&["PING"]).is_some_and(|r| r.starts_with(MISCONF_RDB)));
    s.wait_log("Background saving error");
    let stale: Vec<_> = std::fs::read_dir(&fs.path)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(stale.is_empty(), "a failed BGSAVE left {stale:?}");
    // The dump and its temp file side by side.
    fs.resize(256 * 1024);
    wait_accepting(&mut c, "after-space", &mut acked);
    assert_eq!(c.info("rdb_last_bgsave_status"), "ok");
    s.shutdown();
    let s = Server::start(&fs.path, &log, &args);
    assert_all_present(&s, &acked);
}

/// A BGREWRITEAOF that runs out of space fails and leaves the AOF as it was; the writes
/// around it are kept, and a rewrite after space returns succeeds.
#[test]
fn rewrite_on_a_full_disk_fails_cleanly() {
    let Some(fs) = Tmpfs::mount("diskfull-rewrite", 3 * 1024) else { return };
    let log = fs._holder.path().join("server.log");
    let args = ["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--rdbcompression", "no"];
    let s = Server::start(&fs.path, &log, &args);
    let mut c = s.conn();
    let mut acked = BTreeMap::new();
    // About 1.6 MB of data: its new base does not fit beside the AOF holding it.
    for i in 0..800 {
        let key = format!("k:{i}");
        let v = value(&key);
        assert_eq!(c.call(&["SET", &key, &v]).as_deref(), Some("+OK"));
        acked.insert(key, v);
    }
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "200"]).as_deref(), Some("+OK"));
    assert!(c.call(&["BGREWRITEAOF"]).is_some_and(|r| r.starts_with("+Background")));
    // Writes go on while the rewrite runs, until the disk is full.
    fill(&mut c, "during", 10_000, &mut acked);
    let start = Instant::now();
    while c.info("aof_rewrite_in_progress") != "0" {
        assert!(start.elapsed() < Duration::from_secs(60), "the rewrite did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.info("aof_last_bgrewrite_status"), "err", "log:\n{}", s.log_text());
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "0"]).as_deref(), Some("+OK"));
    fs.resize(64 * 1024);
    wait_accepting(&mut c, "after-space", &mut acked);
    assert!(c.call(&["BGREWRITEAOF"]).is_some_and(|r| r.starts_with("+Background")));
    let start = Instant::now();
    while c.info("aof_rewrite_in_progress") != "0" {
        assert!(start.elapsed() < Duration::from_secs(60), "the rewrite did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.info("aof_last_bgrewrite_status"), "ok", "log:\n{}", s.log_text());
    s.kill9();
    let s = Server::start(&fs.path, &log, &args);
    assert_all_present(&s, &acked);
}

/// What is refused and what is served while the AOF cannot be written, compared with a
/// real redis-server 7.0 on its own full disk (`appendfsync everysec`, where Redis stays
/// up): PING, writes, reads, MULTI/EXEC, scripts and functions.
#[test]
fn refusals_match_redis_while_the_disk_is_full() {
    let Some(ours_fs) = Tmpfs::mount("diskfull-ours", 2 * 1024) else { return };
    let Some(redis_fs) = Tmpfs::mount("diskfull-redis", 2 * 1024) else { return };
    let args = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""];
    let ours = Server::start(&ours_fs.path, &ours_fs._holder.path().join("server.log"), &args);
    let redis = Server::start_binary("redis-server", &redis_fs.path, &redis_fs._holder.path().join("redis.log"), &args);
    let script_w = "return redis.call('SET', KEYS[1], 'v')";
    let script_r = "return redis.call('GET', KEYS[1])";
    let lib = "#!lua name=lib\nredis.register_function('w', function(k, a) return redis.call('SET', k[1], 'v') end)\n\
               redis.register_function{function_name='r', callback=function(k, a) return redis.call('GET', k[1]) end, \
               flags={'no-writes'}}";
    let mut replies = Vec::new();
    for s in [&ours, &redis] {
        let mut c = s.conn();
        assert_eq!(c.call(&["FUNCTION", "LOAD", lib]).as_deref(), Some("lib"));
        // A transaction queued before the disk fills.
        let mut early = s.conn();
        for cmd in [&["MULTI"][..], &["SET", "q", "1"], &["GET", "q"]] {
            early.call(cmd);
        }
        fill(&mut c, "k", 10_000, &mut BTreeMap::new());
        let mut seen = Vec::new();
        let steps: &[&[&str]] = &[
            &["PING"],
            &["PING", "hello"],
            &["SET", "a", "1"],
            &["GET", "k:0"],
            &["EXISTS", "k:0"],
            &["ECHO", "e"],
            &["MULTI"],
            &["SET", "a", "1"],
            &["GET", "k:0"],
            &["EXEC"],
            &["MULTI"],
            &["GET", "k:0"],
            &["EXEC"],
            &["EVAL", script_w, "1", "x"],
            &["EVAL", script_r, "1", "k:0"],
            &["EVAL", &format!("#!lua\n{script_w}"), "1", "x"],
            &["EVAL", &format!("#!lua flags=no-writes\n{script_r}"), "1", "k:0"],
            &["FCALL", "w", "1", "x"],
            &["FCALL_RO", "r", "1", "k:0"],
            &["FUNCTION", "DELETE", "lib"],
        ];
        for st in steps {
            let r = c.call(st).unwrap_or_default();
            // A long value is the same key's 2 KB value on both: keep its head.
            seen.push((st.join(" "), r.chars().take(120).collect::<String>()));
        }
        seen.push(("EXEC (queued before)".into(), early.call(&["EXEC"]).unwrap_or_default()));
        replies.push(seen);
    }
    for (o, r) in replies[0].iter().zip(&replies[1]) {
        assert_eq!(o, r);
    }
}
