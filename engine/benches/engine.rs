//! Library throughput and memory per key.
//!
//! `cargo bench -p ferrokv --bench engine` (part of `make bench`). Prints one line per
//! measurement, `name value unit`, which bench/run.sh puts in docs/benchmarks.md.
//!
//! - commands/s of `Engine::execute` (argv in, reply out) for SET/GET/LPUSH/HSET/ZADD over
//!   1 M keys `key:N`;
//! - memory for 1 M small string keys (`key:N` = `value:N`, what `DEBUG POPULATE 1000000`
//!   makes) set through the library: this process's RSS growth (bench/engine.sh measures
//!   both servers' `DEBUG POPULATE` beside it).

use std::time::Instant;

use ferrokv::{Config, Engine, Session};

const N: usize = 1_000_000;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn argv(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// Run `make(i)` for i in 0..N through the engine; commands per second.
fn rate(engine: &mut Engine, make: impl Fn(usize) -> Vec<Vec<u8>>) -> f64 {
    let mut s = Session::default();
    let cmds: Vec<_> = (0..N).map(&make).collect();
    let t = Instant::now();
    for c in &cmds {
        let r = engine.execute(&mut s, c);
        assert!(!r.is_error(), "{r:?}");
    }
    N as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    // Memory first, in a fresh process: memory freed by an earlier engine would be reused
    // without growing the RSS.
    let before = rss_bytes();
    let mut engine = Engine::in_memory(Config::default());
    let mut s = Session::default();
    for i in 0..N {
        let c = argv(&[b"SET", format!("key:{i}").as_bytes(), format!("value:{i}").as_bytes()]);
        engine.execute(&mut s, &c);
    }
    let ours = rss_bytes().saturating_sub(before);
    assert_eq!(engine.keyspace().len(), N);
    drop(engine);

    println!("mem_ours_rss_per_key {:.1} bytes", ours as f64 / N as f64);

    // Throughput.
    let mut engine = Engine::in_memory(Config::default());
    let set = rate(&mut engine, |i| argv(&[b"SET", format!("key:{i}").as_bytes(), format!("value:{i}").as_bytes()]));
    let get = rate(&mut engine, |i| argv(&[b"GET", format!("key:{i}").as_bytes()]));
    let mut engine = Engine::in_memory(Config::default());
    let lpush = rate(&mut engine, |i| argv(&[b"LPUSH", format!("list:{i}").as_bytes(), b"element"]));
    let hset = rate(&mut engine, |i| argv(&[b"HSET", format!("hash:{i}").as_bytes(), b"field", b"value"]));
    let zadd = rate(&mut engine, |i| argv(&[b"ZADD", format!("zset:{i}").as_bytes(), b"1.5", b"member"]));
    drop(engine);
    for (name, r) in [("set", set), ("get", get), ("lpush", lpush), ("hset", hset), ("zadd", zadd)] {
        println!("engine_{name} {r:.0} commands/s");
    }
}
