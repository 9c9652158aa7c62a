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
use std::sync::mpsc::{channel, sync_channel, Receiver};
use std::sync::{Arc, Mutex};

use ferrokv::format::rdb::{RdbError, Record};

use crate::out::ToolError;

/// The big-key handler: a record and the database of the key before it.
type Inline<'r, 'a> = dyn FnMut(&Record<'a>, Option<u64>) -> Result<(), ToolError> + 'r;

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
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        Pipeline { workers: cores.min(8), batch_bytes: 1 << 20, big_key_bytes: 8 << 20 }
    }
}

fn record_end(r: &Record<'_>) -> Option<usize> {
    match r {
        Record::Key(k) => Some(k.end),
        Record::Eof { end, .. } => Some(*end),
        _ => None,
    }
}

fn key_db(r: &Record<'_>) -> Option<u64> {
    match r {
        Record::Key(k) => Some(k.db),
        _ => None,
    }
}

impl Pipeline {
    /// Run `work` over batches and `sink` over its results in order; `inline` handles big
    /// keys on this thread; `done(offset)` says everything before `offset` is finished.
    #[allow(clippy::too_many_arguments)]
    pub fn run<'a, R, I, W, S, B, D, P>(
        &self,
        records: I,
        work: W,
        mut sink: S,
        mut inline: B,
        mut done: D,
        mut progress: P,
    ) -> Result<(), ToolError>
    where
        R: Send,
        I: Iterator<Item = Result<Record<'a>, RdbError>>,
        W: Fn(&Batch<'a>) -> Result<R, ToolError> + Sync,
        S: FnMut(R) -> Result<(), ToolError>,
        B: FnMut(&Record<'a>, Option<u64>) -> Result<(), ToolError>,
        D: FnMut(usize),
        P: FnMut(usize),
    {
        if self.workers <= 1 {
            return self.run_here(records, &work, &mut sink, &mut inline, &mut done, &mut progress);
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
            let mut ord = Ordered { next: 0, pending: BTreeMap::new(), rx: res_rx, sent: 0 };
            let result = (|| {
                let mut batch = Batch { records: Vec::new(), prev_db: None, end: 0 };
                let mut batch_start = 0usize;
                let mut last_db: Option<u64> = None;
                for rec in records {
                    let rec = match rec {
                        Ok(r) => r,
                        Err(e) => {
                            // Earlier keys may still be in flight: their errors come first.
                            ord.send_batch(&job_tx, &mut batch, last_db)?;
                            ord.drain_all(&mut sink, &mut done)?;
                            return Err(ToolError::Data(e));
                        }
                    };
                    let big = match &rec {
                        Record::Key(k) => k.value.body.len() >= self.big_key_bytes,
                        _ => false,
                    };
                    if big {
                        ord.send_batch(&job_tx, &mut batch, last_db)?;
                        ord.drain_all(&mut sink, &mut done)?;
                        inline(&rec, last_db)?;
                        if let Some(end) = record_end(&rec) {
                            done(end);
                            progress(end);
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
                        progress(end);
                    }
                    if let Some(db) = key_db(&rec) {
                        last_db = Some(db);
                    }
                    batch.records.push(rec);
                    if batch.end.saturating_sub(batch_start) >= self.batch_bytes || batch.records.len() >= 65536 {
                        ord.send_batch(&job_tx, &mut batch, last_db)?;
                        ord.drain_ready(&mut sink, &mut done)?;
                    }
                }
                ord.send_batch(&job_tx, &mut batch, last_db)?;
                ord.drain_all(&mut sink, &mut done)
            })();
            drop(job_tx);
            result
        })
    }

    fn run_here<'a, R>(
        &self,
        records: impl Iterator<Item = Result<Record<'a>, RdbError>>,
        work: &dyn Fn(&Batch<'a>) -> Result<R, ToolError>,
        sink: &mut dyn FnMut(R) -> Result<(), ToolError>,
        inline: &mut Inline<'_, 'a>,
        done: &mut dyn FnMut(usize),
        progress: &mut dyn FnMut(usize),
    ) -> Result<(), ToolError> {
        let mut last_db = None;
        let mut batch = Batch { records: Vec::new(), prev_db: None, end: 0 };
        let mut start = 0;
        for rec in records {
            let rec = rec?;
            if let Some(end) = record_end(&rec) {
                progress(end);
            }
            let big = matches!(&rec, Record::Key(k) if k.value.body.len() >= self.big_key_bytes);
            if big {
                if !batch.records.is_empty() {
                    sink(work(&batch)?)?;
                    done(batch.end);
                    batch = Batch { records: Vec::new(), prev_db: last_db, end: 0 };
                }
                inline(&rec, last_db)?;
                last_db = key_db(&rec).or(last_db);
                batch.prev_db = last_db;
                continue;
            }
            if let Some(end) = record_end(&rec) {
                if batch.records.is_empty() {
                    start = end;
                }
                batch.end = end;
            }
            last_db = key_db(&rec).or(last_db);
            batch.records.push(rec);
            if batch.end.saturating_sub(start) >= self.batch_bytes {
                sink(work(&batch)?)?;
                done(batch.end);
                batch = Batch { records: Vec::new(), prev_db: last_db, end: 0 };
            }
        }
        if !batch.records.is_empty() {
            sink(work(&batch)?)?;
            done(batch.end);
        }
        Ok(())
    }
}

/// Results put back in submission order.
struct Ordered<R> {
    next: u64,
    sent: u64,
    pending: BTreeMap<u64, (usize, Result<R, ToolError>)>,
    rx: Receiver<(u64, usize, Result<R, ToolError>)>,
}

impl<R> Ordered<R> {
    fn send_batch<'a>(
        &mut self,
        tx: &std::sync::mpsc::SyncSender<(u64, Batch<'a>)>,
        batch: &mut Batch<'a>,
        last_db: Option<u64>,
    ) -> Result<(), ToolError> {
        if batch.records.is_empty() {
            batch.prev_db = last_db;
            return Ok(());
        }
        let next_prev = last_db;
        let full = std::mem::replace(batch, Batch { records: Vec::new(), prev_db: next_prev, end: 0 });
        tx.send((self.sent, full)).map_err(|_| ToolError::Usage("internal: worker threads stopped".into()))?;
        self.sent += 1;
        Ok(())
    }

    fn take_in_order(
        &mut self,
        sink: &mut dyn FnMut(R) -> Result<(), ToolError>,
        done: &mut dyn FnMut(usize),
    ) -> Result<(), ToolError> {
        while let Some((end, r)) = self.pending.remove(&self.next) {
            self.next += 1;
            sink(r?)?;
            done(end);
        }
        Ok(())
    }

    fn drain_ready(
        &mut self,
        sink: &mut dyn FnMut(R) -> Result<(), ToolError>,
        done: &mut dyn FnMut(usize),
    ) -> Result<(), ToolError> {
        while let Ok((seq, end, r)) = self.rx.try_recv() {
            self.pending.insert(seq, (end, r));
        }
        self.take_in_order(sink, done)
    }

    fn drain_all(
        &mut self,
        sink: &mut dyn FnMut(R) -> Result<(), ToolError>,
        done: &mut dyn FnMut(usize),
    ) -> Result<(), ToolError> {
        self.take_in_order(sink, done)?;
        while self.next < self.sent {
            match self.rx.recv() {
                Ok((seq, end, r)) => {
                    self.pending.insert(seq, (end, r));
                    self.take_in_order(sink, done)?;
                }
                Err(_) => return Err(ToolError::Usage("internal: worker threads stopped".into())),
            }
        }
        Ok(())
    }
}
