//! What an operator's setup relies on, next to a real redis-server 7.0 started the same way
//! (#15): the unix socket (`unixsocket`, `unixsocketperm`), the pid file, the log file with
//! lines in Redis's format at `loglevel`, and the files removed at shutdown.

mod support;
use support::Ours;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use ferrokv_testkit::{cli, Server as Redis, TempDir};

/// One command over the unix socket at `sock`, its raw reply.
fn over_unix(sock: &Path, args: &[&str]) -> String {
    let mut s = UnixStream::connect(sock).expect("connect to the unix socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    s.write_all(&ferrokv_testkit::encode_command(&argv)).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Whether `line` reads as Redis writes a log line: `pid:R dd Mon yyyy hh:mm:ss.mmm L text`.
fn is_redis_log_line(line: &str) -> bool {
    let Some((pid, rest)) = line.split_once(':') else { return false };
    let mut words = rest.splitn(7, ' ');
    let role = words.next().unwrap_or("");
    let day = words.next().unwrap_or("");
    let month = words.next().unwrap_or("");
    let year = words.next().unwrap_or("");
    let time = words.next().unwrap_or("");
    let level = words.next().unwrap_or("");
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let clock: Vec<&str> = time.split([':', '.']).collect();
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && matches!(role, "M" | "S" | "C" | "X")
        && digits(day, 2)
        && months.contains(&month)
        && digits(year, 4)
        && clock.len() == 4
        && clock[..3].iter().all(|c| digits(c, 2))
        && digits(clock[3], 3)
        && matches!(level, "." | "-" | "*" | "#")
        && words.next().is_some_and(|m| !m.is_empty())
}

/// Wait until `path` is gone (the server removed it at shutdown).
fn wait_gone(path: &Path) -> bool {
    let start = Instant::now();
    while path.exists() {
        if start.elapsed() > Duration::from_secs(20) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// What a server showed: the files' state and its log, checked the same for both.
fn check(who: &str, dir: &Path, pid: u32, port: u16) {
    let sock = dir.join("s.sock");
    let pidfile = dir.join("p.pid");
    let mode = std::fs::metadata(&sock).unwrap_or_else(|e| panic!("{who}: no socket: {e}")).permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{who}: unixsocketperm 700");
    assert_eq!(std::fs::read_to_string(&pidfile).unwrap(), format!("{pid}\n"), "{who}: pid file");
    assert_eq!(over_unix(&sock, &["PING"]), "+PONG\r\n", "{who}");
    let info = over_unix(&sock, &["CLIENT", "INFO"]);
    let path = sock.display();
    assert!(info.contains(&format!(" addr={path}:0 laddr={path}:0 ")), "{who}: {info}");
    assert!(info.contains(" flags=U "), "{who}: {info}");
    assert_eq!(cli(port, &["CONFIG", "GET", "unixsocketperm"]), "unixsocketperm\n700", "{who}");
    // Notice lines stop at loglevel warning; warnings go on.
    assert_eq!(cli(port, &["CONFIG", "SET", "loglevel", "warning"]), "OK", "{who}");
    let _ = over_unix(&sock, &["SHUTDOWN", "NOSAVE"]);
    assert!(wait_gone(&pidfile), "{who}: the pid file stays after SHUTDOWN");
    assert!(wait_gone(&sock), "{who}: the socket file stays after SHUTDOWN");
    let start = Instant::now();
    let log = loop {
        let log = std::fs::read_to_string(dir.join("l.log")).unwrap_or_default();
        if log.contains("ready to exit") || start.elapsed() > Duration::from_secs(20) {
            break log;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        assert!(is_redis_log_line(line), "{who}: not a Redis log line: {line:?}");
    }
    let has = |level: &str, text: &str| log.lines().any(|l| l.contains(&format!(" {level} {text}")));
    assert!(has("*", "Ready to accept connections"), "{who}: {log}");
    assert!(has("*", &format!("The server is now ready to accept connections at {path}")), "{who}: {log}");
    assert!(has("#", "User requested shutdown..."), "{who}: {log}");
    assert!(!log.contains("Removing the pid file."), "{who}: a notice line at loglevel warning: {log}");
    assert!(log.lines().all(|l| l.starts_with(&format!("{pid}:"))), "{who}: {log}");
    assert!(log.lines().any(|l| l.starts_with(&format!("{pid}:M ")) && l.ends_with("Ready to accept connections")));
}

fn files_args(dir: &Path) -> Vec<String> {
    let p = |name: &str| dir.join(name).display().to_string();
    vec![
        "--unixsocket".into(),
        p("s.sock"),
        "--unixsocketperm".into(),
        "700".into(),
        "--pidfile".into(),
        p("p.pid"),
        "--logfile".into(),
        p("l.log"),
    ]
}

#[test]
fn unix_socket_pid_file_and_log_as_redis() {
    let ours_dir = TempDir::new("ops-ours");
    let args = files_args(ours_dir.path());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let ours = Ours::start(ours_dir.path(), &refs);
    let pid = ours.pid();
    check("ferrokv", ours_dir.path(), pid, ours.port);
    assert!(ours.wait_exit().success());

    let redis_dir = TempDir::new("ops-redis");
    let args = files_args(redis_dir.path());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let redis = Redis::start_in(TempDir(redis_dir.path().to_path_buf()), &refs);
    let pid: u32 = redis
        .cli(&["INFO", "server"])
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .expect("process_id");
    check("redis", redis_dir.path(), pid, redis.port);
    std::mem::forget(redis_dir);
}

/// `unixsocketperm` is octal, as Redis reads it: a value that is not is a startup error.
#[test]
fn unixsocketperm_is_octal() {
    let dir = TempDir::new("ops-octal");
    for (value, why) in [
        ("800", "argument couldn't be parsed as an octal number"),
        ("1000", "argument must be between 0 and 777 inclusive"),
    ] {
        for bin in [env!("CARGO_BIN_EXE_ferrokv-server"), "redis-server"] {
            let out = std::process::Command::new(bin)
                .args(["--port", "0", "--unixsocket"])
                .arg(dir.path().join("x.sock"))
                .args(["--unixsocketperm", value])
                .output()
                .expect("start");
            assert_eq!(out.status.code(), Some(1), "{bin} {value}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim_end().lines().last(), Some(why), "{bin} {value}: {err}");
        }
    }
}

/// Redis 7.0's stock redis.conf, unmodified, starts the server (`ferrokv-server redis.conf
/// --port N`, as an operator drops it in). Debian's copy of it (installed with
/// redis-server, which `make deps` brings) differs from upstream's in four directives for
/// its service; they are put back as upstream has them.
#[test]
fn starts_from_redis_stock_config() {
    let Ok(debian) = std::fs::read_to_string("/etc/redis/redis.conf") else {
        eprintln!("skipped: /etc/redis/redis.conf is missing (apt-get install redis-server)");
        return;
    };
    let upstream: Vec<String> = debian
        .lines()
        .map(|l| match l.split_whitespace().next() {
            Some("daemonize") => "daemonize no".to_string(),
            Some("pidfile") => "pidfile /var/run/redis_6379.pid".to_string(),
            Some("logfile") => "logfile \"\"".to_string(),
            Some("dir") => "dir ./".to_string(),
            _ => l.to_string(),
        })
        .collect();
    let dir = TempDir::new("ops-stock");
    std::fs::write(dir.path().join("redis.conf"), upstream.join("\n") + "\n").unwrap();
    let log = dir.path().join("out.log");
    let spawn = |port: u16| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
            .current_dir(dir.path())
            .args(["redis.conf", "--port", &port.to_string()])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap()
    };
    let (mut child, port) = ferrokv_testkit::spawn_on_free_port("ferrokv-server", spawn, Duration::from_secs(60));
    assert_eq!(cli(port, &["CONFIG", "GET", "tcp-keepalive"]), "tcp-keepalive\n300");
    assert_eq!(cli(port, &["CONFIG", "GET", "tcp-backlog"]), "tcp-backlog\n511");
    assert_eq!(cli(port, &["CONFIG", "GET", "dir"]), format!("dir\n{}", dir.path().canonicalize().unwrap().display()));
    let _ = cli(port, &["SHUTDOWN", "NOSAVE"]);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        assert!(is_redis_log_line(line), "not a Redis log line: {line:?}");
    }
    assert!(text.contains(" * Ready to accept connections"), "{text}");
}
