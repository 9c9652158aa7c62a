//! Propagation against real Redis: every script in tests/aof-scripts/ runs on a real
//! redis-server 7.0 with `appendonly yes` and on our engine; the bytes each step appends to
//! the AOF's incr file must be the same, line for line. Absolute times (PXAT/PEXPIREAT
//! arguments) come from two clocks, so unix-ms numbers may differ by up to 2 s.
//!
//! Script lines are commands as redis-cli reads them. Directives:
//! - `# ...` a comment; blank lines are skipped.
//! - `sleep MS` sleeps on both sides (lazy expiry).
//! - `active-expire MS`: Redis runs its active expiry cycle for MS ms; we run ours until
//!   nothing more expires. The DELs of that step are compared as a sorted list.
//! - `lazyfree-lazy-expire yes|no` sets the option on both sides.
//!
//! `SCRIPT=name cargo test -p ferrokv --test aof_vs_redis` runs one script.

use std::path::Path;
use std::time::Duration;

use ferrokv::persist::AofFeed;
use ferrokv::{Config, Engine, Session};
use ferrokv_testkit::{split_args, Server};

fn engine_config() -> Config {
    let mut cfg = Config::default();
    cfg.limits.set_max_listpack_entries = 0;
    cfg
}

/// The incr file the manifest names (Redis 7.0's multi-part AOF).
fn incr_file(dir: &Path) -> std::path::PathBuf {
    let aof = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(aof.join("appendonly.aof.manifest")).expect("manifest");
    let name = manifest
        .lines()
        .find(|l| l.ends_with("type i"))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("an incr file in the manifest");
    aof.join(name)
}

fn lines(b: &[u8]) -> Vec<&[u8]> {
    b.split(|&c| c == b'\n').filter(|l| !l.is_empty()).collect()
}

/// A unix-ms number, or a stream ID generated from the clock (`ms-seq`): the ms and the
/// rest, which must match exactly.
fn unix_ms(l: &[u8]) -> Option<(i64, &str)> {
    let s = std::str::from_utf8(l.strip_suffix(b"\r").unwrap_or(l)).ok()?;
    let (ms, rest) = s.find('-').map_or((s, ""), |d| s.split_at(d));
    let v: i64 = ms.parse().ok()?;
    (v > 1_000_000_000_000).then_some((v, rest))
}

fn same_lines(a: &[&[u8]], b: &[&[u8]]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x == y || matches!((unix_ms(x), unix_ms(y)), (Some(p), Some(q)) if (p.0 - q.0).abs() <= 2000 && p.1 == q.1)
        })
}

/// Commands of an AOF chunk, each as its RESP text (for the sorted comparison).
fn commands(b: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for l in lines(b) {
        if l.starts_with(b"*") {
            out.push(Vec::new());
        }
        if let Some(c) = out.last_mut() {
            c.extend_from_slice(l);
            c.push(b'\n');
        }
    }
    out
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "⏎")
}

fn run_script(name: &str, text: &str) -> Vec<String> {
    let server = Server::start_with(None, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut redis = server.client();
    redis.call_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let incr = incr_file(server.dir.path());
    let mut engine = Engine::in_memory(engine_config());
    let mut sess = Session::default();
    let mut feed = AofFeed::new(false);
    let mut bad = Vec::new();
    let mut redis_len = std::fs::metadata(&incr).map(|m| m.len()).unwrap_or(0) as usize;
    for (no, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut ours = Vec::new();
        let mut sorted = false;
        if let Some(ms) = line.strip_prefix("sleep ") {
            std::thread::sleep(Duration::from_millis(ms.trim().parse().expect("sleep MS")));
            continue;
        } else if let Some(v) = line.strip_prefix("lazyfree-lazy-expire ") {
            redis.call_str(&["CONFIG", "SET", "lazyfree-lazy-expire", v.trim()]);
            engine.config_mut().lazyfree_lazy_expire = v.trim() == "yes";
            continue;
        } else if let Some(ms) = line.strip_prefix("active-expire ") {
            redis.call_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
            std::thread::sleep(Duration::from_millis(ms.trim().parse().expect("active-expire MS")));
            redis.call_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
            for _ in 0..1000 {
                let now = engine.now_ms();
                let (rep, units) = engine.active_expire_cycle_collect();
                for unit in units {
                    feed.unit(&mut ours, &unit, now);
                }
                if rep.expired == 0 {
                    break;
                }
            }
            sorted = true;
        } else {
            let argv = split_args(line).unwrap_or_else(|e| panic!("{name}:{}: {e}", no + 1));
            redis.call(&argv);
            engine.call(&mut sess, &argv);
        }
        let now = engine.now_ms();
        let ops = engine.flush_collect();
        feed.unit(&mut ours, &ops, now);
        let all = std::fs::read(&incr).expect("read incr AOF");
        let theirs = all.get(redis_len..).unwrap_or_default().to_vec();
        redis_len = all.len();
        let ok = if sorted {
            let (mut a, mut b) = (commands(&ours), commands(&theirs));
            a.sort();
            b.sort();
            a == b
        } else {
            same_lines(&lines(&ours), &lines(&theirs))
        };
        if !ok {
            bad.push(format!("{name}:{}: {line}\n    redis: {}\n    ours:  {}", no + 1, show(&theirs), show(&ours)));
        }
    }
    bad
}

#[test]
fn aof_bytes_match_real_redis() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/aof-scripts");
    let only = std::env::var("SCRIPT").ok();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/aof-scripts")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "redis"))
        .collect();
    files.sort();
    let mut bad = Vec::new();
    let mut ran = 0;
    for f in &files {
        let name = f.file_stem().and_then(|s| s.to_str()).unwrap_or("?").to_string();
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        bad.extend(run_script(&name, &std::fs::read_to_string(f).expect("read script")));
        ran += 1;
    }
    assert!(ran > 0, "no aof script ran (SCRIPT={only:?})");
    assert!(bad.is_empty(), "{} steps differ from Redis 7.0's AOF:\n{}", bad.len(), bad.join("\n"));
}
