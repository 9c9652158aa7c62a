//! Test support shared by the workspace's test suites: start a real redis-server
//! (Debian's 7.0, installed by `make deps`) on a free loopback port, and talk RESP to it.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod certs;

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh, empty directory under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ferrokv-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Spawn a server on a free port and wait until it answers. A port found free can be
/// taken again before the server binds it (tests run in parallel, and every client
/// connection takes an ephemeral port), so a server that exits early is started again
/// on another port, and a reply counts only when it comes from this child (INFO's
/// process_id; a NOAUTH reply while the child is alive, when it has a password) and its
/// data is loaded (`loading:0`).
pub fn spawn_on_free_port(name: &str, mut spawn: impl FnMut(u16) -> Child, timeout: Duration) -> (Child, u16) {
    for _attempt in 0..10 {
        let port = free_port();
        let mut child = spawn(port);
        let own = format!("process_id:{}", child.id());
        let start = Instant::now();
        loop {
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            // INFO answers while the data loads: wait for loading:0 too.
            let info = cli(port, &["INFO", "default"]);
            let noauth = info.starts_with("NOAUTH") && child.try_wait().ok().flatten().is_none();
            let loaded = info.lines().any(|l| l.trim() == "loading:0");
            if noauth || (loaded && info.lines().any(|l| l.trim() == own)) {
                return (child, port);
            }
            if start.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{name} did not answer on port {port} within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.wait();
    }
    panic!("{name} exited at start 10 times (see its log)");
}

/// Any server binary (a real redis-server or valkey-server of ../shared/bin, or
/// ferrokv-server) on a free loopback port with `--port N --dir DIR` then `args`, its
/// stdout to `log` (or nowhere); killed when dropped.
pub struct Spawned {
    child: Child,
    pub port: u16,
}

impl Spawned {
    pub fn start(name: &str, bin: &Path, dir: &Path, args: &[&str], log: Option<&Path>) -> Spawned {
        let spawn = |port: u16| {
            let out = match log {
                Some(p) => Stdio::from(std::fs::File::create(p).expect("log file")),
                None => Stdio::null(),
            };
            Command::new(bin)
                .args(["--port", &port.to_string()])
                .arg("--dir")
                .arg(dir)
                .args(args)
                .stdout(out)
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()))
        };
        let (child, port) = spawn_on_free_port(name, spawn, Duration::from_secs(60));
        Spawned { child, port }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SHUTDOWN NOSAVE and wait for the exit: what the AOF buffer holds is written out
    /// (under everysec Redis postpones that write while a slow fsync runs; a kill would
    /// lose it).
    pub fn shutdown(mut self) {
        let _ = cli(self.port, &["SHUTDOWN", "NOSAVE"]);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a server holds, to compare two of them: DEBUG DIGEST (never the empty digest) and
/// the function libraries in name order (FUNCTION LIST follows the server's own dict
/// order); `functions` false for servers without them (6.2).
pub fn dataset_state(port: u16, functions: bool) -> (String, String) {
    let digest = cli(port, &["DEBUG", "DIGEST"]);
    assert!(digest.len() == 40 && digest != "0".repeat(40), "digest {digest}");
    if !functions {
        return (digest, String::new());
    }
    let list = cli(port, &["FUNCTION", "LIST", "WITHCODE"]);
    let mut libs: Vec<&str> =
        list.split("library_name\n").map(|l| l.trim_end_matches('\n')).filter(|l| !l.is_empty()).collect();
    libs.sort_unstable();
    (digest, libs.join("\n--\n"))
}

/// One field of an INFO section.
pub fn info_field(port: u16, section: &str, field: &str) -> String {
    cli(port, &["INFO", section])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// Poll `f` until it holds; fail naming `what` after a minute.
pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// redis-cli has no read timeout: a server that never answers would hang the test run
/// (it did once in CI, a busy-script test taking 993 s), so a call is killed after this.
const CLI_TIMEOUT: Duration = Duration::from_secs(120);

/// Run redis-cli against `port`; its trimmed stdout.
pub fn cli(port: u16, args: &[&str]) -> String {
    let child = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli is installed (make deps)");
    let pid = child.id().to_string();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let timed_out = finished.recv_timeout(CLI_TIMEOUT) == Err(std::sync::mpsc::RecvTimeoutError::Timeout);
        if timed_out {
            let _ = Command::new("kill").args(["-9", &pid]).status();
        }
        timed_out
    });
    let out = child.wait_with_output().expect("wait for redis-cli");
    let _ = done.send(());
    if watchdog.join().unwrap_or(false) {
        panic!("redis-cli -p {port} {args:?} got no answer in {CLI_TIMEOUT:?}");
    }
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A running redis-server, killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// An empty server with no persistence, DEBUG enabled, full resyncs at once.
    pub fn start() -> Server {
        Server::start_with(None, &[])
    }

    /// A server that loads `rdb` at boot, with extra `--name value` arguments.
    pub fn start_with(rdb: Option<&Path>, extra: &[&str]) -> Server {
        let dir = TempDir::new("redis");
        if let Some(rdb) = rdb {
            std::fs::copy(rdb, dir.path().join("dump.rdb")).expect("copy rdb");
        }
        Server::start_in(dir, extra)
    }

    /// A server over an existing directory (its dump.rdb or AOF dir are loaded).
    pub fn start_in(dir: TempDir, extra: &[&str]) -> Server {
        let spawn = |port: u16| {
            let mut args: Vec<String> = ["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""]
                .iter()
                .map(|s| s.to_string())
                .collect();
            if !extra.contains(&"--appendonly") {
                args.extend(["--appendonly".into(), "no".into()]);
            }
            args.extend(["--enable-debug-command".into(), "yes".into(), "--dbfilename".into(), "dump.rdb".into()]);
            // A full resync to a replica starts at once (Redis 7.0 waits 5 s by default).
            args.extend(["--repl-diskless-sync-delay".into(), "0".into()]);
            args.extend(extra.iter().map(|s| s.to_string()));
            Command::new("redis-server")
                .args(&args)
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-server is installed (make deps)")
        };
        let (child, port) = spawn_on_free_port("redis-server", spawn, Duration::from_secs(30));
        Server { child, port, dir }
    }

    pub fn cli(&self, args: &[&str]) -> String {
        cli(self.port, args)
    }

    pub fn client(&self) -> Client {
        Client::connect(self.port)
    }

    /// Stop the server without saving, keeping its directory.
    pub fn stop(self) -> TempDir {
        self.stop_with(false)
    }

    /// Stop with SHUTDOWN NOSAVE, which writes out and fsyncs what the AOF buffer holds:
    /// with `appendfsync everysec` Redis may still hold acknowledged writes there (it
    /// postpones its write while a slow fsync runs), and a kill would lose them.
    pub fn shutdown(self) -> TempDir {
        self.stop_with(true)
    }

    fn stop_with(mut self, graceful: bool) -> TempDir {
        if graceful {
            let _ = cli(self.port, &["SHUTDOWN", "NOSAVE"]);
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(30) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = TempDir(std::mem::take(&mut self.dir.0));
        std::mem::forget(self);
        dir
    }
}

/// Send raw RESP through `redis-cli --pipe`, asserting no errors.
pub fn pipe_into(port: u16, resp: &[u8]) {
    let mut child = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child.stdin.take().expect("stdin").write_all(resp).expect("write");
    let out = child.wait_with_output().expect("redis-cli --pipe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("errors: 0"), "redis-cli --pipe reported errors: {text}");
}

/// A RESP2 client that returns each reply's raw bytes.
pub struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        Client { r: BufReader::new(s.try_clone().expect("clone")), w: s }
    }

    /// Send one command; its reply's raw RESP bytes.
    pub fn call(&mut self, argv: &[Vec<u8>]) -> Vec<u8> {
        self.w.write_all(&encode_command(argv)).expect("send");
        let mut out = Vec::new();
        read_reply(&mut self.r, &mut out);
        out
    }

    pub fn call_str(&mut self, args: &[&str]) -> Vec<u8> {
        self.call(&args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>())
    }

    /// The next reply the server sends unasked (MONITOR lines, pushes).
    pub fn read(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        read_reply(&mut self.r, &mut out);
        out
    }
}

/// A command as a RESP multibulk.
pub fn encode_command(argv: &[Vec<u8>]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

fn read_reply(r: &mut impl BufRead, out: &mut Vec<u8>) {
    let start = out.len();
    r.read_until(b'\n', out).expect("read reply");
    let line = &out[start..];
    assert!(line.len() >= 3, "short reply line {line:?}");
    let tag = line[0];
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2]).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    match tag {
        b'$' | b'=' | b'!' if n >= 0 => {
            let mut body = vec![0u8; n as usize + 2];
            r.read_exact(&mut body).expect("read bulk");
            out.extend_from_slice(&body);
        }
        b'*' | b'~' | b'>' if n > 0 => {
            for _ in 0..n {
                read_reply(r, out);
            }
        }
        b'%' | b'|' if n > 0 => {
            for _ in 0..2 * n {
                read_reply(r, out);
            }
        }
        _ => {}
    }
}

/// Split a script line into arguments: whitespace-separated, with "double quotes"
/// (C escapes \n \r \t \" \\ \xHH) and 'single quotes' as redis-cli reads them.
pub fn split_args(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let mut arg = Vec::new();
        match b[i] {
            b'"' => {
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(format!("unterminated quotes in {line:?}")),
                        Some(b'"') => break,
                        Some(b'\\') => {
                            let c = *b.get(i + 1).ok_or("dangling backslash")?;
                            i += 1;
                            match c {
                                b'n' => arg.push(b'\n'),
                                b'r' => arg.push(b'\r'),
                                b't' => arg.push(b'\t'),
                                b'x' => {
                                    let hex = line.get(i + 1..i + 3).ok_or("short \\x")?;
                                    arg.push(u8::from_str_radix(hex, 16).map_err(|e| e.to_string())?);
                                    i += 2;
                                }
                                c => arg.push(c),
                            }
                        }
                        Some(&c) => arg.push(c),
                    }
                    i += 1;
                }
                i += 1;
            }
            b'\'' => {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    arg.push(b[i]);
                    i += 1;
                }
                if i >= b.len() {
                    return Err(format!("unterminated quotes in {line:?}"));
                }
                i += 1;
            }
            _ => {
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    arg.push(b[i]);
                    i += 1;
                }
            }
        }
        out.push(arg);
    }
    Ok(out)
}
