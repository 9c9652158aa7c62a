//! The server's life, against a real redis-server 7.0 started the same way: SIGTERM waits
//! for the timer (DEBUG PAUSE-CRON holds it) and SHUTDOWN ABORT cancels it; a second SIGINT
//! during the final save exits at once and removes the save's temp file; a start that cannot
//! load its files ends its log with Redis's own line; the AOF is rewritten on its own when it
//! grows past auto-aof-rewrite-percentage; crashes (DEBUG SEGFAULT, SIGABRT) log Redis's
//! report; scripts an old AOF logged run at load; damaged payloads are refused with Redis's
//! log lines; a reply past the output limit closes the client.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrokv_testkit::{
    cli, encode_command, free_port, info_field, pipe_into, spawn_on_free_port, wait_for, Client, TempDir,
};

const OURS: &str = env!("CARGO_BIN_EXE_ferrokv-server");

/// A server process on a free port, its stdout in `dir/stdout.log`.
struct Proc {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Proc {
    fn start(redis: bool, extra: &[&str]) -> Proc {
        let dir = TempDir::new(if redis { "life-redis" } else { "life-ours" });
        let bin = if redis { "redis-server" } else { OURS };
        let log = dir.path().join("stdout.log");
        let spawn = |port: u16| {
            Command::new(bin)
                .args(["--port", &port.to_string(), "--enable-debug-command", "yes"])
                .arg("--dir")
                .arg(dir.path())
                .args(extra)
                .stdout(std::fs::File::create(&log).expect("log file"))
                .stderr(Stdio::null())
                .spawn()
                .expect("start the server")
        };
        let (child, port) = spawn_on_free_port(bin, spawn, Duration::from_secs(30));
        Proc { child, port, dir }
    }

    /// Our server on an existing directory and a known port, not waiting for the load.
    fn start_in(dir: &Path, port: u16, extra: &[&str]) -> Proc {
        let child = Command::new(OURS)
            .args(["--port", &port.to_string(), "--enable-debug-command", "yes"])
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        Proc { child, port, dir: TempDir::new("life-unused") }
    }

    fn cli(&self, args: &[&str]) -> String {
        cli(self.port, args)
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([&format!("-{sig}"), &self.child.id().to_string()]).status();
        assert!(ok.is_ok_and(|s| s.success()), "kill -{sig}");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stdout.log")).unwrap_or_default()
    }

    /// The exit status, once the process is gone (None if still running after `secs`).
    fn wait_exit(&mut self, secs: u64) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(secs) {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SIGALRM does not end the server: Redis 7.0 ignores it (no watchdog), Redis 7.4 logs
/// `Received SIGALRM` and goes on.
#[test]
fn sigalrm_does_not_end_the_server() {
    let run = |redis: bool, extra: &[&str]| {
        let p = Proc::start(redis, extra);
        p.signal("ALRM");
        std::thread::sleep(Duration::from_millis(200));
        let ping = p.cli(&["PING"]);
        (ping, p.log().contains("Received SIGALRM"))
    };
    assert_eq!(run(false, &["--save", ""]), run(true, &["--save", ""]));
    assert_eq!(run(false, &["--save", "", "--redis-version", "7.4"]), ("PONG".to_string(), true));
}

#[test]
fn sigterm_waits_for_the_timer_and_shutdown_abort_cancels_it() {
    let run = |redis: bool| {
        let mut p = Proc::start(redis, &["--save", ""]);
        let paused = p.cli(&["DEBUG", "PAUSE-CRON", "1"]);
        p.signal("TERM");
        std::thread::sleep(Duration::from_millis(300));
        let abort = p.cli(&["SHUTDOWN", "ABORT"]);
        let again = p.cli(&["SHUTDOWN", "ABORT"]);
        let resumed = p.cli(&["DEBUG", "PAUSE-CRON", "0"]);
        std::thread::sleep(Duration::from_millis(300));
        let ping = p.cli(&["PING"]);
        let alive = p.wait_exit(0).is_none();
        let logged = p.log().contains("Shutdown manually aborted");
        vec![paused, abort, again, resumed, ping, alive.to_string(), logged.to_string()]
    };
    let redis = run(true);
    let ours = run(false);
    assert_eq!(ours, redis);
    assert_eq!(ours[1], "OK");
    assert_eq!(ours[4], "PONG");
}

#[test]
fn a_second_sigint_during_the_final_save_exits_at_once_and_removes_the_temp_file() {
    let run = |redis: bool| {
        let mut p = Proc::start(redis, &["--save", "900 1"]);
        p.cli(&["DEBUG", "POPULATE", "30"]);
        p.cli(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
        let temp = p.dir.path().join(format!("temp-{}.rdb", p.child.id()));
        p.signal("INT");
        wait_for("the final save's temp file", || temp.exists());
        p.signal("INT");
        let code = p.wait_exit(20);
        let insisted = p.log().contains("You insist... exiting now.");
        vec![format!("{code:?}"), temp.exists().to_string(), insisted.to_string()]
    };
    let redis = run(true);
    let ours = run(false);
    assert_eq!(ours, redis);
    assert_eq!(ours, ["Some(1)", "false", "true"]);
}

/// The message of a log line, without pid, role, time and level (the two servers print
/// their times differently).
fn message(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    // ferrokv: `pid:M <ms> * msg`; Redis: `pid:M dd Mon yyyy hh:mm:ss.mmm # msg`.
    let skip = if words.get(1).is_some_and(|w| w.len() > 10 && w.bytes().all(|b| b.is_ascii_digit())) { 3 } else { 6 };
    words.get(skip..).map(|w| w.join(" ")).unwrap_or_default()
}

/// Start `bin` on `dir`, wait for its exit; the exit code and its stdout.
fn failed_start(bin: &str, dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("timeout")
        .args(["30", bin, "--port", &free_port().to_string(), "--save", ""])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stderr(Stdio::null())
        .output()
        .expect("run the server");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn aof_dir(files: &[u8]) -> (TempDir, PathBuf) {
    let dir = TempDir::new("life-aof");
    let aofs = dir.path().join("appendonlydir");
    std::fs::create_dir_all(&aofs).expect("mkdir");
    std::fs::write(aofs.join("appendonly.aof.1.incr.aof"), files).expect("write aof");
    std::fs::write(aofs.join("appendonly.aof.manifest"), "file appendonly.aof.1.incr.aof seq 1 type i\n")
        .expect("write manifest");
    let path = aofs.join("appendonly.aof.1.incr.aof");
    (dir, path)
}

#[test]
fn a_start_that_cannot_load_ends_its_log_with_redis_line() {
    let set = encode_command(&[b"set".to_vec(), b"foo".to_vec(), b"hello".to_vec()]);
    let multi = encode_command(&[b"multi".to_vec()]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("bad format", [&set[..], b"!!!", &set[..]].concat()),
        ("unfinished MULTI", [&set[..], &multi[..], &set[..]].concat()),
        ("short read", [&set[..], &set[..set.len() - 1]].concat()),
        ("unknown command", [&set[..], &encode_command(&[b"bla".to_vec(), b"foo".to_vec()])[..]].concat()),
    ];
    for (name, bytes) in cases {
        let mut seen = Vec::new();
        for bin in ["redis-server", OURS] {
            let (dir, _) = aof_dir(&bytes);
            let (code, out) = failed_start(bin, dir.path(), &["--appendonly", "yes", "--aof-load-truncated", "no"]);
            let last = out.lines().last().map(message).unwrap_or_default();
            seen.push((code, last));
        }
        assert_eq!(seen[1], seen[0], "{name}");
        assert_eq!(seen[0].0, Some(1), "{name}: {seen:?}");
    }
    // A dump whose checksum is wrong: Redis's line says "CRC error", among its last ten.
    let mut tails = Vec::new();
    for bin in ["redis-server", OURS] {
        let dir = TempDir::new("life-crc");
        let writer = Proc::start(true, &["--save", ""]);
        writer.cli(&["SET", "a", "b"]);
        writer.cli(&["SAVE"]);
        let mut rdb = std::fs::read(writer.dir.path().join("dump.rdb")).expect("dump.rdb");
        let n = rdb.len();
        rdb[n - 8..].copy_from_slice(b"foobar00");
        std::fs::write(dir.path().join("dump.rdb"), rdb).expect("write dump");
        let (code, out) = failed_start(bin, dir.path(), &[]);
        let lines: Vec<&str> = out.lines().collect();
        let tail = lines[lines.len().saturating_sub(10)..].join("\n");
        tails.push((code, tail.contains("CRC error")));
    }
    assert_eq!(tails, [(Some(1), true), (Some(1), true)]);
}

#[test]
fn the_aof_is_rewritten_when_it_grows() {
    let run = |redis: bool| {
        let p = Proc::start(redis, &["--save", "", "--appendonly", "yes", "--auto-aof-rewrite-min-size", "1mb"]);
        let sets: Vec<u8> = (0..3000)
            .flat_map(|i| encode_command(&[b"SET".to_vec(), format!("k{i}").into_bytes(), vec![b'v'; 1000]]))
            .collect();
        pipe_into(p.port, &sets);
        wait_for("an automatic rewrite", || {
            info_field(p.port, "persistence", "aof_rewrites").parse::<u64>().unwrap_or(0) >= 1
                && info_field(p.port, "persistence", "aof_rewrite_in_progress") == "0"
        });
        let current: u64 = info_field(p.port, "persistence", "aof_current_size").parse().unwrap_or(0);
        let base: u64 = info_field(p.port, "persistence", "aof_base_size").parse().unwrap_or(0);
        let logged = p.log().contains("Starting automatic rewriting of AOF on");
        vec![p.cli(&["DBSIZE"]), logged.to_string(), (base > 0 && current >= base).to_string()]
    };
    let redis = run(true);
    let ours = run(false);
    assert_eq!(ours, redis);
    assert_eq!(ours, ["3000", "true", "true"]);
}

/// A crash, by DEBUG SEGFAULT or by a SIGABRT from outside: the crash report (Redis's
/// START line, the signal, the stack trace or the sender), then the process dies.
#[test]
fn crashes_log_a_crash_report_and_end_the_process() {
    let debug_segfault = |p: &mut Proc| drop(p.cli(&["DEBUG", "SEGFAULT"]));
    let sigabrt = |p: &mut Proc| p.signal("ABRT");
    type Crash<'a> = &'a dyn Fn(&mut Proc);
    let cases: [(Crash, [&str; 2]); 2] = [
        (&debug_segfault, ["crashed by signal: 11", "------ STACK TRACE ------"]),
        (&sigabrt, ["crashed by signal: 6, si_code: 0", "Killed by PID:"]),
    ];
    for (crash, looked_for) in cases {
        let run = |redis: bool| {
            let mut p = Proc::start(redis, &["--save", ""]);
            crash(&mut p);
            let _ = p.wait_exit(30);
            let gone = p.child.try_wait().ok().flatten().is_some();
            let log = p.log();
            let start = log.contains("=== REDIS BUG REPORT START: Cut & paste starting from here ===");
            vec![gone, start, log.contains(looked_for[0]), log.contains(looked_for[1])]
        };
        let redis = run(true);
        let ours = run(false);
        assert_eq!(ours, redis, "{looked_for:?}");
        assert_eq!(ours, [true; 4], "{looked_for:?}");
    }
}

/// The bulk string of a raw RESP reply.
fn bulk(reply: &[u8]) -> Vec<u8> {
    let start = reply.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    reply[start..reply.len().saturating_sub(2).max(start)].to_vec()
}

/// `bytes` with the first `from` replaced by `to` (of the same length).
fn replaced(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = bytes.windows(from.len()).position(|w| w == from).expect("the bytes to replace");
    [&bytes[..at], to, &bytes[at + from.len()..]].concat()
}

/// Payloads a real server dumped, then damaged (a score made NaN, a consumer renamed onto
/// another of its group): RESTORE refuses them with Redis's reply and log line.
#[test]
fn damaged_payloads_are_refused_with_redis_log_lines() {
    let run = |redis: bool| {
        let p = Proc::start(redis, &["--save", "", "--zset-max-listpack-entries", "0", "--loglevel", "verbose"]);
        let mut c = Client::connect(p.port);
        for args in [
            &["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"][..],
            &["ZADD", "z", "1.5", "m"],
            &["XADD", "x", "1-1", "f", "v"],
            &["XGROUP", "CREATE", "x", "g", "0"],
            &["XGROUP", "CREATECONSUMER", "x", "g", "c1"],
            &["XGROUP", "CREATECONSUMER", "x", "g", "c2"],
        ] {
            c.call_str(args);
        }
        let z = bulk(&c.call_str(&["DUMP", "z"]));
        let x = bulk(&c.call_str(&["DUMP", "x"]));
        let nan = replaced(&z, &1.5f64.to_le_bytes(), &f64::NAN.to_le_bytes());
        let dup = replaced(&x, b"\x02c2", b"\x02c1");
        let restore = |c: &mut Client, key: &str, payload: Vec<u8>| {
            String::from_utf8_lossy(&c.call(&[b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec(), payload]))
                .into_owned()
        };
        let replies = [restore(&mut c, "z2", nan), restore(&mut c, "x2", dup)];
        let log = p.log();
        vec![
            replies[0].clone(),
            replies[1].clone(),
            log.contains("Zset with NAN score detected").to_string(),
            log.contains("Duplicate stream consumer detected").to_string(),
        ]
    };
    let redis = run(true);
    let ours = run(false);
    assert_eq!(ours, redis);
    assert_eq!(ours, ["-ERR Bad data format\r\n", "-ERR Bad data format\r\n", "true", "true"]);
}

/// An AOF that logged scripts verbatim (Redis before 7.0 could) loads: the scripts run
/// as the loader reaches them, as Redis 7.0 runs them, even on a read-only replica.
#[test]
fn scripts_an_old_aof_logged_run_at_load() {
    let cmd = |args: &[&str]| encode_command(&args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>());
    let aof = [
        cmd(&["select", "9"]),
        cmd(&["eval", "redis.call('set',KEYS[1],'100')", "1", "foo"]),
        cmd(&["eval", "redis.call('incr',KEYS[1])", "1", "foo"]),
        cmd(&["eval", "return redis.call('incr',KEYS[1])", "1", "foo"]),
        cmd(&["evalsha", "ffffffffffffffffffffffffffffffffffffffff", "0"]),
        cmd(&["set", "after", "1"]),
    ]
    .concat();
    let mut seen = Vec::new();
    for redis in [true, false] {
        let (dir, _) = aof_dir(&aof);
        let extra = ["--appendonly", "yes", "--replicaof", "127.0.0.1", "0", "--replica-read-only", "yes"];
        let bin = if redis { "redis-server" } else { OURS };
        let port = free_port();
        let mut child = Command::new(bin)
            .args(["--port", &port.to_string(), "--save", ""])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        wait_for("the server to load", || cli(port, &["PING"]) == "PONG");
        seen.push((cli(port, &["-n", "9", "GET", "foo"]), cli(port, &["-n", "9", "GET", "after"])));
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_eq!(seen[1], seen[0]);
    assert_eq!(seen[0], ("102".to_string(), "1".to_string()));
}

/// A reply the client's output limit cuts short: Redis stops building it when the limit
/// flags the client and closes the connection; so does ferrokv, without building the rest.
#[test]
fn a_huge_random_reply_past_the_output_limit_closes_the_client() {
    let run = |redis: bool| {
        let p = Proc::start(redis, &["--save", ""]);
        p.cli(&["CONFIG", "SET", "client-output-buffer-limit", "normal 1000000 0 0"]);
        p.cli(&["HSET", "h", "a", "b"]);
        p.cli(&["SADD", "s", "a"]);
        p.cli(&["ZADD", "z", "1", "a"]);
        let mut out: Vec<String> = [
            &["HRANDFIELD", "h", "-999999999"][..],
            &["HRANDFIELD", "h", "-999999999", "WITHVALUES"],
            &["SRANDMEMBER", "s", "-999999999"],
            &["ZRANDMEMBER", "z", "-999999999", "WITHSCORES"],
        ]
        .iter()
        .map(|args| p.cli(args))
        .collect();
        // A script's reply is not the client's: it is built whole.
        out.push(p.cli(&["EVAL", "return #redis.call('srandmember', KEYS[1], -2000000)", "1", "s"]));
        out.push(p.cli(&["PING"]));
        out
    };
    let redis = run(true);
    let ours = run(false);
    assert_eq!(ours, redis);
    assert_eq!(ours[4..], ["2000000", "PONG"]);
}

/// A start that loads a dump slowly (key-load-delay): the same answers as Redis while it
/// loads, every key once it is loaded; a SHUTDOWN meanwhile saves nothing, so the dump
/// stays whole.
#[test]
fn clients_get_loading_while_the_data_loads() {
    let slow = ["--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024"];
    let run = |redis: bool| {
        let first = Proc::start(redis, &["--save", ""]);
        first.cli(&["DEBUG", "POPULATE", "30000", "key", "100"]);
        first.cli(&["SAVE"]);
        let dir = TempDir::new("life-loading");
        std::fs::copy(first.dir.path().join("dump.rdb"), dir.path().join("dump.rdb")).expect("copy dump");
        drop(first);
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("stdout.log")).expect("log");
        let bin = if redis { "redis-server" } else { OURS };
        let mut child = Command::new(bin)
            .args(["--port", &port.to_string(), "--save", "", "--enable-debug-command", "yes"])
            .args(slow)
            .arg("--dir")
            .arg(dir.path())
            .stdout(log)
            .spawn()
            .expect("start");
        wait_for("the server to answer while it loads", || cli(port, &["PING"]).starts_with("LOADING"));
        let mut seen = Vec::new();
        seen.push(format!("loading {}", info_field(port, "persistence", "loading")));
        // (Not DEBUG RELOAD: Redis 7.0 saves the keys loaded so far, and loses the rest.)
        for c in [&["PING"][..], &["GET", "key:1"], &["DBSIZE"], &["SELECT", "1"], &["CONFIG", "GET", "port"]] {
            let reply = cli(port, c).replace(&port.to_string(), "<port>");
            seen.push(format!("{c:?} -> {reply}"));
        }
        wait_for("the load to end", || cli(port, &["PING"]) == "PONG");
        seen.push(format!("keys {}", cli(port, &["DBSIZE"])));
        let _ = cli(port, &["SHUTDOWN", "NOSAVE"]);
        let _ = child.wait();
        seen
    };
    let redis = run(true);
    let ours = run(false);
    assert_eq!(ours, redis);
    assert_eq!(ours.last().map(String::as_str), Some("keys 30000"));
}

#[test]
fn a_shutdown_while_loading_leaves_the_data_whole() {
    let first = Proc::start(false, &["--save", ""]);
    first.cli(&["DEBUG", "POPULATE", "30000", "key", "100"]);
    first.cli(&["SAVE"]);
    let dump = std::fs::read(first.dir.path().join("dump.rdb")).expect("dump.rdb");
    let dir = TempDir::new("life-shutdown-loading");
    std::fs::write(dir.path().join("dump.rdb"), &dump).expect("copy dump");
    drop(first);
    let dir = dir.path();
    for stop in ["SHUTDOWN", "SIGTERM"] {
        let mut p = Proc::start_in(dir, free_port(), &["--save", "1 1", "--key-load-delay", "100"]);
        wait_for("loading", || cli(p.port, &["PING"]).starts_with("LOADING"));
        if stop == "SHUTDOWN" {
            let _ = p.cli(&["SHUTDOWN", "SAVE"]);
        } else {
            p.signal("TERM");
        }
        assert_eq!(p.wait_exit(30), Some(0), "{stop}");
        assert!(std::fs::read(dir.join("dump.rdb")).expect("dump.rdb") == dump, "{stop} changed the dump");
    }
}
