//! Admin commands against a real redis-server 7.0: DEBUG LOADAOF / RELOAD / POPULATE /
//! SET-ACTIVE-EXPIRE / QUICKLIST-PACKED-THRESHOLD / CHANGE-REPL-ID, OBJECT FREQ, MEMORY;
//! the cluster commands without a cluster, FAILOVER without replicas, LOLWUT.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::Ours;

use ferrokv_testkit::{cli, Server, TempDir};

/// Both servers, each with its own directory.
fn pair(extra: &[&str]) -> (Ours, Server, TempDir) {
    let dir = TempDir::new("admin-ours");
    let ours = Ours::start(dir.path(), extra);
    let redis = Server::start_with(None, extra);
    (ours, redis, dir)
}

/// The same commands on both; every reply must be equal.
fn same(ours: &Ours, redis: &Server, cmds: &[&[&str]]) {
    for c in cmds {
        assert_eq!(ours.cli(c), redis.cli(c), "{c:?}");
    }
}

#[test]
fn debug_subcommands_reply_as_redis() {
    let (ours, redis, _dir) = pair(&[]);
    same(
        &ours,
        &redis,
        &[
            &["DEBUG", "SET-ACTIVE-EXPIRE", "0"],
            &["DEBUG", "SET-ACTIVE-EXPIRE", "abc"],
            &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1mb"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "abc"],
            &["DEBUG", "CHANGE-REPL-ID"],
            &["DEBUG", "POPULATE", "100"],
            &["DEBUG", "POPULATE", "10", "p", "30"],
            &["DEBUG", "POPULATE", "-1"],
            &["DEBUG", "POPULATE", "5", "p", "-3"],
            &["DBSIZE"],
            &["GET", "key:42"],
            &["STRLEN", "p:3"],
            &["OBJECT", "ENCODING", "p:3"],
            &["DEBUG", "DIGEST"],
            &["OBJECT", "FREQ", "key:1"],
            &["OBJECT", "FREQ", "nosuchkey"],
            &["DEBUG", "RELOAD"],
            &["DEBUG", "DIGEST"],
            &["DEBUG", "JMAP"],
            &["DEBUG", "PAUSE-CRON", "1"],
            &["DEBUG", "PAUSE-CRON", "0"],
            &["DEBUG", "AOF-FLUSH-SLEEP", "0"],
        ],
    );
    for t in [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push", "verbatim", "true",
        "false", "nope",
    ] {
        same(&ours, &redis, &[&["DEBUG", "PROTOCOL", t], &["-3", "DEBUG", "PROTOCOL", t]]);
    }
}

/// No cluster mode: CLUSTER (its subcommands checked first), READONLY, READWRITE and
/// ASKING refuse as Redis does with cluster-enabled no; FAILOVER's checks without
/// replicas; LOLWUT's text; RESTORE-ASKING as RESTORE.
#[test]
fn cluster_commands_failover_and_lolwut_reply_as_redis() {
    let (ours, redis, _dir) = pair(&[]);
    same(
        &ours,
        &redis,
        &[
            &["CLUSTER", "INFO"],
            &["CLUSTER", "INFO", "x"],
            &["CLUSTER", "nope"],
            &["CLUSTER", "HELP"],
            &["CLUSTER", "KEYSLOT", "k"],
            &["CLUSTER"],
            &["READONLY"],
            &["READWRITE"],
            &["READWRITE", "x"],
            &["ASKING"],
            &["FAILOVER"],
            &["FAILOVER", "ABORT"],
            &["FAILOVER", "TIMEOUT", "0"],
            &["FAILOVER", "TIMEOUT", "x"],
            &["FAILOVER", "TO", "h", "x"],
            &["FAILOVER", "TO", "h", "1", "FORCE"],
            &["FAILOVER", "FORCE", "FORCE"],
            &["FAILOVER", "x"],
            &["LOLWUT"],
            &["LOLWUT", "1", "2"],
            &["LOLWUT", "VERSION", "x"],
            &["LOLWUT", "VERSION", "7"],
            &["SET", "k", "v"],
            &["DUMP", "k"],
            &["RESTORE-ASKING", "k", "0", "x"],
            &["COMMAND", "COUNT"],
            &["COMMAND", "INFO", "restore-asking", "readonly", "failover", "lolwut"],
        ],
    );
}

/// LOLWUT's pieces as Redis draws them: byte for byte where they are not random (a
/// Schotter of two rows of squares, a skyline one row high, the limits on the arguments,
/// their errors); where they are, the same shape (lines, widths, colours), the same
/// first rows of squares and the same closing lines.
#[test]
fn lolwut_draws_as_redis() {
    let (ours, redis, _dir) = pair(&[]);
    same(
        &ours,
        &redis,
        &[
            &["LOLWUT", "VERSION", "5", "66", "8", "2"],
            &["LOLWUT", "VERSION", "5", "10", "3", "2"],
            &["LOLWUT", "VERSION", "5", "1", "1", "1"],
            &["LOLWUT", "VERSION", "5", "0", "-5", "2"],
            &["LOLWUT", "VERSION", "5", "3000", "500", "1"],
            &["LOLWUT", "VERSION", "6", "5", "1"],
            &["LOLWUT", "VERSION", "6", "2000", "-3"],
            &["LOLWUT", "VERSION", "5", "x"],
            &["LOLWUT", "VERSION", "5", "10", "10", "y"],
            &["LOLWUT", "VERSION", "6", "1", "y"],
            &["LOLWUT", "VERSION", "-1"],
            &["LOLWUT", "VERSION", "4"],
            &["LOLWUT", "VERSION", "59", "1"],
        ],
    );
    let lines = |t: &str| t.lines().map(str::to_string).collect::<Vec<_>>();
    // A Schotter of 12 rows: the first 7 lines of Braille are the first two rows of
    // squares, which are not moved.
    let (a, b) = (lines(&ours.cli(&["LOLWUT", "VERSION", "5"])), lines(&redis.cli(&["LOLWUT", "VERSION", "5"])));
    assert_eq!(a.len(), b.len());
    assert_eq!(a[..7], b[..7]);
    assert_eq!(a[a.len() - 2..], b[b.len() - 2..]);
    assert_eq!(
        a.iter().map(|l| l.chars().count()).collect::<Vec<_>>(),
        b.iter().map(|l| l.chars().count()).collect::<Vec<_>>()
    );
    assert!(a[7..a.len() - 2].iter().all(|l| l.chars().all(|c| ('\u{2800}'..='\u{28FF}').contains(&c))));
    // A skyline: rows of escaped spaces, each in one of the four colours.
    let (a, b) = (lines(&ours.cli(&["LOLWUT", "VERSION", "6"])), lines(&redis.cli(&["LOLWUT", "VERSION", "6"])));
    assert_eq!(a.len(), b.len());
    assert_eq!(a[a.len() - 2..], b[b.len() - 2..]);
    let cells = |l: &String| l.split("\x1b[0m").filter(|c| !c.is_empty()).map(str::to_string).collect::<Vec<_>>();
    let colours = ["\x1b[0;30;40m ", "\x1b[0;90;100m ", "\x1b[0;37;47m ", "\x1b[0;97;107m "];
    for (x, y) in a[..a.len() - 2].iter().zip(&b[..b.len() - 2]) {
        let (x, y) = (cells(x), cells(y));
        assert_eq!(x.len(), y.len());
        assert!(x.iter().all(|c| colours.contains(&c.as_str())), "{x:?}");
    }
}

/// INFO's sections in Redis's order (Commandstats before Errorstats, `# CPU`), and
/// commandstats naming a container's subcommands (`client|id`), never the container.
#[test]
fn info_sections_and_command_stats_as_redis() {
    let (ours, redis, _dir) = pair(&[]);
    let shape = |srv: &dyn Fn(&[&str]) -> String| {
        srv(&["CONFIG", "RESETSTAT"]);
        for cmd in [&["CLIENT", "ID"][..], &["CONFIG", "GET", "maxmemory"], &["SET", "a", "b"], &["CONFIG", "GET"]] {
            srv(cmd);
        }
        let headers = |section: &str| -> Vec<String> {
            srv(&["INFO", section]).lines().filter(|l| l.starts_with('#')).map(str::to_string).collect()
        };
        let mut stats: Vec<String> = srv(&["INFO", "commandstats"])
            .lines()
            .filter_map(|l| l.split_once(":calls=").map(|(name, rest)| format!("{name} {}", rest.split(',').count())))
            .collect();
        stats.sort();
        (headers("default"), headers("everything"), headers("commandstats"), stats)
    };
    let theirs = shape(&|a| redis.cli(a));
    let mine = shape(&|a| ours.cli(a));
    assert_eq!(mine, theirs);
}

/// INFO stats and cpu name every field Redis 7.0 names, in its order; memory at least the
/// ones monitoring reads (fragmentation, startup, the machine's memory); the instantaneous
/// rates follow the traffic as Redis's do.
#[test]
fn info_fields_and_instantaneous_rates_as_redis() {
    let (ours, redis, _dir) = pair(&[]);
    let fields = |srv: &dyn Fn(&[&str]) -> String, section: &str| -> Vec<String> {
        srv(&["INFO", section]).lines().filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string())).collect()
    };
    for section in ["stats", "cpu"] {
        assert_eq!(fields(&|a| ours.cli(a), section), fields(&|a| redis.cli(a), section), "INFO {section}");
    }
    let memory = fields(&|a| ours.cli(a), "memory");
    for f in [
        "used_memory_peak_perc",
        "used_memory_startup",
        "total_system_memory",
        "mem_fragmentation_ratio",
        "mem_fragmentation_bytes",
    ] {
        assert!(memory.iter().any(|m| m == f), "INFO memory lacks {f}");
    }
    // Under a steady load both report a rate near what they serve.
    let rate = |port: u16| -> (u64, f64) {
        let bench = std::process::Command::new("redis-benchmark")
            .args(["-p", &port.to_string(), "-n", "400000", "-c", "4", "-q", "-t", "ping", "-P", "4"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-benchmark");
        std::thread::sleep(Duration::from_millis(1500));
        let info = cli(port, &["INFO", "stats"]);
        let get =
            |k: &str| info.lines().find_map(|l| l.strip_prefix(&format!("{k}:"))).unwrap_or("0").trim().to_string();
        let mut bench = bench;
        let _ = bench.kill();
        let _ = bench.wait();
        (get("instantaneous_ops_per_sec").parse().unwrap_or(0), get("instantaneous_input_kbps").parse().unwrap_or(0.0))
    };
    let (ops, kbps) = rate(ours.port);
    assert!(ops > 1000 && kbps > 1.0, "ours under load: {ops} ops/s, {kbps} KB/s in");
    let (ops, _) = rate(redis.port);
    assert!(ops > 1000, "Redis under load: {ops} ops/s");
    // Idle, the rate falls back to 0 as the 16 samples (1.6 s) roll over.
    std::thread::sleep(Duration::from_millis(2500));
    let idle = ours.cli(&["INFO", "stats"]);
    assert!(
        idle.contains("instantaneous_ops_per_sec:0\r\n") || idle.contains("instantaneous_ops_per_sec:0\n"),
        "{idle}"
    );
}

#[test]
fn debug_loadaof_reloads_what_the_aof_holds() {
    let (ours, redis, _dir) = pair(&["--appendonly", "yes", "--appendfsync", "always"]);
    same(
        &ours,
        &redis,
        &[
            &["SET", "a", "1"],
            &["RPUSH", "l", "x", "y", "z"],
            &["HSET", "h", "f", "v"],
            &["SADD", "s", "1", "2"],
            &["ZADD", "z", "1.5", "m"],
            &["SET", "t", "v", "PX", "100000000"],
            // Not logged: gone after LOADAOF, in both.
            &["DEBUG", "POPULATE", "10"],
            &["DBSIZE"],
            &["DEBUG", "LOADAOF"],
            &["DBSIZE"],
            &["DEBUG", "DIGEST"],
            &["LRANGE", "l", "0", "-1"],
            &["INCR", "a"],
            &["BGREWRITEAOF"],
        ],
    );
    let wait = |p: u16| {
        let start = Instant::now();
        while !cli(p, &["INFO", "persistence"]).contains("aof_rewrite_in_progress:0") {
            assert!(start.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait(ours.port);
    wait(redis.port);
    same(&ours, &redis, &[&["SET", "after", "rewrite"], &["DEBUG", "LOADAOF"], &["DEBUG", "DIGEST"], &["GET", "a"]]);
}

/// MEMORY USAGE: exactly Redis's figure for strings, listpacks, intsets, quicklists, hash
/// tables sampled whole and streams (their nodes' room XADD allocates up front); within 2%
/// for skiplists (random node levels).
#[test]
fn memory_usage_matches_redis() {
    let (ours, redis, _dir) = pair(&[]);
    let mut script = String::new();
    for i in 1..=1000 {
        script += &format!("RPUSH list element-number-{i}\nHSET bighash field{i} value{i}\n");
        script += &format!("SADD bigset member{i}\nZADD bigzset {i} member{i}\n");
    }
    for i in 1..=600 {
        script += &format!("SADD intset2 {i}\n");
    }
    for i in 1..=20000 {
        script += &format!("RPUSH ints {i}\n");
    }
    for i in 1..=400 {
        script += &format!("XADD bigstream {i}-1 field value-{i}-{}\n", "x".repeat(i % 40));
    }
    script += "XADD smallstream 1-1 a 1\n";
    for port in [ours.port, redis.port] {
        let mut child = Command::new("redis-cli")
            .args(["-p", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), script.as_bytes()).unwrap();
        drop(child.stdin.take());
        child.wait().unwrap();
    }
    same(
        &ours,
        &redis,
        &[
            &["SET", "s1", "bar"],
            &["SET", "s2", "12345"],
            &["SET", "s3", &"a".repeat(44)],
            &["SET", "s4", &"a".repeat(45)],
            &["SET", "s5", &"b".repeat(300)],
            &["SET", &"k".repeat(40), "v"],
            &["RPUSH", "l1", "a", "b", "c", "1", "2", "3"],
            &["HSET", "h1", "f1", "v1", "f2", "v2", "f3", "300"],
            &["SADD", "si", "1", "2", "3", "70000"],
            &["SADD", "ss", "a", "b", "c"],
            &["ZADD", "z1", "1", "a", "2.5", "b", "3", "c"],
        ],
    );
    // The suite's `trim on SET with big value` (run only under jemalloc): a value read
    // after a big one that grew the query buffer is not charged for the spare room.
    same(&ours, &redis, &[&["SET", "trim", &"A".repeat(100_000)], &["SET", "trim", &"A".repeat(33_000)]]);
    for key in
        ["s1", "s2", "s3", "s4", "s5", &"k".repeat(40), "l1", "h1", "si", "ss", "z1", "list", "ints", "intset2", "trim"]
    {
        same(&ours, &redis, &[&["MEMORY", "USAGE", key], &["MEMORY", "USAGE", key, "SAMPLES", "0"]]);
    }
    for key in ["bigstream", "smallstream"] {
        same(&ours, &redis, &[&["MEMORY", "USAGE", key], &["MEMORY", "USAGE", key, "SAMPLES", "0"]]);
    }
    for key in ["bighash", "bigset"] {
        same(&ours, &redis, &[&["MEMORY", "USAGE", key, "SAMPLES", "0"]]);
    }
    let o: f64 = ours.cli(&["MEMORY", "USAGE", "bigzset", "SAMPLES", "0"]).parse().unwrap();
    let r: f64 = redis.cli(&["MEMORY", "USAGE", "bigzset", "SAMPLES", "0"]).parse().unwrap();
    assert!((o - r).abs() / r < 0.02, "skiplist: ours {o}, redis {r}");
    same(
        &ours,
        &redis,
        &[
            &["MEMORY", "USAGE", "nosuchkey"],
            &["MEMORY", "USAGE", "s1", "SAMPLES"],
            &["MEMORY", "USAGE", "s1", "SAMPLES", "-1"],
            &["MEMORY", "USAGE", "s1", "SAMPLES", "x"],
            &["MEMORY", "USAGE", "s1", "FOO", "1"],
            &["MEMORY", "HELP"],
            &["MEMORY", "NOSUCH"],
            &["MEMORY", "PURGE"],
            &["MEMORY"],
            &["COMMAND", "GETKEYS", "MEMORY", "USAGE", "s1"],
            &["COMMAND", "GETKEYS", "MEMORY", "USAGE", "s1", "SAMPLES", "3"],
            &["COMMAND", "GETKEYS", "MEMORY", "STATS"],
        ],
    );
    let stats = ours.cli(&["MEMORY", "STATS"]);
    assert!(stats.contains("keys.count") && stats.contains("dataset.bytes"), "{stats}");
    assert!(ours.cli(&["MEMORY", "DOCTOR"]).starts_with("Hi Sam"));
}

/// OBJECT FREQ under an LFU maxmemory-policy: the counter starts at 5, the first access
/// always counts, RESTORE ... FREQ sets it; OBJECT IDLETIME refuses; errors as Redis's.
#[test]
fn object_freq_follows_the_lfu_policy() {
    let (ours, redis, _dir) = pair(&[]);
    same(
        &ours,
        &redis,
        &[
            &["SET", "foo", "bar"],
            &["OBJECT", "FREQ", "foo"],
            &["CONFIG", "SET", "maxmemory-policy", "nosuch"],
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
            &["CONFIG", "GET", "maxmemory-policy"],
            // One at a time: a glob's order is Redis's dict order, which varies per run.
            &["CONFIG", "GET", "lfu-log-factor"],
            &["CONFIG", "GET", "lfu-decay-time"],
            &["SET", "k", "v"],
            &["OBJECT", "FREQ", "k"],
            &["GET", "k"],
            &["OBJECT", "FREQ", "k"],
            &["OBJECT", "IDLETIME", "k"],
            &["OBJECT", "FREQ", "nosuchkey"],
            &["DEL", "foo"],
            &["SET", "src", "bar"],
        ],
    );
    let dump = |port: u16| {
        let mut c = ferrokv_testkit::Client::connect(port);
        let raw = c.call_str(&["DUMP", "src"]);
        let text = raw.splitn(2, |b| *b == b'\n').nth(1).unwrap().to_vec();
        text[..text.len() - 2].to_vec()
    };
    for (port, payload) in [(ours.port, dump(ours.port)), (redis.port, dump(redis.port))] {
        let mut c = ferrokv_testkit::Client::connect(port);
        let argv = [b"RESTORE".to_vec(), b"foo".to_vec(), b"0".to_vec(), payload, b"FREQ".to_vec(), b"100".to_vec()];
        assert_eq!(c.call(&argv), b"+OK\r\n");
    }
    same(
        &ours,
        &redis,
        &[
            &["OBJECT", "FREQ", "foo"],
            &["CONFIG", "SET", "maxmemory-policy", "volatile-lru"],
            &["OBJECT", "FREQ", "foo"],
            &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
        ],
    );
    assert!(ours.cli(&["INFO", "memory"]).contains("maxmemory_policy:noeviction"));
}

/// SHUTDOWN's option checks and ABORT with nothing to abort, as Redis 7.0 answers them
/// (neither server shuts down here).
#[test]
fn shutdown_abort_and_bad_options_reply_as_redis() {
    let (ours, redis, _dir) = pair(&[]);
    same(
        &ours,
        &redis,
        &[
            &["SHUTDOWN", "ABORT"],
            &["SHUTDOWN", "NOW", "ABORT"],
            &["SHUTDOWN", "ABORT", "FORCE"],
            &["SHUTDOWN", "SAVE", "NOSAVE"],
            &["SHUTDOWN", "NOPE"],
            &["PING"],
        ],
    );
}

/// `--help`/`-h` and `--version`/`-v` as redis-server answers them: the usage on stderr
/// and exit 1, the version on stdout and exit 0; `-` reads the configuration from stdin.
#[test]
fn command_line_help_version_and_stdin_config() {
    use std::io::Write;
    let bin = env!("CARGO_BIN_EXE_ferrokv-server");
    for flag in ["--help", "-h"] {
        let out = Command::new(bin).arg(flag).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{flag}");
        let usage = String::from_utf8_lossy(&out.stderr);
        assert!(usage.starts_with("Usage: ferrokv-server [/path/to/redis.conf] [options] [-]"), "{usage}");
        assert!(usage.contains("Examples:") && usage.contains("Exit codes:"), "{usage}");
        assert!(out.stdout.is_empty());
    }
    for flag in ["--version", "-v"] {
        let out = Command::new(bin).arg(flag).output().expect("run");
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("ferrokv-server v="), "{flag}");
    }
    // A bad directive on stdin is reported as the config error it is (exit 1), so `-` was read.
    let mut child = Command::new(bin)
        .args(["-", "--port", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(b"maxmemory-policy nonsense\n").expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("FATAL CONFIG FILE ERROR") && err.contains("maxmemory-policy"), "{err}");
}
