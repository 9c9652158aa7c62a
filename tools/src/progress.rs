//! A progress bar on stderr for long runs, shown only when stderr is a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// Inputs smaller than this finish before a bar would be useful.
const MIN_SIZE: u64 = 64 * 1024 * 1024;

pub struct Progress {
    bar: Option<ProgressBar>,
    last: u64,
}

impl Progress {
    pub fn new(total: u64) -> Self {
        let bar = if total >= MIN_SIZE && std::io::stderr().is_terminal() {
            let b = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            {
                b.set_style(style);
            }
            Some(b)
        } else {
            None
        };
        Progress { bar, last: 0 }
    }

    #[inline]
    pub fn set(&mut self, pos: u64) {
        if let Some(b) = &self.bar {
            // Update only every 4 MiB: the bar itself must not cost throughput.
            if pos - self.last.min(pos) >= 4 << 20 {
                b.set_position(pos);
                self.last = pos;
            }
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
