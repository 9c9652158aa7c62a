//! Write the starting corpus of one fuzz target: `seeds <target> <out-dir> <file>...`.
//! - `rdb`, `rdb_body`: each RDB file whole and cut into one small seed per record
//!   (`split_records`); for `rdb_body` the 9-byte magic becomes the one selector byte
//!   that target reads first.
//! - `commands`: each vs_redis script (engine/tests/scripts/*.redis) in the `commands`
//!   input format (directives dropped, `sleep N` as a clock line), whole and in chunks of
//!   a few lines, each chunk also with every integer argument made huge, negative or
//!   i64::MIN.
//! - `aof`: each file as it is.
//!
//! `seeds dict <file>` writes the libFuzzer dictionary of the `commands` target: every
//! command name in the table, option keywords, and the clock and cycle line bytes.
//! fuzz/run.sh calls this; it is a plain program, not built with fuzzing instrumentation.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ferrokv_fuzz::engine_check::{ADVANCE, CYCLE};

/// Lines per `commands` chunk seed.
const CHUNK_LINES: usize = 12;

/// What integer arguments become in the mutated chunk seeds.
const HOSTILE_INTEGERS: &[&str] =
    &["9223372036854775807", "-9223372036854775808", "-1", "-4294967297", "4294967296", "0"];

/// Option keywords the commands take, for the dictionary.
const KEYWORDS: &[&str] = &[
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "NX",
    "XX",
    "GT",
    "LT",
    "KEEPTTL",
    "FIELDS",
    "GET",
    "PERSIST",
    "ABSTTL",
    "REPLACE",
    "IDLETIME",
    "FREQ",
    "COUNT",
    "MATCH",
    "TYPE",
    "LIMIT",
    "WITHSCORES",
    "WITHVALUES",
    "BYSCORE",
    "BYLEX",
    "REV",
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "CH",
    "INCR",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "RANK",
    "MAXLEN",
    "STORE",
    "BY",
    "ASC",
    "DESC",
    "ALPHA",
    "BIT",
    "BYTE",
    "DB",
    "ENCODING",
    "REFCOUNT",
    "ASYNC",
    "SYNC",
    "+inf",
    "-inf",
    "(1",
    "[a",
    "-",
    "+",
    "*",
    "MINID",
    "NOMKSTREAM",
    "STREAMS",
    "GROUP",
    "NOACK",
    "BLOCK",
    "MKSTREAM",
    "ENTRIESREAD",
    "IDLE",
    "TIME",
    "RETRYCOUNT",
    "FORCE",
    "JUSTID",
    "LASTID",
    "FULL",
    "ENTRIESADDED",
    "MAXDELETEDID",
    "CREATE",
    "SETID",
    "DESTROY",
    "CREATECONSUMER",
    "DELCONSUMER",
    "CONSUMERS",
    "GROUPS",
    "STREAM",
    "~",
    "$",
    ">",
    "0-1",
    "(0-1",
];

/// A vs_redis script in the `commands` input format, one command (or clock line) per item.
fn script_lines(text: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for raw in text.lines() {
        let mut line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(ms) = line.strip_prefix("sleep ") {
            let mut l = vec![ADVANCE];
            l.extend_from_slice(ms.trim().as_bytes());
            out.push(l);
            out.push(vec![CYCLE]);
            continue;
        }
        for directive in ["!sorted ", "!len ", "!scan "] {
            line = line.strip_prefix(directive).unwrap_or(line);
        }
        if let Some(rest) = line.strip_prefix("!near ") {
            line = rest.split_once(' ').map_or(rest, |(_, cmd)| cmd);
        }
        let Ok(argv) = ferrokv_testkit::split_args(line) else { continue };
        if argv.is_empty() {
            continue;
        }
        out.push(argv.join(&b' '));
    }
    out
}

/// `lines` with every integer argument (not the command name) replaced by `with`.
fn with_integers(lines: &[Vec<u8>], with: &str) -> Vec<Vec<u8>> {
    lines
        .iter()
        .map(|l| {
            if l.first().is_some_and(|&b| b == ADVANCE || b == CYCLE) {
                return l.clone();
            }
            let args: Vec<&[u8]> = l.split(|&b| b == b' ').collect();
            let mapped: Vec<&[u8]> = args
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let int = std::str::from_utf8(a).ok().and_then(|s| s.parse::<i64>().ok()).is_some();
                    if i > 0 && int {
                        with.as_bytes()
                    } else {
                        a
                    }
                })
                .collect();
            mapped.join(&b' ')
        })
        .collect()
}

fn commands_seeds(text: &str) -> Vec<Vec<u8>> {
    let lines = script_lines(text);
    let join = |ls: &[Vec<u8>]| ls.join(&b'\n');
    let mut seeds = vec![join(&lines)];
    for chunk in lines.chunks(CHUNK_LINES) {
        seeds.push(join(chunk));
        for with in HOSTILE_INTEGERS {
            seeds.push(join(&with_integers(chunk, with)));
        }
    }
    seeds
}

/// The lines of a commands script (tests/scripts/*.redis) as a client sends them: RESP
/// multibulk (read in pieces of 1 byte, and of 64) and inline.
fn resp_seeds(text: &str) -> Vec<Vec<u8>> {
    let mut multibulk = Vec::new();
    let mut inline = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let Ok(argv) = ferrokv_testkit::split_args(line) else { continue };
        multibulk.extend(ferrokv_testkit::encode_command(&argv));
        inline.extend_from_slice(line.as_bytes());
        inline.extend_from_slice(b"\r\n");
    }
    let with = |step: u8, body: &[u8]| [&[step][..], body].concat();
    vec![with(2, &multibulk), with(128, &multibulk), with(3, &inline)]
}

/// DUMP payloads of every key a commands script leaves.
fn dump_seeds(text: &str) -> Vec<Vec<u8>> {
    let mut e = ferrokv::Engine::in_memory(ferrokv::Config::default());
    let mut s = ferrokv::Session::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if let Ok(argv) = ferrokv_testkit::split_args(line) {
            let _ = e.execute(&mut s, &argv);
        }
    }
    let keys: Vec<Vec<u8>> = e.keyspace().dbs[0].slots().iter().map(|k| k.key.to_vec()).collect();
    keys.into_iter()
        .filter_map(|k| match e.execute(&mut ferrokv::Session::default(), &[b"DUMP".to_vec(), k]) {
            ferrokv::Reply::Bulk(p) => Some(p),
            _ => None,
        })
        .collect()
}

fn write_dict(path: &str) -> ExitCode {
    let mut text = String::from("# Command names (ferrokv::command::specs) and option keywords; written by\n");
    text.push_str("# `seeds dict` (fuzz/examples/seeds.rs). The commands fuzz target splits on ' ' and '\\n'.\n");
    let mut names: Vec<&str> = ferrokv::command::specs().map(|s| s.name).collect();
    names.sort_unstable();
    for name in names {
        text.push_str(&format!("\"{}\"\n", name.to_ascii_uppercase()));
    }
    for kw in KEYWORDS {
        text.push_str(&format!("\"{kw}\"\n"));
    }
    text.push_str(&format!("\"\\x{ADVANCE:02x}\"\n\"\\x{CYCLE:02x}\"\n\" \"\n\"\\x0a\"\n"));
    match std::fs::write(path, text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seeds: {path}: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(target), Some(out)) = (args.first(), args.get(1)) else {
        eprintln!(
            "usage: seeds <rdb|rdb_body|commands|aof|resp|dump|config> <out-dir> <file>...  or  seeds dict <file>"
        );
        return ExitCode::from(2);
    };
    if target == "dict" {
        return write_dict(out);
    }
    let body = match target.as_str() {
        "rdb" | "commands" | "aof" | "resp" | "dump" | "config" => false,
        "rdb_body" => true,
        other => {
            eprintln!("seeds: unknown target {other}");
            return ExitCode::from(2);
        }
    };
    let out = PathBuf::from(out);
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("seeds: {}: {e}", out.display());
        return ExitCode::from(2);
    }
    let mut seen = HashSet::new();
    let mut written = 0usize;
    for path in &args[2..] {
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("seeds: {path}: {e}");
                return ExitCode::from(2);
            }
        };
        let stem = Path::new(path).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let all = match target.as_str() {
            "commands" => commands_seeds(&String::from_utf8_lossy(&data)),
            "aof" | "config" => vec![data],
            "resp" => resp_seeds(&String::from_utf8_lossy(&data)),
            "dump" => dump_seeds(&String::from_utf8_lossy(&data)),
            _ => {
                let mut all = vec![data.clone()];
                all.extend(ferrokv_fuzz::split_records(&data));
                all
            }
        };
        for (i, seed) in all.into_iter().enumerate() {
            let seed = if body && seed.len() >= 9 {
                // Odd selector: Valkey; even: Redis (see ferrokv_fuzz::with_magic).
                let sel = u8::from(seed.starts_with(b"VALKEY"));
                let mut s = vec![sel];
                s.extend_from_slice(&seed[9..]);
                s
            } else {
                seed
            };
            if !seen.insert(seed.clone()) {
                continue;
            }
            let name = if i == 0 { format!("{stem}.whole") } else { format!("{stem}.{i:04}") };
            if let Err(e) = std::fs::write(out.join(name), &seed) {
                eprintln!("seeds: {}: {e}", out.display());
                return ExitCode::from(2);
            }
            written += 1;
        }
    }
    println!("seeds: {written} files in {}", out.display());
    ExitCode::SUCCESS
}
