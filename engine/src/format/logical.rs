//! One encoding-free view of a key's value, used by diff, convert and (later) replay.
//!
//! Two datasets are equal when their keys have equal logical values, types and absolute
//! expiries, whatever the encodings: a listpack hash and a hashtable hash with the same
//! fields are the same hash. Values here are owned and canonical: set members and hash
//! fields sorted by bytes, zset members sorted by (score, member), integers as decimal text.

use crate::format::rdb::{HashEntry, KeyRecord, LogicalType, StreamId, StreamMeta, Value};
use crate::format::{Elem, FormatError};

/// A canonical value.
#[derive(Debug, Clone, PartialEq)]
pub enum Logical {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    /// Sorted by bytes.
    Set(Vec<Vec<u8>>),
    /// Sorted by (score, member).
    Zset(Vec<(Vec<u8>, f64)>),
    /// Sorted by field.
    Hash(Vec<Field>),
    Stream(Box<StreamValue>),
    Module(ModuleBlob),
}

/// A hash field; `expire_ms` is the field's absolute TTL (Redis 7.4 HFE, Valkey 9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub field: Vec<u8>,
    pub value: Vec<u8>,
    pub expire_ms: Option<i64>,
}

/// A stream entry: its ID and field/value pairs.
pub type Entry = (StreamId, Vec<(Vec<u8>, Vec<u8>)>);

#[derive(Debug, Clone, PartialEq)]
pub struct StreamValue {
    pub entries: Vec<Entry>,
    pub meta: StreamMeta<'static>,
}

/// A module value kept as the bytes its module wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleBlob {
    pub id: u64,
    pub name: String,
    /// The module opcode stream, EOF included.
    pub payload: Vec<u8>,
}

impl Logical {
    pub fn logical_type(&self) -> LogicalType {
        match self {
            Logical::String(_) => LogicalType::String,
            Logical::List(_) => LogicalType::List,
            Logical::Set(_) => LogicalType::Set,
            Logical::Zset(_) => LogicalType::Zset,
            Logical::Hash(_) => LogicalType::Hash,
            Logical::Stream(_) => LogicalType::Stream,
            Logical::Module(_) => LogicalType::Module,
        }
    }

    /// Number of elements (1 for strings and modules).
    pub fn len(&self) -> usize {
        match self {
            Logical::String(_) | Logical::Module(_) => 1,
            Logical::List(v) | Logical::Set(v) => v.len(),
            Logical::Zset(v) => v.len(),
            Logical::Hash(v) => v.len(),
            Logical::Stream(s) => s.entries.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Read a record's value into canonical form.
    pub fn from_record(k: &KeyRecord<'_>) -> Result<Logical, FormatError> {
        Self::from_value(&k.value)
    }

    /// Read a value into canonical form.
    pub fn from_value(v: &Value<'_>) -> Result<Logical, FormatError> {
        Ok(match v.logical() {
            LogicalType::String => Logical::String(bytes(v.string()?.to_elem()?)),
            LogicalType::List => Logical::List(v.list()?.map(|e| e.map(bytes)).collect::<Result<_, _>>()?),
            LogicalType::Set => {
                let mut m: Vec<Vec<u8>> = v.set()?.map(|e| e.map(bytes)).collect::<Result<_, _>>()?;
                m.sort_unstable();
                Logical::Set(m)
            }
            LogicalType::Zset => {
                let mut m: Vec<(Vec<u8>, f64)> =
                    v.zset()?.map(|e| e.map(|(m, s)| (bytes(m), s))).collect::<Result<_, _>>()?;
                m.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                Logical::Zset(m)
            }
            LogicalType::Hash => {
                let mut f: Vec<Field> = v.hash()?.map(|e| e.map(field)).collect::<Result<_, _>>()?;
                f.sort_unstable_by(|a, b| a.field.cmp(&b.field));
                Logical::Hash(f)
            }
            LogicalType::Stream => {
                let s = v.stream()?;
                let entries: Vec<Entry> = s
                    .entries()
                    .map(|e| e.map(|e| (e.id, e.fields.into_iter().map(|(f, v)| (bytes(f), bytes(v))).collect())))
                    .collect::<Result<_, _>>()?;
                let mut meta = owned_meta(&s.meta);
                canonical_stream_meta(&mut meta, entries.first().map(|e| e.0));
                Logical::Stream(Box::new(StreamValue { entries, meta }))
            }
            LogicalType::Module => {
                let m = v.module()?;
                Logical::Module(ModuleBlob { id: m.id, name: m.name, payload: m.payload.bytes().to_vec() })
            }
        })
    }
}

fn bytes(e: Elem<'_>) -> Vec<u8> {
    match e {
        Elem::Bytes(b) => b.into_owned(),
        Elem::Int(i) => i.to_string().into_bytes(),
    }
}

fn field(h: HashEntry<'_>) -> Field {
    Field { field: bytes(h.field), value: bytes(h.value), expire_ms: h.expire_ms }
}

fn own(e: &Elem<'_>) -> Elem<'static> {
    e.clone().into_owned()
}

/// Fill what older stream layouts leave out the way Redis does when it loads them, so a
/// stream reads the same whatever RDB version held it: first ID = first entry (0-0 when
/// empty), max deleted ID 0-0, entries added = length, entries read estimated from the
/// group's last ID (-1 when it cannot be known), consumer active time = seen time.
pub fn canonical_stream_meta(m: &mut StreamMeta<'static>, first_entry: Option<StreamId>) {
    let first = *m.first_id.get_or_insert_with(|| first_entry.unwrap_or_default());
    m.max_deleted_id.get_or_insert_with(StreamId::default);
    let added = *m.entries_added.get_or_insert(m.length);
    let (len, last) = (m.length, m.last_id);
    for g in &mut m.groups {
        // Redis's streamEstimateDistanceFromFirstEverEntry with no deletion recorded.
        let id = g.last_delivered;
        let estimate = if added == 0 {
            0
        } else if (len == 0 && id <= last) || id == last {
            added as i64
        } else if id > last {
            -1
        } else if id < first {
            (added as i64).wrapping_sub(len as i64)
        } else if id == first {
            (added as i64).wrapping_sub(len as i64).wrapping_add(1)
        } else {
            -1
        };
        g.entries_read.get_or_insert(estimate);
        for c in &mut g.consumers {
            c.active_time.get_or_insert(c.seen_time);
        }
    }
}

/// Stream metadata with every borrowed name copied.
pub fn owned_meta(m: &StreamMeta<'_>) -> StreamMeta<'static> {
    use crate::format::rdb::{Consumer, Group, Idmp, IdmpProducer};
    StreamMeta {
        length: m.length,
        last_id: m.last_id,
        first_id: m.first_id,
        max_deleted_id: m.max_deleted_id,
        entries_added: m.entries_added,
        groups: m
            .groups
            .iter()
            .map(|g| Group {
                name: own(&g.name),
                last_delivered: g.last_delivered,
                entries_read: g.entries_read,
                pending: g.pending.clone(),
                consumers: g
                    .consumers
                    .iter()
                    .map(|c| Consumer {
                        name: own(&c.name),
                        seen_time: c.seen_time,
                        active_time: c.active_time,
                        pending: c.pending.clone(),
                    })
                    .collect(),
                nacked: g.nacked.clone(),
            })
            .collect(),
        idmp: m.idmp.as_ref().map(|i| Idmp {
            duration: i.duration,
            max_entries: i.max_entries,
            producers: i
                .producers
                .iter()
                .map(|p| IdmpProducer {
                    id: own(&p.id),
                    entries: p.entries.iter().map(|(iid, sid)| (own(iid), *sid)).collect(),
                })
                .collect(),
            iids_added: i.iids_added,
            iids_duplicates: i.iids_duplicates,
        }),
    }
}
