//! Score, lexicographic and rank intervals (zrangespec, zlexrangespec), parsed and
//! located in a sorted set.

use super::score::strtod;
use crate::command::Reply;
use crate::value::Zset;

/// A score interval (zrangespec).
#[derive(Clone, Copy)]
pub(super) struct ScoreRange {
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) minex: bool,
    pub(super) maxex: bool,
}

impl ScoreRange {
    pub(super) fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
        let bound = |b: &[u8]| match b.strip_prefix(b"(") {
            Some(rest) => strtod(rest).map(|v| (v, true)),
            None => strtod(b).map(|v| (v, false)),
        };
        match (bound(min), bound(max)) {
            (Some((min, minex)), Some((max, maxex))) => Ok(ScoreRange { min, max, minex, maxex }),
            _ => Err(Reply::err("ERR min or max is not a float")),
        }
    }

    /// Ranks `lo..hi` of the members in range.
    pub(super) fn ranks(&self, z: &Zset) -> (usize, usize) {
        let lo = z.partition_point(|_, s| if self.minex { s <= self.min } else { s < self.min });
        let hi = z.partition_point(|_, s| if self.maxex { s < self.max } else { s <= self.max });
        (lo, hi.max(lo))
    }
}

/// One side of a lex interval.
#[derive(Clone)]
pub(super) enum LexBound {
    Minus,
    Plus,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

#[derive(Clone)]
pub(super) struct LexRange {
    pub(super) min: LexBound,
    pub(super) max: LexBound,
}

impl LexRange {
    pub(super) fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, Reply> {
        fn bound(b: &[u8]) -> Option<LexBound> {
            match b.first()? {
                b'+' if b.len() == 1 => Some(LexBound::Plus),
                b'-' if b.len() == 1 => Some(LexBound::Minus),
                b'(' => Some(LexBound::Excl(b[1..].to_vec())),
                b'[' => Some(LexBound::Incl(b[1..].to_vec())),
                _ => None,
            }
        }
        match (bound(min), bound(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(Reply::err("ERR min or max not valid string range item")),
        }
    }

    pub(super) fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::Minus => true,
            LexBound::Plus => false,
            LexBound::Incl(x) => m >= x.as_slice(),
            LexBound::Excl(x) => m > x.as_slice(),
        }
    }

    pub(super) fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::Minus => false,
            LexBound::Plus => true,
            LexBound::Incl(x) => m <= x.as_slice(),
            LexBound::Excl(x) => m < x.as_slice(),
        }
    }

    /// Ranks `lo..hi` of the members in range, found from the low end (ZRANGEBYLEX,
    /// ZLEXCOUNT, ZREMRANGEBYLEX).
    pub(super) fn ranks(&self, z: &Zset) -> (usize, usize) {
        self.ranks_from(z, false)
    }

    /// Ranks `lo..hi` of the members in range, found from the high end when `rev`.
    ///
    /// With equal scores the members are in byte order and this is a binary search. With
    /// different scores Redis leaves the result unspecified, but a listpack's is fixed and
    /// clients see it: the range is empty unless the last member is >= min and the first
    /// <= max; then the first member >= min (from the low end) or the last <= max (from the
    /// high end), scanning in rank order, starts a run that lasts while members stay in
    /// range.
    pub(super) fn ranks_from(&self, z: &Zset, rev: bool) -> (usize, usize) {
        let n = z.len();
        let member = |i: usize| z.get_by_rank(i).map(|(m, _)| m);
        let (Some(first), Some(last)) = (member(0), member(n.wrapping_sub(1))) else { return (0, 0) };
        if !self.gte_min(last) || !self.lte_max(first) {
            return (0, 0);
        }
        if z.encoding() != "listpack" {
            // A skiplist's result depends on its random levels; the binary search is the
            // specified answer.
            let lo = z.partition_point(|m, _| !self.gte_min(m));
            let hi = z.partition_point(|m, _| self.lte_max(m));
            return (lo, hi.max(lo));
        }
        if rev {
            let hi = (0..n).rev().find(|&i| member(i).is_some_and(|m| self.lte_max(m))).map_or(0, |i| i + 1);
            let mut lo = hi;
            while lo > 0 && member(lo - 1).is_some_and(|m| self.gte_min(m)) {
                lo -= 1;
            }
            (lo, hi)
        } else {
            let lo = (0..n).find(|&i| member(i).is_some_and(|m| self.gte_min(m))).unwrap_or(n);
            let mut hi = lo;
            while hi < n && member(hi).is_some_and(|m| self.lte_max(m)) {
                hi += 1;
            }
            (lo, hi)
        }
    }
}

/// Sanitized rank interval `lo..hi` for start/stop indexes (negative from the end).
pub(super) fn rank_interval(len: usize, start: i64, end: i64) -> (usize, usize) {
    let llen = len as i64;
    let mut start = if start < 0 { llen.saturating_add(start) } else { start };
    let mut end = if end < 0 { llen.saturating_add(end) } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return (0, 0);
    }
    if end >= llen {
        end = llen - 1;
    }
    (start as usize, end as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_intervals_as_redis_sanitizes_them() {
        assert_eq!(rank_interval(5, 0, -1), (0, 5));
        assert_eq!(rank_interval(5, -100, 100), (0, 5));
        assert_eq!(rank_interval(5, 3, 1), (0, 0));
        assert_eq!(rank_interval(5, 5, 10), (0, 0));
        assert_eq!(rank_interval(5, i64::MIN, i64::MAX), (0, 5));
        assert_eq!(rank_interval(0, 0, -1), (0, 0));
    }
}
