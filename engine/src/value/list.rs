//! Lists. Redis 7.0 keeps every list in a quicklist (a linked list of listpacks); Redis
//! 7.2+ keeps a small one as a single listpack, which a list here records (`packed`) for
//! OBJECT ENCODING. The node layout matters only to the RDB encoder, which rebuilds nodes
//! at the target's `list-max-listpack-size`.
//!
//! Ours is a quicklist too: a deque of nodes, each one buffer of packed entries
//! (`length, bytes, length reversed`, lengths as 7-bit varints), so an element costs its
//! bytes plus two or so, not a pointer-sized header and a heap block of its own. The
//! trailing length lets iteration and popping work from the tail without a scan.

use std::collections::VecDeque;

use super::packed::{entry_size, Packed};
use crate::format::listpack;

/// Which end of a list an operation works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The head (LPUSH, LPOP, LEFT).
    Left,
    /// The tail (RPUSH, RPOP, RIGHT).
    Right,
}

/// Bytes one node holds before a new one is started (Redis's default
/// `list-max-listpack-size -2` is 8 KB); a larger element gets a node of its own.
const NODE_BYTES: usize = 8 * 1024;
/// Entries one node holds at most, so walks inside a node stay short for tiny elements.
const NODE_ENTRIES: u32 = 1024;

/// A quicklist node: one buffer of packed entries.
type Node = Packed;

impl Packed {
    /// Whether one more entry of `size` bytes belongs in this node.
    fn fits(&self, size: usize) -> bool {
        self.count == 0 || (self.count < NODE_ENTRIES && self.buf.len() + size <= NODE_BYTES)
    }

    /// Whether `other` can be appended to this node.
    fn can_take(&self, other: &Node) -> bool {
        self.buf.len() + other.buf.len() <= NODE_BYTES && self.count + other.count <= NODE_ENTRIES
    }
}

/// A list of byte strings.
#[derive(Debug, Clone, Default)]
pub struct List {
    nodes: VecDeque<Node>,
    len: usize,
    /// Redis 7.2+ holds a small list as one listpack (OBJECT ENCODING `listpack`) rather
    /// than a quicklist; `packed` says which this list would be there.
    packed: bool,
    /// While packed, the bytes of that listpack (Redis's lpBytes), kept up by push and pop.
    lp_bytes: usize,
}

/// Whether a quicklist node (or a listpack list) of `bytes` and `count` entries is past
/// `list-max-listpack-size` (`fill`): a byte class when negative, an entry count (with
/// 8 KB as a safety limit) when positive. Redis's quicklistNodeExceedsLimit.
fn past_limit(fill: i64, bytes: usize, count: usize) -> bool {
    let (max_bytes, max_count) = node_limit(fill);
    match max_bytes {
        Some(b) => bytes > b,
        None => bytes > 8192 || count > max_count,
    }
}

/// The node limit of `fill`: a byte size, or (positive fill) an entry count.
fn node_limit(fill: i64) -> (Option<usize>, usize) {
    if fill >= 0 {
        (None, fill.max(1) as usize)
    } else {
        let class = (-fill - 1).min(4) as u32;
        (Some(4096 << class), usize::MAX)
    }
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl List {
    pub fn from_items<B: AsRef<[u8]>>(items: impl IntoIterator<Item = B>) -> List {
        let mut l = List::default();
        for item in items {
            l.push_back(item.as_ref());
        }
        l.seal_ends();
        l
    }

    /// A list built whole (loaded, restored, stored), settled as `limits`' version does.
    pub fn loaded<B: AsRef<[u8]>>(items: impl IntoIterator<Item = B>, limits: &super::Limits) -> List {
        let mut l = List::from_items(items);
        if limits.list_packed {
            l.settle(limits.list_max_listpack_size);
        }
        l
    }

    /// Quicklist nodes (1 for a listpack): the allocations freeing it takes.
    pub fn node_count(&self) -> usize {
        if self.packed {
            1
        } else {
            self.nodes.len().max(1)
        }
    }

    pub fn encoding(&self) -> &'static str {
        if self.packed {
            "listpack"
        } else {
            "quicklist"
        }
    }

    /// An empty list as Redis 7.2+ creates one for a push: a listpack.
    pub fn new_packed() -> List {
        List { packed: true, lp_bytes: listpack::OVERHEAD, ..List::default() }
    }

    /// The bytes the elements take as one listpack.
    fn listpack_bytes(&self) -> usize {
        listpack::OVERHEAD + self.iter().map(listpack::entry_bytes).sum::<usize>()
    }

    /// Before adding `count` elements of `bytes` bytes (counted as Redis counts a
    /// command's arguments: their lengths): a listpack past the limit becomes a quicklist.
    /// Redis's LIST_CONV_GROWING.
    pub fn before_growing(&mut self, fill: i64, bytes: usize, count: usize) {
        if self.packed && past_limit(fill, self.lp_bytes + bytes, self.len + count) {
            self.packed = false;
        }
    }

    /// After elements went (pops, LREM, LTRIM, LSET): a quicklist that fits in half the
    /// node limit becomes a listpack again (half, so a list at the edge does not flip
    /// back and forth). Redis's LIST_CONV_SHRINKING. Redis asks that the quicklist have
    /// one node; ferrokv does not keep Redis's node boundaries and takes the size rule
    /// alone (docs/server.md).
    pub fn after_shrinking(&mut self, limits: &super::Limits) {
        if limits.list_packed && !self.packed {
            self.pack_if_within(limits.list_max_listpack_size, 2);
        }
    }

    /// A list just built (loaded, restored, stored by SORT) as Redis 7.2+ settles it: a
    /// listpack when it fits in one node. Redis's LIST_CONV_AUTO.
    pub fn settle(&mut self, fill: i64) {
        if !self.packed {
            self.pack_if_within(fill, 1);
        }
    }

    /// Become a listpack if the elements fit within the node limit divided by `divisor`.
    fn pack_if_within(&mut self, fill: i64, divisor: usize) {
        let (max_bytes, max_count) = node_limit(fill);
        let max_bytes = max_bytes.unwrap_or(usize::MAX) / divisor;
        let max_count = max_count / divisor;
        // Every entry takes two bytes at least: a longer list cannot fit.
        if self.len > max_count || self.len > max_bytes / 2 || self.len == 0 {
            return;
        }
        let bytes = self.listpack_bytes();
        // Counted nodes are held to 8 KB too (SIZE_SAFETY_LIMIT): more would be two nodes.
        let counted = max_count != usize::MAX;
        if bytes <= max_bytes && (!counted || bytes <= 8192) {
            self.packed = true;
            self.lp_bytes = bytes;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every element, head to tail (reversible).
    pub fn iter(&self) -> Iter<'_> {
        match self.len {
            0 => Iter { nodes: &self.nodes, front: (0, 0), back: (0, 0), left: 0 },
            n => self.range(0, n - 1),
        }
    }

    /// Append at the tail (what RPUSH and loaders do).
    pub fn push_back(&mut self, item: &[u8]) {
        self.push(End::Right, item);
    }

    pub fn push(&mut self, end: End, item: &[u8]) {
        let size = entry_size(item.len());
        match end {
            End::Left => {
                if !self.nodes.front().is_some_and(|n| n.fits(size)) {
                    self.add_node(0);
                }
                if let Some(n) = self.nodes.front_mut() {
                    n.put(0..0, item);
                    n.count += 1;
                }
            }
            End::Right => {
                if !self.nodes.back().is_some_and(|n| n.fits(size)) {
                    self.add_node(self.nodes.len());
                }
                if let Some(n) = self.nodes.back_mut() {
                    n.push_back(item);
                }
            }
        }
        self.len += 1;
        if self.packed {
            self.lp_bytes += listpack::entry_bytes(item);
        }
    }

    /// After an edit in place (LSET, LINSERT, LREM, LTRIM): a packed list's size again.
    fn resync_packed(&mut self) {
        if self.packed {
            self.lp_bytes = self.listpack_bytes();
        }
    }

    pub fn set(&mut self, index: i64, item: &[u8]) -> bool {
        let r = self.set_entries(index, item);
        self.resync_packed();
        r
    }

    pub fn trim(&mut self, keep: Option<(usize, usize)>) -> usize {
        let r = self.trim_entries(keep);
        self.resync_packed();
        r
    }

    pub fn insert_by_pivot(&mut self, pivot: &[u8], item: &[u8], after: bool) -> bool {
        let r = self.insert_by_pivot_entries(pivot, item, after);
        self.resync_packed();
        r
    }

    pub fn remove_matching(&mut self, item: &[u8], limit: usize, from_tail: bool) -> usize {
        let r = self.remove_matching_entries(item, limit, from_tail);
        self.resync_packed();
        r
    }

    /// Start an empty node at `at` (0 or the end). The node it moves away from is full
    /// now, so its spare capacity is given back.
    fn add_node(&mut self, at: usize) {
        let neighbour = if at == 0 { self.nodes.front_mut() } else { self.nodes.back_mut() };
        if let Some(n) = neighbour {
            if n.buf.capacity() - n.buf.len() > 64 {
                n.fit();
            }
        }
        if self.nodes.len() == self.nodes.capacity() {
            // Grow from one slot: most lists fit in a single node.
            self.nodes.reserve_exact(self.nodes.len().max(1));
        }
        self.nodes.insert(at, Node::default());
    }

    /// Trim spare capacity at both ends (after a bulk build).
    pub(crate) fn seal_ends(&mut self) {
        if let Some(n) = self.nodes.front_mut() {
            n.fit();
        }
        if let Some(n) = self.nodes.back_mut() {
            n.fit();
        }
    }

    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        let i = match end {
            End::Left => 0,
            End::Right => self.nodes.len().checked_sub(1)?,
        };
        let node = self.nodes.get_mut(i)?;
        let (data, range) = match end {
            End::Left => {
                let (data, next) = node.entry(0);
                (data, 0..next)
            }
            End::Right => {
                let (data, start) = node.entry_before(node.buf.len());
                (data, start..node.buf.len())
            }
        };
        let item = node.buf[data].to_vec();
        node.buf.drain(range);
        node.count -= 1;
        if node.count == 0 {
            self.nodes.remove(i);
        } else {
            node.settle();
        }
        self.len -= 1;
        if self.packed {
            self.lp_bytes = self.lp_bytes.saturating_sub(listpack::entry_bytes(&item));
        }
        Some(item)
    }

    /// The position a Redis index (negative counts from the tail) names, if in range.
    pub fn position(&self, index: i64) -> Option<usize> {
        let len = self.len as i64;
        let i = if index < 0 { len.checked_add(index)? } else { index };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// The node holding position `pos` (< len) and the entry's index in it, walking the
    /// node counts from the nearer end.
    fn locate(&self, pos: usize) -> (usize, usize) {
        if pos < self.len / 2 {
            let mut rest = pos;
            for (i, n) in self.nodes.iter().enumerate() {
                if rest < n.count as usize {
                    return (i, rest);
                }
                rest -= n.count as usize;
            }
        } else {
            let mut rest = self.len - 1 - pos;
            for (i, n) in self.nodes.iter().enumerate().rev() {
                if rest < n.count as usize {
                    return (i, n.count as usize - 1 - rest);
                }
                rest -= n.count as usize;
            }
        }
        (self.nodes.len(), 0)
    }

    pub fn get(&self, index: i64) -> Option<&[u8]> {
        let (ni, ii) = self.locate(self.position(index)?);
        let node = self.nodes.get(ni)?;
        let (data, _) = node.entry(node.offset_of(ii));
        Some(&node.buf[data])
    }

    /// Replace the element at a Redis index; false when out of range.
    fn set_entries(&mut self, index: i64, item: &[u8]) -> bool {
        let Some(pos) = self.position(index) else {
            return false;
        };
        let (ni, ii) = self.locate(pos);
        let Some(node) = self.nodes.get_mut(ni) else {
            return false;
        };
        let off = node.offset_of(ii);
        let (_, next) = node.entry(off);
        node.put(off..next, item);
        self.rebalance(ni);
        true
    }

    /// The inclusive range `start..=stop` of Redis indexes, clamped as LRANGE does; None
    /// when it is empty.
    pub fn clamp_range(&self, start: i64, stop: i64) -> Option<(usize, usize)> {
        let len = self.len as i64;
        let start = if start < 0 { len.saturating_add(start).max(0) } else { start };
        let stop = if stop < 0 { len.saturating_add(stop) } else { stop };
        if start > stop || start >= len {
            return None;
        }
        Some((start as usize, stop.min(len - 1) as usize))
    }

    /// Elements `from..=to` (positions); empty when out of range.
    pub fn range(&self, from: usize, to: usize) -> Iter<'_> {
        if from > to || to >= self.len {
            return Iter { nodes: &self.nodes, front: (0, 0), back: (0, 0), left: 0 };
        }
        let (fi, fe) = self.locate(from);
        // The last element is found from the first, as ranges are usually short.
        let (mut ti, mut te) = (fi, fe + (to - from));
        while let Some(n) = self.nodes.get(ti).filter(|n| te >= n.count as usize) {
            te -= n.count as usize;
            ti += 1;
        }
        let last = &self.nodes[ti];
        let back_end = last.entry(last.offset_of(te)).1;
        Iter {
            nodes: &self.nodes,
            front: (fi, self.nodes[fi].offset_of(fe)),
            back: (ti, back_end),
            left: to - from + 1,
        }
    }

    /// Keep only positions `from..=to` (None: keep nothing); the number of elements removed.
    fn trim_entries(&mut self, keep: Option<(usize, usize)>) -> usize {
        let before = self.len;
        match keep {
            Some((from, to)) if to < self.len && from <= to => {
                self.remove_back(self.len - 1 - to);
                self.remove_front(from);
                if let Some(last) = self.nodes.len().checked_sub(1) {
                    self.rebalance(last);
                    self.rebalance(0);
                }
            }
            _ => *self = List::default(),
        }
        before - self.len
    }

    fn remove_front(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let Some(node) = self.nodes.front_mut() else { return };
            if node.count as usize <= n {
                n -= node.count as usize;
                self.nodes.pop_front();
            } else {
                let off = node.offset_of(n);
                node.buf.drain(..off);
                node.count -= n as u32;
                node.settle();
                n = 0;
            }
        }
    }

    fn remove_back(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let Some(node) = self.nodes.back_mut() else { return };
            if node.count as usize <= n {
                n -= node.count as usize;
                self.nodes.pop_back();
            } else {
                let off = node.offset_of(node.count as usize - n);
                node.buf.truncate(off);
                node.count -= n as u32;
                node.settle();
                n = 0;
            }
        }
    }

    /// Insert `item` next to the first element equal to `pivot`; false when there is none.
    fn insert_by_pivot_entries(&mut self, pivot: &[u8], item: &[u8], after: bool) -> bool {
        let found = self.nodes.iter().enumerate().find_map(|(ni, n)| {
            n.entries()
                .find(|(data, _)| &n.buf[data.clone()] == pivot)
                .map(|(_, start)| (ni, if after { n.entry(start).1 } else { start }))
        });
        let Some((ni, at)) = found else {
            return false;
        };
        let node = &mut self.nodes[ni];
        node.put(at..at, item);
        node.count += 1;
        self.len += 1;
        self.rebalance(ni);
        true
    }

    /// Remove up to `limit` (0: all) elements equal to `item`, scanning from the tail when
    /// `from_tail`; the number removed.
    fn remove_matching_entries(&mut self, item: &[u8], limit: usize, from_tail: bool) -> usize {
        let mut left = if limit == 0 { usize::MAX } else { limit };
        let order: Box<dyn Iterator<Item = usize>> =
            if from_tail { Box::new((0..self.nodes.len()).rev()) } else { Box::new(0..self.nodes.len()) };
        let mut removed = 0;
        for ni in order {
            if left == 0 {
                break;
            }
            let node = &mut self.nodes[ni];
            let matches = node.entries().filter(|(data, _)| &node.buf[data.clone()] == item).count();
            let take = matches.min(left);
            if take == 0 {
                continue;
            }
            // From the tail, the last `take` matches of the node go.
            let skip = if from_tail { matches - take } else { 0 };
            let dropped = node.remove_matching(item, skip, take);
            left -= dropped;
            removed += dropped;
        }
        if removed > 0 {
            self.len -= removed;
            self.compact();
        }
        removed
    }

    /// Drop empty nodes and merge neighbours that fit in one node.
    fn compact(&mut self) {
        let old = std::mem::take(&mut self.nodes);
        let mut nodes: VecDeque<Node> = VecDeque::with_capacity(old.len());
        for n in old.into_iter().filter(|n| n.count > 0) {
            match nodes.back_mut() {
                Some(b) if b.can_take(&n) => b.append(n),
                _ => nodes.push_back(n),
            }
        }
        nodes.shrink_to_fit();
        self.nodes = nodes;
    }

    /// After node `i` changed size: drop it when empty, split it when over budget,
    /// otherwise merge it into a neighbour it fits with.
    fn rebalance(&mut self, i: usize) {
        let Some(node) = self.nodes.get(i) else { return };
        if node.count == 0 {
            self.nodes.remove(i);
        } else if node.count > 1 && (node.buf.len() > NODE_BYTES || node.count > NODE_ENTRIES) {
            let Some(node) = self.nodes.remove(i) else { return };
            let mut parts = vec![Node::default()];
            for (data, _) in node.entries() {
                let item = &node.buf[data];
                if !parts.last().is_some_and(|p| p.fits(entry_size(item.len()))) {
                    parts.push(Node::default());
                }
                if let Some(p) = parts.last_mut() {
                    p.push_back(item);
                }
            }
            for (k, p) in parts.into_iter().enumerate() {
                self.nodes.insert(i + k, p);
            }
        } else if i + 1 < self.nodes.len() && self.nodes[i].can_take(&self.nodes[i + 1]) {
            if let Some(next) = self.nodes.remove(i + 1) {
                self.nodes[i].append(next);
            }
        } else if i > 0 && self.nodes[i - 1].can_take(&self.nodes[i]) {
            if let Some(this) = self.nodes.remove(i) {
                self.nodes[i - 1].append(this);
            }
        }
    }
}

/// Elements of a list in order, from either end.
#[derive(Clone)]
pub struct Iter<'a> {
    nodes: &'a VecDeque<Node>,
    /// The node and offset of the next entry from the front.
    front: (usize, usize),
    /// The node and end offset of the next entry from the back.
    back: (usize, usize),
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (mut ni, mut off) = self.front;
        while off >= self.nodes.get(ni)?.buf.len() {
            ni += 1;
            off = 0;
        }
        let node = &self.nodes[ni];
        let (data, next) = node.entry(off);
        self.front = (ni, next);
        self.left -= 1;
        Some(&node.buf[data])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let (mut ni, mut end) = self.back;
        while end == 0 {
            ni = ni.checked_sub(1)?;
            end = self.nodes.get(ni)?.buf.len();
        }
        let node = self.nodes.get(ni)?;
        let (data, start) = node.entry_before(end);
        self.back = (ni, start);
        self.left -= 1;
        Some(&node.buf[data])
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {

    #[test]
    fn packing_follows_the_byte_class_or_the_entry_count() {
        let item = [b'v'; 100];
        // 100 entries of 102 bytes: past 8 KB, within fill -3's 16 KB.
        let mut l = List::from_items(std::iter::repeat_n(&item[..], 100));
        l.settle(-2);
        assert_eq!(l.encoding(), "quicklist");
        l.settle(-3);
        assert_eq!(l.encoding(), "listpack");
        // Counted nodes: 3 entries fit a fill of 4, but not past the 8 KB safety limit.
        let mut small = List::from_items(["a", "b", "c"]);
        small.settle(4);
        assert_eq!(small.encoding(), "listpack");
        let big = [b'w'; 5000];
        let mut l = List::from_items([&big[..], &big[..]]);
        l.settle(4);
        assert_eq!(l.encoding(), "quicklist");
        // Shrinking takes half the limit (only where lists pack, 7.2+).
        let limits = super::super::Limits { list_packed: true, list_max_listpack_size: 4, ..Default::default() };
        let mut l = List::from_items(["1", "2", "3"]);
        l.after_shrinking(&limits);
        assert_eq!(l.encoding(), "quicklist");
        l.pop(End::Left);
        l.after_shrinking(&Default::default());
        assert_eq!(l.encoding(), "quicklist");
        l.after_shrinking(&limits);
        assert_eq!(l.encoding(), "listpack");
    }
    use super::*;

    fn list(items: &[&str]) -> List {
        List::from_items(items.iter().map(|s| s.as_bytes()))
    }

    fn strs(l: &List) -> Vec<String> {
        l.iter().map(|e| String::from_utf8_lossy(e).into_owned()).collect()
    }

    #[test]
    fn remove_from_either_end() {
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.remove_matching(b"a", 2, true), 2);
        assert_eq!(strs(&l), ["a", "b", "c"]);
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.remove_matching(b"a", 2, false), 2);
        assert_eq!(strs(&l), ["b", "c", "a"]);
        assert_eq!(l.remove_matching(b"zz", 0, false), 0);
    }

    #[test]
    fn ranges_clamp_like_redis() {
        let l = list(&["a", "b", "c"]);
        assert_eq!(l.clamp_range(0, -1), Some((0, 2)));
        assert_eq!(l.clamp_range(-100, 100), Some((0, 2)));
        assert_eq!(l.clamp_range(2, 1), None);
        assert_eq!(l.clamp_range(i64::MIN, i64::MAX), Some((0, 2)));
        assert_eq!(l.clamp_range(5, 10), None);
        assert_eq!(l.position(i64::MIN), None);
        assert_eq!(l.position(-3), Some(0));
    }

    #[test]
    fn entries_round_trip_every_length_class() {
        for n in [0, 1, 127, 128, 300, 16383, 16384, 70000] {
            let item = vec![b'x'; n];
            let mut l = List::default();
            l.push(End::Left, b"a");
            l.push(End::Right, &item);
            l.push(End::Right, b"z");
            assert_eq!(l.get(1), Some(&item[..]));
            assert_eq!(l.iter().rev().nth(1), Some(&item[..]));
            assert_eq!(l.pop(End::Right).as_deref(), Some(&b"z"[..]));
            assert_eq!(l.pop(End::Right), Some(item));
        }
    }

    /// Random operations against a VecDeque model, with element sizes that force node
    /// splits, merges and single-element nodes.
    #[test]
    fn matches_a_plain_deque() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut l = List::default();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        let item = |rng: &mut fastrand::Rng| -> Vec<u8> {
            let len = match rng.u8(..10) {
                0 => rng.usize(..9000),
                1..=3 => rng.usize(..300),
                _ => rng.usize(..4),
            };
            (0..len).map(|i| b'a' + ((i + len) % 3) as u8).collect()
        };
        let mut most_nodes = 0;
        for step in 0..6000 {
            most_nodes = most_nodes.max(l.nodes.len());
            let len = model.len() as i64;
            match rng.u8(..12) {
                0..=2 => {
                    let e = item(&mut rng);
                    l.push(End::Left, &e);
                    model.push_front(e);
                }
                3..=5 => {
                    let e = item(&mut rng);
                    l.push(End::Right, &e);
                    model.push_back(e);
                }
                6 => assert_eq!(l.pop(End::Left), model.pop_front()),
                7 => assert_eq!(l.pop(End::Right), model.pop_back()),
                8 => {
                    let i = rng.i64(-len - 2..len + 2);
                    let e = item(&mut rng);
                    let ok = l.set(i, &e);
                    assert_eq!(ok, l.position(i).is_some());
                    if let Some(p) = l.position(i) {
                        model[p] = e;
                    }
                }
                9 => {
                    let pivot = item(&mut rng);
                    let e = item(&mut rng);
                    let after = rng.bool();
                    let p = model.iter().position(|x| *x == pivot);
                    assert_eq!(l.insert_by_pivot(&pivot, &e, after), p.is_some());
                    if let Some(p) = p {
                        model.insert(if after { p + 1 } else { p }, e);
                    }
                }
                10 => {
                    let e = item(&mut rng);
                    let limit = rng.usize(..3);
                    let from_tail = rng.bool();
                    let removed = l.remove_matching(&e, limit, from_tail);
                    let mut left = if limit == 0 { usize::MAX } else { limit };
                    let mut keep: Vec<bool> = vec![true; model.len()];
                    let idx: Vec<usize> =
                        if from_tail { (0..model.len()).rev().collect() } else { (0..model.len()).collect() };
                    for i in idx {
                        if left > 0 && model[i] == e {
                            keep[i] = false;
                            left -= 1;
                        }
                    }
                    let mut k = keep.iter();
                    model.retain(|_| *k.next().unwrap_or(&true));
                    assert_eq!(removed, keep.iter().filter(|k| !**k).count());
                }
                _ => {
                    if rng.u8(..4) == 0 {
                        let (a, b) = (rng.i64(-len - 2..len + 2), rng.i64(-len - 2..len + 2));
                        let keep = l.clamp_range(a, b);
                        let removed = l.trim(keep);
                        let before = model.len();
                        match keep {
                            Some((from, to)) => {
                                model.truncate(to + 1);
                                model.drain(..from);
                            }
                            None => model.clear(),
                        }
                        assert_eq!(removed, before - model.len());
                    }
                }
            }
            assert_eq!(l.len(), model.len(), "step {step}");
            assert!(l.iter().eq(model.iter().map(|e| e.as_slice())), "step {step}");
            assert!(l.iter().rev().eq(model.iter().rev().map(|e| e.as_slice())), "step {step}");
            assert!(l.nodes.iter().all(|n| n.count > 0), "step {step}");
            assert_eq!(l.nodes.iter().map(|n| n.count as usize).sum::<usize>(), l.len());
            if !model.is_empty() {
                let i = rng.i64(-len - 1..len + 1);
                assert_eq!(l.get(i), l.position(i).map(|p| model[p].as_slice()));
                let (a, b) = (rng.usize(..model.len()), rng.usize(..model.len()));
                let (a, b) = (a.min(b), a.max(b));
                assert!(l.range(a, b).eq(model.range(a..=b).map(|e| e.as_slice())));
                assert!(l.range(a, b).rev().eq(model.range(a..=b).rev().map(|e| e.as_slice())));
            }
        }
        assert!(most_nodes > 5, "{most_nodes}");
    }
}
