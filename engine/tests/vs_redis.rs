//! Replies against real Redis: every script in tests/scripts/ runs, line by line, on a real
//! redis-server 7.0 and on our engine; each reply must be the same RESP2 bytes.
//!
//! Script lines are commands as redis-cli reads them. Directives:
//! - `# ...` a comment; blank lines are skipped.
//! - `sleep MS` sleeps on both sides (for expiry).
//! - `!sorted CMD` compares an array reply as a sorted list (hashtable order is Redis's own).
//! - `!len CMD` compares the reply's type and element count only (random picks).
//! - `!near N CMD` compares integer replies within ±N (TTLs; negative replies exactly).
//! - `!scan CMD` compares a SCAN-like reply `[cursor, keys]`: the cursor exactly (use it
//!   when the scan ends in one call, cursor 0) and the keys as a sorted list.
//!
//! `SCRIPT=name cargo test -p ferrokv --test vs_redis` runs one script.

use ferrokv::{Config, Engine, Session};
use ferrokv_testkit::{split_args, Server};

fn engine_config() -> Config {
    let mut cfg = Config::default();
    // Redis 7.0 has no listpack sets.
    cfg.limits.set_max_listpack_entries = 0;
    cfg
}

/// Top-level elements of a RESP reply (array, set, or map: keys and values in turn), as
/// raw bytes each.
fn elements(reply: &[u8]) -> Option<Vec<Vec<u8>>> {
    let per = match reply.first() {
        Some(b'*') | Some(b'~') => 1,
        Some(b'%') => 2,
        _ => return None,
    };
    let mut r = reply;
    let nl = r.iter().position(|&c| c == b'\n')?;
    let n: usize = std::str::from_utf8(&r[1..nl - 1]).ok()?.parse::<usize>().ok()? * per;
    r = &r[nl + 1..];
    let mut out = Vec::new();
    for _ in 0..n {
        let len = one_len(r)?;
        out.push(r[..len].to_vec());
        r = &r[len..];
    }
    Some(out)
}

/// Length in bytes of the first RESP value in `r`.
fn one_len(r: &[u8]) -> Option<usize> {
    let nl = r.iter().position(|&c| c == b'\n')?;
    let n: i64 = std::str::from_utf8(&r[1..nl - 1]).ok()?.parse().unwrap_or(0);
    Some(match r[0] {
        b'$' | b'=' | b'!' if n >= 0 => nl + 1 + n as usize + 2,
        b'*' | b'~' | b'%' if n > 0 => {
            let n = if r[0] == b'%' { 2 * n } else { n };
            let mut at = nl + 1;
            for _ in 0..n {
                at += one_len(&r[at..])?;
            }
            at
        }
        _ => nl + 1,
    })
}

fn int_of(reply: &[u8]) -> Option<i64> {
    (reply.first() == Some(&b':')).then(|| std::str::from_utf8(&reply[1..reply.len() - 2]).ok()?.parse().ok())?
}

enum Check {
    Exact,
    Sorted,
    Len,
    Near(i64),
    Scan,
}

fn same(check: &Check, ours: &[u8], theirs: &[u8]) -> bool {
    match check {
        Check::Exact => ours == theirs,
        Check::Sorted => match (elements(ours), elements(theirs)) {
            (Some(mut a), Some(mut b)) => {
                a.sort();
                b.sort();
                a == b
            }
            _ => ours == theirs,
        },
        Check::Len => match (elements(ours), elements(theirs)) {
            (Some(a), Some(b)) => a.len() == b.len(),
            _ => ours.first() == theirs.first(),
        },
        Check::Near(n) => match (int_of(ours), int_of(theirs)) {
            // -1 (no TTL) and -2 (no key) must match exactly.
            (Some(a), Some(b)) if a < 0 || b < 0 => a == b,
            (Some(a), Some(b)) => (a - b).abs() <= *n,
            _ => ours == theirs,
        },
        Check::Scan => match (elements(ours), elements(theirs)) {
            (Some(a), Some(b)) if a.len() == 2 && b.len() == 2 => a[0] == b[0] && same(&Check::Sorted, &a[1], &b[1]),
            _ => ours == theirs,
        },
    }
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "⏎")
}

/// Run one script; the mismatches, described.
fn run_script(name: &str, text: &str, resp3: bool) -> Vec<String> {
    let server = Server::start();
    let mut redis = server.client();
    if resp3 {
        redis.call_str(&["HELLO", "3"]);
    }
    let mut engine = Engine::in_memory(engine_config());
    let mut sess = Session::default();
    let mut bad = Vec::new();
    for (no, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(ms) = line.strip_prefix("sleep ") {
            std::thread::sleep(std::time::Duration::from_millis(ms.trim().parse().expect("sleep MS")));
            continue;
        }
        let (check, cmd) = if let Some(rest) = line.strip_prefix("!sorted ") {
            (Check::Sorted, rest)
        } else if let Some(rest) = line.strip_prefix("!len ") {
            (Check::Len, rest)
        } else if let Some(rest) = line.strip_prefix("!scan ") {
            (Check::Scan, rest)
        } else if let Some(rest) = line.strip_prefix("!near ") {
            let (n, rest) = rest.split_once(' ').expect("!near N CMD");
            (Check::Near(n.parse().expect("!near N")), rest)
        } else {
            (Check::Exact, line)
        };
        let argv = split_args(cmd).unwrap_or_else(|e| panic!("{name}:{}: {e}", no + 1));
        let theirs = redis.call(&argv);
        let mut ours = Vec::new();
        engine.execute(&mut sess, &argv).write_resp(&mut ours, resp3);
        if !same(&check, &ours, &theirs) {
            bad.push(format!("{name}:{}: {cmd}\n    redis: {}\n    ours:  {}", no + 1, show(&theirs), show(&ours)));
        }
    }
    bad
}

#[test]
fn replies_match_real_redis() {
    run_all(false);
}

/// The same scripts over RESP3 (HELLO 3): maps, sets, doubles and nulls as Redis 7.0 sends them.
#[test]
fn resp3_replies_match_real_redis() {
    run_all(true);
}

fn run_all(resp3: bool) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts");
    let only = std::env::var("SCRIPT").ok();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/scripts")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "redis"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scripts in {dir:?}");
    let mut bad = Vec::new();
    let mut ran = 0;
    for f in &files {
        let name = f.file_stem().and_then(|s| s.to_str()).unwrap_or("?").to_string();
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read script");
        bad.extend(run_script(&name, &text, resp3));
        ran += 1;
    }
    assert!(ran > 0, "SCRIPT={only:?} matched no script");
    let proto = if resp3 { "RESP3" } else { "RESP2" };
    assert!(bad.is_empty(), "{} {proto} replies differ from Redis 7.0:\n{}", bad.len(), bad.join("\n"));
}
