//! Where input bytes come from: a memory-mapped file, or a buffer read from a pipe.
//!
//! This is the one place that maps files. Mapping is the default because it lets the
//! decoders borrow values without copying and lets the OS page the file in and out, so
//! memory use does not grow with the file.

use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Deref;
use std::path::Path;

use std::sync::atomic::{AtomicUsize, Ordering};

use memmap2::Mmap;

use crate::format::rdb::CRC_STEP;

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
    /// Open `path`; `-` is standard input. Regular files are mapped; anything else
    /// (standard input, pipes, character devices) is copied to an unlinked file in the
    /// temporary directory (TMPDIR) and that is mapped, so a piped input costs disk, not
    /// memory; where no temporary file can be made it is read into memory.
    pub fn open(path: &Path) -> io::Result<Source> {
        if path.as_os_str() == "-" {
            return Source::spill(io::stdin().lock());
        }
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Source::spill(file);
        }
        if meta.len() == 0 {
            return Ok(Source::Buffered(Vec::new()));
        }
        Source::map(&file)
    }

    /// `input` read to its end into an unlinked temporary file, mapped.
    pub fn spill(mut input: impl Read) -> io::Result<Source> {
        let Some((file, dir)) = unlinked_temp_file() else {
            let mut buf = Vec::new();
            input.read_to_end(&mut buf)?;
            return Ok(Source::Buffered(buf));
        };
        let mut out = io::BufWriter::with_capacity(1 << 20, &file);
        let copied = io::copy(&mut input, &mut out).and_then(|n| out.flush().map(|()| n)).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("copying the input to a temporary file in {} (TMPDIR): {e}", dir.display()),
            )
        })?;
        drop(out);
        if copied == 0 {
            return Ok(Source::Buffered(Vec::new()));
        }
        Source::map(&file)
    }

    fn map(file: &File) -> io::Result<Source> {
        // SAFETY: memmap2 requires that the file is not truncated or modified while
        // mapped. We map read-only and treat the bytes as untrusted input; a concurrent
        // writer can at worst give us inconsistent bytes (which every parser already
        // tolerates) or a SIGBUS on truncation, the same contract as redis-check-rdb's
        // reads. Tools document that inputs must not be rewritten while being read.
        // A spilled input's file is unlinked and its only handle is ours: nothing else
        // can write it.
        let map = unsafe { Mmap::map(file)? };
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
        // An RDB reader checking the CRC reads the bytes up to CRC_STEP behind the records
        // it returned: released before that, they would be faulted back in and stay.
        let upto = (offset.saturating_sub(CRC_STEP).min(map.len()) / page) * page;
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

/// A new file in the temporary directory, already unlinked (its space goes when the
/// last handle or mapping of it does): the file and its directory, or None.
fn unlinked_temp_file() -> Option<(File, std::path::PathBuf)> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir();
    for _ in 0..16 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".ferrokv-input-{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path) {
            Ok(file) => {
                let _ = std::fs::remove_file(&path);
                return Some((file, dir));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spilled_files() -> usize {
        let prefix = format!(".ferrokv-input-{}-", std::process::id());
        let names = std::fs::read_dir(std::env::temp_dir()).map(|d| d.flatten().map(|e| e.file_name()));
        names.map(|n| n.filter(|n| n.to_string_lossy().starts_with(&prefix)).count()).unwrap_or(0)
    }

    #[test]
    fn a_piped_input_is_mapped_from_an_unlinked_file() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let src = Source::spill(&data[..]).unwrap();
        assert!(matches!(src, Source::Mapped(..)), "mapped, not held in memory");
        assert_eq!(&src[..], &data[..]);
        assert_eq!(spilled_files(), 0, "the file is unlinked at once");
        let empty = Source::spill(&b""[..]).unwrap();
        assert!(empty.is_empty());
    }

    /// The pages a reader checking the CRC still reads (up to CRC_STEP behind the record it
    /// returned) are kept: released first, they were faulted back in and stayed resident
    /// (`rdbtool info` of a 1.2 GB file peaked at 63 MB of file pages, not 16).
    #[test]
    fn pages_the_checksum_still_reads_are_not_released() {
        let src = Source::spill(&vec![7u8; 3 * RELEASE_STEP][..]).unwrap();
        let Source::Mapped(_, released) = &src else { panic!("mapped") };
        let at = 2 * RELEASE_STEP + 12345;
        src.release_before(at);
        let upto = released.0.load(Ordering::Relaxed);
        assert!(upto >= RELEASE_STEP && upto + CRC_STEP <= at, "released up to {upto} of {at}");
        assert_eq!(src[at - 1], 7);
    }
}
