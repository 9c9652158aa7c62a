//! The size kept for a client's replies between commands, resized by the timer as Redis
//! 7.0's clientsCronResizeOutputBuffer does: an idle connection keeps 1 KiB instead of
//! 16 KiB, a busy one grows back to 16 KiB. CLIENT LIST shows it (`rbs`) and its recent
//! peak (`rbp`); DEBUG REPLYBUFFER tunes it.

use std::time::{Duration, Instant};

/// Redis's PROTO_REPLY_MIN_BYTES and PROTO_REPLY_CHUNK_BYTES.
pub const MIN: usize = 1024;
pub const MAX: usize = 16 * 1024;

/// The server's rules (DEBUG REPLYBUFFER PEAK-RESET-TIME / RESIZING).
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// How long a peak counts before it starts again from what is pending; None: never.
    pub peak_reset: Option<Duration>,
    pub resizing: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { peak_reset: Some(DEFAULT_PEAK_RESET), resizing: true }
    }
}

/// Redis's REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME.
pub const DEFAULT_PEAK_RESET: Duration = Duration::from_secs(5);

/// What a resize did, for INFO's reply_buffer_shrinks / _expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    Shrink,
    Expand,
}

/// One client's reply buffer: its size and the most of it used since the last reset.
#[derive(Debug, Clone)]
pub struct ReplyBuffer {
    pub size: usize,
    pub peak: usize,
    last_reset: Option<Instant>,
}

impl Default for ReplyBuffer {
    fn default() -> ReplyBuffer {
        // A new client starts with the full size, counted as used (Redis sets its peak so).
        ReplyBuffer { size: MAX, peak: MAX, last_reset: None }
    }
}

impl ReplyBuffer {
    /// `pending` bytes of replies wait to be written: the buffer holds up to its size of
    /// them (Redis's bufpos; the rest would be in its reply list).
    pub fn note(&mut self, pending: usize) {
        self.peak = self.peak.max(pending.min(self.size));
    }

    /// The timer's turn: shrink to what the peak needs when it used under half, grow by
    /// doubling (up to 16 KiB) when it was full; then start the peak again when it is due.
    pub fn resize(&mut self, now: Instant, pending: usize, policy: Policy) -> Option<Resize> {
        if !policy.resizing {
            return None;
        }
        let mut done = None;
        let (half, double) = (self.size / 2, self.size * 2);
        if half >= MIN && self.peak < half {
            self.size = MIN.max(self.peak + 1);
            done = Some(Resize::Shrink);
        } else if double < MAX * 2 && self.peak == self.size {
            self.size = MAX.min(double);
            done = Some(Resize::Expand);
        }
        if let Some(every) = policy.peak_reset {
            if self.last_reset.is_none_or(|t| now.duration_since(t) >= every) {
                self.peak = pending.min(self.size);
                self.last_reset = Some(now);
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_shrinks_busy_grows_as_redis() {
        let mut b = ReplyBuffer::default();
        let t0 = Instant::now();
        let p = Policy::default();
        // First turn: the peak (the whole buffer) neither shrinks nor grows it; the peak
        // restarts from nothing pending.
        assert_eq!(b.resize(t0, 0, p), None);
        assert_eq!(b.resize(t0, 0, p), Some(Resize::Shrink));
        assert_eq!(b.size, MIN);
        // A 32 KiB reply fills it each time: it doubles up to 16 KiB, then stays.
        let never = Policy { peak_reset: None, ..p };
        for want in [2048, 4096, 8192, 16384, 16384] {
            b.note(32 * 1024);
            b.resize(t0, 0, never);
            assert_eq!(b.size, want);
        }
        // Off: nothing moves.
        b.peak = 0;
        assert_eq!(b.resize(t0, 0, Policy { resizing: false, ..p }), None);
        assert_eq!(b.size, 16384);
    }
}
