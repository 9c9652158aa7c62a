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

/// Keep transparent huge pages out of the process (`disable-thp yes`, Redis's default).
/// mimalloc asks for huge pages on its arenas, and the kernel then zeroes 2 MiB at a time
/// on first touch: loading the 5.5 M-key bench file took 14 s with them, 9.4 s without
/// (and 100 MiB less RSS). Redis turns them off the same way; jemalloc never asks for them.
pub fn disable_transparent_huge_pages() -> std::io::Result<()> {
    // SAFETY: PR_SET_THP_DISABLE takes integers only and changes a flag of this process.
    let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Bytes allocated and not yet freed, by every thread of the process.
pub fn used_memory() -> u64 {
    ALLOC.allocated() as u64
}
