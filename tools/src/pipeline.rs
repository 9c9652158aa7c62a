//! Decode on every core, write in file order.
//!
//! The main thread walks the file's record structure (cheap: values are skipped, not
//! decoded) and cuts it into batches of about `batch_bytes` of input. Workers decode and
//! format whole batches; results come back to the main thread, which hands them to the
//! sink strictly in file order. A key bigger than `big_key_bytes` is not batched: the
//! in-flight batches are drained and the key is streamed on the main thread, so memory
//! never holds a big key's output at once.
//!
//! The first error in file order wins: a worker's error for an early key beats a
//! structural error the main thread found further on.

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use ferrokv::format::rdb::{RdbError, Record};

use crate::out::ToolError;

/// A run of records and the database of the key just before it.
pub struct Batch<'a> {
    pub records: Vec<Record<'a>>,
    pub prev_db: Option<u64>,
    /// Offset just past the batch's last record.
    pub end: usize,
}

pub struct Pipeline {
    pub workers: usize,
    pub batch_bytes: usize,
    pub big_key_bytes: usize,
}

impl Default for Pipeline {
    fn default() -> Self {
        // FERROKV_THREADS overrides the core count (1 = everything on the main thread).
        let cores = ferrokv::config::threads(ferrokv::config::cores);
        Pipeline { workers: cores.min(16), batch_bytes: 1 << 20, big_key_bytes: 8 << 20 }
    }
}

/// What a tool stage (dump, verify, diff's scan, convert) does on the calling thread with
/// a file read through the pipeline; the workers run its `work` function on batches.
pub trait Stage<'a, R> {
    /// Every record as it is read, in file order, before it is batched (structure, counts).
    fn record(&mut self, _rec: &Record<'a>) {}
    /// A batch's result, in file order.
    fn batch(&mut self, out: R) -> Result<(), ToolError>;
    /// A key too big to batch, handled on this thread; `prev_db`: the database of the key
    /// before it.
    fn big_key(&mut self, rec: &Record<'a>, prev_db: Option<u64>) -> Result<(), ToolError>;
    /// Everything before `offset` is finished (its mapped pages may be released).
    fn done(&mut self, _offset: usize) {}
    /// How far reading has got (a progress bar).
    fn progress(&mut self, _offset: usize) {}
}

type Sink<'s, 'a, R> = dyn Stage<'a, R> + 's;

/// Where full batches go: to worker threads, or straight through `work` here.
trait Dispatch<'a, R> {
    fn submit(&mut self, batch: Batch<'a>, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError>;
    /// Hand finished results to the stage without waiting.
    fn drain_ready(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError>;
    /// Wait for every submitted batch and hand its result to the stage.
    fn drain_all(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError>;
}

/// Everything on the calling thread.
struct Here<'w, W>(&'w W);

impl<'a, R, W> Dispatch<'a, R> for Here<'_, W>
where
    W: Fn(&Batch<'a>) -> Result<R, ToolError>,
{
    fn submit(&mut self, batch: Batch<'a>, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        stage.batch((self.0)(&batch)?)?;
        stage.done(batch.end);
        Ok(())
    }
    fn drain_ready(&mut self, _: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        Ok(())
    }
    fn drain_all(&mut self, _: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        Ok(())
    }
}

/// Worker threads, with results put back in submission order.
struct Threads<'a, R> {
    tx: Option<SyncSender<(u64, Batch<'a>)>>,
    rx: Receiver<(u64, usize, Result<R, ToolError>)>,
    next: u64,
    sent: u64,
    pending: BTreeMap<u64, (usize, Result<R, ToolError>)>,
}

impl<'a, R> Threads<'a, R> {
    fn take_in_order(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        while let Some((end, r)) = self.pending.remove(&self.next) {
            self.next += 1;
            stage.batch(r?)?;
            stage.done(end);
        }
        Ok(())
    }
}

fn stopped() -> ToolError {
    ToolError::Usage("internal: worker threads stopped".into())
}

impl<'a, R> Dispatch<'a, R> for Threads<'a, R> {
    fn submit(&mut self, batch: Batch<'a>, _: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        self.tx.as_ref().ok_or_else(stopped)?.send((self.sent, batch)).map_err(|_| stopped())?;
        self.sent += 1;
        Ok(())
    }

    fn drain_ready(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        while let Ok((seq, end, r)) = self.rx.try_recv() {
            self.pending.insert(seq, (end, r));
        }
        self.take_in_order(stage)
    }

    fn drain_all(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        self.take_in_order(stage)?;
        while self.next < self.sent {
            let (seq, end, r) = self.rx.recv().map_err(|_| stopped())?;
            self.pending.insert(seq, (end, r));
            self.take_in_order(stage)?;
        }
        Ok(())
    }
}

fn key_db(r: &Record<'_>) -> Option<u64> {
    match r {
        Record::Key(k) => Some(k.db),
        _ => None,
    }
}

fn record_end(r: &Record<'_>) -> Option<usize> {
    match r {
        Record::Key(k) => Some(k.end),
        Record::Eof { end, .. } => Some(*end),
        _ => None,
    }
}

impl Pipeline {
    /// Run `work` over batches on the workers and hand its results to `stage` in file
    /// order; big keys go to the stage on this thread.
    pub fn run<'a, R, I, W>(&self, records: I, work: W, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError>
    where
        R: Send,
        I: Iterator<Item = Result<Record<'a>, RdbError>>,
        W: Fn(&Batch<'a>) -> Result<R, ToolError> + Sync,
    {
        if self.workers <= 1 {
            return self.drive(records, &mut Here(&work), stage);
        }
        std::thread::scope(|scope| {
            let (job_tx, job_rx) = sync_channel::<(u64, Batch<'a>)>(self.workers * 2);
            let (res_tx, res_rx) = channel::<(u64, usize, Result<R, ToolError>)>();
            let job_rx = Arc::new(Mutex::new(job_rx));
            for _ in 0..self.workers {
                let job_rx = Arc::clone(&job_rx);
                let res_tx = res_tx.clone();
                let work = &work;
                scope.spawn(move || loop {
                    let job = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok((seq, batch)) = job else { return };
                    let r = work(&batch);
                    if res_tx.send((seq, batch.end, r)).is_err() {
                        return;
                    }
                });
            }
            drop(res_tx);
            let mut threads = Threads { tx: Some(job_tx), rx: res_rx, next: 0, sent: 0, pending: BTreeMap::new() };
            let result = self.drive(records, &mut threads, stage);
            // Closing the job channel ends the workers; the scope joins them.
            threads.tx = None;
            result
        })
    }

    fn drive<'a, R>(
        &self,
        records: impl Iterator<Item = Result<Record<'a>, RdbError>>,
        dispatch: &mut dyn Dispatch<'a, R>,
        stage: &mut Sink<'_, 'a, R>,
    ) -> Result<(), ToolError> {
        let mut last_db: Option<u64> = None;
        let mut batch = Batch { records: Vec::new(), prev_db: None, end: 0 };
        let mut batch_start = 0usize;
        // Submit the batch being built (if any); the next one follows `last_db`.
        let flush =
            |batch: &mut Batch<'a>, last_db, dispatch: &mut dyn Dispatch<'a, R>, stage: &mut Sink<'_, 'a, R>| {
                let full = std::mem::replace(batch, Batch { records: Vec::new(), prev_db: last_db, end: 0 });
                if full.records.is_empty() {
                    return Ok(());
                }
                dispatch.submit(full, stage)
            };
        for rec in records {
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    // Earlier keys may still be in flight: their errors come first.
                    flush(&mut batch, last_db, dispatch, stage)?;
                    dispatch.drain_all(stage)?;
                    return Err(ToolError::Data(e));
                }
            };
            stage.record(&rec);
            if let Some(end) = record_end(&rec) {
                stage.progress(end);
            }
            if matches!(&rec, Record::Key(k) if k.value.body.len() >= self.big_key_bytes) {
                flush(&mut batch, last_db, dispatch, stage)?;
                dispatch.drain_all(stage)?;
                stage.big_key(&rec, last_db)?;
                if let Some(end) = record_end(&rec) {
                    stage.done(end);
                }
                last_db = key_db(&rec).or(last_db);
                batch.prev_db = last_db;
                continue;
            }
            if let Some(end) = record_end(&rec) {
                if batch.records.is_empty() {
                    batch_start = end;
                }
                batch.end = end;
            }
            last_db = key_db(&rec).or(last_db);
            batch.records.push(rec);
            if batch.end.saturating_sub(batch_start) >= self.batch_bytes || batch.records.len() >= 65536 {
                flush(&mut batch, last_db, dispatch, stage)?;
                dispatch.drain_ready(stage)?;
            }
        }
        flush(&mut batch, last_db, dispatch, stage)?;
        dispatch.drain_all(stage)
    }
}
