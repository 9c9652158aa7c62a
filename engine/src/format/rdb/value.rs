//! A key's value as the file stores it, and iterators over its elements.
//!
//! Reading a record only walks the value far enough to find where it ends (`skip_value`).
//! The elements are then produced on demand by the iterators below, straight from the
//! mapped bytes, so a list of any size is never held in memory.

use crate::format::blob::{Blob, Elem};
use crate::format::input::{fail, finish, le_u64, take_bytes, FormatError, Input, PResult};
use crate::format::intset::IntsetIter;
use crate::format::listpack::{self, ListpackIter};
use crate::format::ziplist::ZiplistIter;
use crate::format::zipmap::ZipmapIter;

use super::module::{skip_module_ops, ModuleValue};
use super::prim::{binary_double, length, parse_double, rdb_elem, rdb_str, text_double, RStr};
use super::stream::{skip_stream, Stream};
use super::types::ValueType;

/// A value: its type and the exact bytes it occupies in the file.
#[derive(Debug, Clone, Copy)]
pub struct Value<'a> {
    pub vtype: ValueType,
    pub body: Input<'a>,
}

/// Walk a value of type `vtype` without decoding its elements; returns the rest.
pub fn skip_value(input: Input<'_>, vtype: ValueType) -> PResult<'_, ()> {
    use ValueType::*;
    // A plain string (nearly every one) is stepped over on its raw bytes.
    let str_ = |i| skip_strs(i, 1);
    match vtype {
        String | HashZipmap | ListZiplist | SetIntset | ZsetZiplist | HashZiplist | HashListpack | ZsetListpack
        | SetListpack | HashListpackExPreGa => str_(input),
        ListLinked | SetHashtable | ListQuicklist => {
            let (r, n) = length(input, "element count")?;
            skip_strs(r, n)
        }
        Hash => {
            let (r, n) = length(input, "field count")?;
            skip_strs(r, n.saturating_mul(2))
        }
        ZsetText => repeat(input, "member count", |i| text_double(rdb_str(i)?.0).map(|(r, _)| (r, ()))),
        Zset2 => repeat(input, "member count", |i| take_bytes(str_(i)?.0, 8, "a score").map(|(r, _)| (r, ()))),
        ListQuicklist2 => repeat(input, "node count", |i| {
            let (r, _) = length(i, "a quicklist container")?;
            str_(r)
        }),
        HashMetadataPreGa => repeat(input, "field count", |i| {
            let (r, _) = length(i, "a field TTL")?;
            str_(str_(r)?.0)
        }),
        HashMetadata => {
            let (r, _) = le_u64(input)?;
            repeat(r, "field count", |i| {
                let (r, _) = length(i, "a field TTL")?;
                str_(str_(r)?.0)
            })
        }
        HashListpackEx => {
            let (r, _) = le_u64(input)?;
            str_(r)
        }
        ValkeyHash2 => repeat(input, "field count", |i| {
            let (r, _) = str_(str_(i)?.0)?;
            take_bytes(r, 8, "a field expiry").map(|(r, _)| (r, ()))
        }),
        Stream1 | Stream2 | Stream3 | Stream4 | Stream5 => skip_stream(input, vtype),
        Module2 => {
            let (r, _) = length(input, "a module id")?;
            skip_module_ops(r)
        }
        ModulePreGa => fail(
            input,
            "pre-release module value (type 6, Redis 4.0 RCs) cannot be read: it carries no structure to walk",
        ),
    }
}

/// Where the RDB string at `b[at..]` lies when it is a plain one: a raw string of up to
/// 16383 bytes or an integer. None for 32/64-bit lengths, LZF, a truncation or anything
/// wrong: callers hand those to `rdb_str`, so errors read exactly as they do there.
fn plain_str(b: &[u8], at: usize) -> Option<PlainStr> {
    let first = *b.get(at)?;
    let (raw, head, len) = match first {
        0x00..=0x7F => {
            let (head, len) = short_len(b, at)?;
            (true, head, len)
        }
        0xC0 => (false, 1, 1),
        0xC1 => (false, 1, 2),
        0xC2 => (false, 1, 4),
        _ => return None,
    };
    let end = at + head + len;
    if end > b.len() {
        return None;
    }
    Some(PlainStr { raw, start: at + head, end })
}

/// An RDB length at `b[at..]` in its 1- or 2-byte form: how many bytes it takes, and its
/// value. None for the other forms and a truncation.
#[inline(always)]
fn short_len(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let first = *b.get(at)?;
    match first >> 6 {
        0 => Some((1, usize::from(first))),
        1 => Some((2, usize::from(first & 0x3F) << 8 | usize::from(*b.get(at + 1)?))),
        _ => None,
    }
}

/// A plain RDB string found by [`plain_str`]: its text at `start..end` when `raw`, else an
/// integer; the string ends at `end` either way.
struct PlainStr {
    raw: bool,
    start: usize,
    end: usize,
}

/// Where an LZF string at `at` ends, when both its lengths are in the 1- or 2-byte form
/// and its data is all there (else None: `rdb_str` reads it, or says what is wrong).
#[inline(always)]
fn lzf_str_end(b: &[u8], at: usize) -> Option<usize> {
    if *b.get(at)? != 0xC3 {
        return None;
    }
    let (h1, clen) = short_len(b, at + 1)?;
    let (h2, _) = short_len(b, at + 1 + h1)?;
    let end = at + 1 + h1 + h2 + clen;
    (end <= b.len()).then_some(end)
}

/// Skip `count` RDB strings: the hot path of finding where a value ends.
fn skip_strs(input: Input<'_>, count: u64) -> PResult<'_, ()> {
    let b = input.bytes();
    let mut at = 0usize;
    for _ in 0..count {
        at = match plain_str(b, at).map(|s| s.end).or_else(|| lzf_str_end(b, at)) {
            Some(end) => end,
            None => rdb_str(nom::Input::take_from(&input, at))?.0.offset() - input.offset(),
        };
    }
    Ok((nom::Input::take_from(&input, at), ()))
}

/// Read a count, then `count` items with `item`.
fn repeat<'a>(input: Input<'a>, what: &str, mut item: impl FnMut(Input<'a>) -> PResult<'a, ()>) -> PResult<'a, ()> {
    let (mut rest, n) = length(input, what)?;
    for _ in 0..n {
        rest = item(rest)?.0;
    }
    Ok((rest, ()))
}

/// A counted run of items (internal cursor of the iterators).
pub struct Seq<'a> {
    rest: Input<'a>,
    left: u64,
}

impl<'a> Seq<'a> {
    fn new(input: Input<'a>, what: &str) -> Result<(Self, u64), FormatError> {
        let (rest, n) = length(input, what).map_err(|e| finish(e, what))?;
        Ok((Seq { rest, left: n }, n))
    }

    fn next<T>(&mut self, what: &str, f: impl FnOnce(Input<'a>) -> PResult<'a, T>) -> Option<Result<T, FormatError>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match f(self.rest) {
            Ok((r, v)) => {
                self.rest = r;
                Some(Ok(v))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(finish(e, what)))
            }
        }
    }
}

fn to_blob(s: RStr<'_>) -> Result<Blob<'_>, FormatError> {
    s.to_blob()
}

fn read_str(input: Input<'_>) -> Result<RStr<'_>, FormatError> {
    rdb_str(input).map(|(_, s)| s).map_err(|e| finish(e, "a string"))
}

/// Flat containers of elements: ziplist or listpack.
pub enum Flat<'a> {
    Ziplist(ZiplistIter<'a>),
    Listpack(ListpackIter<'a>),
}

impl<'a> Iterator for Flat<'a> {
    type Item = Result<Elem<'a>, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Flat::Ziplist(z) => z.next(),
            Flat::Listpack(l) => l.next(),
        }
    }
}

impl<'a> Flat<'a> {
    fn ziplist(s: RStr<'a>) -> Result<Self, FormatError> {
        Ok(Flat::Ziplist(ZiplistIter::new(to_blob(s)?)?))
    }
    fn listpack(s: RStr<'a>) -> Result<Self, FormatError> {
        Ok(Flat::Listpack(ListpackIter::new(to_blob(s)?)?))
    }

    /// The next two elements, failing if the container ends between them.
    fn pair(&mut self, what: &str) -> Option<Result<(Elem<'a>, Elem<'a>), FormatError>> {
        let first = match self.next()? {
            Ok(e) => e,
            Err(e) => return Some(Err(e)),
        };
        Some(self.inside(what).map(|second| (first, second)))
    }

    /// The next three elements, failing if the container ends among them.
    fn triplet(&mut self, what: &str) -> Option<Result<(Elem<'a>, Elem<'a>, Elem<'a>), FormatError>> {
        let (first, second) = match self.pair(what)? {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        Some(self.inside(what).map(|third| (first, second, third)))
    }

    /// The next element of a group already begun.
    fn inside(&mut self, what: &str) -> Result<Elem<'a>, FormatError> {
        match self.next() {
            Some(r) => r,
            None => Err(FormatError::new(0, format!("container ends in the middle of {what}"))),
        }
    }
}

/// Elements a compact value may declare before Redis's loader converts it, walking every
/// entry (the defaults: `hash-max-listpack-entries` and `set-max-intset-entries` 512,
/// `zset-max-listpack-entries` and `set-max-listpack-entries` 128).
const HASH_CONVERTS_ABOVE: usize = 512;
const INTSET_CONVERTS_ABOVE: usize = 512;
const ZSET_CONVERTS_ABOVE: usize = 128;
const SET_CONVERTS_ABOVE: usize = 128;

impl<'a> Value<'a> {
    pub fn logical(&self) -> super::types::LogicalType {
        self.vtype.logical()
    }

    /// Whether the loader of the server that wrote an RDB of `rdb_version`, without
    /// `sanitize-dump-payload`, checks only the header of this value's compact blobs
    /// ([`Value::loader_check`]): damage inside their entries goes unnoticed until a
    /// command reads it. True for listpacks (lists, hashes, zsets, sets, streams) and
    /// intsets, and, for Redis 6.2 and older (RDB 9 and below), ziplists and zipmaps; Redis
    /// 7 walks a ziplist whole (it converts it to a listpack).
    pub fn loader_checks_headers_only(&self, rdb_version: u32) -> bool {
        use ValueType::*;
        match self.vtype {
            ListQuicklist2 | Stream1 | Stream2 | Stream3 | Stream4 | Stream5 | SetIntset | HashListpack
            | ZsetListpack | SetListpack | HashListpackEx | HashListpackExPreGa => true,
            ListQuicklist | ListZiplist | HashZipmap | HashZiplist | ZsetZiplist => rdb_version <= 9,
            _ => false,
        }
    }

    /// What Redis's loader checks of this value when `sanitize-dump-payload` is off, for
    /// the values whose blobs it checks by their headers only
    /// ([`Value::loader_checks_headers_only`]): the structure around the blobs, each
    /// listpack's total size and terminator, an intset's encoding and size, a stream's node
    /// keys (16 bytes, each once) and non-empty nodes. An error here is a file Redis
    /// refuses to load.
    pub fn loader_check(&self) -> Result<(), FormatError> {
        use ValueType::*;
        let lp = |s: RStr<'a>| -> Result<ListpackIter<'a>, FormatError> { ListpackIter::new(to_blob(s)?) };
        let zl = |s: RStr<'a>| -> Result<ZiplistIter<'a>, FormatError> { ZiplistIter::new(to_blob(s)?) };
        // A listpack whose header does not know its count is walked by the loader (and an
        // entry it cannot read crashes it).
        let lp_walked = |s: RStr<'a>| -> Result<(), FormatError> {
            let it = lp(s)?;
            if it.declared_len().is_none() {
                for e in it {
                    e?;
                }
            }
            Ok(())
        };
        // A value the loader converts (more elements than the default limit, or a count
        // the header does not know) is walked entry by entry, every `step`-th element a
        // member that must be unique: a bad entry or a duplicate crashes the loader.
        let converted = |it: Flat<'a>, declared: Option<usize>, step: usize, limit: usize| {
            if declared.is_some_and(|n| n / step <= limit) {
                return Ok(());
            }
            let mut seen = std::collections::HashSet::new();
            for (i, e) in it.enumerate() {
                let e = e?;
                if i % step == 0 && !seen.insert(e.to_bytes().into_owned()) {
                    return Err(FormatError::new(0, "duplicate member in a compact value the loader converts"));
                }
            }
            Ok(())
        };
        let flat = |s: RStr<'a>, ziplist: bool, step: usize, limit: usize| -> Result<(), FormatError> {
            if ziplist {
                let it = zl(s)?;
                let n = it.declared_len();
                converted(Flat::Ziplist(it.without_count_check()), n, step, limit)
            } else {
                let it = lp(s)?;
                let n = it.declared_len();
                converted(Flat::Listpack(it.without_count_check()), n, step, limit)
            }
        };
        match self.vtype {
            SetIntset => {
                let it = IntsetIter::new(to_blob(read_str(self.body)?)?)?;
                if it.len() > INTSET_CONVERTS_ABOVE {
                    let mut seen = std::collections::HashSet::new();
                    for v in it.unordered() {
                        if !seen.insert(v) {
                            return Err(FormatError::new(0, "duplicate member in an intset the loader converts"));
                        }
                    }
                }
                Ok(())
            }
            HashListpack => flat(read_str(self.body)?, false, 2, HASH_CONVERTS_ABOVE),
            HashListpackExPreGa => flat(read_str(self.body)?, false, 3, HASH_CONVERTS_ABOVE),
            HashListpackEx => {
                let (r, _) = le_u64(self.body).map_err(|e| finish(e, "a hash's minimum field expiry"))?;
                let s = read_str(r)?;
                // A count the header does not know, or a hash the loader converts: every
                // entry is walked, every TTL read.
                let declared = lp(s)?.declared_len();
                if declared.is_none_or(|n| n / 3 > HASH_CONVERTS_ABOVE) {
                    for (i, e) in lp(s)?.without_count_check().enumerate() {
                        if i % 3 == 2 && e?.as_i64().is_none() {
                            return Err(FormatError::new(0, "a field TTL of a listpack-ex is not an integer"));
                        }
                    }
                }
                flat(s, false, 3, HASH_CONVERTS_ABOVE)?;
                // Then the earliest TTL, the third entry, as lpSeek(lp, 2) reaches it: the
                // entries on its way are checked, and it must be an integer.
                match lp(s)?.seek_as_redis(2)? {
                    Some(e) if e.as_i64().is_none() => {
                        Err(FormatError::new(0, "the first field TTL of a listpack-ex is not an integer"))
                    }
                    _ => Ok(()),
                }
            }
            ZsetListpack => flat(read_str(self.body)?, false, 2, ZSET_CONVERTS_ABOVE),
            SetListpack => flat(read_str(self.body)?, false, 1, SET_CONVERTS_ABOVE),
            HashZiplist => flat(read_str(self.body)?, true, 2, HASH_CONVERTS_ABOVE),
            ZsetZiplist => flat(read_str(self.body)?, true, 2, ZSET_CONVERTS_ABOVE),
            ListZiplist => zl(read_str(self.body)?).map(|_| ()),
            HashZipmap => ZipmapIter::new(to_blob(read_str(self.body)?)?).map(|_| ()),
            ListQuicklist => {
                let (mut nodes, _) = Seq::new(self.body, "quicklist node count")?;
                while let Some(node) = nodes.next("a quicklist node", rdb_str) {
                    zl(node?)?;
                }
                Ok(())
            }
            ListQuicklist2 => {
                let (mut nodes, _) = Seq::new(self.body, "quicklist node count")?;
                while let Some(node) = nodes.next("a quicklist node", |i| {
                    let (i, container) = length(i, "a quicklist container")?;
                    let (r, s) = rdb_str(i)?;
                    Ok((r, (container, s, i.offset())))
                }) {
                    let (container, s, at) = node?;
                    match container {
                        1 if s.is_empty() => return Err(FormatError::new(at, "empty quicklist node")),
                        1 => {}
                        2 => lp_walked(s)?,
                        c => return Err(FormatError::new(at, format!("unknown quicklist container type {c}"))),
                    }
                }
                Ok(())
            }
            Stream1 | Stream2 | Stream3 | Stream4 | Stream5 => {
                let (mut nodes, _) = Seq::new(self.body, "stream node count")?;
                let mut keys = std::collections::HashSet::new();
                while let Some(node) = nodes.next("a stream node", |i| {
                    let (r, key) = rdb_str(i)?;
                    let (r, s) = rdb_str(r)?;
                    Ok((r, (key, s, i.offset())))
                }) {
                    let (key, s, at) = node?;
                    let key = key.to_elem()?.to_bytes().into_owned();
                    if key.len() != 16 {
                        return Err(FormatError::new(at, "stream node key entry is not the size of a stream ID"));
                    }
                    let blob = to_blob(s)?;
                    let mut entries = ListpackIter::new(blob)?;
                    // The loader reads each node's first entry (a bad one crashes it).
                    match entries.next() {
                        None => return Err(FormatError::new(at, "empty listpack inside stream")),
                        Some(first) => {
                            first?;
                        }
                    }
                    if !keys.insert(key) {
                        return Err(FormatError::new(at, "stream listpack re-added with an existing key"));
                    }
                }
                self.stream().map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// The string value as stored.
    pub fn string(&self) -> Result<RStr<'a>, FormatError> {
        read_str(self.body)
    }

    /// How many quicklist nodes a list holds (1 for a single ziplist; None for a linked
    /// list, which has none).
    pub fn list_nodes(&self) -> Result<Option<u64>, FormatError> {
        Ok(match self.vtype {
            ValueType::ListQuicklist | ValueType::ListQuicklist2 => {
                Some(Seq::new(self.body, "quicklist node count")?.1)
            }
            ValueType::ListZiplist => Some(1),
            _ => None,
        })
    }

    pub fn list(&self) -> Result<ListIter<'a>, FormatError> {
        Ok(match self.vtype {
            ValueType::ListLinked => ListIter::Linked(Seq::new(self.body, "list length")?.0),
            ValueType::ListZiplist => ListIter::Flat(Flat::ziplist(read_str(self.body)?)?),
            ValueType::ListQuicklist => {
                ListIter::Quick { nodes: Seq::new(self.body, "quicklist node count")?.0, v2: false, cur: None }
            }
            ValueType::ListQuicklist2 => {
                ListIter::Quick { nodes: Seq::new(self.body, "quicklist node count")?.0, v2: true, cur: None }
            }
            other => return Err(not_a(other, "list")),
        })
    }

    pub fn set(&self) -> Result<SetIter<'a>, FormatError> {
        Ok(match self.vtype {
            ValueType::SetHashtable => SetIter::Hashtable(Seq::new(self.body, "set size")?.0),
            ValueType::SetIntset => SetIter::Intset(IntsetIter::new(to_blob(read_str(self.body)?)?)?),
            ValueType::SetListpack => SetIter::Flat(Flat::listpack(read_str(self.body)?)?),
            other => return Err(not_a(other, "set")),
        })
    }

    pub fn zset(&self) -> Result<ZsetIter<'a>, FormatError> {
        Ok(match self.vtype {
            ValueType::ZsetText => ZsetIter::Text(Seq::new(self.body, "zset size")?.0),
            ValueType::Zset2 => ZsetIter::Binary(Seq::new(self.body, "zset size")?.0),
            ValueType::ZsetZiplist => ZsetIter::Flat(Flat::ziplist(read_str(self.body)?)?),
            ValueType::ZsetListpack => ZsetIter::Flat(Flat::listpack(read_str(self.body)?)?),
            other => return Err(not_a(other, "zset")),
        })
    }

    /// False when no score of this zset can be -0 without reading its elements: a listpack
    /// or ziplist spells every negative score as text with a '-', so a blob without that
    /// byte holds none. True means "look at the scores".
    pub fn zset_may_hold_negative_zero(&self) -> Result<bool, FormatError> {
        Ok(match self.vtype {
            ValueType::ZsetZiplist | ValueType::ZsetListpack => to_blob(read_str(self.body)?)?.data().contains(&b'-'),
            _ => true,
        })
    }

    pub fn hash(&self) -> Result<HashIter<'a>, FormatError> {
        Ok(match self.vtype {
            ValueType::Hash => HashIter::Pairs(Seq::new(self.body, "hash size")?.0, PairTtl::None),
            ValueType::HashMetadataPreGa => HashIter::Pairs(Seq::new(self.body, "hash size")?.0, PairTtl::Absolute),
            ValueType::HashMetadata => {
                let (rest, min) = le_u64(self.body).map_err(|e| finish(e, "the minimum field expiry"))?;
                HashIter::Pairs(Seq::new(rest, "hash size")?.0, PairTtl::Relative(min))
            }
            ValueType::ValkeyHash2 => HashIter::Valkey(Seq::new(self.body, "hash size")?.0),
            ValueType::HashZipmap => HashIter::Zipmap(ZipmapIter::new(to_blob(read_str(self.body)?)?)?),
            ValueType::HashZiplist => HashIter::Flat(Flat::ziplist(read_str(self.body)?)?, false),
            ValueType::HashListpack => HashIter::Flat(Flat::listpack(read_str(self.body)?)?, false),
            ValueType::HashListpackExPreGa => HashIter::Flat(Flat::listpack(read_str(self.body)?)?, true),
            ValueType::HashListpackEx => {
                let (rest, _min) = le_u64(self.body).map_err(|e| finish(e, "the minimum field expiry"))?;
                HashIter::Flat(Flat::listpack(read_str(rest)?)?, true)
            }
            other => return Err(not_a(other, "hash")),
        })
    }

    /// Every item of a value whose elements lie one after another in its bytes (a
    /// listpack-encoded hash, zset or set, a Redis 7 list whose nodes are all listpacks, an
    /// intset, a hashtable-encoded set or hash, a skiplist zset with binary scores), in file
    /// order, read straight from the bytes with the iterators' checks; how many items. A
    /// zset's score comes as stored, for `f` to read ([`Score`]). None when the value is
    /// stored otherwise, when an entry is not right, or when `f` returns false (say, on a
    /// score that does not read): the iterators then say what.
    pub fn visit_items(&self, mut f: impl FnMut(PackedItem<'_>) -> bool) -> Option<u64> {
        use ValueType::*;
        let one_listpack = || to_blob(read_str(self.body).ok()?).ok();
        match self.vtype {
            SetListpack => listpack::visit(one_listpack()?.data(), |e| f(PackedItem::One(e))).map(|n| n as u64),
            HashListpack | ZsetListpack => {
                let blob = one_listpack()?;
                let zset = self.vtype == ZsetListpack;
                // The first of a pair waits for the second.
                let mut first = None;
                let n = listpack::visit(blob.data(), |e| match first.take() {
                    None => {
                        first = Some(e);
                        true
                    }
                    Some(m) if zset => f(PackedItem::Scored(m, Score(ScoreForm::Packed(e)))),
                    Some(field) => f(PackedItem::Pair(field, e)),
                })?;
                first.is_none().then_some(n as u64 / 2)
            }
            ListQuicklist2 => {
                let mut n = 0u64;
                for node in self.quicklist_nodes().ok()? {
                    // A plain node (None) is left to the iterator.
                    let blob = node.ok()??;
                    n += listpack::visit(blob.data(), |e| f(PackedItem::One(e)))? as u64;
                }
                Some(n)
            }
            SetIntset => {
                let members = IntsetIter::new(one_listpack()?).ok()?;
                let n = members.len() as u64;
                for m in members {
                    if !f(PackedItem::One(Elem::Int(m.ok()?))) {
                        return None;
                    }
                }
                Some(n)
            }
            SetHashtable => visit_strs(self.body, 1, |e| f(PackedItem::One(e))),
            Zset2 => visit_binary_zset(self.body, f),
            Hash => {
                let mut field = None;
                let n = visit_strs(self.body, 2, |e| match field.take() {
                    None => {
                        field = Some(e);
                        true
                    }
                    Some(field) => f(PackedItem::Pair(field, e)),
                })?;
                Some(n / 2)
            }
            _ => None,
        }
    }

    pub fn stream(&self) -> Result<Stream<'a>, FormatError> {
        Stream::parse(self.body, self.vtype)
    }

    /// The one listpack, ziplist or intset blob a compact hash, zset or set is stored as (a
    /// TTL-carrying hash's listpack, past its minimum TTL); None for other types.
    pub fn packed(&self) -> Result<Option<Blob<'a>>, FormatError> {
        use ValueType::*;
        let s = match self.vtype {
            HashListpack | ZsetListpack | SetListpack | SetIntset | HashListpackExPreGa | HashZiplist | ZsetZiplist => {
                read_str(self.body)?
            }
            HashListpackEx => {
                let (rest, _min) = le_u64(self.body).map_err(|e| finish(e, "the minimum field expiry"))?;
                read_str(rest)?
            }
            _ => return Ok(None),
        };
        to_blob(s).map(Some)
    }

    /// The nodes of a quicklist as stored: each a blob (a Redis 7 listpack, a ziplist
    /// before), or None for a Redis 7 plain node (one big element).
    pub fn quicklist_nodes(&self) -> Result<QuickNodes<'a>, FormatError> {
        let v2 = match self.vtype {
            ValueType::ListQuicklist2 => true,
            ValueType::ListQuicklist => false,
            other => return Err(not_a(other, "quicklist")),
        };
        Ok(QuickNodes(Seq::new(self.body, "quicklist node count")?.0, v2))
    }

    pub fn module(&self) -> Result<ModuleValue<'a>, FormatError> {
        ModuleValue::parse(self.body)
    }
}

fn not_a(t: ValueType, what: &str) -> FormatError {
    FormatError::new(0, format!("value of type {} is not a {what}", t.name()))
}

/// One quicklist node: its container (Redis 7: 1 plain, 2 a listpack; before, always a
/// ziplist, given as 2), its string, and where the string starts.
fn quick_node(i: Input<'_>, v2: bool) -> PResult<'_, (u64, RStr<'_>, usize)> {
    let (i, container) = if v2 { length(i, "a quicklist container")? } else { (i, 2) };
    let (r, s) = rdb_str(i)?;
    Ok((r, (container, s, i.offset())))
}

/// A quicklist's nodes ([`Value::quicklist_nodes`]); whether it is Redis 7's.
pub struct QuickNodes<'a>(Seq<'a>, bool);

impl<'a> Iterator for QuickNodes<'a> {
    type Item = Result<Option<Blob<'a>>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        let v2 = self.1;
        let node = self.0.next("a quicklist node", |i| quick_node(i, v2))?;
        Some(node.and_then(|(container, s, at)| match container {
            2 => s.to_blob().map(Some),
            1 => Ok(None),
            c => Err(FormatError::new(at, format!("unknown quicklist container type {c}"))),
        }))
    }
}

/// The RDB strings of a hashtable-encoded value (a count, then `per` strings for each),
/// each handed to `f` as [`SetIter`] and [`HashIter`] read them; how many strings. None when
/// one does not read or `f` returns false.
fn visit_strs<'a>(body: Input<'a>, per: u64, mut f: impl FnMut(Elem<'a>) -> bool) -> Option<u64> {
    let (rest, count) = length(body, "element count").ok()?;
    let total = count.checked_mul(per)?;
    let mut at = 0usize;
    for _ in 0..total {
        if !f(str_at(rest, &mut at)?) {
            return None;
        }
    }
    Some(total)
}

/// The members and binary scores of a skiplist-encoded zset (RDB type 5), each handed to
/// `f` as [`ZsetIter`] reads them; how many. None when one does not read, a score is NaN
/// (which the iterator refuses), or `f` returns false.
fn visit_binary_zset<'a>(body: Input<'a>, mut f: impl FnMut(PackedItem<'a>) -> bool) -> Option<u64> {
    let (rest, count) = length(body, "element count").ok()?;
    let bytes = rest.bytes();
    let mut at = 0usize;
    for _ in 0..count {
        let member = str_at(rest, &mut at)?;
        let score = f64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?);
        at += 8;
        if score.is_nan() || !f(PackedItem::Scored(member, Score(ScoreForm::Binary(score)))) {
            return None;
        }
    }
    Some(count)
}

/// The RDB string at `rest[*at..]` as the iterators read it, `*at` moved past it. A plain
/// raw string, the common case, is taken from the bytes without the general parser.
/// Inlined by force: called, it cost verify 3 % more instructions (callgrind).
#[inline(always)]
fn str_at<'a>(rest: Input<'a>, at: &mut usize) -> Option<Elem<'a>> {
    let bytes = rest.bytes();
    if let Some(s) = plain_str(bytes, *at).filter(|s| s.raw) {
        *at = s.end;
        return Some(Elem::borrowed(&bytes[s.start..s.end]));
    }
    let (r, s) = rdb_str(nom::Input::take_from(&rest, *at)).ok()?;
    *at = r.offset() - rest.offset();
    s.to_elem().ok()
}

/// One item of a value [`Value::visit_items`] reads.
pub enum PackedItem<'b> {
    /// A list element or a set member.
    One(Elem<'b>),
    /// A hash's field and value.
    Pair(Elem<'b>, Elem<'b>),
    /// A zset's member and score.
    Scored(Elem<'b>, Score<'b>),
}

/// A zset score as stored (a listpack's integer or text, read when asked; a skiplist
/// zset's binary double).
pub struct Score<'b>(ScoreForm<'b>);

enum ScoreForm<'b> {
    Packed(Elem<'b>),
    Binary(f64),
}

impl Score<'_> {
    /// The score as [`ZsetIter`] reads it; None when it does not read.
    pub fn value(&self) -> Option<f64> {
        match &self.0 {
            ScoreForm::Packed(e) => elem_score(e).ok(),
            ScoreForm::Binary(f) => Some(*f),
        }
    }

    /// Whether the score reads, and is not NaN: what a deep check asks of every score.
    /// Plain decimal text (`-?digits[.digits]`, how Redis writes nearly every score) is
    /// known to read without converting it.
    pub fn is_number(&self) -> bool {
        let b = match &self.0 {
            ScoreForm::Packed(Elem::Int(_)) => return true,
            ScoreForm::Packed(Elem::Bytes(b)) => b,
            ScoreForm::Binary(f) => return !f.is_nan(),
        };
        if plain_decimal(b.strip_prefix(b"-").unwrap_or(b)) {
            return true;
        }
        self.value().is_some_and(|v| !v.is_nan())
    }

    /// Whether the score reads as -0. Text without a '-' (nearly every score) is known not
    /// to without converting it.
    pub fn is_negative_zero(&self) -> bool {
        let minus_zero = |v: f64| v == 0.0 && v.is_sign_negative();
        match &self.0 {
            ScoreForm::Packed(Elem::Int(_)) => false,
            ScoreForm::Packed(Elem::Bytes(b)) => b.contains(&b'-') && self.value().is_some_and(minus_zero),
            ScoreForm::Binary(f) => minus_zero(*f),
        }
    }
}

/// Whether `b` is digits with at most one '.' and a digit somewhere ("1.", ".5" read as
/// 1 and 0.5), eight bytes a step: scores are 17-digit text in Redis 7.0's listpacks.
fn plain_decimal(b: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    // Per byte, the high bit: set where the byte is an ASCII digit, or a '.'.
    let classify = |x: u64| {
        let ascii = !x & HIGH;
        let x7 = x & LOW7;
        // No carries: a byte under 0x80 plus at most 0x7F stays in its byte.
        let at_least_0 = x7.wrapping_add(0x5050_5050_5050_5050) & HIGH;
        let past_9 = x7.wrapping_add(0x4646_4646_4646_4646) & HIGH;
        let digit = at_least_0 & !past_9 & ascii;
        let y = x7 ^ 0x2E2E_2E2E_2E2E_2E2E;
        let dot = !(y.wrapping_add(LOW7) | y) & HIGH & ascii;
        (digit, dot)
    };
    // At most one '.': no chunk with two, no second chunk with one (without counting
    // bits, which is a dozen instructions on x86-64's baseline, where POPCNT is not).
    let mut any_dot = false;
    let mut one_more = |dot: u64| {
        let too_many = dot & dot.wrapping_sub(1) != 0 || (any_dot && dot != 0);
        any_dot |= dot != 0;
        !too_many
    };
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let Ok(c) = <[u8; 8]>::try_from(c) else { return false };
        let (digit, dot) = classify(u64::from_le_bytes(c));
        if digit | dot != HIGH || !one_more(dot) {
            return false;
        }
    }
    // The tail, padded with digits.
    let mut tail = [b'0'; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let (digit, dot) = classify(u64::from_le_bytes(tail));
    if digit | dot != HIGH || !one_more(dot) {
        return false;
    }
    b.len() > usize::from(any_dot)
}

/// List elements in order.
pub enum ListIter<'a> {
    Linked(Seq<'a>),
    Flat(Flat<'a>),
    Quick { nodes: Seq<'a>, v2: bool, cur: Option<QuickNode<'a>> },
}

pub enum QuickNode<'a> {
    Flat(Flat<'a>),
    Plain(Option<Elem<'a>>),
}

impl<'a> Iterator for ListIter<'a> {
    type Item = Result<Elem<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            ListIter::Linked(seq) => seq.next("a list element", rdb_elem),
            ListIter::Flat(f) => f.next(),
            ListIter::Quick { nodes, v2, cur } => loop {
                if let Some(node) = cur {
                    let item = match node {
                        QuickNode::Flat(f) => f.next(),
                        QuickNode::Plain(e) => e.take().map(Ok),
                    };
                    match item {
                        Some(Ok(e)) => return Some(Ok(e)),
                        Some(Err(e)) => {
                            nodes.left = 0;
                            *cur = None;
                            return Some(Err(e));
                        }
                        None => *cur = None,
                    }
                }
                let v2 = *v2;
                let node = nodes.next("a quicklist node", |i| quick_node(i, v2))?;
                let built = node.and_then(|(container, s, at)| match (v2, container) {
                    (false, _) => Flat::ziplist(s).map(QuickNode::Flat),
                    (true, 2) => Flat::listpack(s).map(QuickNode::Flat),
                    (true, 1) => s.to_elem().map(|e| QuickNode::Plain(Some(e))),
                    (true, c) => Err(FormatError::new(at, format!("unknown quicklist container type {c}"))),
                });
                match built {
                    Ok(n) => *cur = Some(n),
                    Err(e) => {
                        nodes.left = 0;
                        return Some(Err(e));
                    }
                }
            },
        }
    }
}

/// Set members (file order).
pub enum SetIter<'a> {
    Hashtable(Seq<'a>),
    Intset(IntsetIter<'a>),
    Flat(Flat<'a>),
}

impl SetIter<'_> {
    /// The member count the encoding declares up front, when it has one.
    pub fn declared_len(&self) -> Option<u64> {
        match self {
            SetIter::Hashtable(seq) => Some(seq.left),
            _ => None,
        }
    }
}

impl<'a> Iterator for SetIter<'a> {
    type Item = Result<Elem<'a>, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            SetIter::Hashtable(seq) => seq.next("a set member", rdb_elem),
            SetIter::Intset(i) => i.next().map(|r| r.map(Elem::Int)),
            SetIter::Flat(f) => f.next(),
        }
    }
}

/// Sorted set members with scores (file order: ZSET_2 is written highest score first).
pub enum ZsetIter<'a> {
    Text(Seq<'a>),
    Binary(Seq<'a>),
    Flat(Flat<'a>),
}

impl<'a> Iterator for ZsetIter<'a> {
    type Item = Result<(Elem<'a>, f64), FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            ZsetIter::Text(seq) => seq.next("a zset member", |i| {
                let (r, m) = rdb_elem(i)?;
                let (r, s) = text_double(r)?;
                if s.is_nan() {
                    return fail(i, "Zset with NAN score detected");
                }
                Ok((r, (m, s)))
            }),
            ZsetIter::Binary(seq) => seq.next("a zset member", |i| {
                let (r, m) = rdb_elem(i)?;
                let (r, s) = binary_double(r)?;
                if s.is_nan() {
                    return fail(i, "Zset with NAN score detected");
                }
                Ok((r, (m, s)))
            }),
            ZsetIter::Flat(f) => {
                let res = f.pair("a member/score pair")?;
                Some(res.and_then(|(m, s)| {
                    let score = elem_score(&s)?;
                    Ok((m, score))
                }))
            }
        }
    }
}

/// A zset score as a listpack or ziplist holds it: an integer entry, or text.
fn elem_score(e: &Elem<'_>) -> Result<f64, FormatError> {
    match e {
        Elem::Int(i) => Ok(*i as f64),
        Elem::Bytes(b) => parse_double(b)
            .ok_or_else(|| FormatError::new(0, format!("invalid zset score {:?}", String::from_utf8_lossy(b)))),
    }
}

/// One hash field.
#[derive(Debug, Clone, PartialEq)]
pub struct HashEntry<'a> {
    pub field: Elem<'a>,
    pub value: Elem<'a>,
    /// Absolute expiry of the field in unix ms (Redis 7.4+ HFE, Valkey 9 HASH_2).
    pub expire_ms: Option<i64>,
}

#[derive(Clone, Copy)]
pub enum PairTtl {
    None,
    /// Pre-GA 7.4 RCs: TTL is absolute, 0 = none.
    Absolute,
    /// 7.4 GA: expire = ttl + min - 1, 0 = none.
    Relative(u64),
}

/// Hash fields (file order).
pub enum HashIter<'a> {
    Pairs(Seq<'a>, PairTtl),
    Valkey(Seq<'a>),
    Zipmap(ZipmapIter<'a>),
    Flat(Flat<'a>, bool),
}

impl HashIter<'_> {
    /// The field count the encoding declares up front, when it has one.
    pub fn declared_len(&self) -> Option<u64> {
        match self {
            HashIter::Pairs(seq, _) | HashIter::Valkey(seq) => Some(seq.left),
            _ => None,
        }
    }
}

impl<'a> Iterator for HashIter<'a> {
    type Item = Result<HashEntry<'a>, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            HashIter::Pairs(seq, ttl) => {
                let ttl = *ttl;
                seq.next("a hash field", |i| {
                    let (i, t) = match ttl {
                        PairTtl::None => (i, 0),
                        _ => length(i, "a field TTL")?,
                    };
                    let (r, field) = rdb_elem(i)?;
                    let (r, value) = rdb_elem(r)?;
                    let expire_ms = match (ttl, t) {
                        (_, 0) | (PairTtl::None, _) => None,
                        (PairTtl::Absolute, t) => Some(t as i64),
                        (PairTtl::Relative(min), t) => Some(t.wrapping_add(min).wrapping_sub(1) as i64),
                    };
                    Ok((r, HashEntry { field, value, expire_ms }))
                })
            }
            HashIter::Valkey(seq) => seq.next("a hash field", |i| {
                let (r, field) = rdb_elem(i)?;
                let (r, value) = rdb_elem(r)?;
                let (r, exp) = le_u64(r)?;
                let expire_ms = if exp == u64::MAX { None } else { Some(exp as i64) };
                Ok((r, HashEntry { field, value, expire_ms }))
            }),
            HashIter::Zipmap(z) => {
                z.next().map(|r| r.map(|(field, value)| HashEntry { field, value, expire_ms: None }))
            }
            HashIter::Flat(f, false) => {
                let r = f.pair("a field/value pair")?;
                Some(r.map(|(field, value)| HashEntry { field, value, expire_ms: None }))
            }
            HashIter::Flat(f, true) => {
                let r = f.triplet("a field/value/ttl triplet")?;
                Some(r.and_then(|(field, value, ttl)| {
                    let t = match ttl {
                        Elem::Int(t) => t,
                        Elem::Bytes(_) => return Err(FormatError::new(0, "hash field TTL is not an integer")),
                    };
                    let expire_ms = if t == 0 { None } else { Some(t) };
                    Ok(HashEntry { field, value, expire_ms })
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Skipping a string ends where reading it does, or fails where it fails: LZF strings
    /// with lengths in every form, cut at every byte.
    #[test]
    fn skipping_a_string_agrees_with_reading_it() {
        let forms = |n: usize| -> Vec<Vec<u8>> {
            let mut v = vec![vec![0x40 | (n >> 8) as u8, n as u8], vec![0x80, 0, 0, (n >> 8) as u8, n as u8]];
            if n < 64 {
                v.push(vec![n as u8]);
                v.push(vec![0xC0 | n as u8]);
            }
            v
        };
        let mut cases = 0;
        for clen in [0usize, 1, 5, 63, 64, 300] {
            for ulen in [0usize, 7, 70, 5000] {
                for c in forms(clen) {
                    for u in forms(ulen) {
                        let mut whole = vec![0xC3];
                        whole.extend(&c);
                        whole.extend(&u);
                        whole.extend((0..clen).map(|i| i as u8));
                        whole.extend(b"next");
                        for cut in 0..=whole.len() {
                            let input = Input::new(&whole[..cut]);
                            let read = rdb_str(input).map(|(r, _)| r.offset()).ok();
                            let skipped = skip_strs(input, 1).map(|(r, ())| r.offset()).ok();
                            assert_eq!(skipped, read, "clen {clen} ulen {ulen} {c:?} {u:?} cut {cut}");
                            cases += 1;
                        }
                    }
                }
            }
        }
        assert!(cases > 10_000, "{cases}");
    }

    /// The decimal shortcut says a score reads exactly when reading it says so.
    #[test]
    fn plain_decimal_agrees_with_a_byte_by_byte_reading() {
        let slow = |b: &[u8]| {
            let dots = b.iter().filter(|&&c| c == b'.').count();
            b.iter().all(|&c| c == b'.' || c.is_ascii_digit()) && dots <= 1 && b.len() > dots
        };
        // Every byte value at every position of texts of 1 to 19 bytes, among digits and
        // next to a '.'.
        for len in 1..=19usize {
            for at in 0..len {
                for v in 0..=255u8 {
                    for base in [b'7', b'.'] {
                        let mut t = vec![b'3'; len];
                        if base == b'.' && len > 1 {
                            t[(at + 1) % len] = b'.';
                        }
                        t[at] = v;
                        assert_eq!(plain_decimal(&t), slow(&t), "{:?}", String::from_utf8_lossy(&t));
                    }
                }
            }
        }
        assert!(!plain_decimal(b""));
        // Two dots chunks apart, or in the tail and a chunk.
        assert!(!plain_decimal(b"1.234567890123.5"));
        assert!(!plain_decimal(b"1.2345678901234.5"));
        assert!(plain_decimal(b"1234567890123456.5"));
    }

    #[test]
    fn a_score_is_a_number_or_minus_zero_exactly_when_it_reads_as_one() {
        let long = "9".repeat(400);
        let texts = [
            "0",
            "-0",
            "7",
            "-12",
            "00012",
            "555.4217319035588",
            "-0.5",
            "1.",
            ".5",
            "-.5",
            "-",
            "",
            ".",
            "1e5",
            "-1E-3",
            "1.2.3",
            "1.",
            ".5",
            "-5.",
            "-.",
            "..",
            "1..",
            ".1.",
            "--1",
            "+1",
            "inf",
            "-inf",
            "nan",
            "NaN",
            " 1",
            "1 ",
            "0x10",
            "1,5",
            &long,
            "-0.0",
            "-0e7",
            "-0.000",
            "0.0",
        ];
        for t in texts {
            let s = Score(ScoreForm::Packed(Elem::borrowed(t.as_bytes())));
            let reads = s.value().is_some_and(|v| !v.is_nan());
            assert_eq!(s.is_number(), reads, "{t:?}");
            let negative_zero = s.value().is_some_and(|v| v == 0.0 && v.is_sign_negative());
            assert_eq!(s.is_negative_zero(), negative_zero, "{t:?}");
        }
        assert!(Score(ScoreForm::Packed(Elem::borrowed(b"-0"))).is_negative_zero());
        assert!(Score(ScoreForm::Packed(Elem::Int(-3))).is_number());
        assert!(!Score(ScoreForm::Packed(Elem::Int(0))).is_negative_zero());
        assert!(Score(ScoreForm::Binary(-0.0)).is_negative_zero());
        assert!(!Score(ScoreForm::Binary(0.0)).is_negative_zero());
        assert!(!Score(ScoreForm::Binary(f64::NAN)).is_number());
    }
}
