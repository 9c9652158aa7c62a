//! Buffered output that flushes in the middle of large keys, so memory stays bounded by
//! the flush threshold rather than by the size of one key.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ferrokv::format::rdb::RdbError;

const FLUSH_AT: usize = 256 * 1024;

/// Why a tool run stopped.
#[derive(Debug)]
pub enum ToolError {
    /// The input is not a valid file (exit 1).
    Data(RdbError),
    /// Writing output or reading input failed (exit 2); a broken pipe is not reported.
    Io(io::Error),
    /// Bad arguments or an unusable input (exit 2).
    Usage(String),
}

impl From<io::Error> for ToolError {
    fn from(e: io::Error) -> Self {
        ToolError::Io(e)
    }
}

impl From<RdbError> for ToolError {
    fn from(e: RdbError) -> Self {
        ToolError::Data(e)
    }
}

/// Output being built: streamed to a writer past a threshold, or kept in memory
/// (a worker's batch, handed back to be written in order).
pub struct Out<'w> {
    pub buf: Vec<u8>,
    w: Option<&'w mut dyn Write>,
}

impl<'w> Out<'w> {
    pub fn new(w: &'w mut dyn Write) -> Self {
        Out { buf: Vec::with_capacity(FLUSH_AT + 64 * 1024), w: Some(w) }
    }

    /// Output kept in `buf` until the caller takes it.
    pub fn memory() -> Out<'static> {
        Out::memory_with(64 * 1024)
    }

    /// In-memory output with room for `capacity` bytes before it grows (each growth
    /// copies what is there).
    pub fn memory_with(capacity: usize) -> Out<'static> {
        Out { buf: Vec::with_capacity(capacity), w: None }
    }

    /// In-memory output into `buf` (emptied first), a buffer used before.
    pub fn memory_in(mut buf: Vec<u8>) -> Out<'static> {
        buf.clear();
        Out { buf, w: None }
    }

    /// Flush if the buffer is past the threshold (never for in-memory output).
    #[inline]
    pub fn check(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT && self.w.is_some() {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(w) = self.w.as_mut() {
            w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Write `bytes` after what is buffered.
    pub fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self.w.as_mut() {
            Some(w) => {
                if !self.buf.is_empty() {
                    w.write_all(&self.buf)?;
                    self.buf.clear();
                }
                w.write_all(bytes)
            }
            None => {
                self.buf.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    pub fn finish(&mut self) -> io::Result<()> {
        self.flush()?;
        match self.w.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

/// A temporary file beside the destination, renamed over it on `commit`, removed on drop.
pub struct AtomicFile {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl AtomicFile {
    pub fn new(dest: &Path) -> Result<(Self, File), ToolError> {
        let dir = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let f = File::create(&tmp).map_err(|e| ToolError::Usage(format!("cannot create {}: {e}", tmp.display())))?;
        Ok((AtomicFile { tmp, dest: dest.to_path_buf(), done: false }, f))
    }

    pub fn commit(mut self, f: File) -> Result<(), ToolError> {
        f.sync_all()?;
        drop(f);
        std::fs::rename(&self.tmp, &self.dest)?;
        self.done = true;
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A file in the temporary directory, removed on drop (an input staged as an RDB).
pub struct TempPath(pub std::path::PathBuf);

impl TempPath {
    /// A fresh name: the process id and a counter, so several live at once.
    pub fn new(what: &str) -> TempPath {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        TempPath(std::env::temp_dir().join(format!("ferrokv-{what}-{}-{n}.rdb", std::process::id())))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
