//! `rdbtool convert IN OUT --to rdb:TARGET|jsonl|json|resp|aof`.
//!
//! IN is an RDB (any version we read) or a jsonl written by `rdbtool dump`. RDB output goes
//! through the logical model and the encoder for TARGET; what the target cannot hold is
//! listed as losses (and `--strict` refuses). Output is written to a temporary file beside
//! OUT, synced, and renamed over OUT only when complete.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use ferrokv::format::rdb::{
    escape_key, put_function, put_key, put_select_db, Encoder, KeyParts, Loss, RdbError, RdbReader, RdbWriter, Record,
    Target,
};
use ferrokv::logical::Logical;
use ferrokv::Source;

use crate::dump::{self, Expired, Filter, Format};
use crate::jsonl_read::{self, JsonlRecord};
use crate::out::{AtomicFile, Out, TempPath, ToolError};
use crate::pipeline::{Batch, Pipeline, Stage};

/// Arguments of `rdbtool convert`.
#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// Input: an RDB file, or a jsonl written by `rdbtool dump`.
    pub input: PathBuf,
    /// Output file; written to a temporary file and renamed when complete.
    pub output: PathBuf,
    /// rdb:redis-6.2 | rdb:redis-7.0 | rdb:redis-7.2 | rdb:redis-7.4 | rdb:valkey-9 | jsonl | json | resp | aof |
    /// parquet (OUT is then a directory: keys.parquet and elements.parquet)
    #[arg(long)]
    pub to: String,
    /// Refuse (exit 3, no output) if anything would be lost.
    #[arg(long)]
    pub strict: bool,
    /// With `--to parquet`: the `source` column's value (default: the input's file name).
    #[arg(long)]
    pub source: Option<String>,
}

/// One thing lost, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLoss {
    pub db: Option<u64>,
    pub key: Option<Vec<u8>>,
    pub what: String,
}

impl std::fmt::Display for KeyLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.db, &self.key) {
            (Some(db), Some(k)) => write!(f, "db {db} key '{}': {}", escape_key(k), self.what),
            _ => f.write_str(&self.what),
        }
    }
}

#[derive(Debug, Default)]
pub struct ConvertReport {
    pub keys: u64,
    pub losses: Vec<KeyLoss>,
}

/// Keys and expiring keys per db, for the RESIZEDB hints.
type Sizes = BTreeMap<u64, (u64, u64)>;

fn key_loss(db: u64, key: &[u8], losses: Vec<Loss>, out: &mut Vec<KeyLoss>) {
    for l in losses {
        out.push(KeyLoss { db: Some(db), key: Some(key.to_vec()), what: l.what });
    }
}

/// A key to write, from whichever input.
struct KeyIn<'k> {
    db: u64,
    key: &'k [u8],
    expire_ms: Option<i64>,
    idle: Option<u64>,
    freq: Option<u8>,
    value: &'k Logical,
}

fn write_key<W: Write>(
    w: &mut RdbWriter<W>,
    sizes: &Sizes,
    k: KeyIn<'_>,
    report: &mut ConvertReport,
) -> Result<(), ToolError> {
    if w.current_db() != Some(k.db) {
        w.select_db(k.db, sizes.get(&k.db).copied())?;
    }
    let mut losses = Vec::new();
    w.key(k.key, k.expire_ms, k.idle, k.freq, k.value, &mut losses)?;
    key_loss(k.db, k.key, losses, &mut report.losses);
    report.keys += 1;
    Ok(())
}

/// Re-encode an RDB for `target`.
pub fn rdb_to_rdb<W: Write>(data: &[u8], target: Target, out: W, ctime: i64) -> Result<(W, ConvertReport), ToolError> {
    rdb_to_rdb_with(data, target, out, ctime, &Pipeline::default(), &|_| {})
}

/// Re-encode an RDB for `target`; `release(offset)` is told what has been read for good.
pub fn rdb_to_rdb_with<W: Write>(
    data: &[u8],
    target: Target,
    out: W,
    ctime: i64,
    pipeline: &Pipeline,
    release: &dyn Fn(usize),
) -> Result<(W, ConvertReport), ToolError> {
    // Pass 1: sizes per database (structure only, values skipped).
    let mut sizes = Sizes::new();
    for rec in RdbReader::new(data)? {
        if let Record::Key(k) = rec? {
            let e = sizes.entry(k.db).or_default();
            e.0 += 1;
            e.1 += u64::from(k.expire_ms.is_some());
            release(k.end);
        }
    }
    // Pass 2: workers encode batches of records; they are written here, in order.
    let enc = Encoder::new(target);
    let mut stage = ConvertStage {
        w: RdbWriter::new(out, target, ctime)?,
        report: ConvertReport::default(),
        enc: &enc,
        sizes: &sizes,
        release,
    };
    let work = |batch: &Batch<'_>| encode_records(&enc, &sizes, &batch.records, batch.prev_db);
    pipeline.run(RdbReader::new(data)?, work, &mut stage)?;
    Ok((stage.w.finish()?, stage.report))
}

/// The conversion's side of the pipeline: encoded batches written in file order, big keys
/// encoded here.
struct ConvertStage<'s, W: Write> {
    w: RdbWriter<W>,
    report: ConvertReport,
    enc: &'s Encoder,
    sizes: &'s Sizes,
    release: &'s dyn Fn(usize),
}

impl<'a, W: Write> Stage<'a, Encoded> for ConvertStage<'_, W> {
    fn batch(&mut self, e: Encoded) -> Result<(), ToolError> {
        self.w.raw(&e.bytes, e.last_db)?;
        self.report.keys += e.keys;
        self.report.losses.extend(e.losses);
        Ok(())
    }

    fn big_key(&mut self, rec: &Record<'a>, prev_db: Option<u64>) -> Result<(), ToolError> {
        let e = encode_records(self.enc, self.sizes, std::slice::from_ref(rec), prev_db)?;
        self.batch(e)
    }

    fn done(&mut self, offset: usize) {
        (self.release)(offset);
    }
}

/// Records encoded by a worker, to be written in order.
struct Encoded {
    bytes: Vec<u8>,
    losses: Vec<KeyLoss>,
    keys: u64,
    /// The database the bytes leave selected, if they select one.
    last_db: Option<u64>,
}

fn encode_records(
    enc: &Encoder,
    sizes: &Sizes,
    records: &[Record<'_>],
    prev_db: Option<u64>,
) -> Result<Encoded, ToolError> {
    let mut e = Encoded { bytes: Vec::new(), losses: Vec::new(), keys: 0, last_db: None };
    let mut db = prev_db;
    for rec in records {
        match rec {
            Record::Key(k) => {
                if db != Some(k.db) {
                    put_select_db(&mut e.bytes, k.db, sizes.get(&k.db).copied());
                    db = Some(k.db);
                    e.last_db = db;
                }
                let value = Logical::from_record(k).map_err(|err| ToolError::Data(RdbError::in_key(err, k)))?;
                let key = k.key.to_bytes();
                if k.meta.is_some() {
                    e.losses.push(KeyLoss {
                        db: Some(k.db),
                        key: Some(key.to_vec()),
                        what: "key metadata (Redis 8.6 KEY_META) dropped".into(),
                    });
                }
                let mut losses = Vec::new();
                let parts = KeyParts { key: &key, expire_ms: k.expire_ms, idle: k.idle, freq: k.freq };
                put_key(enc, &mut e.bytes, parts, &value, &mut losses);
                key_loss(k.db, &key, losses, &mut e.losses);
                e.keys += 1;
            }
            Record::Function { code, .. } | Record::FunctionPreGa { code, .. } => {
                if let Some(l) = put_function(enc, &mut e.bytes, &code.to_bytes()) {
                    e.losses.push(KeyLoss { db: None, key: None, what: l.what });
                }
            }
            Record::ModuleAux(m) => {
                e.bytes.push(0xF7);
                e.bytes.extend_from_slice(m.raw.bytes());
            }
            _ => {}
        }
    }
    Ok(e)
}

/// Encode a jsonl dump for `target`.
pub fn jsonl_to_rdb<W: Write>(
    text: &[u8],
    target: Target,
    out: W,
    ctime: i64,
) -> Result<(W, ConvertReport), ToolError> {
    let mut sizes = Sizes::new();
    for (n, line) in jsonl_read::lines(text) {
        if let JsonlRecord::Key { db, expire_ms, .. } = jsonl_read::parse(line, n)? {
            let e = sizes.entry(db).or_default();
            e.0 += 1;
            e.1 += u64::from(expire_ms.is_some());
        }
    }
    let mut w = RdbWriter::new(out, target, ctime)?;
    let mut report = ConvertReport::default();
    for (n, line) in jsonl_read::lines(text) {
        match jsonl_read::parse(line, n)? {
            JsonlRecord::Key { db, key, expire_ms, idle, freq, value } => {
                write_key(&mut w, &sizes, KeyIn { db, key: &key, expire_ms, idle, freq, value: &value }, &mut report)?;
            }
            JsonlRecord::Function(code) => {
                if let Some(l) = w.function(&code)? {
                    report.losses.push(KeyLoss { db: None, key: None, what: l.what });
                }
            }
            JsonlRecord::ModuleAux(raw) => w.module_aux(&raw)?,
        }
    }
    Ok((w.finish()?, report))
}

enum To {
    Rdb(Target),
    Dump(Format),
}

fn parse_to(s: &str) -> Result<To, ToolError> {
    if let Some(t) = s.strip_prefix("rdb:") {
        return Target::parse(t).map(To::Rdb).ok_or_else(|| {
            ToolError::Usage(format!("unknown target '{t}' (redis-6.2, redis-7.0, redis-7.2, redis-7.4, valkey-9)"))
        });
    }
    Ok(To::Dump(match s {
        "jsonl" => Format::Jsonl,
        "json" => Format::Json,
        "resp" | "aof" => Format::RESP,
        other => return Err(ToolError::Usage(format!("unknown output '{other}'"))),
    }))
}

fn is_rdb(data: &[u8]) -> bool {
    data.starts_with(b"REDIS") || data.starts_with(b"VALKEY")
}

/// Encode a jsonl input as a temporary RDB (removed when the guard drops) and map it.
pub(crate) fn stage_jsonl_as_rdb(text: &[u8], ctime: i64) -> Result<(TempPath, Source), ToolError> {
    let path = TempPath::new("jsonl");
    let file =
        File::create(&path.0).map_err(|e| ToolError::Usage(format!("cannot create {}: {e}", path.0.display())))?;
    let buf = jsonl_to_rdb(text, Target::Redis74, BufWriter::with_capacity(1 << 20, file), ctime)?.0;
    buf.into_inner().map_err(|e| ToolError::Io(e.into_error()))?;
    let src = Source::open(&path.0)?;
    Ok((path, src))
}

/// Exit code when --strict refuses a lossy conversion.
pub const EXIT_LOSSY: u8 = 3;

pub fn run_cli(args: ConvertArgs) -> Result<u8, ToolError> {
    let src = Source::open(&args.input)
        .map_err(|e| ToolError::Usage(format!("cannot read {}: {e}", args.input.display())))?;
    let ctime = crate::now_ms() / 1000;
    if args.to == "parquet" {
        // OUT is a directory: keys.parquet and elements.parquet.
        let name = args.input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let source = args.source.clone().unwrap_or(name);
        if is_rdb(&src) {
            crate::parquet_out::write(&src, &args.output, &source, &|o| src.release_before(o))?;
        } else {
            let staged = stage_jsonl_as_rdb(&src, ctime)?;
            crate::parquet_out::write(&staged.1, &args.output, &source, &|_| {})?;
        }
        return Ok(crate::exit::OK);
    }
    let to = parse_to(&args.to)?;
    let (atomic, file) = AtomicFile::new(&args.output)?;
    let buf = BufWriter::with_capacity(1 << 20, file);
    let (buf, report) = match (&to, is_rdb(&src)) {
        (To::Rdb(t), true) => rdb_to_rdb_with(&src, *t, buf, ctime, &Pipeline::default(), &|o| src.release_before(o))?,
        (To::Rdb(t), false) => jsonl_to_rdb(&src, *t, buf, ctime)?,
        (To::Dump(format), rdb) => {
            // A jsonl input is first encoded losslessly into a temporary RDB (mapped like
            // any input, so memory does not grow with it), then dumped.
            let staged;
            let data: &[u8] = if rdb {
                &src
            } else {
                staged = stage_jsonl_as_rdb(&src, ctime)?;
                &staged.1
            };
            let mut buf = buf;
            {
                let mut out = Out::new(&mut buf);
                let f = Filter { db: None, key: None, types: vec![], expired: Expired::Keep, now_ms: 0 };
                dump::run_with(data, *format, &f, &mut out, &Pipeline::default(), &|_| {})?;
            }
            (buf, ConvertReport::default())
        }
    };
    for l in &report.losses {
        eprintln!("rdbtool: convert: loss: {l}");
    }
    if !report.losses.is_empty() {
        let keys: std::collections::BTreeSet<_> =
            report.losses.iter().filter_map(|l| l.key.as_ref().map(|k| (l.db, k.clone()))).collect();
        eprintln!(
            "rdbtool: convert: {} loss(es), {} key(s) affected, target {}",
            report.losses.len(),
            keys.len(),
            args.to
        );
        if args.strict {
            eprintln!("rdbtool: convert: --strict: nothing written");
            return Ok(EXIT_LOSSY);
        }
    }
    let file = buf.into_inner().map_err(|e| ToolError::Io(e.into_error()))?;
    atomic.commit(file)?;
    Ok(crate::exit::OK)
}
