//! Engine values straight from an RDB value's element iterators (loading, RESTORE): the
//! same result as going through [`crate::format::logical::Logical`], without its copies and
//! sorting; collections keep the file's order, as Redis keeps a listpack's.

use std::borrow::Cow;

use super::str::EMBSTR_MAX;
use super::{Hash, Limits, List, Set, Str, Stream, Value, Zset};
use crate::format::blob::{fmt_i64, itoa_buf};
use crate::format::logical::Logical;
use crate::format::rdb::{LogicalType, Value as RdbValue, ValueType};
use crate::format::{Elem, FormatError};

/// Why a value could not be built from its RDB form.
#[derive(Debug)]
pub enum FromRdbError {
    /// The bytes are not what the type says.
    Format(FormatError),
    /// A value the engine cannot hold (module types, hash field TTLs).
    Unsupported(String),
}

impl std::fmt::Display for FromRdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FromRdbError::Format(e) => write!(f, "{e}"),
            FromRdbError::Unsupported(what) => f.write_str(what),
        }
    }
}

impl From<FormatError> for FromRdbError {
    fn from(e: FormatError) -> FromRdbError {
        FromRdbError::Format(e)
    }
}

/// An element's bytes without allocating for integers.
enum ElemBytes<'a> {
    Bytes(Cow<'a, [u8]>),
    Int([u8; 20], usize),
}

impl<'a> ElemBytes<'a> {
    fn new(e: Elem<'a>) -> ElemBytes<'a> {
        match e {
            Elem::Bytes(b) => ElemBytes::Bytes(b),
            Elem::Int(i) => {
                let mut buf = itoa_buf();
                let len = fmt_i64(i, &mut buf).len();
                // fmt_i64 writes at the end of the buffer.
                ElemBytes::Int(buf, len)
            }
        }
    }
}

impl AsRef<[u8]> for ElemBytes<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            ElemBytes::Bytes(b) => b,
            ElemBytes::Int(buf, len) => &buf[buf.len() - len..],
        }
    }
}

/// Build an engine value straight from the RDB's element iterators, in the encoding
/// `limits` call for (the same result as going through `Logical`, without its copies and
/// sorting; collections keep the file's order, as Redis does).
pub fn from_rdb(v: &RdbValue<'_>, limits: &Limits) -> Result<Value, FromRdbError> {
    from_rdb_checked(v, limits, false)
}

/// A repeated field or member: refused always in the types Redis builds by insertion
/// (plain hashes, sets and zsets: "Duplicate ... detected") or converts entry by entry
/// (ziplists), and in listpacks and intsets only under `deep` (sanitize-dump-payload yes,
/// Redis's deep integrity validation).
fn refuse_duplicate(vtype: ValueType, deep: bool) -> Option<FromRdbError> {
    use ValueType::*;
    let what = match vtype {
        Hash => "Duplicate hash fields detected",
        SetHashtable => "Duplicate set members detected",
        ZsetText | Zset2 => "Duplicate zset fields detected",
        HashZiplist => "Hash ziplist integrity check failed (a repeated field)",
        ZsetZiplist => "Zset ziplist integrity check failed (a repeated member)",
        HashListpack if deep => "Hash listpack integrity check failed (a repeated field)",
        ZsetListpack if deep => "Zset listpack integrity check failed (a repeated member)",
        SetListpack if deep => "Set listpack integrity check failed (a repeated member)",
        SetIntset if deep => "Intset integrity check failed (a repeated member)",
        _ => return None,
    };
    Some(FormatError::new(0, what).into())
}

/// A pending entry that no consumer owns, outside Redis 8's NACK zone: Redis's deep
/// integrity check refuses it.
fn pending_without_consumer(g: &crate::format::rdb::Group<'_>) -> bool {
    let owned: std::collections::HashSet<_> =
        g.consumers.iter().flat_map(|c| c.pending.iter()).chain(g.nacked.iter()).collect();
    g.pending.iter().any(|p| !owned.contains(&p.id))
}

/// [`from_rdb`], with Redis's deep integrity checks when `deep`.
pub fn from_rdb_checked(v: &RdbValue<'_>, limits: &Limits, deep: bool) -> Result<Value, FromRdbError> {
    Ok(match v.logical() {
        LogicalType::String => Value::Str(match v.string()?.to_elem()? {
            Elem::Bytes(Cow::Owned(b)) if b.len() > EMBSTR_MAX => Str::raw(b),
            e => Str::from_loaded(ElemBytes::new(e).as_ref()),
        }),
        LogicalType::List => {
            let mut l = List::default();
            for e in v.list()? {
                l.push_back(ElemBytes::new(e?).as_ref());
            }
            l.seal_ends();
            // Redis 7.2 makes a loaded quicklist a listpack only when it has one node.
            if limits.list_packed && v.list_nodes()?.is_none_or(|n| n <= 1) {
                l.settle(limits.list_max_listpack_size);
            }
            Value::List(Box::new(l))
        }
        LogicalType::Set => {
            let members = v.set()?;
            let n = match members.declared_len() {
                Some(n) => n as usize,
                // Intsets and listpacks: counting walks borrowed bytes.
                None => v.set()?.count(),
            };
            let mut set = Set::default();
            // A listpack stays one, integers and all (Redis 7.2+ loads it as it is).
            let listpack = v.vtype == ValueType::SetListpack && n <= limits.set_max_listpack_entries;
            for (i, m) in members.enumerate() {
                let m = ElemBytes::new(m?);
                if i == 0 {
                    set = if listpack { Set::Listpack(Default::default()) } else { Set::create(m.as_ref(), n, limits) };
                }
                if !set.insert(m.as_ref(), limits) {
                    if let Some(e) = refuse_duplicate(v.vtype, deep) {
                        return Err(e);
                    }
                }
            }
            set.shrink_to_fit();
            Value::Set(Box::new(set))
        }
        LogicalType::Zset => {
            // The encoding depends on every member's length: gather them first.
            let items: Vec<(ElemBytes<'_>, f64)> =
                v.zset()?.map(|r| r.map(|(m, s)| (ElemBytes::new(m), s))).collect::<Result<_, _>>()?;
            let small = items.len() <= limits.zset_max_listpack_entries
                && items.iter().all(|(m, _)| m.as_ref().len() <= limits.zset_max_listpack_value);
            if let Some(e) = refuse_duplicate(v.vtype, deep) {
                let mut seen = std::collections::HashSet::with_capacity(items.len());
                if !items.iter().all(|(m, _)| seen.insert(m.as_ref())) {
                    return Err(e);
                }
            }
            let compact = matches!(v.vtype, ValueType::ZsetZiplist | ValueType::ZsetListpack);
            if small && compact {
                // A ziplist or listpack is kept as the file has it (Redis converts a
                // ziplist entry by entry), a `-0` score too: only an insertion writes 0.
                if let Some(z) = Zset::from_sorted_listpack(&items) {
                    return Ok(Value::Zset(Box::new(z)));
                }
            }
            if !small {
                if let Some(s) = crate::value::zset::SkipList::from_distinct(&items) {
                    return Ok(Value::Zset(Box::new(Zset::Skiplist(Box::new(s)))));
                }
            }
            // A skiplist small enough becomes a listpack by insertion, where -0 becomes 0
            // (Redis 7's zsetConvert); a skiplist keeps it.
            let mut z = if small { Zset::default() } else { Zset::Skiplist(Default::default()) };
            for (m, sc) in &items {
                z.insert(m.as_ref(), *sc, limits);
            }
            Value::Zset(Box::new(z))
        }
        LogicalType::Hash => {
            let fields = v.hash()?;
            let n = match fields.declared_len() {
                Some(n) => n as usize,
                None => v.hash()?.count(),
            };
            let with_ttls = matches!(
                v.vtype,
                ValueType::HashMetadata
                    | ValueType::HashMetadataPreGa
                    | ValueType::HashListpackEx
                    | ValueType::HashListpackExPreGa
            );
            if with_ttls {
                // Redis 7.4: a listpackex keeps its order, a hashtable's fields are placed by
                // TTL; fields whose TTL passed are kept (expiry removes them later).
                let keep_order = matches!(v.vtype, ValueType::HashListpackEx | ValueType::HashListpackExPreGa);
                let mut entries = Vec::with_capacity(n);
                for f in fields {
                    let f = f?;
                    let ttl = f.expire_ms.map_or(0, |t| t.max(0) as u64);
                    entries.push((
                        super::sds(ElemBytes::new(f.field).as_ref()),
                        super::sds(ElemBytes::new(f.value).as_ref()),
                        ttl,
                    ));
                }
                return Ok(Value::Hash(Box::new(Hash::from_entries_with_ttls(entries, keep_order, limits))));
            }
            let mut h = Hash::with_capacity(n, limits);
            let compact = matches!(v.vtype, ValueType::HashZiplist | ValueType::HashListpack);
            for f in fields {
                let f = f?;
                if f.expire_ms.is_some() {
                    return Err(FromRdbError::Unsupported("hash field TTLs in a type without them".into()));
                }
                let (field, value) = (ElemBytes::new(f.field), ElemBytes::new(f.value));
                let new = h.insert_loaded(field.as_ref(), value.as_ref(), compact, limits);
                if !new {
                    if let Some(e) = refuse_duplicate(v.vtype, deep) {
                        return Err(e);
                    }
                }
            }
            h.shrink_to_fit();
            Value::Hash(Box::new(h))
        }
        LogicalType::Stream => {
            let s = v.stream()?;
            if deep && s.meta.groups.iter().any(pending_without_consumer) {
                return Err(FormatError::new(0, "Stream CG PEL entry without consumer").into());
            }
            match Stream::from_rdb(&s, limits)? {
                Some(st) => Value::Stream(Box::new(st)),
                None => {
                    Value::from_logical_owned(Logical::from_value(v)?, limits).map_err(FromRdbError::Unsupported)?
                }
            }
        }
        LogicalType::Module => {
            let logical = Logical::from_value(v)?;
            if let (true, Logical::Stream(s)) = (deep, &logical) {
                if s.meta.groups.iter().any(pending_without_consumer) {
                    return Err(FormatError::new(0, "Stream CG PEL entry without consumer").into());
                }
            }
            Value::from_logical_owned(logical, limits).map_err(FromRdbError::Unsupported)?
        }
    })
}
