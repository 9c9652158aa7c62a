//! The RESP form of an AOF base, as Redis 7.0's rewrite writes it when
//! `aof-use-rdb-preamble` is off: per database a SELECT, then per key SET (strings) or
//! RPUSH / SADD / ZADD / HMSET in batches of at most [`AOF_REWRITE_ITEMS_PER_CMD`]
//! elements, then PEXPIREAT when the key has a TTL.
//!
//! The writer takes elements, not engine values, so tools that read RDB files can write
//! the same bytes from [`Logical`] values ([`RespBaseWriter::logical`]). Streams are
//! rebuilt by [`stream_entry`] and [`stream_tail`], shared with `rdbtool dump --format resp`.

use std::io::{self, Write};

use super::feed::put_multibulk;
use super::snapshot::{KeySink, SlotEncoder, Source};
use crate::command::fmt_double;
use crate::format::logical::{Logical, StreamValue};
use crate::format::rdb::{StreamId, StreamMeta};
use crate::keyspace::{Db, Keyspace};
use crate::value::Value;

/// Elements per variadic command in a rewritten AOF (Redis's AOF_REWRITE_ITEMS_PER_CMD).
pub const AOF_REWRITE_ITEMS_PER_CMD: usize = 64;

pub struct RespBaseWriter<W: Write> {
    w: W,
    buf: Vec<u8>,
}

impl<W: Write> RespBaseWriter<W> {
    pub fn new(w: W) -> Self {
        RespBaseWriter { w, buf: Vec::with_capacity(1 << 16) }
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn count(&mut self, n: usize) {
        self.buf.push(b'*');
        self.buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    fn bulk(&mut self, b: &[u8]) {
        self.buf.push(b'$');
        self.buf.extend_from_slice(itoa::Buffer::new().format(b.len()).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// The `#TS:` annotation a rewrite starts with when timestamps are enabled.
    pub fn timestamp(&mut self, now_ms: i64) -> io::Result<()> {
        self.buf.extend_from_slice(format!("#TS:{}\r\n", now_ms.div_euclid(1000)).as_bytes());
        self.spill()
    }

    /// A function library, as Redis's rewrite writes it: `FUNCTION LOAD <code>`.
    pub fn function(&mut self, code: &[u8]) -> io::Result<()> {
        self.count(3);
        self.bulk(b"FUNCTION");
        self.bulk(b"LOAD");
        self.bulk(code);
        self.spill()
    }

    pub fn select_db(&mut self, db: usize) -> io::Result<()> {
        put_multibulk(&mut self.buf, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
        self.spill()
    }

    pub fn string(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.count(3);
        self.bulk(b"SET");
        self.bulk(key);
        self.bulk(value);
        self.spill()
    }

    /// `cmd key e1 e2 ...` in batches; each item writes `per_item` bulks.
    /// `len` items in commands of at most AOF_REWRITE_ITEMS_PER_CMD.
    fn batched<I, F>(
        &mut self,
        cmd: &[u8],
        key: &[u8],
        len: usize,
        items: I,
        per_item: usize,
        mut put: F,
    ) -> io::Result<()>
    where
        I: Iterator,
        F: FnMut(&mut Self, I::Item),
    {
        let mut left = len;
        let mut in_cmd = 0;
        // The counts are written ahead: `len` items go, however many come.
        for it in items.take(len) {
            if in_cmd == 0 {
                let n = left.min(AOF_REWRITE_ITEMS_PER_CMD);
                self.count(2 + n * per_item);
                self.bulk(cmd);
                self.bulk(key);
            }
            put(self, it);
            in_cmd += 1;
            if in_cmd == AOF_REWRITE_ITEMS_PER_CMD {
                in_cmd = 0;
            }
            left -= 1;
            self.spill()?;
        }
        Ok(())
    }

    pub fn list<'e>(&mut self, key: &[u8], len: usize, items: impl Iterator<Item = &'e [u8]>) -> io::Result<()> {
        self.batched(b"RPUSH", key, len, items, 1, |w, e| w.bulk(e))
    }

    pub fn set<B: AsRef<[u8]>>(&mut self, key: &[u8], len: usize, members: impl Iterator<Item = B>) -> io::Result<()> {
        self.batched(b"SADD", key, len, members, 1, |w, e| w.bulk(e.as_ref()))
    }

    /// ZADD with scores as `%.17g`.
    pub fn zset<'e>(&mut self, key: &[u8], len: usize, items: impl Iterator<Item = (&'e [u8], f64)>) -> io::Result<()> {
        self.batched(b"ZADD", key, len, items, 2, |w, (m, s)| {
            w.bulk(fmt_double(s).as_bytes());
            w.bulk(m);
        })
    }

    pub fn hash<'e>(
        &mut self,
        key: &[u8],
        len: usize,
        fields: impl Iterator<Item = (&'e [u8], &'e [u8])>,
    ) -> io::Result<()> {
        self.batched(b"HMSET", key, len, fields, 2, |w, (f, v)| {
            w.bulk(f);
            w.bulk(v);
        })
    }

    /// Any command, as a multibulk.
    pub fn command(&mut self, args: &[&[u8]]) -> io::Result<()> {
        self.count(args.len());
        for a in args {
            self.bulk(a);
        }
        self.spill()
    }

    /// XADD per entry, then XSETID and the consumer groups.
    pub fn stream(&mut self, key: &[u8], st: &StreamValue) -> io::Result<()> {
        let entries =
            st.entries.iter().map(|(id, fields)| (*id, fields.iter().map(|(f, v)| (f.as_slice(), v.as_slice()))));
        self.stream_of(key, entries, &st.meta)
    }

    /// [`Self::stream`] from the live entries in ID order and the stream's metadata.
    fn stream_of<'f, P>(
        &mut self,
        key: &[u8],
        entries: impl Iterator<Item = (StreamId, P)>,
        meta: &StreamMeta<'_>,
    ) -> io::Result<()>
    where
        P: Iterator<Item = (&'f [u8], &'f [u8])>,
    {
        let mut res = Ok(());
        let mut emit = |args: &[&[u8]]| {
            if res.is_ok() {
                res = self.command(args);
            }
        };
        let mut any = false;
        for (id, fields) in entries {
            any = true;
            stream_entry(key, id, fields, &mut emit);
        }
        stream_tail(key, meta, any, &mut emit);
        res
    }

    /// A hash with field TTLs, as Redis 7.4 rewrites one: per field an HMSET, and an
    /// HPEXPIREAT after it when the field has a TTL (kept even when it passed).
    pub fn hash_with_ttls<'e>(
        &mut self,
        key: &[u8],
        fields: impl Iterator<Item = (&'e [u8], &'e [u8], Option<u64>)>,
    ) -> io::Result<()> {
        let mut when = itoa::Buffer::new();
        for (f, v, ttl) in fields {
            self.command(&[b"HMSET", key, f, v])?;
            if let Some(t) = ttl {
                self.command(&[b"HPEXPIREAT", key, when.format(t).as_bytes(), b"FIELDS", b"1", f])?;
            }
        }
        Ok(())
    }

    pub fn pexpireat(&mut self, key: &[u8], when_ms: i64) -> io::Result<()> {
        self.count(3);
        self.bulk(b"PEXPIREAT");
        self.bulk(key);
        self.bulk(itoa::Buffer::new().format(when_ms).as_bytes());
        self.spill()
    }

    /// One key of the engine, in its in-memory element order, and its TTL.
    pub fn value(&mut self, key: &[u8], v: &Value, expire_ms: Option<i64>) -> io::Result<()> {
        match v {
            Value::Str(s) => self.string(key, &s.as_bytes())?,
            Value::List(l) => self.list(key, l.len(), l.iter())?,
            Value::Set(s) => self.set(key, s.len(), s.iter())?,
            Value::Zset(z) => self.zset(key, z.len(), z.iter())?,
            // Redis takes the per-field form whenever the hash is registered for expiry.
            Value::Hash(h) if h.registered().is_some() => self.hash_with_ttls(key, h.iter_with_ttl())?,
            Value::Hash(h) => self.hash(key, h.len(), h.iter())?,
            Value::Stream(st) => self.stream_of(key, st.entries().map(|(id, f)| (id, f.iter())), &st.meta())?,
        }
        match expire_ms {
            Some(t) => self.pexpireat(key, t),
            None => Ok(()),
        }
    }

    /// One key from its canonical view. Modules have no rewrite form and are refused.
    pub fn logical(&mut self, key: &[u8], v: &Logical, expire_ms: Option<i64>) -> io::Result<()> {
        let unsupported = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidData, what.to_string()));
        match v {
            Logical::String(s) => self.string(key, s)?,
            Logical::List(items) => self.list(key, items.len(), items.iter().map(Vec::as_slice))?,
            Logical::Set(members) => self.set(key, members.len(), members.iter())?,
            Logical::Zset(items) => self.zset(key, items.len(), items.iter().map(|(m, s)| (m.as_slice(), *s)))?,
            Logical::Hash(fields) => {
                if fields.iter().any(|f| f.expire_ms.is_some()) {
                    let ttls =
                        fields.iter().map(|f| (f.field.as_slice(), f.value.as_slice(), f.expire_ms.map(|t| t as u64)));
                    self.hash_with_ttls(key, ttls)?
                } else {
                    self.hash(key, fields.len(), fields.iter().map(|f| (f.field.as_slice(), f.value.as_slice())))?
                }
            }
            Logical::Stream(st) => self.stream(key, st)?,
            Logical::Module(_) => return unsupported("module values have no AOF form"),
        }
        match expire_ms {
            Some(t) => self.pexpireat(key, t),
            None => Ok(()),
        }
    }

    /// Flush what is buffered; returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        self.w.flush()?;
        Ok(self.w)
    }
}

fn stream_id(id: StreamId) -> Vec<u8> {
    id.to_bytes()
}

/// `XADD key id field value ...`: one stream entry.
pub fn stream_entry<'f>(
    key: &[u8],
    id: StreamId,
    fields: impl Iterator<Item = (&'f [u8], &'f [u8])>,
    emit: &mut dyn FnMut(&[&[u8]]),
) {
    let id = stream_id(id);
    let mut args: Vec<&[u8]> = vec![b"XADD", key, &id];
    for (f, v) in fields {
        args.push(f);
        args.push(v);
    }
    emit(&args);
}

/// What follows a stream's entries ([`stream_entry`]): for a stream without entries an
/// XADD trimmed to nothing (so the key exists), XSETID with the last ID (and, when known,
/// ENTRIESADDED / MAXDELETEDID), then per group XGROUP CREATE (ENTRIESREAD when known) and
/// per consumer XGROUP CREATECONSUMER, or XCLAIM ... FORCE of each pending entry with its
/// delivery time and count.
pub fn stream_tail(key: &[u8], meta: &StreamMeta<'_>, had_entries: bool, emit: &mut dyn FnMut(&[&[u8]])) {
    if !had_entries {
        emit(&[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    }
    let last = stream_id(meta.last_id);
    match (meta.entries_added, meta.max_deleted_id) {
        (Some(added), Some(maxdel)) => {
            let (added, maxdel) = (added.to_string(), stream_id(maxdel));
            emit(&[b"XSETID", key, &last, b"ENTRIESADDED", added.as_bytes(), b"MAXDELETEDID", &maxdel]);
        }
        _ => emit(&[b"XSETID", key, &last]),
    }
    for g in &meta.groups {
        let gname = g.name.to_bytes();
        let delivered = stream_id(g.last_delivered);
        match g.entries_read.filter(|n| *n >= 0) {
            Some(n) => {
                let n = n.to_string();
                emit(&[b"XGROUP", b"CREATE", key, &gname, &delivered, b"ENTRIESREAD", n.as_bytes()]);
            }
            None => emit(&[b"XGROUP", b"CREATE", key, &gname, &delivered]),
        }
        for c in &g.consumers {
            let cname = c.name.to_bytes();
            if c.pending.is_empty() {
                emit(&[b"XGROUP", b"CREATECONSUMER", key, &gname, &cname]);
            }
            for p in &c.pending {
                let pe = g.pending.iter().find(|x| x.id == *p);
                let (time, count) = pe.map_or((0, 1), |x| (x.delivery_time, x.delivery_count));
                let (id, time, count) = (stream_id(*p), time.to_string(), count.to_string());
                emit(&[
                    b"XCLAIM",
                    key,
                    &gname,
                    &cname,
                    b"0",
                    &id,
                    b"TIME",
                    time.as_bytes(),
                    b"RETRYCOUNT",
                    count.as_bytes(),
                    b"JUSTID",
                    b"FORCE",
                ]);
            }
        }
    }
}

/// A whole keyspace as a RESP AOF base (`timestamp_ms`: the `#TS:` annotation to start
/// with, when timestamps are enabled).
pub fn write_keyspace<W: Write>(w: W, ks: &Keyspace, timestamp_ms: Option<i64>) -> io::Result<W> {
    write_keyspace_from(w, Source::Keyspace(ks), timestamp_ms)
}

/// A snapshot as a RESP AOF base.
pub fn write_keyspace_from<W: Write>(w: W, src: Source, timestamp_ms: Option<i64>) -> io::Result<W> {
    let mut out = RespBaseWriter::new(w);
    if let Some(t) = timestamp_ms {
        out.timestamp(t)?;
    }
    src.feed(&mut out, 0)?;
    out.finish()
}

impl<W: Write> KeySink for RespBaseWriter<W> {
    fn functions(&mut self, codes: &[Vec<u8>]) -> io::Result<()> {
        for c in codes {
            self.function(c)?;
        }
        Ok(())
    }

    fn db(&mut self, index: usize, _keys: u64, _volatile: u64) -> io::Result<()> {
        self.select_db(index)
    }

    fn key(&mut self, key: &[u8], value: &Value, expire_ms: Option<i64>) -> io::Result<()> {
        self.value(key, value, expire_ms)
    }

    fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(bytes);
        self.spill()
    }

    fn encoder(&self) -> Box<SlotEncoder> {
        Box::new(|db: &Db, range| {
            let mut w = RespBaseWriter::new(Vec::new());
            for (s, expire_ms) in db.iter_range(range) {
                w.value(&s.key, &s.value, expire_ms)?;
            }
            w.finish()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{sds, List, Str};

    #[test]
    fn batches_of_64_and_expiry() {
        let mut ks = Keyspace::new(16);
        let items = (0..130).map(|i| sds(i.to_string().as_bytes()));
        let db = ks.db_mut(2);
        let p = db.add(b"l", Value::List(Box::new(List::from_items(items))), 0);
        db.set_expire_at(p, 1_700_000_000_123);
        ks.db_mut(2).add(b"s", Value::Str(Str::try_encode(b"42")), 0);
        let out = String::from_utf8(write_keyspace(Vec::new(), &ks, None).unwrap()).unwrap();
        assert!(out.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n*66\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$1\r\n0\r\n"));
        assert_eq!(out.matches("RPUSH").count(), 3);
        assert!(out.contains("*4\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$3\r\n128\r\n$3\r\n129\r\n"));
        assert!(out.contains("*3\r\n$9\r\nPEXPIREAT\r\n$1\r\nl\r\n$13\r\n1700000000123\r\n"));
        assert!(out.ends_with("*3\r\n$3\r\nSET\r\n$1\r\ns\r\n$2\r\n42\r\n"));
    }
}
