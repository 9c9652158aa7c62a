//! `rdbtool verify` gives the verdict of the real server's loader: a file the server
//! refuses to load is invalid, a file it loads is valid (what it tolerates is at most a
//! warning). For each server at hand, a file with every type and encoding is written by it
//! during the test, then mutated (a bit flipped or a byte replaced with the checksum
//! recomputed or zeroed, as Redis skips a zero checksum; a truncation; a flip under the old
//! checksum), and each mutant is loaded by that server and verified here.
//!
//! Debian's redis-server 7.0 runs in `make test` (a few hundred mutants);
//! ../shared/bin's Redis 6.2.16, 7.4.1 and Valkey 8.0.1 join under `make compat`, where
//! `FERROKV_VERDICTS=N` sets the mutants per server (2,500 there).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::shared_dir;
use ferrokv::format::crc::crc64;
use ferrokv_testkit::{spawn_on_free_port, Client, TempDir};
use ferrokv_tools::verify::{walk, Depth};

/// A server binary and what its seed file holds.
struct Version {
    name: &'static str,
    bin: PathBuf,
    functions: bool,
    field_ttls: bool,
}

fn argv(a: &[&str]) -> Vec<Vec<u8>> {
    a.iter().map(|x| x.as_bytes().to_vec()).collect()
}

/// The seed: every type and encoding the version has, SAVEd by the server itself.
fn seed(v: &Version) -> Vec<u8> {
    let dir = TempDir::new("verdict-seed");
    let spawn = |port: u16| -> Child {
        Command::new(&v.bin)
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--dbfilename", "dump.rdb"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the server")
    };
    let (mut child, port) = spawn_on_free_port(v.name, spawn, Duration::from_secs(30));
    let mut c = Client::connect(port);
    let mut run = |a: Vec<Vec<u8>>| {
        let r = c.call(&a);
        assert!(!r.starts_with(b"-"), "{}: {:?} -> {}", v.name, a, String::from_utf8_lossy(&r));
    };
    run(argv(&["SET", "int", "12345"]));
    run(argv(&["SET", "emb", "hello"]));
    run(argv(&["SET", "raw", &"r0123456789".repeat(10)]));
    run(argv(&["SET", "lzf", &"a".repeat(300)]));
    run(argv(&["SET", "ttl", "v", "PX", "100000000"]));
    run(argv(&["RPUSH", "list", "a", "b", "1", "2"]));
    let mut big = argv(&["RPUSH", "biglist"]);
    big.extend((0..400).map(|i| format!("item-{i}").into_bytes()));
    run(big);
    run(argv(&["SADD", "ints", "1", "2", "300", "70000"]));
    run(argv(&["SADD", "strs", "a", "b", "c"]));
    let mut bigset = argv(&["SADD", "bigset"]);
    bigset.extend((0..200).map(|i| format!("m{i}").into_bytes()));
    run(bigset);
    run(argv(&["ZADD", "zset", "1", "a", "2.5", "b", "-3", "c"]));
    let mut bigz = argv(&["ZADD", "bigzset"]);
    for i in 0..200 {
        bigz.push(format!("{i}.5").into_bytes());
        bigz.push(format!("z{i}").into_bytes());
    }
    run(bigz);
    run(argv(&["HSET", "hash", "f1", "v1", "f2", "2", "f3", "vvv"]));
    let mut bigh = argv(&["HSET", "bighash"]);
    for i in 0..600 {
        bigh.push(format!("f{i}").into_bytes());
        bigh.push(format!("v{i}").into_bytes());
    }
    run(bigh);
    for i in 0..20 {
        run(argv(&["XADD", "stream", &format!("{}-1", i + 1), "f", &format!("v{i}")]));
    }
    run(argv(&["XGROUP", "CREATE", "stream", "g", "0"]));
    run(argv(&["XREADGROUP", "GROUP", "g", "c1", "COUNT", "5", "STREAMS", "stream", ">"]));
    if v.functions {
        run(argv(&["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('f', function(k, a) return 1 end)"]));
    }
    if v.field_ttls {
        run(argv(&["HSET", "hfe", "a", "1", "b", "2", "c", "3"]));
        run(argv(&["HPEXPIRE", "hfe", "100000000", "FIELDS", "2", "a", "b"]));
    }
    run(argv(&["SAVE"]));
    let _ = child.kill();
    let _ = child.wait();
    std::fs::read(dir.path().join("dump.rdb")).expect("the server's dump")
}

/// Whether the server loads `file`: it says it is ready, or it exits (or crashes) first.
/// `log_lines` gets the reason, `full_log` the server's whole log.
fn server_loads(bin: &Path, file: &[u8], log_lines: &mut String) -> bool {
    server_loads_logged(bin, file, log_lines, &mut String::new())
}

fn server_loads_logged(bin: &Path, file: &[u8], log_lines: &mut String, full_log: &mut String) -> bool {
    let dir = TempDir::new("verdict-load");
    std::fs::write(dir.path().join("dump.rdb"), file).expect("write");
    let log = dir.path().join("log");
    let sock = dir.path().join("sock");
    let mut child = Command::new(bin)
        .args(["--port", "0", "--save", "", "--appendonly", "no", "--dbfilename", "dump.rdb"])
        .arg("--unixsocket")
        .arg(&sock)
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let start = Instant::now();
    let loaded = loop {
        let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
        if text.to_ascii_lowercase().contains("ready to accept connections") {
            break true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            // Read again: the log may have grown since the exit was seen.
            let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
            full_log.clone_from(&text);
            let lines: Vec<&str> = text.lines().collect();
            // The reason is where loading stopped: just before the crash report or the exit.
            let at = lines
                .iter()
                .position(|l| {
                    ["Internal error", "Short read", "BUG REPORT", "Fatal", "Wrong", "Can't handle", "Unexpected"]
                        .iter()
                        .any(|w| l.contains(w))
                })
                .unwrap_or(lines.len().saturating_sub(2));
            *log_lines = lines[at..lines.len().min(at + 2)]
                .iter()
                .map(|l| l.splitn(4, ' ').nth(3).unwrap_or(l))
                .collect::<Vec<_>>()
                .join(" | ");
            break false;
        }
        if start.elapsed() > Duration::from_secs(20) {
            *log_lines = "timed out".into();
            break false;
        }
        std::thread::sleep(Duration::from_millis(3));
    };
    let _ = child.kill();
    let _ = child.wait();
    loaded
}

/// A mutant of `seed` and what was done to it.
fn mutate(seed: &[u8], rng: &mut fastrand::Rng) -> (Vec<u8>, String) {
    let mut f = seed.to_vec();
    let n = f.len();
    let body = 9..n - 8;
    let fix_crc = |f: &mut Vec<u8>| {
        let l = f.len();
        let c = crc64(&f[..l - 8]);
        f[l - 8..].copy_from_slice(&c.to_le_bytes());
    };
    match rng.u32(0..10) {
        0..=3 => {
            let (at, bit) = (rng.usize(body), rng.u32(0..8));
            f[at] ^= 1 << bit;
            fix_crc(&mut f);
            (f, format!("bit {bit} of byte {at} flipped, checksum recomputed"))
        }
        4..=5 => {
            let (at, bit) = (rng.usize(body), rng.u32(0..8));
            f[at] ^= 1 << bit;
            f[n - 8..].fill(0);
            (f, format!("bit {bit} of byte {at} flipped, checksum zeroed"))
        }
        6..=7 => {
            let (at, b) = (rng.usize(body), rng.u8(..));
            f[at] = b;
            fix_crc(&mut f);
            (f, format!("byte {at} set to {b:#04x}, checksum recomputed"))
        }
        8 => {
            let at = rng.usize(1..n);
            f.truncate(at);
            (f, format!("truncated to {at} bytes"))
        }
        _ => {
            let at = rng.usize(body);
            f[at] ^= 0x10;
            (f, format!("byte {at} changed under the old checksum"))
        }
    }
}

fn versions() -> Vec<Version> {
    let bin = shared_dir().join("bin");
    let mut out = vec![Version { name: "redis-7.0", bin: "redis-server".into(), functions: true, field_ttls: false }];
    for (name, file, functions, field_ttls) in [
        ("redis-6.2", "redis-server-6.2.16", false, false),
        ("redis-7.4", "redis-server-7.4.1", true, true),
        ("valkey-8.0", "valkey-server-8.0.1", true, false),
    ] {
        let p = bin.join(file);
        if p.exists() {
            out.push(Version { name, bin: p, functions, field_ttls });
        }
    }
    out
}

fn disagreements(v: &Version, count: usize) -> Vec<String> {
    let seed = seed(v);
    let mut log = String::new();
    assert!(server_loads(&v.bin, &seed, &mut log), "{}: its own dump does not load: {log}", v.name);
    assert!(walk(&seed, Depth::Deep, 0).is_ok(), "{}: its own dump does not verify", v.name);
    let mut rng = fastrand::Rng::with_seed(0x5eed ^ v.name.len() as u64);
    let mut out = Vec::new();
    for i in 0..count {
        let (file, what) = mutate(&seed, &mut rng);
        let ours = walk(&file, Depth::Deep, 0);
        let (mut log, mut full_log) = (String::new(), String::new());
        let theirs = server_loads_logged(&v.bin, &file, &mut log, &mut full_log);
        if ours.is_ok() != theirs {
            let ours = match &ours {
                Ok(r) => format!("valid ({} warnings)", r.warnings_total),
                Err((_, e)) => format!("invalid: {e}"),
            };
            // A verdict the server does not repeat (a crash that depends on its hash seed
            // or memory layout) is reported as such.
            let again = (0..4).filter(|_| server_loads(&v.bin, &file, &mut String::new())).count();
            let theirs = if theirs { "loads".to_string() } else { format!("refuses: {log}") };
            let keep = keep_dir().join(format!("{}-{i}", v.name));
            let _ = std::fs::create_dir_all(&keep);
            let _ = std::fs::write(keep.join("mutant.rdb"), &file);
            let _ = std::fs::write(keep.join("seed.rdb"), &seed);
            let _ = std::fs::write(keep.join("server.log"), &full_log);
            out.push(format!(
                "{} mutant {i} ({what}): verify says {ours}; the server {theirs} (loaded {again} of 4 times more; \
                 mutant, seed and server log kept in {})",
                v.name,
                keep.display()
            ));
        }
    }
    out
}

/// A key's type byte turned into one its writer does not know (a hash-listpack made a
/// set-listpack, RDB 11's, in Redis 7.0's RDB 10 file): Redis 7.0 refuses the file
/// ("Unknown RDB encoding type 20"), so verify does; Redis 7.4 reads it. Found by the
/// random AOF mutants (a base RDB's flipped bit).
#[test]
fn a_type_newer_than_the_files_version_is_refused_as_its_writer_refuses_it() {
    use ferrokv::format::rdb::{RdbReader, Record, ValueType};
    let v = versions().remove(0);
    let mut file = seed(&v);
    let at = RdbReader::new(&file)
        .expect("header")
        .find_map(|r| match r.expect("the server's own file") {
            Record::Key(k) if k.value.vtype == ValueType::HashListpack && k.expire_ms.is_none() => Some(k.offset),
            _ => None,
        })
        .expect("a listpack hash");
    assert_eq!(file[at], 16, "the record starts with its type byte");
    file[at] = 20;
    let n = file.len();
    let crc = crc64(&file[..n - 8]);
    file[n - 8..].copy_from_slice(&crc.to_le_bytes());
    let e = walk(&file, Depth::Deep, 0).err().map(|(_, e)| e.to_string()).unwrap_or_default();
    assert!(e.contains("in an RDB 10 file"), "verify: {e:?}");
    let mut log = String::new();
    assert!(!server_loads(&v.bin, &file, &mut log), "Redis 7.0 loads it");
    assert!(log.contains("Unknown RDB encoding type 20"), "{log}");
    if let Some(v74) = versions().into_iter().find(|v| v.name == "redis-7.4") {
        assert!(server_loads(&v74.bin, &file, &mut log), "Redis 7.4.1 refuses it: {log}");
    }
    // The loader is the writer's, named by its version field, not the header alone: Valkey
    // 8.0's file (RDB 11, `valkey-ver 8.0.1`) with its header made RDB 10 still loads in
    // Valkey 8.0, set-listpacks and stream-v3 and all (a mutant of make compat's run).
    if let Some(valkey) = versions().into_iter().find(|v| v.name == "valkey-8.0") {
        let mut file = seed(&valkey);
        assert_eq!(&file[..9], b"REDIS0011");
        file[8] = b'0';
        let n = file.len();
        let crc = crc64(&file[..n - 8]);
        file[n - 8..].copy_from_slice(&crc.to_le_bytes());
        assert!(server_loads(&valkey.bin, &file, &mut log), "Valkey 8.0.1 refuses it: {log}");
        assert!(walk(&file, Depth::Deep, 0).is_ok(), "verify refuses what Valkey 8.0.1 loads");
    }
}

/// Where a disagreeing mutant is kept for study: `FERROKV_VERDICTS_KEEP`, else the build's
/// scratch directory (CI's disagreements are random and rare: the file is the only way back).
fn keep_dir() -> PathBuf {
    std::env::var_os("FERROKV_VERDICTS_KEEP")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("verdict-disagreements"))
}

#[test]
fn verify_agrees_with_redis_7_0_on_mutated_files() {
    let v = versions().remove(0);
    let count = std::env::var("FERROKV_VERDICTS").ok().and_then(|n| n.parse().ok()).unwrap_or(300);
    let d = disagreements(&v, count);
    assert!(d.is_empty(), "{} of {count} mutants disagree:\n{}", d.len(), d.join("\n"));
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn verify_agrees_with_every_version_on_mutated_files() {
    let count = std::env::var("FERROKV_VERDICTS").ok().and_then(|n| n.parse().ok()).unwrap_or(2500);
    let mut all = Vec::new();
    for v in versions() {
        let d = disagreements(&v, count);
        eprintln!("{}: {count} mutants, {} disagreements", v.name, d.len());
        all.extend(d);
    }
    assert!(all.is_empty(), "{} disagreements:\n{}", all.len(), all.join("\n"));
}

// ---------------------------------------------------------------- AOF

/// A multi-part AOF directory the server wrote: a base (RDB or RESP), then an incr file
/// with writes of every kind (MULTI/EXEC, SELECT, TTLs, a function library).
fn aof_seed(v: &Version, preamble: bool) -> TempDir {
    let dir = TempDir::new("verdict-aof-seed");
    let spawn = |port: u16| -> Child {
        Command::new(&v.bin)
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "yes", "--appendfsync", "always"])
            .args(["--aof-use-rdb-preamble", if preamble { "yes" } else { "no" }])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the server")
    };
    let (mut child, port) = spawn_on_free_port(v.name, spawn, Duration::from_secs(30));
    let mut c = Client::connect(port);
    let mut run = |a: &[&str]| {
        let r = c.call(&argv(a));
        assert!(!r.starts_with(b"-"), "{}: {a:?} -> {}", v.name, String::from_utf8_lossy(&r));
    };
    run(&["SET", "base:str", "v"]);
    run(&["RPUSH", "base:list", "a", "b", "c"]);
    run(&["HSET", "base:hash", "f", "v", "g", "w"]);
    run(&["ZADD", "base:zset", "1", "a", "2", "b"]);
    run(&["SADD", "base:set", "1", "2", "x"]);
    run(&["XADD", "base:stream", "1-1", "f", "v"]);
    if v.functions {
        run(&["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('f', function(k, a) return 1 end)"]);
    }
    run(&["BGREWRITEAOF"]);
    let start = Instant::now();
    loop {
        let info = String::from_utf8_lossy(&c.call(&argv(&["INFO", "persistence"]))).into_owned();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{}: the rewrite did not end", v.name);
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut run = |a: &[&str]| {
        c.call(&argv(a));
    };
    run(&["SET", "k1", "v1"]);
    run(&["INCR", "counter"]);
    run(&["SET", "ttl", "v", "EX", "1000000"]);
    run(&["RPUSH", "list", "x", "y"]);
    run(&["HSET", "hash", "a", "1", "b", "2"]);
    run(&["MULTI"]);
    run(&["INCR", "counter"]);
    run(&["SADD", "set", "m"]);
    run(&["EXEC"]);
    run(&["SELECT", "3"]);
    run(&["SET", "other", "db"]);
    run(&["ZADD", "zset", "1.5", "a"]);
    run(&["EXPIRE", "zset", "1000000"]);
    run(&["XADD", "stream", "*", "f", "v"]);
    if v.functions {
        run(&[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=lib\nredis.register_function('f', function(k, a) return 2 end)",
        ]);
    }
    let _ = child.kill();
    let _ = child.wait();
    dir
}

/// Whether the server loads the AOF directory `dir` (a copy of it).
fn server_loads_aof(bin: &Path, dir: &Path, log_lines: &mut String) -> bool {
    let work = TempDir::new("verdict-aof-load");
    let status = Command::new("cp").arg("-a").arg(format!("{}/.", dir.display())).arg(work.path()).status();
    assert!(status.is_ok_and(|s| s.success()), "copy the AOF directory");
    let log = work.path().join("server.log");
    let mut child = Command::new(bin)
        .args(["--port", "0", "--save", "", "--appendonly", "yes"])
        .arg("--unixsocket")
        .arg(work.path().join("sock"))
        .arg("--dir")
        .arg(work.path())
        .arg("--logfile")
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let start = Instant::now();
    let loaded = loop {
        let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
        if text.to_ascii_lowercase().contains("ready to accept connections") {
            break true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            *log_lines = text.lines().rfind(|l| l.contains(" # ")).unwrap_or_default().to_string();
            break false;
        }
        if start.elapsed() > Duration::from_secs(20) {
            *log_lines = "timed out".into();
            break false;
        }
        std::thread::sleep(Duration::from_millis(3));
    };
    let _ = child.kill();
    let _ = child.wait();
    loaded
}

/// Mutate one file of an AOF directory (a copy of `seed`): mostly the incr file, else the
/// base or the manifest.
fn mutate_aof(seed: &Path, rng: &mut fastrand::Rng) -> (TempDir, String) {
    let dir = TempDir::new("verdict-aof-mutant");
    let status = Command::new("cp").arg("-a").arg(format!("{}/.", seed.display())).arg(dir.path()).status();
    assert!(status.is_ok_and(|s| s.success()));
    let aofdir = dir.path().join("appendonlydir");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&aofdir).expect("dir").flatten().map(|e| e.path()).collect();
    files.sort();
    let pick = |suffix: &str| files.iter().find(|p| p.to_string_lossy().ends_with(suffix)).cloned();
    let which = rng.u32(0..10);
    let target = match which {
        0..=6 => pick(".incr.aof"),
        7..=8 => pick(".base.aof").or_else(|| pick(".base.rdb")),
        _ => pick(".manifest"),
    }
    .expect("the file to mutate");
    let mut f = std::fs::read(&target).expect("read");
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if f.is_empty() {
        return (dir, format!("{name} empty, untouched"));
    }
    let is_rdb = name.ends_with(".rdb");
    let what = match rng.u32(0..6) {
        0 | 1 => {
            let (at, bit) = (rng.usize(0..f.len()), rng.u32(0..8));
            f[at] ^= 1 << bit;
            format!("{name}: bit {bit} of byte {at} flipped")
        }
        2 | 3 => {
            let (at, b) = (rng.usize(0..f.len()), rng.u8(..));
            f[at] = b;
            format!("{name}: byte {at} set to {b:#04x}")
        }
        4 => {
            let at = rng.usize(0..f.len());
            f.truncate(at);
            format!("{name}: truncated to {at} bytes")
        }
        _ => {
            let at = rng.usize(0..=f.len());
            let junk: Vec<u8> = (0..rng.usize(1..8)).map(|_| rng.u8(..)).collect();
            f.splice(at..at, junk.iter().copied());
            format!("{name}: {} bytes inserted at {at}", junk.len())
        }
    };
    if is_rdb && f.len() > 8 && rng.bool() {
        // Recompute the checksum so the RDB's structure decides.
        let l = f.len();
        let c = crc64(&f[..l - 8]);
        f[l - 8..].copy_from_slice(&c.to_le_bytes());
    }
    std::fs::write(&target, &f).expect("write");
    (dir, what)
}

fn aof_disagreements(v: &Version, count: usize) -> Vec<String> {
    use ferrokv::command::catalog::ServerVersion;
    use ferrokv_tools::aof::check::{verify, Options};
    // A RESP base names no version: the operator says which server wrote it.
    let version = ServerVersion::parse(v.name);
    let mut out = Vec::new();
    let mut rng = fastrand::Rng::with_seed(0xa0f ^ v.name.len() as u64);
    for preamble in [true, false] {
        let seed = aof_seed(v, preamble);
        let mut log = String::new();
        assert!(server_loads_aof(&v.bin, seed.path(), &mut log), "{}: its own AOF does not load: {log}", v.name);
        let ours = verify(&seed.path().join("appendonlydir"), Options::default()).expect("verify runs");
        assert!(ours.problem.is_none(), "{}: its own AOF does not verify: {:?}", v.name, ours.problem);
        let opts = if preamble {
            Options::default()
        } else {
            Options { version, strict: false, writer: true, ..Default::default() }
        };
        for i in 0..count / 2 {
            let (dir, what) = mutate_aof(seed.path(), &mut rng);
            let ours = verify(&dir.path().join("appendonlydir"), opts).expect("verify runs");
            let mut log = String::new();
            let theirs = server_loads_aof(&v.bin, dir.path(), &mut log);
            if ours.problem.is_none() != theirs {
                let ours = match &ours.problem {
                    None => "valid".to_string(),
                    Some(p) => format!("invalid: {p}"),
                };
                let theirs = if theirs { "loads".to_string() } else { format!("refuses: {log}") };
                let to = keep_dir().join(format!("{}-aof-{preamble}-{i}", v.name));
                let _ = std::fs::create_dir_all(&to);
                let _ = Command::new("cp").arg("-a").arg(format!("{}/.", dir.path().display())).arg(&to).status();
                out.push(format!(
                    "{} aof (preamble {preamble}) mutant {i} ({what}): verify says {ours}; the server {theirs} (kept in {})",
                    v.name,
                    to.display()
                ));
            }
        }
    }
    out
}

#[test]
fn aof_verify_agrees_with_redis_7_0_on_mutated_files() {
    let v = versions().remove(0);
    let count = std::env::var("FERROKV_VERDICTS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let d = aof_disagreements(&v, count);
    assert!(d.is_empty(), "{} of {count} mutants disagree:\n{}", d.len(), d.join("\n"));
}

#[test]
#[ignore = "needs ../shared; run with make compat"]
fn aof_verify_agrees_with_every_version_on_mutated_files() {
    let count = std::env::var("FERROKV_VERDICTS").ok().and_then(|n| n.parse().ok()).unwrap_or(2500);
    let mut all = Vec::new();
    for v in versions().into_iter().filter(|v| v.name != "redis-6.2") {
        let d = aof_disagreements(&v, count);
        eprintln!("{}: {count} AOF mutants, {} disagreements", v.name, d.len());
        all.extend(d);
    }
    assert!(all.is_empty(), "{} disagreements:\n{}", all.len(), all.join("\n"));
}
