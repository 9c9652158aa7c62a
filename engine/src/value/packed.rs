//! Byte strings packed one after another in one buffer: each entry is its length, its
//! bytes and its length again reversed (lengths as 7-bit varints), so an element costs its
//! bytes plus two or so, not a pointer-sized header and a heap block of its own, and the
//! trailing length lets a walk go from either end. A list's quicklist nodes, a small zset's
//! (member, score) pairs and a small hash's field/value pairs are kept this way.

use std::ops::Range;

use super::varint;

/// Capacity doubles up to this size, then grows by what is needed.
const DOUBLING_LIMIT: usize = 8 * 1024;

/// Bytes an element of `n` bytes takes in a node.
pub(super) fn entry_size(n: usize) -> usize {
    n + 2 * varint::len(n)
}

/// Write the entry for `item` into `out`, which is exactly `entry_size(item.len())` long.
fn write_entry(out: &mut [u8], item: &[u8]) {
    let head = varint::write(out, item.len());
    out[head..head + item.len()].copy_from_slice(item);
    // The trailing copy is read backwards: its last byte holds the lowest seven bits.
    let end = out.len();
    for i in 0..head {
        out[end - 1 - i] = out[i];
    }
}

/// Entries packed one after another in one buffer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Packed {
    pub(super) buf: Vec<u8>,
    /// Entries in `buf`.
    pub(super) count: u32,
}

impl Packed {
    /// The entry starting at `off`: its data range and where the next entry starts.
    pub(super) fn entry(&self, off: usize) -> (Range<usize>, usize) {
        let (n, head) = varint::read(&self.buf[off..]);
        let data = off + head..off + head + n;
        let next = data.end + head;
        (data, next)
    }

    /// The entry ending at `end`: its data range and where it starts.
    pub(super) fn entry_before(&self, end: usize) -> (Range<usize>, usize) {
        let (mut n, mut shift, mut p) = (0usize, 0, end);
        loop {
            p -= 1;
            let b = self.buf[p];
            n |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let head = end - p;
        (p - n..p, p - n - head)
    }

    /// Where entry `i` starts (`count` gives the end), walking from the nearer end.
    pub(super) fn offset_of(&self, i: usize) -> usize {
        let count = self.count as usize;
        if i <= count / 2 {
            (0..i).fold(0, |off, _| self.entry(off).1)
        } else {
            (i..count).fold(self.buf.len(), |end, _| self.entry_before(end).1)
        }
    }

    pub(super) fn entries(&self) -> impl Iterator<Item = (Range<usize>, usize)> + '_ {
        let mut off = 0;
        std::iter::from_fn(move || {
            (off < self.buf.len()).then(|| {
                let (data, next) = self.entry(off);
                let start = off;
                off = next;
                (data, start)
            })
        })
    }

    /// The entries' data, front to back.
    pub(super) fn data(&self) -> Data<'_> {
        Data { p: self, off: 0 }
    }

    /// Make room for `extra` more bytes: capacity doubles up to 8 KiB (a list node's
    /// budget), then grows only as needed, so a full buffer wastes little.
    pub(super) fn reserve(&mut self, extra: usize) {
        let need = self.buf.len() + extra;
        if need > self.buf.capacity() {
            let target = need.max((self.buf.capacity() * 2).min(DOUBLING_LIMIT));
            self.buf.reserve_exact(target - self.buf.len());
        }
    }

    /// Give back all spare capacity (a buffer built whole).
    pub(super) fn fit(&mut self) {
        super::fit(&mut self.buf);
    }

    /// Give back capacity that a removal left well unused.
    pub(super) fn settle(&mut self) {
        if self.buf.capacity() > 256 && self.buf.len() < self.buf.capacity() / 4 {
            self.buf.shrink_to(self.buf.len() * 2);
        }
    }

    /// Replace bytes `range` with the entry for `item` (an empty range inserts; the
    /// caller keeps `count`).
    pub(super) fn put(&mut self, range: Range<usize>, item: &[u8]) {
        let size = entry_size(item.len());
        let old = range.len();
        let len = self.buf.len();
        if size > old {
            self.reserve(size - old);
            self.buf.resize(len + size - old, 0);
            self.buf.copy_within(range.end..len, range.start + size);
        } else if size < old {
            self.buf.copy_within(range.end..len, range.start + size);
            self.buf.truncate(len - (old - size));
        }
        write_entry(&mut self.buf[range.start..range.start + size], item);
    }

    pub(super) fn push_back(&mut self, item: &[u8]) {
        let end = self.buf.len();
        self.put(end..end, item);
        self.count += 1;
    }

    pub(super) fn append(&mut self, other: Packed) {
        self.reserve(other.buf.len());
        self.buf.extend_from_slice(&other.buf);
        self.count += other.count;
    }

    /// Remove entries equal to `item`: keep the first `skip` matches, drop the next
    /// `take`. Returns how many were dropped.
    pub(super) fn remove_matching(&mut self, item: &[u8], skip: usize, take: usize) -> usize {
        let (mut read, mut write, mut seen, mut taken) = (0, 0, 0, 0);
        while read < self.buf.len() {
            let (data, next) = self.entry(read);
            let matched = &self.buf[data] == item;
            if matched && seen >= skip && taken < take {
                taken += 1;
            } else {
                self.buf.copy_within(read..next, write);
                write += next - read;
            }
            seen += usize::from(matched);
            read = next;
        }
        self.buf.truncate(write);
        self.count -= taken as u32;
        self.settle();
        taken
    }

    /// Remove the bytes `range`, which hold `entries` whole entries.
    pub(super) fn remove_span(&mut self, range: Range<usize>, entries: usize) {
        self.buf.drain(range);
        self.count -= entries as u32;
        self.settle();
    }

    /// Remove the `entries` entries spanning `range` and move the last `entries` entries
    /// into their place: the order a hashtable's swap-remove leaves.
    pub(super) fn swap_remove_span(&mut self, range: Range<usize>, entries: usize) {
        if range.end < self.buf.len() {
            let tail = (0..entries).fold(self.buf.len(), |end, _| self.entry_before(end).1);
            let moved = self.buf[tail..].to_vec();
            self.buf.truncate(tail);
            self.buf.splice(range, moved);
            self.count -= entries as u32;
            self.settle();
        } else {
            self.remove_span(range, entries);
        }
    }

    /// Insert `items` as entries at byte offset `at` (an entry boundary).
    pub(super) fn insert_all(&mut self, at: usize, items: &[&[u8]]) {
        let size: usize = items.iter().map(|i| entry_size(i.len())).sum();
        let len = self.buf.len();
        self.reserve(size);
        self.buf.resize(len + size, 0);
        self.buf.copy_within(at..len, at + size);
        let mut off = at;
        for item in items {
            let n = entry_size(item.len());
            write_entry(&mut self.buf[off..off + n], item);
            off += n;
        }
        self.count += items.len() as u32;
    }
}

/// The data of a [`Packed`]'s entries, front to back.
pub(super) struct Data<'a> {
    p: &'a Packed,
    off: usize,
}

impl<'a> Iterator for Data<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        (self.off < self.p.buf.len()).then(|| {
            let (data, next) = self.p.entry(self.off);
            self.off = next;
            &self.p.buf[data]
        })
    }
}

/// Entries read two at a time (a zset's member and score, a hash's field and value).
impl Packed {
    pub(super) fn pair_count(&self) -> usize {
        self.count as usize / 2
    }

    /// Pair `i`, if there is one.
    pub(super) fn pair_at(&self, i: usize) -> Option<(&[u8], &[u8])> {
        (i < self.pair_count()).then(|| self.pairs(i, i + 1).next()).flatten()
    }

    /// Pairs `start..end` (within the count), from either end.
    pub(super) fn pairs(&self, start: usize, end: usize) -> PairIter<'_> {
        PairIter { p: self, front: self.offset_of(2 * start), back: self.offset_of(2 * end), left: end - start }
    }

    /// The pair whose first entry is `first`: the bytes the pair spans, and those of its
    /// second entry (lengths included; [`Packed::entry`] at its start gives the data).
    pub(super) fn find_pair(&self, first: &[u8]) -> Option<(Range<usize>, Range<usize>)> {
        let mut off = 0;
        while off < self.buf.len() {
            let (a, next) = self.entry(off);
            let (_, end) = self.entry(next);
            if &self.buf[a] == first {
                return Some((off..end, next..end));
            }
            off = end;
        }
        None
    }

    /// The data of the entry starting at `start`.
    pub(super) fn data_at(&self, start: usize) -> &[u8] {
        &self.buf[self.entry(start).0]
    }
}

/// Pairs of entries of a [`Packed`], from either end.
#[derive(Clone)]
pub struct PairIter<'a> {
    p: &'a Packed,
    front: usize,
    back: usize,
    left: usize,
}

impl PairIter<'_> {
    /// Where the next pair from the front starts.
    pub(super) fn front(&self) -> usize {
        self.front
    }
}

impl<'a> Iterator for PairIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let (a, next) = self.p.entry(self.front);
        let (b, next) = self.p.entry(next);
        self.front = next;
        self.left -= 1;
        Some((&self.p.buf[a], &self.p.buf[b]))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for PairIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let (b, start) = self.p.entry_before(self.back);
        let (a, start) = self.p.entry_before(start);
        self.back = start;
        self.left -= 1;
        Some((&self.p.buf[a], &self.p.buf[b]))
    }
}

impl ExactSizeIterator for PairIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(tag: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| tag.wrapping_add(i as u8)).collect()
    }

    proptest! {
        /// Pairs read, found, replaced, inserted and removed as a vector of pairs is,
        /// across the varint length classes (1 and 2 bytes) and from both ends.
        #[test]
        fn pairs_match_a_vector(ops in proptest::collection::vec((0u8..4, 0u8..12, 0usize..300, 0usize..300), 1..80)) {
            let mut p = Packed::default();
            let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for (op, tag, a, b) in ops {
                let first = bytes(tag, tag as usize * 20 % 140);
                let second = bytes(tag ^ 0x55, a);
                match op {
                    0 => match model.iter().position(|(f, _)| *f == first) {
                        Some(i) => {
                            let (_, old) = p.find_pair(&first).expect("present");
                            p.put(old, &second);
                            model[i].1 = second;
                        }
                        None => {
                            p.push_back(&first);
                            p.push_back(&second);
                            model.push((first, second));
                        }
                    },
                    1 => {
                        let found = p.find_pair(&first);
                        match model.iter().position(|(f, _)| *f == first) {
                            Some(i) => {
                                let (span, _) = found.expect("present");
                                p.remove_span(span, 2);
                                model.remove(i);
                            }
                            None => prop_assert!(found.is_none()),
                        }
                    }
                    2 if model.iter().all(|(f, _)| *f != first) => {
                        let at = b % (model.len() + 1);
                        let off = p.offset_of(2 * at);
                        p.insert_all(off, &[&first, &second]);
                        model.insert(at, (first, second));
                    }
                    _ => {
                        let n = model.len();
                        let (s, e) = (a % (n + 1), b % (n + 1));
                        let (s, e) = (s.min(e), s.max(e));
                        let fwd: Vec<_> = p.pairs(s, e).map(|(x, y)| (x.to_vec(), y.to_vec())).collect();
                        prop_assert_eq!(&fwd[..], &model[s..e]);
                        let back: Vec<_> = p.pairs(s, e).rev().map(|(x, y)| (x.to_vec(), y.to_vec())).collect();
                        let want: Vec<_> = model[s..e].iter().rev().cloned().collect();
                        prop_assert_eq!(back, want);
                    }
                }
                prop_assert_eq!(p.pair_count(), model.len());
                for (f, v) in &model {
                    let (_, second) = p.find_pair(f).expect("present");
                    prop_assert_eq!(p.data_at(second.start), &v[..]);
                }
            }
        }
    }
}
