//! `rdbtool dump`: records -> filters -> one of the writers (jsonl, json, resp).

mod json;
mod jsonl;
mod resp;

use ferrokv::format::rdb::{KeyRecord, LogicalType, RdbError, RdbReader, Record};
use ferrokv::format::Elem;

use crate::out::{Out, ToolError};
use crate::progress::Progress;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Json,
    Resp,
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
        if self.db.is_some_and(|d| d != k.db) {
            return false;
        }
        if !self.types.is_empty() && !self.types.contains(&k.value.logical()) {
            return false;
        }
        if self.expired == Expired::Skip && k.expire_ms.is_some_and(|e| e <= self.now_ms) {
            return false;
        }
        if let Some(p) = &self.key {
            if !crate::glob::matches(p, &k.key.to_bytes()) {
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

/// What a writer does with each kind of record.
pub trait Writer {
    fn begin(&mut self, _out: &mut Out<'_>) -> Result<(), ToolError> {
        Ok(())
    }
    fn key(&mut self, out: &mut Out<'_>, k: &KeyRecord<'_>, f: &Filter) -> Result<(), ToolError>;
    fn function(&mut self, _out: &mut Out<'_>, _code: &Elem<'_>) -> Result<(), ToolError> {
        Ok(())
    }
    fn other(&mut self, _out: &mut Out<'_>, _r: &Record<'_>) -> Result<(), ToolError> {
        Ok(())
    }
    fn end(&mut self, _out: &mut Out<'_>) -> Result<(), ToolError> {
        Ok(())
    }
}

/// Counts reported on stderr at the end.
#[derive(Debug, Default)]
pub struct DumpStats {
    pub keys_written: u64,
    pub keys_skipped: u64,
    pub skipped_modules: u64,
}

pub fn run(data: &[u8], format: Format, filter: &Filter, out: &mut Out<'_>) -> Result<DumpStats, ToolError> {
    let mut w: Box<dyn Writer> = match format {
        Format::Jsonl => Box::new(jsonl::Jsonl),
        Format::Json => Box::new(json::Json::default()),
        Format::Resp => Box::new(resp::Resp::default()),
    };
    let mut stats = DumpStats::default();
    let reader = RdbReader::new(data)?;
    let mut progress = Progress::new(data.len() as u64);
    w.begin(out)?;
    for rec in reader {
        let rec = rec?;
        match &rec {
            Record::Key(k) => {
                progress.set(k.end as u64);
                if filter.wants(k) {
                    w.key(out, k, filter)?;
                    stats.keys_written += 1;
                } else {
                    stats.keys_skipped += 1;
                }
            }
            Record::Function { code } if !filter.keys_only() => w.function(out, code)?,
            Record::FunctionPreGa { code, .. } if !filter.keys_only() => w.function(out, code)?,
            other if !filter.keys_only() => w.other(out, other)?,
            _ => {}
        }
        out.check()?;
    }
    w.end(out)?;
    out.finish()?;
    progress.finish();
    Ok(stats)
}

/// Wrap an element-level error with its key's context.
pub(crate) fn ctx<'k>(k: &'k KeyRecord<'_>) -> impl Fn(ferrokv::format::FormatError) -> ToolError + 'k {
    move |e| ToolError::Data(RdbError::in_key(e, k))
}
