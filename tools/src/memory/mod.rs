//! `rdbtool memory FILE`: what each key would cost the server that loads the file, from
//! the engine's model of Redis's allocations (`ferrokv::memory`, the one MEMORY USAGE
//! answers with), and where it adds up: totals per database, by type and encoding, the
//! biggest keys, key prefixes, TTLs. One pass through the pipeline; memory is bounded by
//! `--top` and `--max-prefixes`, never by the file.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::io::Write;
use std::path::PathBuf;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::format::rdb::{escape_key, RdbError, RdbReader, Record};
use ferrokv::logical::Logical;
use ferrokv::value::{Limits, Value};

use crate::jsonw;

mod html;
use crate::out::{Out, ToolError};
use crate::pipeline::{Batch, Pipeline, Stage};

/// Arguments of `rdbtool memory`.
#[derive(clap::Args, Debug)]
pub struct MemoryArgs {
    /// RDB file.
    pub file: PathBuf,
    /// The server whose allocations are modelled (its encodings and thresholds). Default:
    /// the file's writer, else 7.0.
    #[arg(long, value_name = "V", value_parser = crate::parse_server_version)]
    pub redis_version: Option<ServerVersion>,
    /// The allocator whose size classes the server's allocations round to: jemalloc (as
    /// Redis builds it: from source, the official images), jemalloc-q16 (a system
    /// jemalloc, as Debian's and Ubuntu's packages link), libc.
    #[arg(long, default_value = "jemalloc", value_parser = ["jemalloc", "jemalloc-q16", "libc"])]
    pub allocator: String,
    /// How many of the biggest keys to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// What separates the parts of a key name, for the prefix report.
    #[arg(long, default_value = ":")]
    pub separator: String,
    /// How many parts of a key make its prefix.
    #[arg(long, default_value_t = 1)]
    pub depth: usize,
    /// At most this many prefixes are kept; the keys of any further ones count as `(other)`.
    #[arg(long, default_value_t = 10_000)]
    pub max_prefixes: usize,
    /// table (for people), json (the whole report), jsonl or csv (a line per key).
    #[arg(long, value_enum, default_value = "table")]
    pub format: MemoryFormat,
    /// The time, in unix ms, TTLs are counted from (default: now).
    #[arg(long)]
    pub now: Option<i64>,
    /// A redis.conf whose thresholds (hash-max-listpack-entries, zset-max-listpack-value,
    /// list-max-listpack-size, ...) the modelled server loads the file with; the keys whose
    /// encoding that changes are reported.
    #[arg(long, value_name = "REDIS.CONF")]
    pub config: Option<PathBuf>,
    /// Also write the report as one self-contained HTML page (no network) to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the line per key (jsonl: db, key, type, encoding, elements, bytes,
    /// allocated, expire_ms; csv with --format csv) to this file, in the same pass as the
    /// report (table or json) on standard output.
    #[arg(long, value_name = "FILE")]
    pub per_key: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MemoryFormat {
    Table,
    Json,
    Jsonl,
    Csv,
}

/// One key's estimate.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyCost {
    /// What MEMORY USAGE would answer.
    pub bytes: usize,
    /// What the allocator hands out for its value and name (the keyspace's dict entry is
    /// counted with the database's tables, as INFO counts it).
    pub allocated: usize,
    pub db: u64,
    pub key: Vec<u8>,
    pub kind: &'static str,
    pub encoding: &'static str,
    /// The encoding the file stores the value in.
    pub stored: &'static str,
    pub elements: usize,
    pub expire_ms: Option<i64>,
}

/// Keys, their MEMORY USAGE and their allocations.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub keys: u64,
    pub bytes: u64,
    pub allocated: u64,
}

impl Tally {
    /// `"keys":N,"bytes":N,"allocated":N`, for the JSON report.
    fn json_fields(&self) -> String {
        format!("\"keys\":{},\"bytes\":{},\"allocated\":{}", self.keys, self.bytes, self.allocated)
    }

    fn add(&mut self, c: &KeyCost) {
        self.keys += 1;
        self.bytes += c.bytes as u64;
        self.allocated += c.allocated as u64;
    }
}

/// TTL classes: none, already passed, then under an hour, a day, a week, a month, more.
pub const TTL_CLASSES: [&str; 7] = ["none", "expired", "<1h", "<1d", "<7d", "<30d", ">=30d"];

fn ttl_class(expire_ms: Option<i64>, now: i64) -> usize {
    const HOUR: i64 = 3_600_000;
    match expire_ms.map(|e| e - now) {
        None => 0,
        Some(left) if left <= 0 => 1,
        Some(left) if left < HOUR => 2,
        Some(left) if left < 24 * HOUR => 3,
        Some(left) if left < 7 * 24 * HOUR => 4,
        Some(left) if left < 30 * 24 * HOUR => 5,
        Some(_) => 6,
    }
}

/// Key sizes (as MEMORY USAGE answers), by upper bound.
pub const SIZE_CLASSES: [(&str, usize); 10] = [
    ("<64B", 64),
    ("<256B", 256),
    ("<1KB", 1 << 10),
    ("<4KB", 4 << 10),
    ("<16KB", 16 << 10),
    ("<64KB", 64 << 10),
    ("<256KB", 256 << 10),
    ("<1MB", 1 << 20),
    ("<16MB", 16 << 20),
    (">=16MB", usize::MAX),
];

/// Elements per key, by upper bound (128 and 512 are the default listpack and intset limits).
pub const ELEMENT_CLASSES: [(&str, usize); 7] = [
    ("1", 1),
    ("2-16", 16),
    ("17-128", 128),
    ("129-512", 512),
    ("513-8K", 8 << 10),
    ("8K-64K", 64 << 10),
    (">64K", usize::MAX),
];

/// The class of `n` among `classes` (each an upper bound, the last unbounded).
fn class_of(classes: &[(&str, usize)], n: usize, inclusive: bool) -> usize {
    classes.iter().position(|&(_, max)| if inclusive { n <= max } else { n < max }).unwrap_or(classes.len() - 1)
}

/// The whole report.
#[derive(Debug)]
pub struct MemoryReport {
    pub version: ServerVersion,
    pub alloc: ferrokv::memory::Allocator,
    pub total: Tally,
    /// Keys, bytes of the keys, and keys with a TTL, per database.
    pub dbs: BTreeMap<u64, (Tally, u64)>,
    pub by_encoding: BTreeMap<(&'static str, &'static str), Tally>,
    pub top: Vec<KeyCost>,
    /// The prefix tree: each prefix of 1 to `--depth` parts, with its depth.
    pub prefixes: BTreeMap<Vec<u8>, (usize, Tally)>,
    /// Keys whose first-level prefix came past `--max-prefixes`.
    pub other_prefixes: Tally,
    pub ttls: [Tally; TTL_CLASSES.len()],
    pub sizes: [Tally; SIZE_CLASSES.len()],
    pub element_counts: [Tally; ELEMENT_CLASSES.len()],
    /// Keys the modelled server holds in another encoding than the file's: (type, the
    /// file's encoding, the server's).
    pub conversions: BTreeMap<(&'static str, &'static str, &'static str), Tally>,
    /// The thresholds `--config` set, as it named them.
    pub config: Vec<(String, i64)>,
}

impl MemoryReport {
    /// The databases' tables: the keyspace's buckets and entries, the expires dict.
    pub fn tables_bytes(&self) -> u64 {
        let m = ferrokv::memory::Model::allocated(self.version, self.alloc);
        self.dbs
            .values()
            .map(|(t, volatile)| {
                (ferrokv::memory::db_overhead(t.keys as usize, *volatile as usize, &m) + t.keys as usize * m.dict_entry)
                    as u64
            })
            .sum()
    }

    /// What the data would take in the server: the keys' allocations (INFO's
    /// `used_memory_dataset`) and the databases' tables.
    pub fn total_bytes(&self) -> u64 {
        self.total.allocated + self.tables_bytes()
    }
}

/// The thresholds `version` loads a file with: its defaults, and those of `config`.
fn limits_of(version: ServerVersion, config: &[(String, i64)]) -> Limits {
    let mut cfg = ferrokv::Config::default();
    cfg.set_version(version);
    let mut limits = cfg.limits;
    for (name, n) in config {
        limits.set_by_name(name, *n);
    }
    if version.behaves_as() < ServerVersion::Redis72 {
        // Before 7.2 a set of strings is a hashtable however small.
        limits.set_max_listpack_entries = 0;
    }
    limits
}

/// The encoding thresholds a redis.conf sets (Redis 7 or 6.2 names); its other directives
/// are left alone.
pub fn read_config(path: &std::path::Path) -> Result<Vec<(String, i64)>, ToolError> {
    let text = std::fs::read(path).map_err(|e| ToolError::Usage(format!("cannot read {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in text.split(|&c| c == b'\n').enumerate() {
        let bad = |what: &str| ToolError::Usage(format!("{} line {}: {what}", path.display(), i + 1));
        let line = line.trim_ascii();
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let words = ferrokv::format::args::split_args(line).ok_or_else(|| bad("unbalanced quotes"))?;
        let [name, value, ..] = words.as_slice() else { continue };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if Limits::default().get_by_name(&name).is_none() {
            continue;
        }
        let n = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| bad(&format!("{name}: '{}' is not an integer", String::from_utf8_lossy(value))))?;
        out.push((name, n));
    }
    Ok(out)
}

/// What the two models count for `version`: MEMORY USAGE's, and the allocator's.
struct Models {
    usage: ferrokv::memory::Model,
    allocated: ferrokv::memory::Model,
}

impl Models {
    fn new(version: ServerVersion, alloc: ferrokv::memory::Allocator) -> Models {
        Models {
            usage: ferrokv::memory::Model::usage(version, alloc),
            allocated: ferrokv::memory::Model::allocated(version, alloc),
        }
    }
}

/// A batch's keys and, for a per-key format, their lines (written by the workers, so that
/// formatting uses every core too).
struct Costed {
    costs: Vec<KeyCost>,
    lines: Vec<u8>,
}

fn costs(records: &[Record<'_>], limits: &Limits, models: &Models, format: MemoryFormat) -> Result<Costed, ToolError> {
    let out = key_costs(records, limits, models)?;
    let mut lines = Vec::new();
    for c in &out {
        key_line(&mut lines, c, format);
    }
    Ok(Costed { costs: out, lines })
}

/// What a key of a file costs the server that wrote it (its version's defaults, Redis's
/// bundled jemalloc): for other reports than memory's (convert's Parquet keys).
pub struct Sizer {
    limits: Limits,
    models: Models,
}

impl Sizer {
    pub fn for_file(data: &[u8]) -> Sizer {
        let version = crate::aof::check::rdb_server_version(data).unwrap_or(ServerVersion::Redis70);
        Sizer { limits: limits_of(version, &[]), models: Models::new(version, ferrokv::memory::Allocator::Jemalloc) }
    }

    /// The key's cost (None for a record that is not a key).
    pub fn cost(&self, rec: &Record<'_>) -> Result<Option<KeyCost>, ToolError> {
        Ok(key_costs(std::slice::from_ref(rec), &self.limits, &self.models)?.pop())
    }
}

fn key_costs(records: &[Record<'_>], limits: &Limits, models: &Models) -> Result<Vec<KeyCost>, ToolError> {
    let mut out = Vec::new();
    for rec in records {
        let Record::Key(k) = rec else { continue };
        // Most keys are read from the record; the rest are built as the server builds them.
        let at = |e| ToolError::Data(RdbError::in_key(e, k));
        if let Some(r) = ferrokv::memory::record_shape(&k.value, limits, &models.usage).map_err(at)? {
            let key = k.key.to_bytes().into_owned();
            let name = models.usage.sds_alloc(key.len());
            out.push(KeyCost {
                bytes: r.shape.size(&models.usage) + name + models.usage.dict_entry,
                allocated: r.shape.size(&models.allocated) + name,
                db: k.db,
                key,
                kind: r.kind,
                encoding: r.encoding,
                stored: k.value.vtype.encoding(),
                elements: r.elements,
                expire_ms: k.expire_ms,
            });
            continue;
        }
        let logical = Logical::from_record(k).map_err(|e| ToolError::Data(RdbError::in_key(e, k)))?;
        let value = Value::from_logical_owned(logical, limits)
            .map_err(|e| ToolError::Usage(format!("db {} key '{}': {e}", k.db, escape_key(&k.key.to_bytes()))))?;
        let key = k.key.to_bytes().into_owned();
        let fill = limits.list_max_listpack_size;
        let bytes = ferrokv::memory::key_usage(&key, &value, usize::MAX, fill, &models.usage);
        let allocated =
            ferrokv::memory::key_usage(&key, &value, usize::MAX, fill, &models.allocated) - models.allocated.dict_entry;
        out.push(KeyCost {
            bytes,
            allocated,
            db: k.db,
            key,
            kind: value.type_name(),
            encoding: models.usage.encoding(&value, fill),
            stored: k.value.vtype.encoding(),
            elements: value.len(),
            expire_ms: k.expire_ms,
        });
    }
    Ok(out)
}

struct MemoryStage<'o, 'w> {
    report: MemoryReport,
    limits: Limits,
    models: &'o Models,
    /// Told what has been read for good (its mapped pages may go).
    release: &'o dyn Fn(usize),
    /// Prefixes as they are counted (hashed; sorted into the report at the end).
    prefixes: HashMap<Vec<u8>, (usize, Tally), foldhash::fast::FixedState>,
    heap: BinaryHeap<Reverse<KeyCost>>,
    args: &'o MemoryArgs,
    now: i64,
    out: &'o mut Out<'w>,
    /// `--per-key`'s file, when the lines go there rather than to `out`.
    per_key: Option<std::io::BufWriter<std::fs::File>>,
    /// On stderr when it is a terminal.
    progress: crate::progress::Progress,
}

impl MemoryStage<'_, '_> {
    /// Count `c` under each of its prefixes: its name up to each of its first `--depth`
    /// separators (the whole name, when it has none). A new prefix past `--max-prefixes`
    /// is not kept (at the first level its keys count as `(other)`).
    fn count_prefixes(&mut self, c: &KeyCost) {
        let sep = self.args.separator.as_bytes();
        let (mut end, mut depth) = (0, 0);
        while depth < self.args.depth.max(1) {
            let next = if sep.is_empty() { None } else { c.key[end..].windows(sep.len()).position(|w| w == sep) };
            end = match next {
                Some(at) => end + at + sep.len(),
                None if depth == 0 => c.key.len(),
                None => break,
            };
            depth += 1;
            let prefix = &c.key[..end];
            let room = self.prefixes.len() < self.args.max_prefixes;
            match self.prefixes.get_mut(prefix) {
                Some((_, t)) => t.add(c),
                None if room => self.prefixes.entry(prefix.to_vec()).or_insert((depth, Tally::default())).1.add(c),
                None if depth == 1 => self.report.other_prefixes.add(c),
                None => {}
            }
            if next.is_none() {
                break;
            }
        }
    }

    fn take(&mut self, c: KeyCost) -> Result<(), ToolError> {
        let r = &mut self.report;
        r.total.add(&c);
        let db = r.dbs.entry(c.db).or_default();
        db.0.add(&c);
        db.1 += u64::from(c.expire_ms.is_some());
        r.by_encoding.entry((c.kind, c.encoding)).or_default().add(&c);
        r.ttls[ttl_class(c.expire_ms, self.now)].add(&c);
        r.sizes[class_of(&SIZE_CLASSES, c.bytes, false)].add(&c);
        r.element_counts[class_of(&ELEMENT_CLASSES, c.elements, true)].add(&c);
        if !matches!(c.kind, "string" | "stream") && c.stored != c.encoding {
            r.conversions.entry((c.kind, c.stored, c.encoding)).or_default().add(&c);
        }
        self.count_prefixes(&c);
        if self.args.top > 0 {
            if self.heap.len() < self.args.top {
                self.heap.push(Reverse(c));
            } else if self.heap.peek().is_some_and(|Reverse(min)| c.bytes > min.bytes) {
                self.heap.pop();
                self.heap.push(Reverse(c));
            }
        }
        Ok(())
    }
}

impl<'a> Stage<'a, Costed> for MemoryStage<'_, '_> {
    fn batch(&mut self, batch: Costed) -> Result<(), ToolError> {
        match &mut self.per_key {
            Some(f) => f.write_all(&batch.lines)?,
            None => self.out.write_all(&batch.lines)?,
        }
        batch.costs.into_iter().try_for_each(|c| self.take(c))
    }

    fn big_key(&mut self, rec: &Record<'a>, _prev_db: Option<u64>) -> Result<(), ToolError> {
        let c = costs(std::slice::from_ref(rec), &self.limits, self.models, self.args.format)?;
        self.batch(c)
    }

    fn done(&mut self, offset: usize) {
        (self.release)(offset);
    }

    fn progress(&mut self, offset: usize) {
        self.progress.set(offset as u64);
    }
}

/// Run `rdbtool memory` over `data`, writing per-key lines (jsonl, csv) as it goes; the
/// report comes back for the caller to print.
pub fn run(
    data: &[u8],
    args: &MemoryArgs,
    out: &mut Out<'_>,
    pipeline: &Pipeline,
    release: &dyn Fn(usize),
) -> Result<MemoryReport, ToolError> {
    let version =
        args.redis_version.or_else(|| crate::aof::check::rdb_server_version(data)).unwrap_or(ServerVersion::Redis70);
    let config = match &args.config {
        Some(path) => read_config(path)?,
        None => Vec::new(),
    };
    let limits = limits_of(version, &config);
    let alloc = ferrokv::memory::Allocator::parse(&args.allocator)
        .ok_or_else(|| ToolError::Usage(format!("unknown allocator '{}'", args.allocator)))?;
    let models = Models::new(version, alloc);
    let per_key = match &args.per_key {
        Some(path) => Some(std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(path)
                .map_err(|e| ToolError::Usage(format!("cannot create {}: {e}", path.display())))?,
        )),
        None => None,
    };
    let mut per_key = per_key;
    if args.format == MemoryFormat::Csv {
        let header = b"db,key,type,encoding,elements,bytes,allocated,expire_ms\n";
        match &mut per_key {
            Some(f) => f.write_all(header)?,
            None => out.write_all(header)?,
        }
    }
    let mut stage = MemoryStage {
        report: MemoryReport {
            version,
            alloc,
            total: Tally::default(),
            dbs: BTreeMap::new(),
            by_encoding: BTreeMap::new(),
            top: Vec::new(),
            prefixes: BTreeMap::new(),
            other_prefixes: Tally::default(),
            ttls: [Tally::default(); TTL_CLASSES.len()],
            sizes: [Tally::default(); SIZE_CLASSES.len()],
            element_counts: [Tally::default(); ELEMENT_CLASSES.len()],
            conversions: BTreeMap::new(),
            config,
        },
        limits,
        models: &models,
        release,
        prefixes: HashMap::default(),
        heap: BinaryHeap::new(),
        args,
        now: args.now.unwrap_or_else(crate::now_ms),
        out,
        per_key,
        progress: crate::progress::Progress::new(data.len() as u64),
    };
    // With --per-key the lines go to its file: csv with --format csv, else jsonl.
    let lines = match (&args.per_key, args.format) {
        (Some(_), MemoryFormat::Csv) => MemoryFormat::Csv,
        (Some(_), _) => MemoryFormat::Jsonl,
        (None, format) => format,
    };
    let work = |batch: &Batch<'_>| costs(&batch.records, &limits, &models, lines);
    let result = pipeline.run(RdbReader::new(data)?, work, &mut stage);
    stage.progress.finish();
    result?;
    if let Some(mut f) = stage.per_key.take() {
        f.flush()?;
    }
    let mut top: Vec<KeyCost> = stage.heap.into_iter().map(|Reverse(c)| c).collect();
    top.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| (a.db, &a.key).cmp(&(b.db, &b.key))));
    stage.report.top = top;
    stage.report.prefixes = stage.prefixes.into_iter().collect();
    Ok(stage.report)
}

/// A JSON string of `b` (its escapes are ASCII).
fn json_bytes(s: &mut String, b: &[u8]) {
    let mut v = Vec::new();
    jsonw::bytes(&mut v, b);
    s.push_str(&String::from_utf8_lossy(&v));
}

/// A key's JSON object (a jsonl line without its newline) appended to `out`.
fn key_json(out: &mut Vec<u8>, c: &KeyCost) {
    let _ = write!(out, "{{\"db\":{},\"key\":", c.db);
    jsonw::bytes(out, &c.key);
    let _ = write!(
        out,
        ",\"type\":\"{}\",\"encoding\":\"{}\",\"elements\":{},\"bytes\":{},\"allocated\":{}",
        c.kind, c.encoding, c.elements, c.bytes, c.allocated
    );
    if let Some(e) = c.expire_ms {
        let _ = write!(out, ",\"expire_ms\":{e}");
    }
    out.push(b'}');
}

/// A key's csv line appended to `out`.
fn key_csv(out: &mut Vec<u8>, c: &KeyCost) {
    let key = String::from_utf8_lossy(&c.key).replace('"', "\"\"");
    let _ = write!(out, "{},\"{key}\",{},{},{},{},{},", c.db, c.kind, c.encoding, c.elements, c.bytes, c.allocated);
    if let Some(e) = c.expire_ms {
        let _ = write!(out, "{e}");
    }
    out.push(b'\n');
}

/// A key's line in the per-key `format` (none for the reports).
fn key_line(out: &mut Vec<u8>, c: &KeyCost, format: MemoryFormat) {
    match format {
        MemoryFormat::Jsonl => {
            key_json(out, c);
            out.push(b'\n');
        }
        MemoryFormat::Csv => key_csv(out, c),
        MemoryFormat::Table | MemoryFormat::Json => {}
    }
}

/// `1.5 MB`-style sizes for people (powers of 1024).
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        "0.0%".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// The prefixes of `depth` under `parent` (biggest first, at most `limit`), each followed
/// by its own children (at most 5 each), indented by depth.
fn prefix_rows(s: &mut String, r: &MemoryReport, parent: &[u8], depth: usize, limit: usize) {
    let mut rows: Vec<(&Vec<u8>, &Tally)> = r
        .prefixes
        .range(parent.to_vec()..)
        .take_while(|(p, _)| p.starts_with(parent))
        .filter(|(_, (d, _))| *d == depth)
        .map(|(p, (_, t))| (p, t))
        .collect();
    rows.sort_by(|a, b| b.1.allocated.cmp(&a.1.allocated).then_with(|| a.0.cmp(b.0)));
    for (p, t) in rows.into_iter().take(limit) {
        s.push_str(&format!(
            "  {:>12} {:>7} {:>10} keys  {}{}\n",
            human(t.allocated),
            share(t.allocated, r.total.allocated),
            t.keys,
            "  ".repeat(depth - 1),
            escape_key(p)
        ));
        prefix_rows(s, r, p, depth + 1, 5);
    }
}

/// The report for people.
pub fn table(r: &MemoryReport, name: &str, args: &MemoryArgs) -> String {
    let mut s = String::new();
    let total = r.total_bytes();
    s.push_str(&format!(
        "{name}: {} for {} ({} keys: their data {}, the databases' tables {}; MEMORY USAGE would sum to {})\n",
        human(total),
        r.version.display(),
        r.total.keys,
        human(r.total.allocated),
        human(r.tables_bytes()),
        human(r.total.bytes)
    ));
    if !r.config.is_empty() {
        let set: Vec<String> = r.config.iter().map(|(k, v)| format!("{k} {v}")).collect();
        s.push_str(&format!("  with the thresholds of --config: {}\n", set.join(", ")));
    }
    for (db, (t, volatile)) in &r.dbs {
        s.push_str(&format!("  db {db}: {} keys ({volatile} with a TTL), {}\n", t.keys, human(t.allocated)));
    }
    s.push_str("\nby type and encoding:\n");
    let mut enc: Vec<_> = r.by_encoding.iter().collect();
    enc.sort_by_key(|e| Reverse(e.1.allocated));
    s.push_str(&format!("  {:<8} {:<12} {:>12} {:>12} {:>7}\n", "type", "encoding", "keys", "allocated", "share"));
    for ((kind, encoding), t) in enc {
        s.push_str(&format!(
            "  {kind:<8} {encoding:<12} {:>12} {:>12} {:>7}\n",
            t.keys,
            human(t.allocated),
            share(t.allocated, r.total.allocated)
        ));
    }
    if !r.top.is_empty() {
        s.push_str(&format!("\nthe {} biggest keys (as MEMORY USAGE answers):\n", r.top.len()));
        for c in &r.top {
            s.push_str(&format!(
                "  {:>12}  db {}  {} {} ({} elements)  {}\n",
                human(c.bytes as u64),
                c.db,
                c.kind,
                c.encoding,
                c.elements,
                escape_key(&c.key)
            ));
        }
    }
    s.push_str(&format!("\nprefixes (separator '{}', depth {}):\n", args.separator, args.depth));
    let first = r.prefixes.values().filter(|(d, _)| *d == 1).count();
    prefix_rows(&mut s, r, b"", 1, args.top.max(10));
    if first > args.top.max(10) {
        s.push_str(&format!("  ... {first} first-level prefixes in all\n"));
    }
    if r.other_prefixes.keys > 0 {
        s.push_str(&format!(
            "  {:>12} {:>7} {:>10} keys  (other: past --max-prefixes)\n",
            human(r.other_prefixes.allocated),
            share(r.other_prefixes.allocated, r.total.allocated),
            r.other_prefixes.keys
        ));
    }
    let classes = |s: &mut String, title: &str, names: &mut dyn Iterator<Item = &str>, tallies: &[Tally]| {
        s.push_str(title);
        for (name, t) in names.zip(tallies) {
            if t.keys > 0 {
                s.push_str(&format!("  {name:<8} {:>10} keys {:>12}\n", t.keys, human(t.allocated)));
            }
        }
    };
    classes(&mut s, "\nTTL left:\n", &mut TTL_CLASSES.iter().copied(), &r.ttls);
    classes(&mut s, "\nkey sizes (as MEMORY USAGE answers):\n", &mut SIZE_CLASSES.iter().map(|c| c.0), &r.sizes);
    classes(&mut s, "\nelements per key:\n", &mut ELEMENT_CLASSES.iter().map(|c| c.0), &r.element_counts);
    if !r.conversions.is_empty() {
        s.push_str("\nkeys the server holds in another encoding than the file's:\n");
        for ((kind, from, to), t) in &r.conversions {
            s.push_str(&format!("  {kind:<8} {from:>10} -> {to:<10} {:>10} keys {:>12}\n", t.keys, human(t.allocated)));
        }
    }
    s
}

/// The report as one JSON document (docs/json-schema.md).
pub fn json(r: &MemoryReport, name: &str) -> String {
    let mut s = String::from("{\"file\":");
    json_bytes(&mut s, name.as_bytes());
    s.push_str(&format!(
        ",\"model\":\"{}\",\"keys\":{},\"usage_bytes\":{},\"dataset_bytes\":{},\"tables_bytes\":{},\"total_bytes\":{},\"dbs\":[",
        r.version.tag(),
        r.total.keys,
        r.total.bytes,
        r.total.allocated,
        r.tables_bytes(),
        r.total_bytes()
    ));
    let dbs: Vec<String> =
        r.dbs.iter().map(|(db, (t, v))| format!("{{\"db\":{db},\"expires\":{v},{}}}", t.json_fields())).collect();
    s.push_str(&dbs.join(","));
    s.push_str("],\"by_encoding\":[");
    let enc: Vec<String> = r
        .by_encoding
        .iter()
        .map(|((k, e), t)| format!("{{\"type\":\"{k}\",\"encoding\":\"{e}\",{}}}", t.json_fields()))
        .collect();
    s.push_str(&enc.join(","));
    s.push_str("],\"top\":[");
    let mut top = Vec::new();
    for (i, c) in r.top.iter().enumerate() {
        if i > 0 {
            top.push(b',');
        }
        key_json(&mut top, c);
    }
    s.push_str(&String::from_utf8_lossy(&top));
    s.push_str("],\"prefixes\":[");
    let pre: Vec<String> = r
        .prefixes
        .iter()
        .map(|(p, (depth, t))| {
            let mut e = String::from("{\"prefix\":");
            json_bytes(&mut e, p);
            e.push_str(&format!(",\"depth\":{depth},{}}}", t.json_fields()));
            e
        })
        .collect();
    s.push_str(&pre.join(","));
    s.push_str(&format!("],\"other_prefixes\":{{{}}},\"ttl\":[", r.other_prefixes.json_fields()));
    let ttl: Vec<String> =
        TTL_CLASSES.iter().zip(&r.ttls).map(|(n, t)| format!("{{\"class\":\"{n}\",{}}}", t.json_fields())).collect();
    s.push_str(&ttl.join(","));
    let classes = |names: &mut dyn Iterator<Item = &str>, tallies: &[Tally]| -> String {
        let v: Vec<String> =
            names.zip(tallies).map(|(n, t)| format!("{{\"class\":\"{n}\",{}}}", t.json_fields())).collect();
        v.join(",")
    };
    s.push_str("],\"sizes\":[");
    s.push_str(&classes(&mut SIZE_CLASSES.iter().map(|c| c.0), &r.sizes));
    s.push_str("],\"elements\":[");
    s.push_str(&classes(&mut ELEMENT_CLASSES.iter().map(|c| c.0), &r.element_counts));
    s.push_str("],\"conversions\":[");
    let conv: Vec<String> = r
        .conversions
        .iter()
        .map(|((k, f, t), tally)| {
            format!("{{\"type\":\"{k}\",\"from\":\"{f}\",\"to\":\"{t}\",{}}}", tally.json_fields())
        })
        .collect();
    s.push_str(&conv.join(","));
    s.push_str("],\"config\":{");
    let cfg: Vec<String> = r.config.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    s.push_str(&cfg.join(","));
    s.push_str("}}\n");
    s
}

/// `rdbtool memory` as the binary runs it.
pub fn run_cli(args: &MemoryArgs, src: &ferrokv::Source, name: &str, w: &mut dyn Write) -> Result<(), ToolError> {
    let mut out = Out::new(w);
    let report = run(src, args, &mut out, &Pipeline::default(), &|off| src.release_before(off))?;
    if let Some(path) = &args.html {
        std::fs::write(path, html::page(&report, name))
            .map_err(|e| ToolError::Usage(format!("cannot write {}: {e}", path.display())))?;
    }
    match args.format {
        MemoryFormat::Table => out.write_all(table(&report, name, args).as_bytes())?,
        MemoryFormat::Json => out.write_all(json(&report, name).as_bytes())?,
        MemoryFormat::Jsonl | MemoryFormat::Csv => {}
    }
    out.finish()?;
    Ok(())
}
