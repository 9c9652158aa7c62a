//! Freeing big values on a background thread, as Redis's lazyfree does: UNLINK, FLUSHALL /
//! FLUSHDB ASYNC and the `lazyfree-lazy-*` deletions hand what they remove to a thread
//! instead of freeing it in the command, so deleting a million-member set does not stall
//! every client. A value whose freeing is cheap (Redis's effort of at most 64 allocations:
//! strings, listpacks, intsets, small tables) is freed on the spot, as Redis does.
//!
//! The counters are the process's (Redis's `lazyfree_pending_objects` and
//! `lazyfreed_objects` in INFO): a value counts one, an emptied database one per key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use super::Slot;
use crate::value::{Hash, Set, Value, Zset};

/// Redis's LAZYFREE_THRESHOLD: above this many allocations a value goes to the thread.
pub const THRESHOLD: usize = 64;

static PENDING: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);
/// Jobs handed to the thread, and the last one it finished (it takes them in order).
static SUBMITTED: AtomicU64 = AtomicU64::new(0);
static COMPLETED: AtomicU64 = AtomicU64::new(0);
static WORKER: OnceLock<Option<Sender<(Garbage, u64, u64)>>> = OnceLock::new();

/// What the thread frees: a value, or an emptied database's keys.
type Garbage = Box<dyn Send>;

/// The allocations freeing `v` takes, as Redis's lazyfreeGetFreeEffort counts them: one
/// per quicklist node, table entry, skiplist node, stream radix-tree node (and per consumer
/// group, its first group's pending entries and itself); 1 for one-allocation encodings.
pub fn free_effort(v: &Value) -> usize {
    match v {
        Value::Str(_) => 1,
        Value::List(l) => l.node_count(),
        Value::Set(s) => match s.as_ref() {
            Set::Table(_) => s.len(),
            _ => 1,
        },
        Value::Zset(z) => match z.as_ref() {
            Zset::Skiplist(_) => z.len(),
            Zset::Listpack(_) => 1,
        },
        Value::Hash(h) => match h.as_ref() {
            Hash::Table(_) => h.len(),
            _ => 1,
        },
        Value::Stream(st) => {
            let groups = st.groups.len();
            let first_pel = st.groups.values().next().map_or(0, |g| g.pel.len());
            st.rax_nodes() + groups * (1 + first_pel)
        }
    }
}

/// Free `v`: on the thread when that is worth it, else now.
pub fn free_value(v: Value) {
    if free_effort(&v) > THRESHOLD {
        send(Box::new(v), 1);
    }
}

/// Free the value of a key that expired: on the thread under lazyfree-lazy-expire (when
/// big), else now.
pub fn free_expired(v: Value, cfg: &crate::config::Config) {
    if cfg.lazyfree_lazy_expire {
        free_value(v);
    }
}

/// Free the keys of an emptied database on the thread (FLUSHALL/FLUSHDB ASYNC).
pub fn free_keys(keys: Vec<Slot>) {
    let n = keys.len() as u64;
    if n > 0 {
        send(Box::new(keys), n);
    }
}

fn send(garbage: Garbage, objects: u64) {
    let job = SUBMITTED.fetch_add(1, Ordering::AcqRel) + 1;
    let Some(tx) = worker() else {
        COMPLETED.fetch_max(job, Ordering::AcqRel);
        return;
    };
    PENDING.fetch_add(objects, Ordering::Relaxed);
    if tx.send((garbage, objects, job)).is_err() {
        // The thread is gone: what was handed back is freed here when the error drops.
        PENDING.fetch_sub(objects, Ordering::Relaxed);
        COMPLETED.fetch_max(job, Ordering::AcqRel);
    }
}

/// The last job handed to the thread (0: none yet).
pub fn last_job() -> u64 {
    SUBMITTED.load(Ordering::Acquire)
}

/// Whether the thread has finished job `job` (and every one before it).
pub fn job_done(job: u64) -> bool {
    COMPLETED.load(Ordering::Acquire) >= job
}

/// The thread, started at first use; None when it cannot be started (everything is then
/// freed on the spot).
fn worker() -> Option<&'static Sender<(Garbage, u64, u64)>> {
    WORKER
        .get_or_init(|| {
            let (tx, rx) = channel::<(Garbage, u64, u64)>();
            let spawned = std::thread::Builder::new().name("lazyfree".into()).spawn(move || {
                for (garbage, objects, job) in rx {
                    drop(garbage);
                    PENDING.fetch_sub(objects, Ordering::Relaxed);
                    FREED.fetch_add(objects, Ordering::Relaxed);
                    COMPLETED.fetch_max(job, Ordering::AcqRel);
                }
            });
            spawned.ok().map(|_| tx)
        })
        .as_ref()
}

/// Objects handed to the thread and not freed yet (INFO lazyfree_pending_objects).
pub fn pending() -> u64 {
    PENDING.load(Ordering::Relaxed)
}

/// Objects the thread freed (INFO lazyfreed_objects).
pub fn freed() -> u64 {
    FREED.load(Ordering::Relaxed)
}

/// CONFIG RESETSTAT.
pub fn reset_stats() {
    FREED.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Limits, Stream};

    #[test]
    fn effort_as_redis_counts_it() {
        let limits = Limits::default();
        let mut big = Set::default();
        for i in 0..1000 {
            big.insert(format!("member-{i}").as_bytes(), &limits);
        }
        assert_eq!(free_effort(&Value::Set(Box::new(big))), 1000);
        let mut small = Set::default();
        small.insert(b"1", &limits);
        assert_eq!(free_effort(&Value::Set(Box::new(small))), 1);
        let mut st = Stream::default();
        let few = Limits { stream_node_max_entries: 5, ..limits };
        for i in 1..=1000u64 {
            st.append(
                crate::format::rdb::StreamId { ms: i, seq: 0 },
                crate::value::stream::Fields::new([(&b"f"[..], &b"v"[..])]),
                &few,
            );
        }
        assert!(free_effort(&Value::Stream(Box::new(st))) > THRESHOLD);
    }

    #[test]
    fn big_values_are_freed_on_the_thread() {
        let limits = Limits::default();
        let before = freed();
        let mut big = Set::default();
        for i in 0..10_000 {
            big.insert(format!("m{i}").as_bytes(), &limits);
        }
        free_value(Value::Set(Box::new(big)));
        let start = std::time::Instant::now();
        while freed() == before && start.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(freed() > before);
    }
}
