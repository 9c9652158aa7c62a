//! SORT and SORT_RO: sort a list, set or sorted set by its elements or by external keys
//! (`BY weight_*`, `BY hash_*->field`), fetch external values (`GET`), optionally STORE.

use std::cmp::Ordering;

use super::super::pqsort::partial_sort;
use super::super::{eq_ic, notify, parse_i64, Ctx, Reply};
use crate::value::{sds, List, Value};

/// Key positions: the sorted key, and the last STORE destination (none for SORT_RO, whose
/// parser never accepts STORE).
pub fn sort_keys(a: &[Vec<u8>]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut i = 2;
    while i < a.len() {
        let skip = if eq_ic(&a[i], "limit") {
            2
        } else if eq_ic(&a[i], "get") || eq_ic(&a[i], "by") {
            1
        } else if eq_ic(&a[i], "store") {
            if i + 1 < a.len() {
                store = Some(i + 1);
            }
            1
        } else {
            0
        };
        i += skip + 1;
    }
    keys.extend(store);
    keys
}

pub fn sort(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    sort_generic(ctx, a, false)
}

pub fn sort_ro(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    sort_generic(ctx, a, true)
}

struct Item {
    obj: Vec<u8>,
    score: f64,
    /// The BY value for an ALPHA sort (None: missing, sorts first).
    by: Option<Vec<u8>>,
}

impl Item {
    fn new(obj: Vec<u8>) -> Item {
        Item { obj, score: 0.0, by: None }
    }
}

#[derive(Default)]
struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a [u8]>,
    by: Option<&'a [u8]>,
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
}

fn parse_options(a: &[Vec<u8>], readonly: bool) -> Result<Options<'_>, Reply> {
    let mut o = Options { limit_count: -1, ..Options::default() };
    let mut j = 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        let opt = &a[j];
        if eq_ic(opt, "asc") {
            o.desc = false;
        } else if eq_ic(opt, "desc") {
            o.desc = true;
        } else if eq_ic(opt, "alpha") {
            o.alpha = true;
        } else if eq_ic(opt, "limit") && left >= 2 {
            o.limit_start = parse_i64(&a[j + 1]).ok_or_else(Reply::not_integer)?;
            o.limit_count = parse_i64(&a[j + 2]).ok_or_else(Reply::not_integer)?;
            j += 2;
        } else if !readonly && eq_ic(opt, "store") && left >= 1 {
            o.store = Some(&a[j + 1]);
            j += 1;
        } else if eq_ic(opt, "by") && left >= 1 {
            o.by = Some(&a[j + 1]);
            // A BY pattern without '*' is constant: nothing to sort by.
            o.dont_sort = !a[j + 1].contains(&b'*');
            j += 1;
        } else if eq_ic(opt, "get") && left >= 1 {
            o.gets.push(&a[j + 1]);
            j += 1;
        } else {
            return Err(Reply::syntax());
        }
        j += 1;
    }
    Ok(o)
}

/// The value a BY/GET pattern names for element `subst`: `#` is the element itself, `*`
/// is replaced by it, and `->field` reads a hash field.
fn by_pattern(ctx: &mut Ctx<'_>, pattern: &[u8], subst: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(subst.to_vec());
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after.windows(2).position(|w| w == b"->").filter(|&i| i + 2 < after.len());
    let (post, field) = match arrow {
        Some(i) => (&after[..i], Some(&after[i + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + subst.len() + post.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(post);
    match (ctx.lookup_read(&key)?, field) {
        (Value::Str(s), None) => Some(s.to_vec()),
        (Value::Hash(h), Some(f)) => h.get(f).map(|v| v.to_vec()),
        _ => None,
    }
}

/// A sort weight as strtod reads it over the whole string; None when it is not one.
fn weight(b: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return Some(0.0);
    }
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if unsigned.starts_with("nan") {
        return None;
    }
    let v: f64 = match unsigned {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        _ => {
            if unsigned.starts_with("0x") {
                return None;
            }
            let v: f64 = t.parse().ok()?;
            // strtod reports overflow and underflow (ERANGE).
            let has_digit = unsigned.bytes().take_while(|c| *c != b'e').any(|c| (b'1'..=b'9').contains(&c));
            if v.is_infinite() || (has_digit && (v == 0.0 || v.is_subnormal())) {
                return None;
            }
            v
        }
    };
    Some(v)
}

fn sort_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], readonly: bool) -> Reply {
    let mut o = match parse_options(a, readonly) {
        Ok(o) => o,
        Err(e) => return e,
    };
    // The elements, in their native order.
    enum Source {
        List(Vec<Vec<u8>>),
        Set(Vec<Vec<u8>>),
        Zset(Vec<Vec<u8>>),
    }
    let source = match ctx.lookup_read(&a[1]) {
        None => Source::List(Vec::new()),
        Some(Value::List(l)) => Source::List(l.iter().map(|e| e.to_vec()).collect()),
        Some(Value::Set(s)) => Source::Set(s.members()),
        Some(Value::Zset(z)) => Source::Zset(z.iter().map(|(m, _)| m.to_vec()).collect()),
        Some(_) => return Reply::wrongtype(),
    };
    // Redis converts a sorted set it sorts to a skiplist, for good (SORT_RO too).
    if matches!(source, Source::Zset(_)) {
        if let Some(Value::Zset(z)) = ctx.lookup_write(&a[1]) {
            z.convert_to_skiplist();
        }
    }
    // A set has no order of its own: sort it when the result is stored or goes to a
    // script, so it is the same everywhere.
    if o.dont_sort && matches!(source, Source::Set(_)) && (o.store.is_some() || ctx.fx.from_script) {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    let len = match &source {
        Source::List(v) | Source::Set(v) | Source::Zset(v) => v.len() as i64,
    };
    let mut start = o.limit_start.clamp(0, len);
    let count = o.limit_count.clamp(-1, len);
    let mut end = if count < 0 { len - 1 } else { start + count - 1 };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    let mut items: Vec<Item> = match source {
        Source::List(v) | Source::Zset(v) if o.dont_sort => {
            // Native order, only the LIMIT range, walked from the tail for DESC.
            let mut picked = Vec::new();
            if end >= start {
                let n = (end - start + 1) as usize;
                if o.desc {
                    picked.extend(v.into_iter().rev().skip(start as usize).take(n).map(Item::new));
                } else {
                    picked.extend(v.into_iter().skip(start as usize).take(n).map(Item::new));
                }
            }
            end -= start;
            start = 0;
            picked
        }
        Source::List(v) | Source::Set(v) | Source::Zset(v) => v.into_iter().map(Item::new).collect(),
    };
    let mut conversion_error = false;
    if !o.dont_sort {
        for it in &mut items {
            let by = match o.by {
                Some(p) => match by_pattern(ctx, p, &it.obj) {
                    Some(b) => b,
                    None => continue,
                },
                None => {
                    if !o.alpha {
                        match weight(&it.obj) {
                            Some(w) => it.score = w,
                            None => conversion_error = true,
                        }
                    }
                    continue;
                }
            };
            if o.alpha {
                it.by = Some(by);
            } else {
                match weight(&by) {
                    Some(w) => it.score = w,
                    None => conversion_error = true,
                }
            }
        }
        let (alpha, by, desc) = (o.alpha, o.by.is_some(), o.desc);
        let cmp = |x: &Item, y: &Item| {
            let c = if !alpha {
                x.score.partial_cmp(&y.score).unwrap_or(Ordering::Equal).then_with(|| x.obj.cmp(&y.obj))
            } else if by {
                x.by.cmp(&y.by)
            } else {
                x.obj.cmp(&y.obj)
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        };
        // Redis sorts BY with its partial quicksort when LIMIT keeps a part, which leaves
        // equal elements in its own order; a full sort is glibc's stable one.
        if by && (start != 0 || end != len - 1) && end >= start {
            partial_sort(&mut items, (start as usize, end as usize), &cmp);
        } else {
            items.sort_by(cmp);
        }
    }
    if conversion_error {
        return Reply::err("ERR One or more scores can't be converted into double");
    }
    let range = if end >= start { &items[start as usize..=end as usize] } else { &items[..0] };
    let Some(store) = o.store else {
        let mut out = Vec::new();
        for it in range {
            if o.gets.is_empty() {
                out.push(Reply::Bulk(it.obj.clone()));
            }
            for g in &o.gets {
                out.push(by_pattern(ctx, g, &it.obj).map_or(Reply::Nil, Reply::Bulk));
            }
        }
        return Reply::Array(out);
    };
    let mut stored = Vec::new();
    for it in range {
        if o.gets.is_empty() {
            stored.push(sds(&it.obj));
        }
        for g in &o.gets {
            stored.push(sds(&by_pattern(ctx, g, &it.obj).unwrap_or_default()));
        }
    }
    let n = stored.len();
    if n > 0 {
        ctx.expire_if_needed(store);
        let list = List::loaded(stored, &ctx.cfg.limits);
        ctx.db_set(store, Value::List(Box::new(list)), false);
        ctx.notify(notify::LIST, "sortstore", store);
        ctx.dirty += n as u64;
    } else if ctx.db_delete(store) {
        ctx.notify(notify::GENERIC, "del", store);
        ctx.dirty += 1;
    }
    Reply::Int(n as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_read_as_strtod() {
        assert_eq!(weight(b""), Some(0.0));
        assert_eq!(weight(b" 1.5"), Some(1.5));
        assert_eq!(weight(b"1.5 "), None);
        assert_eq!(weight(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(weight(b"nan"), None);
        assert_eq!(weight(b"1e400"), None);
        assert_eq!(weight(b"1e-400"), None);
        assert_eq!(weight(b"0e-400"), Some(0.0));
        assert_eq!(weight(b"abc"), None);
    }

    #[test]
    fn store_key_positions() {
        let argv: Vec<Vec<u8>> = ["SORT", "k", "LIMIT", "0", "1", "GET", "store", "STORE", "d"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        assert_eq!(sort_keys(&argv), vec![1, 8]);
    }
}
