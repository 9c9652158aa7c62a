//! `rdbtool diff`, on files written by a real redis-server 7.0: the fixture `all-types.rdb`
//! is loaded into a fresh server, saved as A, changed through ordinary commands, saved as
//! B. No test input is made by editing bytes, except truncating a real file.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ferrokv_tools::diff::{diff_files, json, Options};
use ferrokv_tools::pipeline::Pipeline;
use serde_json::Value;

// ---- helpers: temp dirs, a real redis-server, the CLI ----

/// A fresh directory, removed when dropped.
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("ferrokv-difftest-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        Tmp(p)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A redis-server on a free loopback port, loading `dir/dump.rdb` if it exists.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(dir: &Path) -> Server {
        let spawn = |port: u16| {
            Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--enable-debug-command", "yes", "--daemonize", "no", "--dbfilename", "dump.rdb", "--dir"])
                .arg(dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is installed (make deps)")
        };
        let (child, port) = ferrokv_testkit::spawn_on_free_port("redis-server", spawn, Duration::from_secs(15));
        Server { child, port, dir: dir.to_path_buf() }
    }

    /// A server holding `all-types.rdb`, the fixture written by redis-server 7.0.
    fn with_fixture(dir: &Path) -> Server {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb/redis-7.0/all-types.rdb");
        std::fs::copy(fixture, dir.join("dump.rdb")).expect("copy fixture");
        let s = Server::start(dir);
        assert_eq!(s.cli(&["DBSIZE"]), "266", "the fixture loaded");
        s
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli is installed (make deps)");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// SAVE, then copy the file to `dest`.
    fn save_as(&self, dest: &Path) {
        assert_eq!(self.cli(&["SAVE"]), "OK");
        std::fs::copy(self.dir.join("dump.rdb"), dest).expect("copy dump.rdb");
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rdbtool<S: AsRef<OsStr>>(args: &[S], tmpdir: Option<&Path>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rdbtool"));
    cmd.args(args);
    if let Some(t) = tmpdir {
        cmd.env("TMPDIR", t);
    }
    let out = cmd.output().expect("run rdbtool");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn diff_json(a: &Path, b: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args: Vec<&OsStr> =
        vec![OsStr::new("diff"), a.as_os_str(), b.as_os_str(), OsStr::new("--format"), OsStr::new("json")];
    args.extend(extra.iter().map(OsStr::new));
    let r = rdbtool(&args, None);
    assert!(r.code == 0 || r.code == 1, "exit {}: {}", r.code, r.stderr);
    (r.code, serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("json output: {e}: {}", r.stdout)))
}

/// The reported keys as (db, key, status).
fn statuses(v: &Value) -> Vec<(u64, String, String)> {
    v["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| {
            (
                k["db"].as_u64().expect("db"),
                k["key"].as_str().expect("key").to_string(),
                k["status"].as_str().expect("status").to_string(),
            )
        })
        .collect()
}

fn key<'v>(v: &'v Value, db: u64, name: &str) -> &'v Value {
    v["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["db"] == db && k["key"] == name)
        .unwrap_or_else(|| panic!("db {db} key {name} not reported: {v}"))
}

/// A (before) and B (after) with exactly four changes, made by real Redis commands:
/// one hash field changed, one TTL moved by +100000 ms, one key deleted (db 1), one key
/// replaced by a key of another type (db 15).
fn four_changes(t: &Tmp) -> (PathBuf, PathBuf) {
    let dir = t.path("server");
    std::fs::create_dir_all(&dir).expect("dir");
    let s = Server::with_fixture(&dir);
    let (a, b) = (t.path("a.rdb"), t.path("b.rdb"));
    s.save_as(&a);
    assert_eq!(s.cli(&["HSET", "hash:small:1", "tfhq", "changed"]), "0");
    assert_eq!(s.cli(&["PEXPIRETIME", "str:embstr:hello"]), "4102444802002");
    assert_eq!(s.cli(&["PEXPIREAT", "str:embstr:hello", "4102444902002"]), "1");
    assert_eq!(s.cli(&["-n", "1", "DEL", "db1:list"]), "1");
    assert_eq!(s.cli(&["-n", "15", "DEL", "db15:str"]), "1");
    assert_eq!(s.cli(&["-n", "15", "RPUSH", "db15:str", "now", "a", "list"]), "3");
    s.save_as(&b);
    (a, b)
}

// ---- the tests ----

#[test]
fn a_file_is_the_same_as_itself() {
    let t = Tmp::new("self");
    let (a, _) = four_changes(&t);
    let r = rdbtool(&[OsStr::new("diff"), a.as_os_str(), a.as_os_str()], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("same: 286 keys"), "{}", r.stdout);
    let (code, v) = diff_json(&a, &a, &[]);
    assert_eq!(code, 0);
    assert_eq!(v["same"], true);
    assert_eq!(v["counts"]["keys_same"], 286);
    assert_eq!(v["counts"]["keys_differ"], 0);
    assert!(v["keys"].as_array().expect("keys").is_empty());
}

#[test]
fn four_changes_are_reported_exactly() {
    let t = Tmp::new("four");
    let (a, b) = four_changes(&t);
    let (code, v) = diff_json(&a, &b, &[]);
    assert_eq!(code, 1);
    assert_eq!(v["same"], false);
    let c = &v["counts"];
    assert_eq!(
        (c["keys_a"].as_u64(), c["keys_b"].as_u64(), c["keys_same"].as_u64(), c["keys_differ"].as_u64()),
        (Some(286), Some(285), Some(282), Some(4))
    );
    assert_eq!(
        (&c["only_in_a"], &c["only_in_b"], &c["type_changed"], &c["value_changed"], &c["ttl_changed"]),
        (&Value::from(1), &Value::from(0), &Value::from(1), &Value::from(1), &Value::from(1))
    );
    // Sorted by db, then key bytes.
    let expect = [
        (0, "hash:small:1", "changed"),
        (0, "str:embstr:hello", "changed"),
        (1, "db1:list", "only_in_a"),
        (15, "db15:str", "type_changed"),
    ];
    let got = statuses(&v);
    assert_eq!(got.len(), 4, "{got:?}");
    for (g, e) in got.iter().zip(expect) {
        assert_eq!((g.0, g.1.as_str(), g.2.as_str()), e);
    }
    let h = key(&v, 0, "hash:small:1");
    assert_eq!((&h["value_changed"], &h["ttl_changed"]), (&Value::Bool(true), &Value::Bool(false)));
    let d = &h["value"];
    assert_eq!(
        (&d["len_a"], &d["len_b"], &d["differences_total"]),
        (&Value::from(2), &Value::from(2), &Value::from(1))
    );
    let f = &d["differences"][0];
    assert_eq!(f["field"], "tfhq");
    assert_eq!(f["a"]["value"], "2s7 ");
    assert_eq!(f["b"]["value"], "changed");
    let s = key(&v, 0, "str:embstr:hello");
    assert_eq!((&s["value_changed"], &s["ttl_changed"]), (&Value::Bool(false), &Value::Bool(true)));
    assert_eq!(
        (&s["expire_ms_a"], &s["expire_ms_b"]),
        (&Value::from(4102444802002i64), &Value::from(4102444902002i64))
    );
    assert!(s.get("value").is_none());
    let l = key(&v, 1, "db1:list");
    assert_eq!((&l["type_a"], &l["type_b"]), (&Value::from("list"), &Value::Null));
    let x = key(&v, 15, "db15:str");
    assert_eq!((&x["type_a"], &x["type_b"]), (&Value::from("string"), &Value::from("list")));
    assert_eq!(v["keys_not_shown"], 0);
    assert_eq!(v["functions"]["only_in_a"].as_array().map(Vec::len), Some(0));

    // The same, for people.
    let r = rdbtool(&[OsStr::new("diff"), a.as_os_str(), b.as_os_str()], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let want = [
        "db 0 'hash:small:1' (hash): value differs: 1 difference (A 2 fields, B 2 fields)",
        "    'tfhq': '2s7 ' -> 'changed'",
        "db 0 'str:embstr:hello' (string): TTL 4102444802002 -> 4102444902002 (+100000 ms)",
        "db 1 'db1:list': only in A (list)",
        "db 15 'db15:str': type string (A) -> list (B)",
    ];
    assert_eq!(&lines[..5], &want, "{}", r.stdout);
    assert!(lines[5].starts_with("different: 4 keys differ (1 only in A, 0 only in B, 1 type changed, 1 value changed, 1 TTL changed); 282 same"), "{}", lines[5]);
    assert_eq!(lines.len(), 6);

    // B -> A mirrors it.
    let (code, back) = diff_json(&b, &a, &[]);
    assert_eq!(code, 1);
    assert_eq!(back["counts"]["only_in_b"], 1);
    assert_eq!(back["counts"]["only_in_a"], 0);
    assert_eq!(key(&back, 0, "hash:small:1")["value"]["differences"][0]["a"]["value"], "changed");
}

#[test]
fn options_filter_and_tolerate() {
    let t = Tmp::new("opts");
    let (a, b) = four_changes(&t);
    let differ = |extra: &[&str]| {
        let (code, v) = diff_json(&a, &b, extra);
        (code, v["counts"]["keys_differ"].as_u64().expect("count"), v)
    };
    let (code, n, v) = differ(&["--ignore-ttl"]);
    assert_eq!((code, n), (1, 3));
    assert_eq!(v["counts"]["ttl_changed"], 0);
    assert_eq!(differ(&["--ttl-tolerance", "100000"]).1, 3);
    assert_eq!(differ(&["--ttl-tolerance", "99999"]).1, 4);
    let (_, n, v) = differ(&["--db", "15"]);
    assert_eq!(n, 1);
    assert_eq!((&v["counts"]["keys_a"], &v["counts"]["type_changed"]), (&Value::from(10), &Value::from(1)));
    let (_, n, v) = differ(&["--key", "hash:*"]);
    assert_eq!(n, 1);
    assert_eq!(statuses(&v)[0].1, "hash:small:1");
    assert_eq!(v["options"]["key"], "hash:*");
    let (code, n, _) = differ(&["--key", "list:*"]);
    assert_eq!((code, n), (0, 0), "nothing differs among list:* keys");
    let (_, n, v) = differ(&["--max-keys", "2"]);
    assert_eq!(n, 4);
    assert_eq!(v["keys"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["keys_not_shown"], 2);
    assert_eq!(statuses(&v)[1].1, "str:embstr:hello", "the first keys in (db, key) order are kept");
    let (_, _, v) = differ(&["--max-details", "0"]);
    let d = &key(&v, 0, "hash:small:1")["value"];
    assert_eq!((&d["differences_total"], d["differences"].as_array().map(Vec::len)), (&Value::from(1), Some(0)));
    let r = rdbtool(&[OsStr::new("diff"), a.as_os_str(), b.as_os_str(), OsStr::new("--quiet")], None);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    let r =
        rdbtool(&[OsStr::new("diff"), a.as_os_str(), b.as_os_str(), OsStr::new("--max-keys"), OsStr::new("1")], None);
    assert!(r.stdout.contains("... 3 more differing keys not shown (--max-keys)"), "{}", r.stdout);
}

#[test]
fn encodings_do_not_matter() {
    // The same dataset saved twice: with the default config, then after every hash, zset and
    // set was converted to its dict encoding (DEBUG RELOAD under zero listpack/intset limits)
    // and with LZF compression off.
    let t = Tmp::new("enc");
    let dir = t.path("server");
    std::fs::create_dir_all(&dir).expect("dir");
    let s = Server::with_fixture(&dir);
    let (a, b) = (t.path("a.rdb"), t.path("b.rdb"));
    s.save_as(&a);
    for (k, v) in [
        ("hash-max-listpack-entries", "0"),
        ("zset-max-listpack-entries", "0"),
        ("set-max-intset-entries", "0"),
        ("rdbcompression", "no"),
    ] {
        assert_eq!(s.cli(&["CONFIG", "SET", k, v]), "OK");
    }
    assert_eq!(s.cli(&["DEBUG", "RELOAD"]), "OK");
    assert_eq!(s.cli(&["OBJECT", "ENCODING", "hash:small:1"]), "hashtable");
    assert_eq!(s.cli(&["-n", "1", "OBJECT", "ENCODING", "db1:set"]), "hashtable");
    s.save_as(&b);

    // The files really differ in how they store things.
    let enc = |p: &Path| {
        let data = std::fs::read(p).expect("read");
        let r = ferrokv_tools::verify::walk(&data, ferrokv_tools::verify::Depth::Records, 0)
            .unwrap_or_else(|(_, e)| panic!("{e}"));
        r.dbs[&0].encodings.clone()
    };
    let (ea, eb) = (enc(&a), enc(&b));
    for e in ["hash-listpack", "zset-listpack", "set-intset"] {
        assert!(ea.get(e).copied().unwrap_or(0) > 0, "A has {e}: {ea:?}");
        assert_eq!(eb.get(e), None, "B has no {e}: {eb:?}");
    }
    assert!(eb["hash-hashtable"] > ea["hash-hashtable"]);
    assert_ne!(std::fs::read(&a).expect("a"), std::fs::read(&b).expect("b"));

    let (code, v) = diff_json(&a, &b, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["counts"]["keys_same"], 286);
    let r = rdbtool(&[OsStr::new("diff"), b.as_os_str(), a.as_os_str()], None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

#[test]
fn every_type_names_its_differing_elements() {
    let t = Tmp::new("types");
    let dir = t.path("server");
    std::fs::create_dir_all(&dir).expect("dir");
    let s = Server::with_fixture(&dir);
    let (a, b) = (t.path("a.rdb"), t.path("b.rdb"));
    s.save_as(&a);
    assert_eq!(s.cli(&["-n", "1", "LSET", "db1:list", "1", "changed"]), "OK");
    assert_eq!(s.cli(&["SADD", "set:str:1", "new-member"]), "1");
    assert_eq!(s.cli(&["-n", "1", "ZADD", "db1:zset", "3.5", "b"]), "0");
    assert_eq!(s.cli(&["-n", "1", "XADD", "db1:stream", "2-1", "f", "v2"]), "2-1");
    assert_eq!(s.cli(&["APPEND", "str:lzf:lorem", "XYZ"]).parse::<u64>().map(|n| n > 100), Ok(true));
    assert_eq!(s.cli(&["HSET", "hash:513", "f000", "changed"]), "0");
    assert_eq!(s.cli(&["-n", "15", "SADD", "db15:set", "99"]), "1");
    let pending = s.cli(&["XPENDING", "stream:big", "g1", "-", "+", "1"]);
    let pel_id = pending.lines().next().expect("a pending entry").to_string();
    assert_eq!(s.cli(&["XACK", "stream:big", "g1", &pel_id]), "1");
    s.save_as(&b);

    let (code, v) = diff_json(&a, &b, &["--max-details", "5"]);
    assert_eq!(code, 1);
    assert_eq!(v["counts"]["keys_differ"], 8, "{}", v["keys"]);
    assert_eq!(v["counts"]["value_changed"], 8);
    let first = |db, name| key(&v, db, name)["value"]["differences"][0].clone();

    assert_eq!(first(1, "db1:list"), serde_json::json!({"index": 1, "a": "b", "b": "changed"}));

    assert_eq!(first(0, "set:str:1"), serde_json::json!({"member": "new-member", "in": "b"}));
    assert_eq!(first(15, "db15:set"), serde_json::json!({"member": "99", "in": "b"}));
    assert_eq!(first(1, "db1:zset"), serde_json::json!({"member": "b", "a": "2.5", "b": "3.5"}));
    assert_eq!(first(0, "hash:513")["field"], "f000");
    assert_eq!(first(0, "hash:513")["b"], serde_json::json!({"value": "changed", "expire_ms": null}));

    let st = &key(&v, 1, "db1:stream")["value"];
    assert_eq!(st["differences"][0], serde_json::json!({"meta": "last_id", "a": "1-1", "b": "2-1"}));
    assert_eq!(st["differences"][1], serde_json::json!({"id": "2-1", "a": null, "b": ["f", "v2"]}));
    assert_eq!((&st["len_a"], &st["len_b"]), (&Value::from(1), &Value::from(2)));

    let lorem = &key(&v, 0, "str:lzf:lorem")["value"];
    assert_eq!(lorem["len_b"].as_u64(), lorem["len_a"].as_u64().map(|n| n + 3));
    assert!(lorem["differences"][0]["b"].as_str().expect("window").ends_with("XYZ"));

    let big = &key(&v, 0, "stream:big")["value"]["differences"];
    let whats: Vec<&str> = big.as_array().expect("diffs").iter().filter_map(|d| d["meta"].as_str()).collect();
    assert!(whats.contains(&format!("group 'g1' pending {pel_id}").as_str()), "{whats:?}");
    assert!(whats.iter().any(|w| w.starts_with("group 'g1' consumer '")), "{whats:?}");
}

#[test]
fn partitions_and_threads_do_not_change_the_result() {
    let t = Tmp::new("parts");
    let (a, b) = four_changes(&t);
    let run = |partition_bytes: u64, pipeline: Pipeline| {
        let opts = Options { partition_bytes, pipeline, temp_dir: Some(t.0.clone()), ..Options::default() };
        let r = diff_files(&a, &b, &opts).unwrap_or_else(|e| panic!("{e:?}"));
        (json(&r), r.partitions, r.splits)
    };
    let (reference, parts, _) = run(64 << 20, Pipeline::default());
    assert_eq!(parts, 1);
    let serial = Pipeline { workers: 1, batch_bytes: usize::MAX, big_key_bytes: usize::MAX };
    let tiny = Pipeline { workers: 2, batch_bytes: 1, big_key_bytes: 200 };
    for (bytes, pipeline) in
        [(64 << 20, serial), (20_000, Pipeline::default()), (1_000, tiny), (300, Pipeline::default())]
    {
        let (out, parts, splits) = run(bytes, pipeline);
        assert!(out == reference, "partition budget {bytes}: output differs");
        if bytes < 64 << 20 {
            assert!(parts > 1, "budget {bytes}: {parts} partitions");
        }
        if bytes <= 1_000 {
            assert!(splits > 0, "budget {bytes}: partitions were split again");
        }
    }
    // Only our files are left in the temp dir: the partition files are gone.
    let left: Vec<_> = std::fs::read_dir(&t.0).expect("ls").filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 3, "{left:?}");

    // Through the CLI's hidden knob too.
    let r = rdbtool(
        &[
            OsStr::new("diff"),
            a.as_os_str(),
            b.as_os_str(),
            OsStr::new("--format"),
            OsStr::new("json"),
            OsStr::new("--partition-bytes"),
            OsStr::new("500"),
        ],
        None,
    );
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout.trim_end().as_bytes(), &reference[..]);
}

#[test]
fn truncated_input_is_an_error_not_a_verdict() {
    let t = Tmp::new("trunc");
    let (a, b) = four_changes(&t);
    let full = std::fs::read(&b).expect("read b");
    let tmpdir = t.path("tmp");
    std::fs::create_dir_all(&tmpdir).expect("tmpdir");
    for cut in [full.len() / 2, full.len() - 3, 40] {
        let bad = t.path(&format!("cut-{cut}.rdb"));
        std::fs::write(&bad, &full[..cut]).expect("write");
        for (x, y) in [(&a, &bad), (&bad, &a)] {
            for format in ["human", "json"] {
                let r = rdbtool(
                    &[OsStr::new("diff"), x.as_os_str(), y.as_os_str(), OsStr::new("--format"), OsStr::new(format)],
                    Some(&tmpdir),
                );
                assert_eq!(r.code, 2, "cut at {cut}: {}", r.stderr);
                assert_eq!(r.stdout, "", "no verdict on stdout");
                let name = bad.display().to_string();
                assert!(r.stderr.starts_with(&format!("rdbtool: {name}: offset ")), "cut at {cut}: {}", r.stderr);
                assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
            }
        }
        // Nothing is left behind in TMPDIR.
        assert_eq!(std::fs::read_dir(&tmpdir).expect("ls").count(), 0);
    }
    let r = rdbtool(&[OsStr::new("diff"), a.as_os_str(), t.path("missing.rdb").as_os_str()], None);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("missing.rdb"), "{}", r.stderr);
    // A truncated key names its key: cut inside the last key's value.
    let data = std::fs::read(&a).expect("read a");
    let bad = t.path("inside-a-key.rdb");
    std::fs::write(&bad, &data[..data.len() - 20]).expect("write");
    let r = rdbtool(&[OsStr::new("diff"), bad.as_os_str(), a.as_os_str()], None);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains(": db "), "{}", r.stderr);
}

#[test]
fn temp_files_go_to_tmpdir_and_are_removed() {
    let t = Tmp::new("tmpdir");
    let (a, b) = four_changes(&t);
    let tmpdir = t.path("tmp");
    std::fs::create_dir_all(&tmpdir).expect("tmpdir");
    let r = rdbtool(
        &[OsStr::new("diff"), a.as_os_str(), b.as_os_str(), OsStr::new("--partition-bytes"), OsStr::new("2000")],
        Some(&tmpdir),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(std::fs::read_dir(&tmpdir).expect("ls").count(), 0);
    // An unusable TMPDIR is an error naming it.
    let r = rdbtool(&[OsStr::new("diff"), a.as_os_str(), b.as_os_str()], Some(&t.path("no-such-dir")));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no-such-dir"), "{}", r.stderr);
}

/// Saves of one dataset by Redis 7.4.1 under different eviction policies (IDLE / FREQ
/// opcodes, hashes with field TTLs) are the same dataset. Needs ../shared beside the
/// checkout: `make compat`.
#[test]
#[ignore = "needs ../shared; run with make compat"]
fn shared_corpus_saves_of_one_dataset_are_the_same() {
    let dir = std::env::var_os("FERROKV_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
        .join("corpus/redis-7.4.1");
    assert!(dir.join("dump.rdb").exists(), "{} is missing: make compat needs ../shared", dir.display());
    for other in ["dump-lru.rdb", "dump-lfu.rdb"] {
        let (code, v) = diff_json(&dir.join("dump.rdb"), &dir.join(other), &[]);
        assert_eq!(code, 0, "{other}: {}", v["keys"]);
    }
}
