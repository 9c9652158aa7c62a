//! The process's allocator: mimalloc (replies and values are many small allocations;
//! mimalloc serves them faster than glibc's malloc, as jemalloc does for Redis), behind
//! a counter of the bytes in use. That counter is INFO's `used_memory` and what
//! `maxmemory` is compared with, as Redis compares zmalloc's own count.
//!
//! The count is of the sizes asked for, not of the allocator's size classes (Redis
//! counts jemalloc's usable sizes), so it runs a little below what Redis would report
//! for the same data.

#[global_allocator]
static ALLOC: cap::Cap<mimalloc::MiMalloc> = cap::Cap::new(mimalloc::MiMalloc, usize::MAX);

/// Buffers at least this big, freed, are given back to the system at once.
pub const RELEASE_AT: usize = 1 << 20;

/// Return freed memory the allocator keeps to the system (after a client with a big query
/// or reply buffer went: Redis's RSS falls back, as jemalloc purges its dirty pages).
pub fn release_free_memory() {
    // SAFETY: mi_collect only walks the allocator's own structures; it takes no pointer
    // and is callable at any time from any thread.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// Bytes allocated and not yet freed, by every thread of the process.
pub fn used_memory() -> u64 {
    ALLOC.allocated() as u64
}
