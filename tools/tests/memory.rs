//! `rdbtool memory` against the server that loads the file: a corpus of every type and
//! encoding written by a real server during the test, saved, loaded again by that server
//! (a restart), then each key's estimate compared with its `MEMORY USAGE key SAMPLES 0`
//! and the data's total with INFO's `used_memory_dataset`. Debian's Redis 7.0 always;
//! Redis 7.4.1 (with hash field TTLs) and 6.2.16 (ziplists, its unrounded MEMORY USAGE
//! formulas) of ../shared/bin in `make compat`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrokv_testkit::{info_field, pipe_into, Client, Server as Redis, Spawned, TempDir};

/// A deterministic corpus: strings (int, embstr, raw), lists, hashes, sets (intset and
/// hashtable, of numbers and of strings), zsets (listpack, skiplist), streams with and
/// without consumer groups, a few keys with a TTL; hash field TTLs for 7.4.
fn corpus(field_ttls: bool) -> Vec<u8> {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut cmds: Vec<Vec<String>> = Vec::new();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    for i in 0..200 {
        cmds.push(s(&["SET", &format!("str:int:{i}"), &(i * 100_003).to_string()]));
        cmds.push(s(&["SET", &format!("str:emb:{i}"), &"e".repeat(1 + rnd(44) as usize)]));
        cmds.push(s(&["SET", &format!("str:raw:{i}"), &"r".repeat(45 + rnd(5000) as usize)]));
    }
    for i in 0..60 {
        let n = [3, 40, 300, 3000][rnd(4) as usize];
        let mut c = s(&["RPUSH", &format!("list:{i}")]);
        c.extend((0..n).map(|j| format!("item-{j}-{}", "z".repeat(rnd(30) as usize))));
        cmds.push(c);
        for (kind, n) in [("hash", [3, 60, 700][rnd(3) as usize]), ("hashbig", 5)] {
            let mut c = s(&["HSET", &format!("{kind}:{i}")]);
            for j in 0..n {
                let len = if kind == "hashbig" { 70 } else { rnd(60) as usize };
                c.extend([format!("f{j}"), format!("v{}", "w".repeat(len))]);
            }
            cmds.push(c);
        }
        let n = [3, 60, 700][rnd(3) as usize];
        let mut ints = s(&["SADD", &format!("set:int:{i}")]);
        ints.extend((0..n).map(|_| rnd(1 << 40).to_string()));
        cmds.push(ints);
        let mut strs = s(&["SADD", &format!("set:str:{i}")]);
        strs.extend((0..n).map(|j| format!("m{j}x{}", rnd(100_000))));
        cmds.push(strs);
        let n = [3, 100, 400][rnd(3) as usize];
        let mut z = s(&["ZADD", &format!("zset:{i}")]);
        for j in 0..n {
            z.extend([format!("{}.{}", rnd(1000), rnd(1000)), format!("member{j}")]);
        }
        cmds.push(z);
        let stream = format!("stream:{i}");
        for j in 0..[1, 10, 250][rnd(3) as usize] {
            cmds.push(s(&[
                "XADD",
                &stream,
                &format!("{}-{j}", 1_700_000_000_000u64 + i),
                "a",
                "1",
                "b",
                &j.to_string(),
            ]));
        }
        if i % 3 == 0 {
            cmds.push(s(&["XGROUP", "CREATE", &stream, "g", "0"]));
            cmds.push(s(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "5", "STREAMS", &stream, ">"]));
        }
        if field_ttls && i % 4 == 0 {
            cmds.push(s(&["HPEXPIRE", &format!("hash:{i}"), "86400000", "FIELDS", "2", "f0", "f1"]));
        }
    }
    for i in 0..30 {
        cmds.push(s(&["PEXPIRE", &format!("str:raw:{i}"), "86400000"]));
    }
    let mut out = Vec::new();
    for c in cmds {
        let argv: Vec<Vec<u8>> = c.into_iter().map(String::into_bytes).collect();
        out.extend(ferrokv_testkit::encode_command(&argv));
    }
    out
}

/// How far each key's estimate is from MEMORY USAGE, by type and encoding, and the
/// data's total against `used_memory_dataset`; panics when under the bars.
fn check(label: &str, port: u16, rdb: &Path, allocator: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_rdbtool"))
        .args(["memory", &rdb.display().to_string(), "--format", "jsonl", "--allocator", allocator])
        .output()
        .expect("rdbtool memory");
    assert!(out.status.success(), "{label}: {}", String::from_utf8_lossy(&out.stderr));
    let mut c = Client::connect(port);
    let (mut within, mut n, mut dataset) = (0usize, 0usize, 0u64);
    let mut by_encoding: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a jsonl line");
        let key = v["key"].as_str().expect("a text key");
        let ours = v["bytes"].as_u64().expect("bytes") as f64;
        dataset += v["allocated"].as_u64().expect("allocated");
        let reply = c.call_str(&["MEMORY", "USAGE", key, "SAMPLES", "0"]);
        let real: f64 = String::from_utf8_lossy(&reply[1..reply.len() - 2]).parse().expect("an integer");
        let err = (ours - real) / real;
        n += 1;
        within += usize::from(err.abs() <= 0.10);
        if err.abs() > 0.10 && n - within <= 12 {
            eprintln!(
                "  off by {:+.1}%: {key} ({} {}): ours {ours}, MEMORY USAGE {real}",
                err * 100.0,
                v["type"],
                v["encoding"]
            );
        }
        by_encoding.entry(format!("{} {}", v["type"], v["encoding"])).or_default().push(err);
    }
    let real_dataset: f64 = info_field(port, "memory", "used_memory_dataset").parse().expect("dataset");
    let total_err = (dataset as f64 - real_dataset) / real_dataset;
    eprintln!("{label}: {within}/{n} keys within 10% of MEMORY USAGE; data {dataset} vs used_memory_dataset {real_dataset} ({:+.2}%)", total_err * 100.0);
    for (enc, mut errs) in by_encoding {
        errs.sort_by(f64::total_cmp);
        eprintln!(
            "  {enc:<24} {:>5} keys  error min {:+.1}%  median {:+.1}%  max {:+.1}%",
            errs.len(),
            errs[0] * 100.0,
            errs[errs.len() / 2] * 100.0,
            errs[errs.len() - 1] * 100.0
        );
    }
    assert!(n > 1000, "{label}: {n} keys");
    assert!(within * 100 >= n * 95, "{label}: {within}/{n} within 10%");
    assert!(total_err.abs() <= 0.03, "{label}: total off by {:.2}%", total_err * 100.0);
}

#[test]
fn estimates_match_redis_7_0() {
    let writer = Redis::start();
    pipe_into(writer.port, &corpus(false));
    writer.cli(&["SAVE"]);
    let dir = writer.stop();
    let rdb = dir.path().join("dump.rdb");
    let kept = TempDir::new("memory-70");
    let copy = kept.path().join("dump.rdb");
    std::fs::copy(&rdb, &copy).expect("copy");
    let loaded = Redis::start_in(dir, &[]);
    // Debian's package links the system jemalloc.
    check("Redis 7.0", loaded.port, &copy, "jemalloc-q16");
}

fn shared(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("FERROKV_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    let p = dir.join("bin").join(name);
    p.exists().then_some(p)
}

#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn estimates_match_redis_6_2_and_7_4() {
    for (bin, field_ttls) in [("redis-server-7.4.1", true), ("redis-server-6.2.16", false)] {
        let Some(bin) = shared(bin) else {
            eprintln!("skipped: ../shared/bin/{bin} is absent");
            continue;
        };
        let dir = TempDir::new("memory-real");
        let args = ["--bind", "127.0.0.1", "--save", ""];
        let writer = Spawned::start("redis-server", &bin, dir.path(), &args, None);
        pipe_into(writer.port, &corpus(field_ttls));
        ferrokv_testkit::cli(writer.port, &["SAVE"]);
        drop(writer);
        let loaded = Spawned::start("redis-server", &bin, dir.path(), &args, None);
        // Built from source: Redis's bundled jemalloc.
        check(&bin.display().to_string(), loaded.port, &dir.path().join("dump.rdb"), "jemalloc");
    }
}

/// The text between `start` (after it) and the next `end` in `s`.
fn between<'a>(s: &'a str, start: &str, end: &str) -> &'a str {
    let from = s.find(start).unwrap_or_else(|| panic!("no {start:?} in the page")) + start.len();
    let to = s[from..].find(end).unwrap_or_else(|| panic!("no {end:?} after {start:?}")) + from;
    &s[from..to]
}

/// The values of `attr` in `s`, in order.
fn attrs(s: &str, attr: &str) -> Vec<u64> {
    let pat = format!("{attr}=\"");
    s.match_indices(&pat)
        .map(|(i, _)| {
            let rest = &s[i + pat.len()..];
            rest[..rest.find('"').expect("closing quote")].parse().expect("a number")
        })
        .collect()
}

#[test]
fn html_report_opens_in_headless_chromium_with_the_jsonl_data() {
    let Some(chromium) = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
    else {
        eprintln!("SKIPPED: no chromium (scripts/install-deps.sh installs it)");
        return;
    };
    let writer = Redis::start();
    pipe_into(writer.port, &corpus(false));
    writer.cli(&["SAVE"]);
    let dir = writer.stop();
    let rdb = dir.path().join("dump.rdb");
    let page = dir.path().join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_rdbtool"))
        .args(["memory", &rdb.display().to_string(), "--format", "jsonl", "--top", "5", "--now", "1795765967000"])
        .arg("--html")
        .arg(&page)
        .output()
        .expect("rdbtool memory");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // What the per-key lines say.
    let (mut keys, mut dataset, mut usage) = (0u64, 0u64, 0u64);
    let mut sizes = Vec::new();
    let mut by_encoding: BTreeMap<(String, String), u64> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a jsonl line");
        let (b, a) = (v["bytes"].as_u64().expect("bytes"), v["allocated"].as_u64().expect("allocated"));
        keys += 1;
        usage += b;
        dataset += a;
        sizes.push(b);
        let enc = (v["type"].as_str().unwrap_or("").to_string(), v["encoding"].as_str().unwrap_or("").to_string());
        *by_encoding.entry(enc).or_default() += a;
    }
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    assert!(keys > 1000, "{keys} keys");

    // The page as the browser has it, and what its console said.
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains(" src="), "not self-contained");
    let url = format!("file://{}", page.display());
    let shot = dir.path().join("shot.png");
    let base = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"];
    let dom = Command::new(chromium).args(base).arg("--dump-dom").arg(&url).output().expect("chromium --dump-dom");
    assert!(dom.status.success(), "chromium: {}", String::from_utf8_lossy(&dom.stderr));
    let shown = Command::new(chromium)
        .args(base)
        .args(["--window-size=1280,2000", &format!("--screenshot={}", shot.display()), &url])
        .output()
        .expect("chromium --screenshot");
    for run in [&dom, &shown] {
        let log = String::from_utf8_lossy(&run.stderr);
        let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
        assert!(console.is_empty(), "the page logged to the console: {console:?}");
    }
    let png = std::fs::read(&shot).expect("a screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let (w, h) =
        (u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap()));
    assert_eq!((w, h), (1280, 2000));
    assert!(png.len() > 20_000, "a screenshot of {} bytes", png.len());

    // The page's figures, visible and embedded, are the per-key lines'.
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    let totals = between(&dom, "id=\"totals\"", ">");
    assert_eq!(attrs(totals, "data-keys"), [keys]);
    assert_eq!(attrs(totals, "data-dataset"), [dataset]);
    assert_eq!(attrs(totals, "data-usage"), [usage]);
    let top = between(&dom, "id=\"top\"", "</table>");
    assert_eq!(attrs(top, "data-bytes"), sizes[..5]);
    let encodings = between(&dom, "id=\"encodings\"", "</table>");
    let mut shown: Vec<u64> = attrs(encodings, "data-allocated");
    let mut expected: Vec<u64> = by_encoding.values().copied().collect();
    shown.sort_unstable();
    expected.sort_unstable();
    assert_eq!(shown, expected);
    let treemap = between(&dom, "id=\"treemap\"", "</svg>");
    assert!(treemap.matches("<rect").count() >= 5, "treemap: {treemap}");
    let report: serde_json::Value =
        serde_json::from_str(between(&dom, "id=\"report\">", "</script>")).expect("the embedded report");
    assert_eq!(report["keys"].as_u64(), Some(keys));
    assert_eq!(report["dataset_bytes"].as_u64(), Some(dataset));
    let hist: u64 = report["sizes"].as_array().expect("sizes").iter().map(|c| c["keys"].as_u64().unwrap_or(0)).sum();
    assert_eq!(hist, keys);
}

#[test]
fn config_thresholds_change_encodings_and_are_reported() {
    let rdb = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb/redis-7.0/all-types.rdb");
    let dir = TempDir::new("memory-config");
    let run = |conf: &str| {
        let path = dir.path().join("redis.conf");
        std::fs::write(&path, conf).expect("write the config");
        Command::new(env!("CARGO_BIN_EXE_rdbtool"))
            .args(["memory", &rdb.display().to_string(), "--format", "json", "--config"])
            .arg(&path)
            .output()
            .expect("rdbtool memory")
    };
    let json = |o: &std::process::Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).expect("a JSON report")
    };
    // The defaults keep the file's encodings; lower thresholds (6.2 names too) convert.
    let plain = json(&run("# nothing\nsave \"\"\n"));
    assert_eq!(plain["conversions"], serde_json::json!([]));
    let low = json(&run("hash-max-listpack-entries 1\nzset-max-ziplist-entries 2\nappendonly yes\n"));
    assert_eq!(low["config"], serde_json::json!({"hash-max-listpack-entries": 1, "zset-max-ziplist-entries": 2}));
    let conv = low["conversions"].as_array().expect("conversions");
    let kinds: Vec<(&str, &str, &str)> = conv
        .iter()
        .map(|c| (c["type"].as_str().unwrap_or(""), c["from"].as_str().unwrap_or(""), c["to"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(kinds, [("hash", "listpack", "hashtable"), ("zset", "listpack", "skiplist")]);
    // Tables cost more than listpacks.
    assert!(low["dataset_bytes"].as_u64() > plain["dataset_bytes"].as_u64());
    // One pass gives the report and, with --per-key, the line per key in a file.
    let lines = dir.path().join("keys.jsonl");
    let both = Command::new(env!("CARGO_BIN_EXE_rdbtool"))
        .args(["memory", &rdb.display().to_string(), "--format", "json", "--per-key"])
        .arg(&lines)
        .output()
        .expect("rdbtool memory");
    let report = json(&both);
    let text = std::fs::read_to_string(&lines).expect("the per-key file");
    assert_eq!(text.lines().count() as u64, report["keys"].as_u64().expect("keys"));
    let first: serde_json::Value = serde_json::from_str(text.lines().next().expect("a line")).expect("jsonl");
    for field in ["db", "key", "type", "encoding", "bytes"] {
        assert!(!first[field].is_null(), "{field} in {first}");
    }
    let bad = run("hash-max-listpack-entries lots\n");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("line 1: hash-max-listpack-entries: 'lots' is not an integer")
    );
}

#[test]
fn prefixes_form_a_tree_whose_first_level_adds_up() {
    let rdb = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb/redis-7.0/all-types.rdb");
    let out = Command::new(env!("CARGO_BIN_EXE_rdbtool"))
        .args(["memory", &rdb.display().to_string(), "--format", "json", "--depth", "2"])
        .output()
        .expect("rdbtool memory");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let pre = r["prefixes"].as_array().expect("prefixes");
    let level = |d: u64| pre.iter().filter(move |p| p["depth"].as_u64() == Some(d));
    let first: u64 = level(1).map(|p| p["keys"].as_u64().unwrap_or(0)).sum();
    assert_eq!(first, r["keys"].as_u64().expect("keys"), "every key under one first-level prefix");
    assert!(level(2).count() > 0, "second-level prefixes");
    for child in level(2) {
        let name = child["prefix"].as_str().expect("a text prefix");
        // Its parent is the longest first-level prefix it starts with (a key named "" is
        // a first-level prefix of everything).
        let parent = level(1)
            .filter(|p| p["prefix"].as_str().is_some_and(|q| name.starts_with(q)))
            .max_by_key(|p| p["prefix"].as_str().map_or(0, str::len))
            .unwrap_or_else(|| panic!("{name} has no parent"));
        assert!(child["keys"].as_u64() <= parent["keys"].as_u64(), "{name}");
        assert!(child["allocated"].as_u64() <= parent["allocated"].as_u64(), "{name}");
    }
}
