//! Buffered output that flushes in the middle of large keys, so memory stays bounded by
//! the flush threshold rather than by the size of one key.

use std::io::{self, Write};

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

pub struct Out<'w> {
    pub buf: Vec<u8>,
    w: &'w mut dyn Write,
}

impl<'w> Out<'w> {
    pub fn new(w: &'w mut dyn Write) -> Self {
        Out { buf: Vec::with_capacity(FLUSH_AT + 64 * 1024), w }
    }

    /// Flush if the buffer is past the threshold.
    #[inline]
    pub fn check(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    pub fn finish(&mut self) -> io::Result<()> {
        self.flush()?;
        self.w.flush()
    }
}
