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
//!
//! A batch's record buffer (about a megabyte) goes back to the main thread with its
//! result and is filled again: allocated afresh each time and freed on a worker, it made
//! glibc give the top of its heap back to the kernel and take it again per batch (a
//! hundred thousand page faults, a sixth of `verify`'s time on two cores).

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
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
    /// Threads that decode, the calling thread among them (1: everything on it).
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
    /// An empty record buffer, one that came back from a finished batch when there is one.
    fn spare(&mut self) -> Vec<Record<'a>>;
    /// Hand finished results to the stage without waiting.
    fn drain_ready(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError>;
    /// Wait for every submitted batch and hand its result to the stage.
    fn drain_all(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError>;
}

/// Everything on the calling thread.
struct Here<'w, 'a, W> {
    work: &'w W,
    spare: Vec<Record<'a>>,
}

impl<'a, R, W> Dispatch<'a, R> for Here<'_, 'a, W>
where
    W: Fn(&Batch<'a>) -> Result<R, ToolError>,
{
    fn submit(&mut self, batch: Batch<'a>, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        let (_, end, r, spare) = run_job(self.work, (0, batch));
        self.spare = spare;
        stage.batch(r?)?;
        stage.done(end);
        Ok(())
    }
    fn spare(&mut self) -> Vec<Record<'a>> {
        std::mem::take(&mut self.spare)
    }
    fn drain_ready(&mut self, _: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        Ok(())
    }
    fn drain_all(&mut self, _: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        Ok(())
    }
}

/// A batch to decode, numbered in file order.
type Job<'a> = (u64, Batch<'a>);

/// What comes back: the batch's number, its end, its result and its emptied record buffer.
type Finished<'a, R> = (u64, usize, Result<R, ToolError>, Vec<Record<'a>>);

/// Run one job and hand back its record buffer, emptied.
fn run_job<'a, R>(work: &impl Fn(&Batch<'a>) -> Result<R, ToolError>, (seq, mut batch): Job<'a>) -> Finished<'a, R> {
    let r = work(&batch);
    batch.records.clear();
    (seq, batch.end, r, batch.records)
}

/// Worker threads, with results put back in submission order. When the queue is full
/// the calling thread takes a queued batch itself instead of waiting: with a worker per
/// core besides it, it would share a core with one and be given half of it, and the
/// workers would wait for its batches.
struct Threads<'w, 'a, R, W> {
    tx: Option<SyncSender<Job<'a>>>,
    jobs: Arc<Mutex<Receiver<Job<'a>>>>,
    work: &'w W,
    rx: Receiver<Finished<'a, R>>,
    next: u64,
    sent: u64,
    pending: BTreeMap<u64, (usize, Result<R, ToolError>)>,
    spares: Vec<Vec<Record<'a>>>,
}

impl<'a, R, W> Threads<'_, 'a, R, W>
where
    W: Fn(&Batch<'a>) -> Result<R, ToolError>,
{
    fn arrived(&mut self, (seq, end, r, spare): Finished<'a, R>) {
        self.pending.insert(seq, (end, r));
        self.spares.push(spare);
    }

    fn take_in_order(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        while let Some((end, r)) = self.pending.remove(&self.next) {
            self.next += 1;
            stage.batch(r?)?;
            stage.done(end);
        }
        Ok(())
    }

    /// Run the oldest queued batch here, if there is one and no worker is taking one.
    /// (A worker waits for the queue with the lock held: never block on it here, as only
    /// this thread fills the queue.)
    fn help(&mut self) -> bool {
        let job = match self.jobs.try_lock() {
            Ok(rx) => rx.try_recv().ok(),
            Err(_) => None,
        };
        let Some(job) = job else { return false };
        let finished = run_job(self.work, job);
        self.arrived(finished);
        true
    }
}

fn stopped() -> ToolError {
    ToolError::Usage("internal: worker threads stopped".into())
}

impl<'a, R, W> Dispatch<'a, R> for Threads<'_, 'a, R, W>
where
    W: Fn(&Batch<'a>) -> Result<R, ToolError>,
{
    fn submit(&mut self, batch: Batch<'a>, _: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        let mut job = (self.sent, batch);
        loop {
            match self.tx.as_ref().ok_or_else(stopped)?.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    job = back;
                    if !self.help() {
                        std::thread::yield_now();
                    }
                }
                Err(TrySendError::Disconnected(_)) => return Err(stopped()),
            }
        }
        self.sent += 1;
        Ok(())
    }

    fn spare(&mut self) -> Vec<Record<'a>> {
        self.spares.pop().unwrap_or_default()
    }

    fn drain_ready(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        while let Ok(finished) = self.rx.try_recv() {
            self.arrived(finished);
        }
        self.take_in_order(stage)
    }

    fn drain_all(&mut self, stage: &mut Sink<'_, 'a, R>) -> Result<(), ToolError> {
        self.take_in_order(stage)?;
        while self.next < self.sent {
            match self.rx.try_recv() {
                Ok(finished) => self.arrived(finished),
                Err(TryRecvError::Disconnected) => return Err(stopped()),
                Err(TryRecvError::Empty) => {
                    if !self.help() {
                        let finished = self.rx.recv().map_err(|_| stopped())?;
                        self.arrived(finished);
                    }
                }
            }
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
            return self.drive(records, &mut Here { work: &work, spare: Vec::new() }, stage);
        }
        std::thread::scope(|scope| {
            let (job_tx, job_rx) = sync_channel::<Job<'a>>(self.workers * 2);
            let (res_tx, res_rx) = channel::<Finished<'a, R>>();
            let jobs = Arc::new(Mutex::new(job_rx));
            // This thread walks the file and decodes too (see `Threads`): one worker
            // fewer than the threads asked for.
            for _ in 1..self.workers {
                let jobs = Arc::clone(&jobs);
                let res_tx = res_tx.clone();
                let work = &work;
                scope.spawn(move || loop {
                    let job = match jobs.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    if res_tx.send(run_job(work, job)).is_err() {
                        return;
                    }
                });
            }
            drop(res_tx);
            let mut threads = Threads {
                tx: Some(job_tx),
                jobs,
                work: &work,
                rx: res_rx,
                next: 0,
                sent: 0,
                pending: BTreeMap::new(),
                spares: Vec::new(),
            };
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
                if batch.records.is_empty() {
                    batch.prev_db = last_db;
                    return Ok(());
                }
                let full = std::mem::replace(batch, Batch { records: dispatch.spare(), prev_db: last_db, end: 0 });
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

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokv::format::rdb::RdbReader;

    /// Collects what reaches the stage: each batch's key offsets, in the order given.
    #[derive(Default)]
    struct Collect {
        offsets: Vec<usize>,
        done: Vec<usize>,
    }

    impl<'a> Stage<'a, Vec<usize>> for Collect {
        fn batch(&mut self, out: Vec<usize>) -> Result<(), ToolError> {
            self.offsets.extend(out);
            Ok(())
        }
        fn big_key(&mut self, rec: &Record<'a>, _: Option<u64>) -> Result<(), ToolError> {
            if let Record::Key(k) = rec {
                self.offsets.push(k.offset);
            }
            Ok(())
        }
        fn done(&mut self, offset: usize) {
            self.done.push(offset);
        }
    }

    fn key_offsets(batch: &Batch<'_>) -> Vec<usize> {
        batch.records.iter().filter_map(|r| if let Record::Key(k) = r { Some(k.offset) } else { None }).collect()
    }

    fn reader(data: &[u8]) -> RdbReader<'_> {
        RdbReader::new(data).unwrap_or_else(|e| panic!("{e}"))
    }

    fn sample() -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb/redis-7.0/all-types.rdb");
        std::fs::read(path).unwrap_or_default()
    }

    #[test]
    fn results_reach_the_stage_in_file_order_whoever_decodes_them() {
        let data = sample();
        assert!(!data.is_empty(), "fixtures/rdb/redis-7.0/all-types.rdb is missing");
        let want: Vec<usize> = reader(&data)
            .map(|r| r.map(|r| if let Record::Key(k) = r { Some(k.offset) } else { None }))
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.into_iter().flatten().collect())
            .unwrap_or_default();
        assert!(want.len() > 100, "{} keys", want.len());
        // A batch per record up to batches of many, on 1 to 5 threads; a slow worker so
        // the queue fills and the calling thread takes batches itself.
        for workers in 1..=5 {
            for batch_bytes in [1, 700, 1 << 20] {
                let p = Pipeline { workers, batch_bytes, big_key_bytes: 8 << 20 };
                let mut stage = Collect::default();
                let work = |b: &Batch<'_>| -> Result<Vec<usize>, ToolError> {
                    if b.end.is_multiple_of(3) {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                    Ok(key_offsets(b))
                };
                p.run(reader(&data), work, &mut stage).unwrap_or_else(|e| panic!("{e:?}"));
                assert_eq!(stage.offsets, want, "workers {workers}, batch {batch_bytes}");
                assert!(stage.done.windows(2).all(|w| w[0] < w[1]), "done out of order: {workers} {batch_bytes}");
            }
        }
    }

    #[test]
    fn the_first_failing_batch_in_file_order_is_the_error() {
        let data = sample();
        assert!(!data.is_empty(), "fixtures/rdb/redis-7.0/all-types.rdb is missing");
        for workers in 1..=4 {
            let p = Pipeline { workers, batch_bytes: 1, big_key_bytes: 8 << 20 };
            let mut stage = Collect::default();
            let failed = std::sync::atomic::AtomicUsize::new(0);
            // Batches from the 40th key on fail; later ones fail faster.
            let work = |b: &Batch<'_>| -> Result<Vec<usize>, ToolError> {
                let offsets = key_offsets(b);
                let nth = b.records.iter().any(|r| matches!(r, Record::Key(k) if k.offset >= 10_000));
                if nth {
                    failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Err(ToolError::Usage(format!("batch ending {}", b.end)));
                }
                std::thread::sleep(std::time::Duration::from_micros(100));
                Ok(offsets)
            };
            let err = p.run(reader(&data), work, &mut stage).err().map(|e| format!("{e:?}")).unwrap_or_default();
            let first_bad = reader(&data)
                .filter_map(|r| match r {
                    Ok(Record::Key(k)) if k.offset >= 10_000 => Some(k.end),
                    _ => None,
                })
                .next()
                .unwrap_or_default();
            assert!(err.contains(&format!("batch ending {first_bad}")), "workers {workers}: {err}");
            assert!(stage.offsets.iter().all(|&o| o < 10_000), "a result after the error reached the stage");
        }
    }
}
