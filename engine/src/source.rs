//! Where input bytes come from: a memory-mapped file, or a buffer read from a pipe.
//!
//! This is the one place that maps files. Mapping is the default because it lets the
//! decoders borrow values without copying and lets the OS page the file in and out, so
//! memory use does not grow with the file.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::path::Path;

use std::sync::atomic::{AtomicUsize, Ordering};

use memmap2::Mmap;

/// Bytes of an input file.
pub enum Source {
    Mapped(Mmap, Released),
    Buffered(Vec<u8>),
}

/// How much of a mapping has been handed back to the OS.
#[derive(Default)]
pub struct Released(AtomicUsize);

/// Release in steps of this many bytes: madvise calls are cheap but not free.
const RELEASE_STEP: usize = 16 << 20;

impl Source {
    /// Open `path`; `-` reads standard input into memory. Regular files are mapped,
    /// anything else (pipes, character devices) is read into a buffer.
    pub fn open(path: &Path) -> io::Result<Source> {
        if path.as_os_str() == "-" {
            let mut buf = Vec::new();
            io::stdin().lock().read_to_end(&mut buf)?;
            return Ok(Source::Buffered(buf));
        }
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() || meta.len() == 0 {
            let mut buf = Vec::new();
            (&file).read_to_end(&mut buf)?;
            return Ok(Source::Buffered(buf));
        }
        // SAFETY: memmap2 requires that the file is not truncated or modified while
        // mapped. We map read-only and treat the bytes as untrusted input; a concurrent
        // writer can at worst give us inconsistent bytes (which every parser already
        // tolerates) or a SIGBUS on truncation, the same contract as redis-check-rdb's
        // reads. Tools document that inputs must not be rewritten while being read.
        let map = unsafe { Mmap::map(&file)? };
        #[cfg(unix)]
        {
            let _ = map.advise(memmap2::Advice::Sequential);
        }
        Ok(Source::Mapped(map, Released::default()))
    }

    /// Tell the OS the bytes before `offset` will not be read again, so their pages leave
    /// this process's resident set (they stay in the page cache). Keeps peak RSS of a
    /// streaming pass bounded by what is in flight, not by the file size.
    pub fn release_before(&self, offset: usize) {
        let Source::Mapped(map, released) = self else { return };
        let page = 4096;
        let upto = (offset.min(map.len()) / page) * page;
        let mut from = released.0.load(Ordering::Relaxed);
        if upto < from {
            // A new pass from the start of the file: release again from there.
            from = 0;
            released.0.store(0, Ordering::Relaxed);
        }
        if upto < from + RELEASE_STEP {
            return;
        }
        // SAFETY: MADV_DONTNEED on a read-only file mapping only drops our
        // resident copies of the pages; the mapping stays valid and a later access reads
        // the same bytes from the file again. No slice is invalidated, so borrowed
        // values from before `offset` remain sound, merely slower to touch.
        let r = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, upto - from) };
        if r.is_ok() {
            released.0.store(upto, Ordering::Relaxed);
        }
    }
}

impl Deref for Source {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Source::Mapped(m, _) => m,
            Source::Buffered(b) => b,
        }
    }
}
