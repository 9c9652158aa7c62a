//! `rdbtool convert --to parquet` against `rdbtool dump`: the Parquet files of a file real
//! Redis 7.0 wrote (fixtures/rdb/redis-7.0/all-types.rdb: every type and encoding) hold
//! the dump's keys, types, TTLs and every element's value, read back with the parquet
//! crate; and DuckDB (its Python package, in target/duckdb-venv from
//! scripts/install-deps.sh, or FERROKV_DUCKDB_PYTHON) reads the same row counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrokv_testkit::TempDir;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb/redis-7.0/all-types.rdb")
}

/// A dump value's bytes: a string, or `{"hex": ...}` for bytes that are not UTF-8.
fn bytes(v: &serde_json::Value) -> Vec<u8> {
    match v {
        serde_json::Value::String(s) => s.as_bytes().to_vec(),
        other => {
            let hex = other["hex"].as_str().expect("a string or {\"hex\"}");
            (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex")).collect()
        }
    }
}

fn rows(path: &Path) -> Vec<Row> {
    let reader = SerializedFileReader::new(std::fs::File::open(path).expect("open")).expect("a Parquet file");
    reader.get_row_iter(None).expect("rows").map(|r| r.expect("a row")).collect()
}

fn get<'r>(row: &'r Row, name: &str) -> &'r Field {
    row.get_column_iter()
        .find(|(n, _)| n.as_str() == name)
        .map(|(_, f)| f)
        .unwrap_or_else(|| panic!("no column {name}"))
}

fn field_bytes(f: &Field) -> Option<Vec<u8>> {
    match f {
        Field::Bytes(b) => Some(b.data().to_vec()),
        Field::Str(s) => Some(s.as_bytes().to_vec()),
        Field::Null => None,
        other => panic!("not bytes: {other:?}"),
    }
}

fn field_int(f: &Field) -> Option<i64> {
    match f {
        Field::Long(n) => Some(*n),
        Field::Null => None,
        other => panic!("not an int64: {other:?}"),
    }
}

/// A key's elements, each as (index or id, field, value, score) in a comparable form.
type Elements = Vec<(String, Vec<u8>, Vec<u8>, String)>;

/// Per (db, key): its type, TTL and elements.
type Dataset = BTreeMap<(i64, Vec<u8>), (String, Option<i64>, Elements)>;

#[test]
fn parquet_holds_what_dump_holds_and_duckdb_reads_it() {
    let out = TempDir::new("parquet");
    let dir = out.path().join("set");
    let run = Command::new(env!("CARGO_BIN_EXE_rdbtool"))
        .args(["convert", &fixture().display().to_string(), &dir.display().to_string(), "--to", "parquet"])
        .args(["--source", "backup-1"])
        .output()
        .expect("rdbtool convert");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    // What the dump says.
    let dump = Command::new(env!("CARGO_BIN_EXE_rdbtool")).arg("dump").arg(fixture()).output().expect("dump");
    let mut want: Dataset = BTreeMap::new();
    for line in String::from_utf8_lossy(&dump.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("jsonl");
        let Some(kind) = v["type"].as_str() else { continue };
        let mut els: Elements = Vec::new();
        let value = &v["value"];
        match kind {
            "string" => els.push((String::new(), Vec::new(), bytes(value), String::new())),
            "list" => {
                for (i, item) in value.as_array().expect("items").iter().enumerate() {
                    els.push((i.to_string(), Vec::new(), bytes(item), String::new()));
                }
            }
            "set" => {
                for m in value.as_array().expect("members") {
                    els.push((String::new(), bytes(m), Vec::new(), String::new()));
                }
            }
            "zset" => {
                for p in value.as_array().expect("pairs") {
                    let score: f64 = p[1].as_str().expect("a score").parse().expect("a number");
                    els.push((String::new(), bytes(&p[0]), Vec::new(), format!("{score:?}")));
                }
            }
            "hash" => {
                for p in value.as_array().expect("pairs") {
                    els.push((String::new(), bytes(&p[0]), bytes(&p[1]), String::new()));
                }
            }
            "stream" => {
                for e in value.as_array().expect("entries") {
                    let id = e[0].as_str().expect("an id").to_string();
                    let pairs = e[1].as_array().expect("fields");
                    for fv in pairs.chunks(2) {
                        els.push((id.clone(), bytes(&fv[0]), bytes(&fv[1]), String::new()));
                    }
                }
            }
            _ => {}
        }
        els.sort();
        let key = (v["db"].as_i64().expect("db"), bytes(&v["key"]));
        want.insert(key, (kind.to_string(), v["expire_ms"].as_i64(), els));
    }
    assert!(want.len() > 200, "{} keys", want.len());

    // What the Parquet files say.
    let mut got: Dataset = BTreeMap::new();
    let keys = rows(&dir.join("keys.parquet"));
    for r in &keys {
        assert_eq!(field_bytes(get(r, "source")).as_deref(), Some(&b"backup-1"[..]));
        let key = (field_int(get(r, "db")).expect("db"), field_bytes(get(r, "key")).expect("key"));
        let kind = String::from_utf8(field_bytes(get(r, "type")).expect("type")).expect("utf-8");
        assert!(field_int(get(r, "size")).expect("size") > 0);
        got.insert(key, (kind, field_int(get(r, "expire_ms")), Vec::new()));
    }
    let elements = rows(&dir.join("elements.parquet"));
    for r in &elements {
        let key = (field_int(get(r, "db")).expect("db"), field_bytes(get(r, "key")).expect("key"));
        let index = field_int(get(r, "index")).map(|i| i.to_string());
        let id = field_bytes(get(r, "id")).map(|b| String::from_utf8_lossy(&b).into_owned());
        let score = match get(r, "score") {
            Field::Double(x) => format!("{x:?}"),
            _ => String::new(),
        };
        let e = (
            index.or(id).unwrap_or_default(),
            field_bytes(get(r, "field")).unwrap_or_default(),
            field_bytes(get(r, "value")).unwrap_or_default(),
            score,
        );
        got.get_mut(&key).expect("an element of a listed key").2.push(e);
    }
    for v in got.values_mut() {
        v.2.sort();
    }
    let differ: Vec<_> = want.iter().filter(|(k, v)| got.get(*k) != Some(*v)).map(|(k, _)| k).take(5).collect();
    assert!(
        differ.is_empty() && got.len() == want.len(),
        "{} vs {} keys; differing: {differ:?}",
        got.len(),
        want.len()
    );

    // DuckDB reads the same rows.
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/duckdb-venv/bin/python");
    let python = std::env::var_os("FERROKV_DUCKDB_PYTHON").map(PathBuf::from).or(venv.exists().then_some(venv));
    let Some(python) = python else {
        eprintln!("SKIPPED the DuckDB part: no target/duckdb-venv (scripts/install-deps.sh) nor FERROKV_DUCKDB_PYTHON");
        return;
    };
    let query = format!(
        "import duckdb\nc = duckdb.connect()\nd = '{}'\n\
         print(c.sql(f\"select count(*) from read_parquet('{{d}}/keys.parquet')\").fetchall()[0][0])\n\
         print(c.sql(f\"select count(*) from read_parquet('{{d}}/elements.parquet')\").fetchall()[0][0])\n\
         print(c.sql(f\"select count(distinct source) from read_parquet('{{d}}/*.parquet', union_by_name=true)\").fetchall()[0][0])\n",
        dir.display()
    );
    let duck = Command::new(&python).arg("-c").arg(&query).output().expect("python with duckdb");
    assert!(duck.status.success(), "duckdb: {}", String::from_utf8_lossy(&duck.stderr));
    let counts: Vec<usize> =
        String::from_utf8_lossy(&duck.stdout).lines().map(|l| l.trim().parse().expect("a count")).collect();
    assert_eq!(counts, [keys.len(), elements.len(), 1]);
}

/// A file that ends early: the error, and no Parquet file under its name (the tables are
/// written beside their names and dropped, whichever thread was writing).
#[test]
fn a_truncated_file_leaves_no_parquet_files() {
    let out = TempDir::new("parquet-truncated");
    let data = std::fs::read(fixture()).expect("fixture");
    let cut = out.path().join("cut.rdb");
    std::fs::write(&cut, &data[..data.len() * 2 / 3]).expect("write");
    let dir = out.path().join("set");
    let run = Command::new(env!("CARGO_BIN_EXE_rdbtool"))
        .args(["convert", &cut.display().to_string(), &dir.display().to_string(), "--to", "parquet"])
        .output()
        .expect("rdbtool convert");
    assert_eq!(run.status.code(), Some(2), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stderr).contains("offset"), "{}", String::from_utf8_lossy(&run.stderr));
    let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").map(|e| e.expect("entry").file_name()).collect();
    assert!(left.is_empty(), "{left:?}");
}
