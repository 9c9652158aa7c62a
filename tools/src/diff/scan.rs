//! Pass 1: each file streamed once through the decode pipeline into partition files.

use std::path::Path;

use ferrokv::format::rdb::{RdbError, RdbReader, Record};
use ferrokv::Source;

use super::hash::{key_hash, part_of, raw_digest, raw_form, value_digest, H, T_FUNCTION};
use super::options::Options;
use super::partition::{encode, lt_code, vt_code, Meta, PartFile, PartWriters};
use crate::out::ToolError;
use crate::pipeline::{Batch, Stage};
use crate::progress::Progress;

pub(super) struct Scanned {
    pub(super) keys: u64,
    pub(super) parts: Vec<PartFile>,
    /// (digest of the code, library name) of every function library.
    pub(super) functions: Vec<(u128, String)>,
}

/// One batch's entries, encoded back to back, and which partition each goes to.
#[derive(Default)]
pub(super) struct BatchOut {
    pub(super) buf: Vec<u8>,
    pub(super) index: Vec<(usize, usize, usize)>,
    pub(super) functions: Vec<(u128, String)>,
}

pub(super) fn entry_of(rec: &Record<'_>, opts: &Options, nparts: usize, out: &mut BatchOut) -> Result<(), ToolError> {
    match rec {
        Record::Key(k) => {
            if !opts.wants(k) {
                return Ok(());
            }
            let raw = raw_form(&k.value);
            let (digest, fttl) = if raw {
                (raw_digest(u64::from(vt_code(k.value.vtype)), k.value.body.bytes()), 0)
            } else {
                value_digest(&k.value).map_err(|e| ToolError::Data(RdbError::in_key(e, k)))?
            };
            let key = k.key.to_bytes();
            let part = part_of(key_hash(k.db, &key), 0, nparts);
            let m = Meta {
                rec_off: k.offset as u64,
                body_off: k.value.body.offset() as u64,
                body_len: k.value.body.len() as u64,
                expire: k.expire_ms,
                digest,
                fttl,
                ltype: lt_code(k.value.logical()),
                vtype: vt_code(k.value.vtype),
                raw,
            };
            let start = out.buf.len();
            encode(&mut out.buf, k.db, &key, &m);
            out.index.push((part, start, out.buf.len()));
        }
        Record::Function { code, .. } | Record::FunctionPreGa { code, .. } if !opts.filtered() => {
            let code = code.to_bytes();
            out.functions.push((H::new(T_FUNCTION).bytes(&code).finish(), library_name(&code)));
        }
        _ => {}
    }
    Ok(())
}

/// The library name from the code's shebang line (`#!lua name=mylib`).
pub(super) fn library_name(code: &[u8]) -> String {
    let line = code.split(|&c| c == b'\n').next().unwrap_or_default();
    if let Some(p) = line.windows(5).position(|w| w == b"name=") {
        let rest = &line[p + 5..];
        let end = rest.iter().position(|c| c.is_ascii_whitespace()).unwrap_or(rest.len());
        return String::from_utf8_lossy(&rest[..end]).into_owned();
    }
    format!("<library of {} bytes>", code.len())
}

/// Stream `data` once and write one entry per key to `nparts` partition files.
pub(super) fn scan(
    name: &str,
    src: &Source,
    opts: &Options,
    dir: &Path,
    side: &str,
    nparts: usize,
) -> Result<Scanned, ToolError> {
    let data: &[u8] = src;
    let with_name = |e: ToolError| match e {
        ToolError::Data(e) => ToolError::Usage(format!("{name}: {e}")),
        other => other,
    };
    let reader = RdbReader::new(data).map_err(|e| ToolError::Usage(format!("{name}: {e}")))?;
    let mut stage = ScanStage {
        writers: PartWriters::create(dir, "p", side, nparts)?,
        keys: 0,
        functions: Vec::new(),
        opts,
        nparts,
        src,
        progress: Progress::new(data.len() as u64),
    };
    let work = |batch: &Batch<'_>| -> Result<BatchOut, ToolError> {
        let mut out = BatchOut::default();
        for rec in &batch.records {
            entry_of(rec, opts, nparts, &mut out)?;
        }
        Ok(out)
    };
    let result = opts.pipeline.run(reader, work, &mut stage);
    stage.progress.finish();
    result.map_err(with_name)?;
    let parts = stage.writers.finish()?;
    let mut functions = stage.functions;
    functions.sort();
    Ok(Scanned { keys: stage.keys, parts, functions })
}

/// Pass 1's side of the pipeline: each batch's entries appended to their partitions in
/// file order, big keys' entries made here.
struct ScanStage<'s> {
    writers: PartWriters,
    keys: u64,
    functions: Vec<(u128, String)>,
    opts: &'s Options,
    nparts: usize,
    src: &'s Source,
    progress: Progress,
}

impl<'a> Stage<'a, BatchOut> for ScanStage<'_> {
    fn batch(&mut self, o: BatchOut) -> Result<(), ToolError> {
        for &(part, s, e) in &o.index {
            self.writers.write(part, &o.buf[s..e])?;
        }
        self.keys += o.index.len() as u64;
        self.functions.extend(o.functions);
        Ok(())
    }

    fn big_key(&mut self, rec: &Record<'a>, _: Option<u64>) -> Result<(), ToolError> {
        let mut out = BatchOut::default();
        entry_of(rec, self.opts, self.nparts, &mut out)?;
        self.batch(out)
    }

    fn done(&mut self, offset: usize) {
        self.src.release_before(offset);
    }

    fn progress(&mut self, offset: usize) {
        self.progress.set(offset as u64);
    }
}

/// Libraries whose code is in one file only, by name.
pub(super) fn function_diff(a: Vec<(u128, String)>, b: Vec<(u128, String)>) -> (Vec<String>, Vec<String>) {
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                only_a.push(x.1.clone());
                i += 1;
            }
            (Some(x), None) => {
                only_a.push(x.1.clone());
                i += 1;
            }
            (_, Some(y)) => {
                only_b.push(y.1.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    only_a.sort();
    only_b.sort();
    (only_a, only_b)
}
