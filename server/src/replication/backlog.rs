//! The replication history a replica can continue from: this server's replication IDs
//! and the backlog of the last `repl-backlog-size` bytes of the stream.

use std::collections::VecDeque;
use std::time::Instant;

/// Redis never keeps less history than this, whatever repl-backlog-size says.
const MIN_BACKLOG: usize = 16 * 1024;

/// The last bytes of the stream, by offset. Offsets count the stream's bytes from its
/// start; `end` is the offset of the last byte held (Redis's master_repl_offset).
#[derive(Debug)]
pub(super) struct Backlog {
    bytes: VecDeque<u8>,
    size: usize,
    end: u64,
}

impl Backlog {
    pub(super) fn new(size: usize, end: u64) -> Backlog {
        Backlog { bytes: VecDeque::new(), size: size.max(MIN_BACKLOG), end }
    }

    pub(super) fn push(&mut self, b: &[u8]) {
        self.bytes.extend(b);
        self.end += b.len() as u64;
        let over = self.bytes.len().saturating_sub(self.size);
        self.bytes.drain(..over);
    }

    pub(super) fn resize(&mut self, size: usize) {
        self.size = size.max(MIN_BACKLOG);
        self.push(&[]);
    }

    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The offset of the first byte held (one past `end` when none is).
    pub(super) fn first(&self) -> u64 {
        self.end + 1 - self.bytes.len() as u64
    }

    pub(super) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The last `n` bytes held, when there are any.
    pub(super) fn tail(&self, n: usize) -> Option<Vec<u8>> {
        let skip = self.bytes.len().saturating_sub(n);
        (!self.bytes.is_empty()).then(|| self.bytes.range(skip..).copied().collect())
    }

    /// The bytes from offset `from` (a replica's offset plus one) to the end, when the
    /// backlog still holds them all.
    pub(super) fn since(&self, from: u64) -> Option<Vec<u8>> {
        if from < self.first() || from > self.end + 1 {
            return None;
        }
        Some(self.bytes.range((from - self.first()) as usize..).copied().collect())
    }
}

/// Which stream this server's data follows: its replication ID, the one it followed
/// before (valid up to `second_offset`), and the backlog when one is kept.
#[derive(Debug)]
pub struct History {
    pub(super) replid: String,
    pub(super) replid2: String,
    /// The first offset that `replid2` does not cover, -1 without one.
    pub(super) second_offset: i64,
    pub(super) backlog: Option<Backlog>,
    /// Since when a master has had no replica (the backlog is freed after
    /// repl-backlog-ttl seconds of it).
    pub(super) alone_since: Option<Instant>,
}

pub(super) const NO_REPLID: &str = "0000000000000000000000000000000000000000";

impl History {
    pub fn new() -> History {
        History { replid: new_replid(), replid2: NO_REPLID.into(), second_offset: -1, backlog: None, alone_since: None }
    }

    pub fn replid(&self) -> &str {
        &self.replid
    }

    /// A new history starts here (a backlog created, a master that lost its backlog,
    /// DEBUG CHANGE-REPL-ID).
    pub fn renew(&mut self) {
        self.replid = new_replid();
        self.clear_second();
    }

    /// A backlog from `offset` on, unless one is kept already.
    pub(super) fn keep_backlog(&mut self, size: usize, offset: u64) {
        self.backlog.get_or_insert_with(|| Backlog::new(size, offset));
    }

    pub(super) fn clear_second(&mut self) {
        self.replid2 = NO_REPLID.into();
        self.second_offset = -1;
    }

    /// The stream goes on under another ID (a promotion, or a master that did): the old
    /// one stays valid up to `offset`.
    pub(super) fn shift(&mut self, to: String, offset: u64) {
        self.replid2 = std::mem::replace(&mut self.replid, to);
        self.second_offset = offset as i64 + 1;
    }

    /// Whether a replica that followed `replid` up to `from - 1` can continue from here.
    pub(super) fn continues(&self, replid: &str, from: u64) -> Result<Vec<u8>, String> {
        let id2 = replid.eq_ignore_ascii_case(&self.replid2) && from as i64 <= self.second_offset;
        if !replid.eq_ignore_ascii_case(&self.replid) && !id2 {
            return Err(if replid.eq_ignore_ascii_case(&self.replid2) {
                format!("Requested offset for second ID was {from}, but I can reply up to {}", self.second_offset)
            } else {
                format!(
                    "Replication ID mismatch (Replica asked for '{replid}', my replication IDs are '{}' and '{}')",
                    self.replid, self.replid2
                )
            });
        }
        self.backlog.as_ref().and_then(|b| b.since(from)).ok_or_else(String::new)
    }

    /// INFO replication's history lines.
    pub fn info_lines(&self, offset: u64) -> Vec<(&'static str, String)> {
        let (first, len) = self.backlog.as_ref().map_or((0, 0), |b| (b.first(), b.len()));
        vec![
            ("master_replid", self.replid.clone()),
            ("master_replid2", self.replid2.clone()),
            ("master_repl_offset", offset.to_string()),
            ("second_repl_offset", self.second_offset.to_string()),
            ("repl_backlog_active", u8::from(self.backlog.is_some()).to_string()),
            ("repl_backlog_size", self.backlog.as_ref().map_or(0, |b| b.size()).to_string()),
            ("repl_backlog_first_byte_offset", first.to_string()),
            ("repl_backlog_histlen", len.to_string()),
        ]
    }
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

/// 40 random hex digits.
pub fn new_replid() -> String {
    (0..40).map(|_| char::from_digit(fastrand::u32(0..16), 16).unwrap_or('0')).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_answers_from_any_offset_it_still_holds() {
        let mut b = Backlog::new(16 * 1024, 100);
        assert_eq!(b.first(), 101);
        assert_eq!(b.since(101), Some(Vec::new()));
        assert_eq!(b.since(102), None);
        b.push(b"abcdef");
        assert_eq!(b.since(103).as_deref(), Some(&b"cdef"[..]));
        b.push(&vec![b'x'; 20 * 1024]);
        assert_eq!(b.len(), 16 * 1024);
        assert_eq!(b.since(101), None);
        assert_eq!(b.first(), 106 + 20 * 1024 - 16 * 1024 + 1);
    }

    #[test]
    fn the_second_id_is_valid_up_to_the_shift() {
        let mut h = History::new();
        let mut b = Backlog::new(1 << 20, 0);
        b.push(b"0123456789");
        h.backlog = Some(b);
        let old = h.replid.clone();
        h.shift(new_replid(), 10);
        if let Some(b) = h.backlog.as_mut() {
            b.push(b"abc");
        }
        assert_eq!(h.continues(&old, 11).as_deref(), Ok(&b"abc"[..]));
        assert!(h.continues(&old, 12).unwrap_err().starts_with("Requested offset for second ID"));
        assert_eq!(h.continues(&h.replid.clone(), 12).as_deref(), Ok(&b"bc"[..]));
        assert!(h.continues("x", 1).unwrap_err().starts_with("Replication ID mismatch"));
    }
}
