//! The redis-cli modes operators point at a server, and redis-benchmark, run against
//! ferrokv-server and a real redis-server 7.0 holding the same keys: `--bigkeys` and
//! `--memkeys` summaries equal (the per-key "so far" lines follow SCAN's order, which is
//! each server's own), `--stat` and `--latency` produce their lines, and redis-benchmark
//! runs every one of its default tests with no error reply.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::Ours;

use ferrokv_testkit::{Client, Server as Redis, TempDir};

/// Keys of every type, each of its own size, so no two tie for "biggest".
fn populate(port: u16) {
    let mut c = Client::connect(port);
    for i in 1..=20 {
        let n = i * 3;
        c.call_str(&["SET", &format!("str:{i}"), &"x".repeat(n)]);
        let items: Vec<String> = (0..i).map(|j| format!("item-{j}")).collect();
        let mut push = vec!["RPUSH".to_string(), format!("list:{i}")];
        push.extend(items.iter().cloned());
        c.call_str(&push.iter().map(String::as_str).collect::<Vec<_>>());
        // Integers: an intset, whose size MEMORY USAGE gives exactly (a hashtable's depends
        // on how far Redis's incremental rehashing has got).
        let mut sadd = vec!["SADD".to_string(), format!("set:{i}")];
        sadd.extend((0..i).map(|j| (j * 1000).to_string()));
        c.call_str(&sadd.iter().map(String::as_str).collect::<Vec<_>>());
        let mut hset = vec!["HSET".to_string(), format!("hash:{i}")];
        for it in &items {
            hset.push(it.clone());
            hset.push("v".to_string());
        }
        c.call_str(&hset.iter().map(String::as_str).collect::<Vec<_>>());
        let mut zadd = vec!["ZADD".to_string(), format!("zset:{i}")];
        for (j, it) in items.iter().enumerate() {
            zadd.push(j.to_string());
            zadd.push(it.clone());
        }
        c.call_str(&zadd.iter().map(String::as_str).collect::<Vec<_>>());
        for j in 0..i {
            c.call_str(&["XADD", &format!("stream:{i}"), &format!("{}-1", j + 1), "f", "v"]);
        }
    }
}

/// redis-cli's output from `-------- summary -------` on.
fn summary(port: u16, mode: &str) -> String {
    let out = Command::new("redis-cli").args(["-p", &port.to_string(), mode]).output().expect("redis-cli");
    assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let at = text.find("-------- summary -------").unwrap_or_else(|| panic!("{mode}: no summary\n{text}"));
    text[at..].to_string()
}

/// What a mode that runs until stopped prints in `secs`.
fn for_a_while(port: u16, args: &[&str], secs: f64) -> String {
    // stdbuf: redis-cli's stdout is a pipe here, and what it buffers dies with it.
    let mut child = Command::new("stdbuf")
        .args(["-o0", "redis-cli", "-p", &port.to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    std::thread::sleep(Duration::from_secs_f64(secs));
    let _ = child.kill();
    let _ = child.wait();
    let mut text = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut text);
    }
    text
}

#[test]
fn bigkeys_and_memkeys_summaries_equal_redis() {
    let redis = Redis::start();
    let dir = TempDir::new("cli-modes");
    let ours = Ours::start(dir.path(), &[]);
    populate(redis.port);
    populate(ours.port);
    assert_eq!(summary(ours.port, "--bigkeys"), summary(redis.port, "--bigkeys"));
    // Keys of one size class tie for "biggest"; the first SCAN finds is named, so the names
    // are left out of the comparison, the sizes are not.
    let unnamed = |text: String| {
        text.lines()
            .map(|l| match (l.find(" found '"), l.rfind("' has ")) {
                (Some(a), Some(b)) => format!("{}{}", &l[..a], &l[b + 1..]),
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(unnamed(summary(ours.port, "--memkeys")), unnamed(summary(redis.port, "--memkeys")));
}

#[test]
fn stat_and_latency_modes_run() {
    let dir = TempDir::new("cli-stat");
    let ours = Ours::start(dir.path(), &[]);
    populate(ours.port);
    let stat = for_a_while(ours.port, &["--stat", "-i", "0.2"], 1.2);
    let lines: Vec<&str> = stat.lines().collect();
    assert!(lines.first().is_some_and(|l| l.contains("data") && l.contains("load")), "{stat}");
    // Each sample line starts with the key count.
    let samples: Vec<&str> = lines.iter().copied().filter(|l| l.split_whitespace().next() == Some("120")).collect();
    assert!(samples.len() >= 3, "{stat}");
    // Not on a terminal, --latency prints `min max avg samples` as it goes.
    let latency = for_a_while(ours.port, &["--latency", "-i", "0.2"], 1.2);
    let last: Vec<f64> =
        latency.lines().last().unwrap_or("").split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(last.len() == 4 && last[3] > 0.0 && last[0] <= last[1], "{latency}");
}

#[test]
fn redis_benchmark_runs_every_default_test() {
    let run = |port: u16| {
        let out = Command::new("redis-benchmark")
            .args(["-p", &port.to_string(), "-q", "-n", "2000", "-c", "8"])
            .output()
            .expect("redis-benchmark");
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!text.to_lowercase().contains("error"), "{text}");
        // "NAME: 12345.67 requests per second, p50=..." per test (the \r progress lines
        // before each are cut off).
        let mut names: Vec<String> = text
            .split(['\n', '\r'])
            .filter(|l| l.contains("requests per second"))
            .filter_map(|l| l.split(':').next().map(str::to_string))
            .collect();
        names.dedup();
        names
    };
    let redis = Redis::start();
    let dir = TempDir::new("cli-bench");
    let ours = Ours::start(dir.path(), &[]);
    let want = run(redis.port);
    assert!(want.len() >= 20, "{want:?}");
    assert_eq!(run(ours.port), want);
}
