//! The replication history a replica can continue from: this server's replication IDs
//! and the replication buffer, which is both the backlog (the last `repl-backlog-size`
//! bytes of the stream) and what every replica has yet to be sent.

use std::collections::VecDeque;
use std::time::Instant;

/// Redis never keeps less history than this, whatever repl-backlog-size says.
const MIN_BACKLOG: usize = 16 * 1024;

/// The smallest block (Redis's PROTO_REPLY_CHUNK_BYTES): small writes share one.
const BLOCK: usize = 16 * 1024;

/// What a block costs beside its bytes (its record and the deque's slot), counted as
/// Redis counts its block header and list node.
const BLOCK_OVERHEAD: usize = std::mem::size_of::<Block>() + 16;

/// Bytes of the stream from offset `start` on; never grown past the capacity it was
/// made with, so the bytes in it never move.
#[derive(Debug)]
struct Block {
    start: u64,
    bytes: Vec<u8>,
}

impl Block {
    /// One past the offset of its last byte.
    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

/// The stream's recent bytes in blocks, by offset. Offsets count the stream's bytes from
/// its start; `end` is the offset of the last byte held (Redis's master_repl_offset).
/// One copy serves the backlog and every replica (Redis 7.0's shared replication
/// buffer): a block goes when the backlog is longer than `size` without it and no
/// replica still has to be sent any of it.
#[derive(Debug)]
pub(super) struct Backlog {
    blocks: VecDeque<Block>,
    size: usize,
    end: u64,
    /// The blocks' memory (INFO's mem_total_replication_buffers).
    mem: usize,
}

impl Backlog {
    pub(super) fn new(size: usize, end: u64) -> Backlog {
        Backlog { blocks: VecDeque::new(), size: size.max(MIN_BACKLOG), end, mem: 0 }
    }

    /// Append `b` (trimming is `trim`'s, once the replicas' needs are known). True when
    /// a block was added.
    pub(super) fn push(&mut self, mut b: &[u8]) -> bool {
        let mut added = false;
        while !b.is_empty() {
            if self.blocks.back().is_none_or(|t| t.bytes.len() == t.bytes.capacity()) {
                // Big writes span several blocks of at most a sixteenth of the backlog,
                // so a block a replica no longer needs can go soon.
                let cap = b.len().clamp(BLOCK, (self.size / 16).max(BLOCK));
                let block = Block { start: self.end + 1, bytes: Vec::with_capacity(cap) };
                self.mem += block.bytes.capacity() + BLOCK_OVERHEAD;
                self.blocks.push_back(block);
                added = true;
            }
            let Some(tail) = self.blocks.back_mut() else { break };
            let take = (tail.bytes.capacity() - tail.bytes.len()).min(b.len());
            tail.bytes.extend_from_slice(&b[..take]);
            self.end += take as u64;
            b = &b[take..];
        }
        added
    }

    /// Drop the oldest blocks the backlog does not need to hold `size` bytes and no
    /// replica needs: `needed` is the first offset some replica has yet to be sent.
    pub(super) fn trim(&mut self, needed: u64) {
        while let Some(f) = self.blocks.front() {
            if self.len() - f.bytes.len() < self.size || f.end() > needed {
                break;
            }
            self.mem -= f.bytes.capacity() + BLOCK_OVERHEAD;
            self.blocks.pop_front();
        }
    }

    pub(super) fn resize(&mut self, size: usize) {
        self.size = size.max(MIN_BACKLOG);
    }

    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The offset of the last byte held, or the stream's end when none is.
    pub(super) fn end(&self) -> u64 {
        self.end
    }

    /// The offset of the first byte held (one past `end` when none is).
    pub(super) fn first(&self) -> u64 {
        self.blocks.front().map_or(self.end + 1, |b| b.start)
    }

    pub(super) fn len(&self) -> usize {
        (self.end + 1 - self.first()) as usize
    }

    /// The memory the blocks take.
    pub(super) fn mem(&self) -> usize {
        self.mem
    }

    /// Append up to `max` bytes from offset `from` to `out`: the count, or None when
    /// `from` is no longer (or not yet) held.
    pub(super) fn copy_from(&self, from: u64, max: usize, out: &mut Vec<u8>) -> Option<usize> {
        if from < self.first() || from > self.end + 1 {
            return None;
        }
        let mut i = self.blocks.partition_point(|b| b.end() <= from);
        let mut at = from;
        let mut copied = 0;
        while copied < max {
            let Some(b) = self.blocks.get(i) else { break };
            let chunk = &b.bytes[(at - b.start) as usize..];
            let take = chunk.len().min(max - copied);
            out.extend_from_slice(&chunk[..take]);
            copied += take;
            at += take as u64;
            i += 1;
        }
        Some(copied)
    }

    /// The last `n` bytes held, when there are any.
    pub(super) fn tail(&self, n: usize) -> Option<Vec<u8>> {
        let from = self.end + 1 - n.min(self.len()) as u64;
        let mut out = Vec::new();
        self.copy_from(from, n, &mut out).filter(|&k| k > 0).map(|_| out)
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

    /// Whether a replica that followed `replid` up to `from - 1` can continue from here:
    /// the number of bytes it missed.
    pub(super) fn continues(&self, replid: &str, from: u64) -> Result<u64, String> {
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
        match &self.backlog {
            Some(b) if from >= b.first() && from <= b.end() + 1 => Ok(b.end() + 1 - from),
            _ => Err(String::new()),
        }
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

    fn since(b: &Backlog, from: u64) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        b.copy_from(from, usize::MAX, &mut out).map(|_| out)
    }

    #[test]
    fn the_backlog_answers_from_any_offset_it_still_holds() {
        let mut b = Backlog::new(16 * 1024, 100);
        assert_eq!(b.first(), 101);
        assert_eq!(since(&b, 101), Some(Vec::new()));
        assert_eq!(since(&b, 102), None);
        b.push(b"abcdef");
        assert_eq!(since(&b, 103).as_deref(), Some(&b"cdef"[..]));
        assert_eq!(b.tail(2).as_deref(), Some(&b"ef"[..]));
        // A write over a block's room spans blocks; reads cross them.
        b.push(&vec![b'x'; 20 * 1024]);
        assert_eq!(b.len(), 6 + 20 * 1024);
        let all = since(&b, 101).unwrap_or_default();
        assert_eq!(all.len(), 6 + 20 * 1024);
        assert!(all.starts_with(b"abcdefxx") && all[6..].iter().all(|&c| c == b'x'));
        let mut part = Vec::new();
        assert_eq!(b.copy_from(105, 10, &mut part), Some(10));
        assert_eq!(part, b"efxxxxxxxx");
    }

    #[test]
    fn blocks_go_when_neither_the_backlog_nor_a_replica_needs_them() {
        let mut b = Backlog::new(16 * 1024, 0);
        for _ in 0..64 {
            b.push(&[b'y'; 1024]);
        }
        assert_eq!(b.len(), 64 * 1024);
        let mem = b.mem();
        // A replica still owed everything from offset 1 keeps it all.
        b.trim(1);
        assert_eq!((b.len(), b.mem()), (64 * 1024, mem));
        // Once it is served, the backlog keeps its size (whole blocks: up to one more).
        b.trim(b.end() + 1);
        assert!(b.len() >= 16 * 1024 && b.len() < 32 * 1024, "{}", b.len());
        assert!(b.mem() < mem / 2);
        assert_eq!(since(&b, 1), None);
        assert_eq!(b.first(), b.end() + 1 - b.len() as u64);
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
        assert_eq!(h.continues(&old, 11), Ok(3));
        assert!(h.continues(&old, 12).unwrap_err().starts_with("Requested offset for second ID"));
        assert_eq!(h.continues(&h.replid.clone(), 12), Ok(2));
        assert_eq!(h.continues(&h.replid.clone(), 15), Err(String::new()));
        assert!(h.continues("x", 1).unwrap_err().starts_with("Replication ID mismatch"));
    }
}
