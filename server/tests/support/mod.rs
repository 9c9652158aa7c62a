//! Shared by the pub/sub and blocking tests: our server, and scripted sessions over
//! several connections whose replies are compared with a real redis-server 7.0.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrokv_testkit::{cli, encode_command, spawn_on_free_port, Spawned};

/// A running ferrokv-server, killed when dropped.
pub struct Ours {
    child: Option<Child>,
    pub port: u16,
}

impl Ours {
    /// Start the binary on a free port with no save points and data (and its log,
    /// `server.log`) in `dir`; wait until it answers (testkit::spawn_on_free_port). A
    /// full resync starts at once (`repl-diskless-sync-delay 0`) unless `extra` says
    /// otherwise.
    pub fn start(dir: &Path, extra: &[&str]) -> Ours {
        let spawn = |port: u16| {
            let log = std::fs::File::create(dir.join("server.log")).expect("log file");
            Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
                .args(["--port", &port.to_string(), "--save", "", "--enable-debug-command", "yes"])
                .args(["--repl-diskless-sync-delay", "0"])
                .arg("--dir")
                .arg(dir)
                .args(extra)
                .stdout(Stdio::from(log))
                .spawn()
                .expect("start ferrokv-server")
        };
        let (child, port) = spawn_on_free_port("ferrokv-server", spawn, Duration::from_secs(60));
        Ours { child: Some(child), port }
    }

    pub fn cli(&self, args: &[&str]) -> String {
        cli(self.port, args)
    }

    /// One field of INFO everything.
    pub fn info(&self, field: &str) -> String {
        let text = self.cli(&["INFO", "everything"]);
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
            .unwrap_or_default()
    }

    pub fn redis(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap().get_connection().unwrap()
    }

    pub fn kill9(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Wait for the process to exit by itself (after SHUTDOWN or SIGTERM).
    pub fn wait_exit(mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().unwrap();
        let start = Instant::now();
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return st;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Send `input` in one write and collect everything the server sends back until it
/// closes the connection (`<closed>` is appended) or is quiet for a while.
pub fn raw_session(port: u16, input: &[u8]) -> Vec<u8> {
    raw_session_quiet_after(port, input, Duration::from_millis(300))
}

/// [`raw_session`] for a reply that ends with the server closing the connection: quiet
/// for `quiet` only ends it early on a loaded machine.
pub fn raw_session_quiet_after(port: u16, input: &[u8], quiet: Duration) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(input).unwrap();
    s.set_read_timeout(Some(quiet)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => {
                out.extend_from_slice(b"<closed>");
                return out;
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return out,
        }
    }
}

/// Commands as RESP multibulks.
pub fn resp(cmds: &[&[&str]]) -> Vec<u8> {
    let mut v = Vec::new();
    for c in cmds {
        let argv: Vec<Vec<u8>> = c.iter().map(|a| a.as_bytes().to_vec()).collect();
        v.extend(encode_command(&argv));
    }
    v
}

/// [`resp`] for commands built at run time.
pub fn resp_vecs(cmds: &[Vec<&str>]) -> Vec<u8> {
    resp(&cmds.iter().map(Vec::as_slice).collect::<Vec<_>>())
}

/// Client ids differ between servers: blank HELLO's `id` field.
pub fn mask_ids(out: &[u8]) -> Vec<u8> {
    let mut v = out.to_vec();
    let tag = b"$2\r\nid\r\n:";
    let mut i = 0;
    while let Some(p) = v[i..].windows(tag.len()).position(|w| w == tag) {
        let start = i + p + tag.len();
        let end = start + v[start..].iter().position(|&b| b == b'\r').unwrap_or(0);
        v.splice(start..end, *b"N");
        i = start;
    }
    v
}

/// One step of a session over numbered connections.
pub enum Step {
    /// Send commands on a connection (without reading).
    Send(usize, Vec<Vec<&'static str>>),
    /// Read exactly this many replies (or pushed messages) from a connection.
    Recv(usize, usize),
    /// Read replies until one contains this text (a marker published last).
    RecvUntil(usize, &'static str),
    /// Let time pass (for a TTL to run out; never a timing assertion).
    Pause(u64),
    /// Wait until INFO reports this many blocked clients.
    Blocked(usize),
    /// Wait until PUBSUB NUMSUB of the channel reaches this count.
    Subscribers(&'static str, i64),
}

pub fn send(conn: usize, cmds: &[&[&'static str]]) -> Step {
    Step::Send(conn, cmds.iter().map(|c| c.to_vec()).collect())
}

/// The end of the RESP value starting at `pos`, if complete.
pub fn value_end(b: &[u8], pos: usize) -> Option<usize> {
    let line_end = pos + b.get(pos..)?.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(&b[pos + 1..line_end]).ok()?;
    let next = line_end + 2;
    match b.get(pos)? {
        b'$' | b'=' | b'!' => {
            let n: i64 = head.parse().ok()?;
            if n < 0 {
                return Some(next);
            }
            let end = next + n as usize + 2;
            (b.len() >= end).then_some(end)
        }
        b'*' | b'>' | b'~' | b'%' | b'|' => {
            let n: i64 = head.parse().ok()?;
            let items = if matches!(b[pos], b'%' | b'|') { n * 2 } else { n };
            let mut p = next;
            for _ in 0..items.max(0) {
                p = value_end(b, p)?;
            }
            Some(p)
        }
        _ => Some(next),
    }
}

/// Run a session against `port`; the bytes of each Recv step, in order.
pub fn run_session(port: u16, steps: &[Step]) -> Vec<Vec<u8>> {
    let mut conns: Vec<Option<(TcpStream, Vec<u8>)>> = Vec::new();
    let mut out = Vec::new();
    let mut control = ferrokv_testkit::Client::connect(port);
    for step in steps {
        match step {
            Step::Send(i, cmds) => {
                let c = conn(&mut conns, port, *i);
                let mut bytes = Vec::new();
                for cmd in cmds {
                    bytes.extend(encode_command(&cmd.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>()));
                }
                c.0.write_all(&bytes).expect("send");
            }
            Step::Recv(i, n) => {
                let c = conn(&mut conns, port, *i);
                out.push(recv(c, *n));
            }
            Step::RecvUntil(i, needle) => {
                let c = conn(&mut conns, port, *i);
                let mut all = Vec::new();
                loop {
                    let one = recv(c, 1);
                    let done = one.windows(needle.len()).any(|w| w == needle.as_bytes());
                    all.extend(one);
                    if done {
                        break;
                    }
                }
                out.push(all);
            }
            Step::Pause(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Step::Blocked(n) => {
                let want = format!("blocked_clients:{n}\r\n");
                wait_until(|| String::from_utf8_lossy(&control.call_str(&["INFO", "clients"])).contains(&want));
            }
            Step::Subscribers(ch, n) => {
                let want = format!(":{n}\r\n");
                wait_until(|| String::from_utf8_lossy(&control.call_str(&["PUBSUB", "NUMSUB", ch])).ends_with(&want));
            }
        }
    }
    out
}

fn conn(conns: &mut Vec<Option<(TcpStream, Vec<u8>)>>, port: u16, i: usize) -> &mut (TcpStream, Vec<u8>) {
    while conns.len() <= i {
        conns.push(None);
    }
    conns[i].get_or_insert_with(|| {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
        (s, Vec::new())
    })
}

/// Read `n` complete replies (generous deadline: the machine may be loaded).
fn recv(c: &mut (TcpStream, Vec<u8>), n: usize) -> Vec<u8> {
    let start = Instant::now();
    loop {
        let mut pos = 0;
        let mut got = 0;
        while got < n {
            match value_end(&c.1, pos) {
                Some(p) => {
                    pos = p;
                    got += 1;
                }
                None => break,
            }
        }
        if got == n {
            let rest = c.1.split_off(pos);
            return std::mem::replace(&mut c.1, rest);
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "wanted {n} replies, have {got}: {:?}",
            String::from_utf8_lossy(&c.1)
        );
        let mut buf = [0u8; 65536];
        match c.0.read(&mut buf) {
            Ok(0) => panic!("connection closed; have {:?}", String::from_utf8_lossy(&c.1)),
            Ok(k) => c.1.extend_from_slice(&buf[..k]),
            Err(_) => {}
        }
    }
}

/// An INFO field's value (`INFO everything`, "" when absent) without its timings
/// (`usec=`, `usec_per_call=`), so two servers' counters compare.
pub fn info_counts(port: u16, field: &str) -> String {
    let text = cli(port, &["INFO", "everything"]);
    let value = text.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')).unwrap_or("");
    value.trim().split(',').filter(|p| !p.starts_with("usec")).collect::<Vec<_>>().join(",")
}

pub fn wait_until(mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(20), "condition not reached");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Replace the digits after each `tag` with N (client ids differ between servers).
pub fn mask(v: &[u8], tag: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i..].starts_with(tag) {
            out.extend_from_slice(tag);
            i += tag.len();
            let digits = v[i..].iter().take_while(|b| b.is_ascii_digit()).count();
            if digits > 0 {
                out.push(b'N');
            }
            i += digits;
        } else {
            out.push(v[i]);
            i += 1;
        }
    }
    out
}

/// Run each named session on both servers (FLUSHALL first) and list the differences.
pub fn compare(redis: u16, ours: u16, sessions: &[(&str, Vec<Step>)]) -> Vec<String> {
    let mut failures = Vec::new();
    for (name, steps) in sessions {
        cli(redis, &["FLUSHALL"]);
        cli(ours, &["FLUSHALL"]);
        let masked = |v: Vec<Vec<u8>>| v.iter().map(|x| mask(x, b"$2\r\nid\r\n:")).collect::<Vec<_>>();
        let want = masked(run_session(redis, steps));
        let got = masked(run_session(ours, steps));
        if want != got {
            let show = |v: &Vec<Vec<u8>>| v.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect::<Vec<_>>();
            failures.push(format!("{name}:\n  redis: {:?}\n  ours:  {:?}", show(&want), show(&got)));
        }
    }
    failures
}

/// A raw connection: send commands, read whole replies.
pub struct Conn(TcpStream, Vec<u8>);

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
        Conn(s, Vec::new())
    }

    pub fn send(&mut self, args: &[&str]) {
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.0.write_all(&encode_command(&argv)).expect("send");
    }

    pub fn read(&mut self) -> Vec<u8> {
        let mut pair = (self.0.try_clone().expect("clone"), std::mem::take(&mut self.1));
        let r = recv(&mut pair, 1);
        self.1 = pair.1;
        r
    }

    pub fn call(&mut self, args: &[&str]) -> Vec<u8> {
        self.send(args);
        self.read()
    }
}

/// A binary of ../shared/bin (FERROKV_SHARED overrides the directory), if present.
pub fn shared_bin(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("FERROKV_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    let p = dir.join("bin").join(name);
    p.exists().then_some(p)
}

/// A real server of ../shared/bin over `dir` (no save points, DEBUG on: Redis 6.2 has no
/// switch for it), killed when dropped.
pub fn start_shared(bin: &Path, dir: &Path, extra: &[&str]) -> Spawned {
    let mut args = vec!["--bind", "127.0.0.1", "--save", ""];
    if !bin.to_string_lossy().contains("6.2.") {
        args.extend(["--enable-debug-command", "yes"]);
    }
    args.extend(extra);
    Spawned::start("shared redis-server", bin, dir, &args, None)
}

/// A real server of ../shared/bin (`bin`, started with `real_args`) and ours standing in
/// for it (`--redis-version version`), each over its own directory, handed to `check` as
/// their ports; skipped with a message when ../shared/bin lacks the binary.
pub fn with_shared_and_ours(bin: &str, real_args: &[&str], version: &str, check: impl FnOnce(u16, u16)) {
    let Some(path) = shared_bin(bin) else {
        eprintln!("skipped: ../shared/bin/{bin} is absent");
        return;
    };
    let (d1, d2) = (ferrokv_testkit::TempDir::new("shared-real"), ferrokv_testkit::TempDir::new("shared-ours"));
    let real = start_shared(&path, d1.path(), real_args);
    let ours = Ours::start(d2.path(), &["--redis-version", version]);
    check(real.port, ours.port);
}

/// Every reply of `session` (and those after it) equal, each shown (cut short) with its
/// command when not.
pub fn assert_same_replies(session: &[&[&str]], theirs: &[Vec<u8>], mine: &[Vec<u8>], tag: &str) {
    assert_eq!(theirs.len(), mine.len(), "{tag}: reply count");
    let shown = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(600)]).into_owned();
    for (i, (t, m)) in theirs.iter().zip(mine).enumerate() {
        let what = session.get(i).map(|c| c.join(" ")).unwrap_or_else(|| format!("reply {i} after the session"));
        let what: String = what.chars().take(120).collect();
        assert!(t == m, "{tag}: #{i} {what}\n  theirs: {}\n  ours:   {}", shown(t), shown(m));
    }
}
