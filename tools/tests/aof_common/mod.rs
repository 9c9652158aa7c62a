//! AOFs written by a real redis-server 7.0, and helpers to read them back with aoftool.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrokv_testkit::{Server, TempDir};
use ferrokv_tools::aof::dump::{self, Format};
use ferrokv_tools::out::Out;
use serde_json::Value;

pub type Argv = Vec<Vec<u8>>;

pub fn args(s: &[&str]) -> Argv {
    s.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// A server with appendonly on and `extra` settings, once the rewrite that writes the
/// first base (at startup on an empty directory) is over.
pub fn aof_server(extra: &[&str]) -> Server {
    let mut all = vec!["--appendonly", "yes"];
    all.extend_from_slice(extra);
    let s = Server::start_with(None, &all);
    wait_rewrite_done(&s);
    s
}

fn wait_rewrite_done(s: &Server) {
    let start = Instant::now();
    loop {
        let info = s.cli(&["INFO", "persistence"]);
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the AOF rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Send commands, asserting none fails.
pub fn send(s: &Server, cmds: &[Argv]) {
    let mut c = s.client();
    for argv in cmds {
        let reply = c.call(argv);
        assert!(!reply.starts_with(b"-"), "{argv:?}: {}", String::from_utf8_lossy(&reply));
    }
}

/// BGREWRITEAOF and wait for it to finish.
pub fn rewrite(s: &Server) {
    let before = s.cli(&["INFO", "persistence"]);
    let count = |info: &str| info.lines().find_map(|l| l.strip_prefix("aof_rewrites:")).map(|v| v.trim().to_string());
    assert!(s.cli(&["BGREWRITEAOF"]).contains("rewriting"));
    let start = Instant::now();
    loop {
        let info = s.cli(&["INFO", "persistence"]);
        let done = info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0");
        if done && count(&info) != count(&before) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "BGREWRITEAOF did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stop the server (SHUTDOWN NOSAVE, so its AOF holds every acknowledged write) and
/// return its directory and the AOF directory in it.
pub fn stop(s: Server) -> (TempDir, PathBuf) {
    let dir = s.shutdown();
    let aof = dir.path().join("appendonlydir");
    (dir, aof)
}

/// Every line of `aoftool dump --format jsonl`.
pub fn dump_jsonl(path: &Path) -> Vec<Value> {
    let mut buf = Vec::new();
    {
        let mut out = Out::new(&mut buf);
        let problem = dump::run(path, Format::Jsonl, &mut out).expect("dump runs");
        out.finish().expect("flush");
        assert!(problem.is_none(), "dump: {}", problem.map(|p| p.to_string()).unwrap_or_default());
    }
    buf.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).expect("jsonl")).collect()
}

pub fn argv_of(v: &Value) -> Argv {
    v["argv"].as_array().expect("argv").iter().map(|a| a.as_str().expect("utf-8 args").as_bytes().to_vec()).collect()
}

/// Commands of one file, SELECTs left out, names upper-cased.
pub fn commands_of(lines: &[Value], file: &str) -> Vec<Argv> {
    lines
        .iter()
        .filter(|l| l["file"] == file && l.get("argv").is_some())
        .map(argv_of)
        .filter(|a| !a[0].eq_ignore_ascii_case(b"select"))
        .map(|mut a| {
            a[0].make_ascii_uppercase();
            a
        })
        .collect()
}

/// Copy the directory tree `from` to a new temp dir (for a server to start in).
pub fn copy_tree(from: &Path, tag: &str) -> TempDir {
    let to = TempDir::new(tag);
    copy_into(from, to.path());
    to
}

fn copy_into(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        let dest = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&dest).expect("mkdir");
            copy_into(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy");
        }
    }
}

/// The incr file names of an AOF directory's manifest, in order.
pub fn incr_files(aof: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(aof.join("appendonly.aof.manifest")).expect("manifest");
    text.lines()
        .filter(|l| l.ends_with("type i"))
        .map(|l| l.split_whitespace().nth(1).expect("name").to_string())
        .collect()
}
