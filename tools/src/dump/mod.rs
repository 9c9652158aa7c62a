//! `rdbtool dump`: records -> filters -> one of the writers (jsonl, json, resp).

mod json;
mod jsonl;
mod resp;
pub use resp::{key_commands, needs_restore};

use ferrokv::format::rdb::{KeyRecord, LogicalType, RdbError, RdbReader, Record};
use std::collections::BTreeMap;
use std::sync::Mutex;

use ferrokv::format::Elem;

use crate::out::{Out, ToolError};
use crate::pipeline::{Batch, Pipeline, Stage};
use crate::progress::Progress;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Json,
    Resp(RespOptions),
}

impl Format {
    /// `--format resp` with its defaults (RESTORE where commands fall short, the file's
    /// version).
    pub const RESP: Format = Format::Resp(RespOptions { restore: Restore::Auto, target: None });
}

/// How `--format resp` writes keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RespOptions {
    pub restore: Restore,
    /// The version the commands and RESTORE payloads are for; None: the file's.
    pub target: Option<ferrokv::format::rdb::Target>,
}

/// When a key is written as `RESTORE key ttl payload ABSTTL REPLACE` rather than commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Restore {
    /// Never: commands only (what they cannot carry is reported by key on stderr).
    Never,
    /// The keys plain commands cannot rebuild exactly: a zset with a `-0` score (Redis 7
    /// stores 0), a stream with consumer groups (delivery and consumer times).
    #[default]
    Auto,
    /// Every key.
    Always,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    Skip,
    Keep,
}

/// Which keys to write.
#[derive(Debug, Clone)]
pub struct Filter {
    pub db: Option<u64>,
    pub key: Option<Vec<u8>>,
    pub types: Vec<LogicalType>,
    pub expired: Expired,
    pub now_ms: i64,
}

impl Filter {
    pub fn wants(&self, k: &KeyRecord<'_>) -> bool {
        self.selects(k) && !self.skips_expired(k)
    }

    /// Whether `--expired skip` leaves `k` out (already expired at `now_ms`).
    pub fn skips_expired(&self, k: &KeyRecord<'_>) -> bool {
        self.expired == Expired::Skip && k.expire_ms.is_some_and(|e| e <= self.now_ms)
    }

    /// Whether `k`'s database, type and name are selected (its expiry aside).
    pub fn selects(&self, k: &KeyRecord<'_>) -> bool {
        if self.db.is_some_and(|d| d != k.db) {
            return false;
        }
        if !self.types.is_empty() && !self.types.contains(&k.value.logical()) {
            return false;
        }
        if let Some(p) = &self.key {
            // `*` alone takes every key, the empty one too (Redis's KEYS does the same).
            if p.as_slice() != b"*" && !ferrokv::glob::matches(p, &k.key.to_bytes()) {
                return false;
            }
        }
        true
    }

    /// Whether a hash field with this expiry is written.
    pub fn wants_field(&self, expire_ms: Option<i64>) -> bool {
        !(self.expired == Expired::Skip && expire_ms.is_some_and(|e| e <= self.now_ms))
    }

    fn keys_only(&self) -> bool {
        self.db.is_some() || self.key.is_some() || !self.types.is_empty()
    }
}

/// What a writer does with each kind of record. One writer is made per batch, knowing
/// the database of the key before the batch, so batches can be formatted in parallel.
pub trait Writer {
    fn key(&mut self, out: &mut Out<'_>, k: &KeyRecord<'_>, f: &Filter) -> Result<(), ToolError>;
    fn function(&mut self, _out: &mut Out<'_>, _code: &Elem<'_>) -> Result<(), ToolError> {
        Ok(())
    }
    fn other(&mut self, _out: &mut Out<'_>, _r: &Record<'_>) -> Result<(), ToolError> {
        Ok(())
    }
    /// Key TTLs the format writes at the end (json), as (db, key, ms).
    fn take_expires(&mut self) -> Vec<(u64, Vec<u8>, i64)> {
        Vec::new()
    }
}

fn writer(format: Format, prev_db: Option<u64>) -> Box<dyn Writer> {
    match format {
        Format::Jsonl => Box::new(jsonl::Jsonl),
        Format::Json => Box::new(json::Json::after(prev_db)),
        Format::Resp(o) => Box::new(resp::Resp::after(prev_db, o)),
    }
}

/// Counts reported on stderr at the end.
#[derive(Debug, Default)]
pub struct DumpStats {
    pub keys_written: u64,
    pub keys_skipped: u64,
}

/// One batch's output.
struct Formatted {
    bytes: Vec<u8>,
    expires: Vec<(u64, Vec<u8>, i64)>,
    written: u64,
    skipped: u64,
}

fn write_record(
    w: &mut dyn Writer,
    out: &mut Out<'_>,
    rec: &Record<'_>,
    filter: &Filter,
    stats: &mut DumpStats,
) -> Result<(), ToolError> {
    match rec {
        Record::Key(k) => {
            if filter.wants(k) {
                w.key(out, k, filter)?;
                stats.keys_written += 1;
            } else {
                stats.keys_skipped += 1;
            }
        }
        Record::Function { code, .. } if !filter.keys_only() => w.function(out, code)?,
        Record::FunctionPreGa { code, .. } if !filter.keys_only() => w.function(out, code)?,
        other if !filter.keys_only() => w.other(out, other)?,
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// Tests turn the one-pass writers off to compare them with the element walk.
    static WALK_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Values up to this size in the file may be written in one pass, without a flush between
/// elements.
const ONE_PASS_MAX: usize = 64 << 10;

/// Whether a writer may write `v`, if its elements lie one after another, in one pass over
/// its bytes ([`Value::visit_items`](ferrokv::format::rdb::Value::visit_items)).
fn one_pass(v: &ferrokv::format::rdb::Value<'_>) -> bool {
    #[cfg(test)]
    if WALK_ONLY.get() {
        return false;
    }
    v.body.len() <= ONE_PASS_MAX
}

/// Dump with the default pipeline (every core).
pub fn run(data: &[u8], format: Format, filter: &Filter, out: &mut Out<'_>) -> Result<DumpStats, ToolError> {
    run_with(data, format, filter, out, &Pipeline::default(), &|_| {})
}

/// Dump `data`; `release(offset)` is told when everything before `offset` is written.
pub fn run_with(
    data: &[u8],
    format: Format,
    filter: &Filter,
    out: &mut Out<'_>,
    pipeline: &Pipeline,
    release: &dyn Fn(usize),
) -> Result<DumpStats, ToolError> {
    let reader = RdbReader::new(data)?;
    let format = match format {
        Format::Resp(o) if o.target.is_none() => {
            Format::Resp(RespOptions { target: Some(resp::target_of(reader.dialect())), ..o })
        }
        f => f,
    };
    let mut progress = Progress::new(data.len() as u64);
    let mut stats = DumpStats::default();
    let mut expires: BTreeMap<u64, Vec<(Vec<u8>, i64)>> = BTreeMap::new();
    if format == Format::Json {
        out.buf.push(b'[');
    }
    let spare = Mutex::new(Vec::new());
    let stage_spare = &spare;
    let mut stage = DumpStage {
        spare: &spare,
        format,
        filter,
        out: &mut *out,
        stats: &mut stats,
        expires: &mut expires,
        any_key: false,
        release,
        progress: &mut progress,
    };
    let work = |batch: &Batch<'_>| -> Result<Formatted, ToolError> {
        let mut w = writer(format, batch.prev_db);
        // Text output runs to about twice its input: room for that up front (a batch's
        // worth; a pipeline of unbounded batches grows as it goes), in a buffer an earlier
        // batch used when one is free (a fresh one costs its pages' faults).
        let mut o = match stage_spare.lock().ok().and_then(|mut s| s.pop()) {
            Some(buf) => Out::memory_in(buf),
            None => Out::memory_with(pipeline.batch_bytes.min(4 << 20) * 2),
        };
        let mut st = DumpStats::default();
        for rec in &batch.records {
            write_record(w.as_mut(), &mut o, rec, filter, &mut st)?;
        }
        Ok(Formatted { bytes: o.buf, expires: w.take_expires(), written: st.keys_written, skipped: st.keys_skipped })
    };
    let result = pipeline.run(reader, work, &mut stage);
    let any_key = stage.any_key;
    if format == Format::Json && result.is_ok() {
        json::footer(&mut out.buf, any_key, &expires);
    }
    out.finish()?;
    progress.finish();
    result.map(|()| stats)
}

/// The dump's side of the pipeline: batches' output written in file order, big keys
/// formatted here, the JSON footer's expiries gathered.
struct DumpStage<'s, 'o> {
    format: Format,
    filter: &'s Filter,
    out: &'s mut Out<'o>,
    stats: &'s mut DumpStats,
    expires: &'s mut BTreeMap<u64, Vec<(Vec<u8>, i64)>>,
    /// A key was written (JSON needs to know where its footer goes).
    any_key: bool,
    release: &'s dyn Fn(usize),
    progress: &'s mut Progress,
    /// Batch output buffers written out, for the workers to fill again.
    spare: &'s Mutex<Vec<Vec<u8>>>,
}

/// Output buffers kept for reuse (a few per worker are in flight at once).
const SPARE_BUFFERS: usize = 8;
/// A bigger one (a batch that ran long) is let go.
const SPARE_BUFFER_MAX: usize = 16 << 20;

impl<'a> Stage<'a, Formatted> for DumpStage<'_, '_> {
    fn batch(&mut self, f: Formatted) -> Result<(), ToolError> {
        self.out.write_all(&f.bytes)?;
        if let Ok(mut spare) = self.spare.lock() {
            if spare.len() < SPARE_BUFFERS && f.bytes.capacity() <= SPARE_BUFFER_MAX {
                spare.push(f.bytes);
            }
        }
        self.stats.keys_written += f.written;
        self.stats.keys_skipped += f.skipped;
        self.any_key |= f.written > 0;
        for (db, k, ms) in f.expires {
            self.expires.entry(db).or_default().push((k, ms));
        }
        Ok(())
    }

    fn big_key(&mut self, rec: &Record<'a>, prev_db: Option<u64>) -> Result<(), ToolError> {
        let mut w = writer(self.format, prev_db);
        let before = self.stats.keys_written;
        write_record(w.as_mut(), self.out, rec, self.filter, self.stats)?;
        self.any_key |= self.stats.keys_written > before;
        for (db, k, ms) in w.take_expires() {
            self.expires.entry(db).or_default().push((k, ms));
        }
        Ok(())
    }

    fn done(&mut self, offset: usize) {
        (self.release)(offset);
    }

    fn progress(&mut self, offset: usize) {
        self.progress.set(offset as u64);
    }
}

/// Wrap an element-level error with its key's context.
pub(crate) fn ctx<'k>(k: &'k KeyRecord<'_>) -> impl Fn(ferrokv::format::FormatError) -> ToolError + 'k {
    move |e| ToolError::Data(RdbError::in_key(e, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Pipeline;

    fn dump(data: &[u8], format: Format, walk_only: bool) -> (Vec<u8>, Option<String>) {
        let filter = Filter { db: None, key: None, types: Vec::new(), expired: Expired::Keep, now_ms: 0 };
        let pipeline = Pipeline { workers: 1, ..Pipeline::default() };
        let mut out = Out::memory();
        WALK_ONLY.set(walk_only);
        let r = run_with(data, format, &filter, &mut out, &pipeline, &|_| {});
        WALK_ONLY.set(false);
        (out.buf, r.err().map(|e| format!("{e:?}")))
    }

    /// A -0 score sends a zset to RESTORE in every form it takes (a skiplist's binary
    /// double, listpack or ziplist text), found by the one pass as the element walk finds
    /// it; 0 and -1.5 do not.
    #[test]
    fn a_negative_zero_score_is_found_in_every_form() {
        use ferrokv::format::logical::Logical;
        use ferrokv::format::rdb::{Encoder, Form, Target};
        let mut seen = 0;
        for (target, header) in [(Target::Redis70, b"REDIS0010"), (Target::Redis62, b"REDIS0009")] {
            for form in [Form::Listpack, Form::Table] {
                for score in [-0.0, 0.0, -1.5] {
                    let v = Logical::Zset(vec![(b"a".to_vec(), score), (b"b".to_vec(), 2.0)]);
                    let mut body = Vec::new();
                    let vtype = Encoder::new(target).value_in(&v, Some(form), &mut body, &mut Vec::new());
                    let mut file = header.to_vec();
                    file.extend_from_slice(&[vtype, 1, b'z']);
                    file.extend_from_slice(&body);
                    file.push(0xFF);
                    file.extend_from_slice(&[0; 8]);
                    let Some(Ok(Record::Key(k))) = RdbReader::new(&file).unwrap().next() else { panic!("no key") };
                    let walk = k.value.zset().unwrap().any(|m| m.unwrap().1.to_bits() == (-0.0f64).to_bits());
                    assert_eq!(needs_restore(&k).unwrap(), walk, "{target:?} {form:?} {score}");
                    if form == Form::Table {
                        assert_eq!(walk, score.is_sign_negative() && score == 0.0);
                    }
                    seen += usize::from(walk);
                }
            }
        }
        assert!(seen >= 2, "{seen}");
    }

    /// jsonl and resp write a value in one pass (listpacks, hashtable sets and hashes)
    /// exactly as the element walk writes it, and leave a damaged one to the walk (same
    /// output, same error): every byte of the fixtures' values of those kinds damaged.
    #[test]
    fn one_pass_writes_what_the_walk_writes() {
        let files: Vec<(Vec<u8>, usize, usize)> =
            crate::one_pass_samples::samples().0.into_iter().map(|s| (s.file, s.body.start, s.body.end)).collect();
        assert!(files.len() > 50, "{} values", files.len());
        let mut damaged_ok = 0;
        for (file, start, end) in &files {
            let mut copy = file.clone();
            // Every byte of a small value, every third of a larger one; a low or a high bit.
            let step = if end - start <= 256 { 1 } else { 3 };
            for at in std::iter::once(None).chain((*start..*end).step_by(step).map(Some)) {
                for flip in [0x01u8 << (at.unwrap_or(0) % 8)] {
                    copy.copy_from_slice(file);
                    if let Some(at) = at {
                        copy[at] ^= flip;
                    }
                    for format in [Format::Jsonl, Format::RESP] {
                        let one_pass = dump(&copy, format, false);
                        let walk = dump(&copy, format, true);
                        assert!(
                            one_pass == walk,
                            "{format:?}, byte {at:?} ^ {flip:#x}: {:?} / {:?}",
                            one_pass.1,
                            walk.1
                        );
                        if at.is_none() {
                            assert!(one_pass.1.is_none(), "{:?}", one_pass.1);
                        } else if one_pass.1.is_none() {
                            damaged_ok += 1;
                        }
                    }
                }
            }
        }
        eprintln!("{} values, {damaged_ok} damaged copies read whole", files.len());
        assert!(damaged_ok > 100, "{damaged_ok}");
    }
}
