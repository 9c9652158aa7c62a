//! Redis's partial sort (pqsort.c): the Bentley–McIlroy quicksort ("Engineering a Sort
//! Function", 1993) that recurses only into the parts overlapping the ranks a caller keeps.
//! Elements that compare equal end up in the order this algorithm leaves them, which is
//! not the order they came in; GEORADIUS ... COUNT and SORT ... LIMIT reply in that order,
//! so ferrokv runs the same algorithm to reply as Redis does.

use std::cmp::Ordering;

/// Sort `v` enough that positions `keep.0..=keep.1` hold what a full sort puts there.
pub fn partial_sort<T>(v: &mut [T], keep: (usize, usize), cmp: &impl Fn(&T, &T) -> Ordering) {
    sort_part(v, 0, keep, cmp);
}

/// Index of the median of three (ties broken as pqsort's med3 breaks them).
fn median3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    if cmp(&v[a], &v[b]).is_lt() {
        if cmp(&v[b], &v[c]).is_lt() {
            b
        } else if cmp(&v[a], &v[c]).is_lt() {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]).is_gt() {
        b
    } else if cmp(&v[a], &v[c]).is_lt() {
        a
    } else {
        c
    }
}

/// Swap `n` elements from `i` with `n` from `j` (the ranges do not overlap).
fn swap_runs<T>(v: &mut [T], i: usize, j: usize, n: usize) {
    for k in 0..n {
        v.swap(i + k, j + k);
    }
}

/// Whether `v`, starting at absolute position `at`, holds any kept position.
fn overlaps(at: usize, len: usize, keep: (usize, usize)) -> bool {
    keep.1 >= at && keep.0 < at + len
}

/// `v` is the part starting at absolute position `at`.
fn sort_part<T>(mut v: &mut [T], mut at: usize, keep: (usize, usize), cmp: &impl Fn(&T, &T) -> Ordering) {
    loop {
        let n = v.len();
        if n < 7 {
            // Insertion sort: stable.
            for m in 1..n {
                let mut l = m;
                while l > 0 && cmp(&v[l - 1], &v[l]).is_gt() {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let mut pm = n / 2;
        if n > 7 {
            let (mut pl, mut pn) = (0, n - 1);
            if n > 40 {
                let d = n / 8;
                pl = median3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = median3(v, pm - d, pm, pm + d, cmp);
                pn = median3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = median3(v, pl, pm, pn, cmp);
        }
        v.swap(0, pm);
        // Three-way partition around v[0]: equal elements gather at both ends
        // ([1, pa) and (pd, n)) and are swapped into the middle afterwards.
        let (mut pa, mut pb) = (1usize, 1usize);
        let (mut pc, mut pd) = (n as isize - 1, n as isize - 1);
        loop {
            while pb as isize <= pc {
                let r = cmp(&v[pb], &v[0]);
                if r.is_gt() {
                    break;
                }
                if r.is_eq() {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb as isize <= pc {
                let r = cmp(&v[pc as usize], &v[0]);
                if r.is_lt() {
                    break;
                }
                if r.is_eq() {
                    v.swap(pc as usize, pd as usize);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb as isize > pc {
                break;
            }
            v.swap(pb, pc as usize);
            pb += 1;
            pc -= 1;
        }
        let (pc, pd) = (pc as usize, pd as usize);
        let r = pa.min(pb - pa);
        swap_runs(v, 0, pb - r, r);
        let r = (pd - pc).min(n - pd - 1);
        swap_runs(v, pb, n - r, r);
        let less = pb - pa;
        if less > 1 && overlaps(at, less, keep) {
            sort_part(&mut v[..less], at, keep, cmp);
        }
        let more = pd - pc;
        if more <= 1 || !overlaps(at + n - more, more, keep) {
            return;
        }
        at += n - more;
        v = &mut v[n - more..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_ranks_match_a_full_sort() {
        let mut seed = 7u64;
        for len in [0usize, 1, 5, 7, 8, 40, 41, 100, 1000] {
            let v: Vec<u32> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (seed >> 33) as u32 % 50
                })
                .collect();
            let mut full = v.clone();
            full.sort();
            for keep in [(0, 0), (0, len / 3), (len / 2, len / 2 + 3)] {
                if len == 0 || keep.1 >= len {
                    continue;
                }
                let mut part = v.clone();
                partial_sort(&mut part, keep, &|a: &u32, b: &u32| a.cmp(b));
                assert_eq!(part[keep.0..=keep.1], full[keep.0..=keep.1], "len {len} keep {keep:?}");
            }
        }
    }
}
