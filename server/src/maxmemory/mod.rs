//! `maxmemory` as Redis 7.0 enforces it: eviction (the refusals are in admission.rs).
//!
//! Before each command (Redis's processCommand), while `used_memory` is above
//! `maxmemory`, keys are evicted by `maxmemory-policy`: the LRU, LFU and TTL policies
//! sample `maxmemory-samples` keys per database into a pool of the 16 best candidates
//! kept between calls (Redis's evict.c) and evict the best; the random policies take a
//! random key, database after database. Each evicted key propagates as DEL (UNLINK with
//! `lazyfree-lazy-eviction`), fires `evicted`, touches WATCH and counts in
//! `evicted_keys`. Eviction stops after `maxmemory-eviction-tenacity`'s time budget and
//! goes on from the timer. When memory stays above the limit (nothing left to evict, or
//! `noeviction`), commands flagged `denyoom`, and every command queued inside MULTI, are
//! refused with Redis's OOM error (server/src/admission.rs).
//!
//! Used memory is the allocator's count of bytes in use (server/src/alloc.rs), the figure
//! INFO reports as `used_memory`. As Redis, it subtracts what the replication buffer holds
//! for replicas beyond the backlog's size (`mem_not_counted_for_evict`); the AOF buffer is
//! written out after every command, so it is not subtracted.

mod evict;
mod pool;

pub use evict::{config_changed, used_and_peak, used_memory};
pub use pool::{Eviction, Outcome, Policy};
