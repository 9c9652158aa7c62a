//! resp: commands that rebuild the dataset, as Redis's AOF rewrite writes them
//! (at most 64 elements per variadic command, TTLs as PEXPIREAT).

use std::borrow::Cow;

use ferrokv::format::rdb::{
    dump_payload, escape_key, Dialect, Encoder, Family, KeyRecord, LogicalType, PackedItem, Target, Value,
};
use ferrokv::format::Elem;
use ferrokv::logical::Logical;
use ferrokv::persist::feed::{put_bulk, put_multibulk_header};
use ferrokv::persist::rewrite::{stream_entry, stream_tail};

use super::{ctx, Filter, RespOptions, Restore, Writer};
use crate::out::{Out, ToolError};
use ferrokv::format::rdb::score_text_into;

const ITEMS_PER_CMD: usize = 64;

pub struct Resp {
    db: Option<u64>,
    opts: RespOptions,
}

impl Resp {
    /// A writer continuing after a key in `prev_db`.
    pub fn after(prev_db: Option<u64>, opts: RespOptions) -> Self {
        Resp { db: prev_db, opts }
    }

    fn target(&self) -> Target {
        self.opts.target.unwrap_or(Target::Redis70)
    }
}

/// The version a file's commands are for: its writer's (RDB 9 and older: 6.2).
pub fn target_of(d: Dialect) -> Target {
    match (d.family, d.version) {
        (Family::Valkey, _) => Target::Valkey9,
        (_, v) if v <= 9 => Target::Redis62,
        (_, 10) => Target::Redis70,
        (_, 11) => Target::Redis72,
        _ => Target::Redis74,
    }
}

/// Whether plain commands cannot rebuild `k` exactly: a zset with a -0 score (a Redis 7
/// listpack stores 0), a stream with consumer groups (delivery and consumer times).
pub fn needs_restore(k: &KeyRecord<'_>) -> Result<bool, ToolError> {
    let e = ctx(k);
    Ok(match k.value.logical() {
        LogicalType::Zset if !k.value.zset_may_hold_negative_zero().map_err(&e)? => false,
        LogicalType::Zset => {
            let mut negative_zero = false;
            // One pass over the scores as stored; a value that does not read that way is
            // left to the iterator (which says what is wrong).
            let read = k.value.visit_items(|item| {
                if let PackedItem::Scored(_, s) = item {
                    negative_zero = s.is_negative_zero();
                }
                !negative_zero
            });
            if read.is_some() || negative_zero {
                return Ok(negative_zero);
            }
            for item in k.value.zset().map_err(&e)? {
                let (_, s) = item.map_err(&e)?;
                negative_zero |= s == 0.0 && s.is_sign_negative();
            }
            negative_zero
        }
        LogicalType::Stream => !k.value.stream().map_err(&e)?.meta.groups.is_empty(),
        _ => false,
    })
}

/// `RESTORE key ttl payload ABSTTL REPLACE` with a DUMP payload for `target`; what the
/// target has no form for is reported by key.
fn restore(out: &mut Vec<u8>, k: &KeyRecord<'_>, key: &[u8], target: Target) -> Result<(), ToolError> {
    let logical = Logical::from_record(k).map_err(ctx(k))?;
    let mut losses = Vec::new();
    let payload = dump_payload(&Encoder::new(target), &logical, &mut losses);
    for l in losses {
        report(k, &l.what);
    }
    let ttl = k.expire_ms.unwrap_or(0).to_string();
    command(out, &[b"RESTORE", key, ttl.as_bytes(), &payload, b"ABSTTL", b"REPLACE"]);
    Ok(())
}

/// A key the output does not carry whole, on stderr.
fn report(k: &KeyRecord<'_>, what: &str) {
    eprintln!("rdbtool: db {} key '{}': {what}", k.db, escape_key(&k.key.to_bytes()));
}

/// Write one command, as Redis writes it to an AOF.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    ferrokv::persist::feed::put_multibulk(out, args);
}

/// A variadic command's arguments, encoded as they come, written as one command every
/// `ITEMS_PER_CMD` items.
struct Batch<'h> {
    cmd: &'h [u8],
    key: &'h [u8],
    /// The encoded arguments after the key (a buffer reused from key to key).
    body: Vec<u8>,
    args: usize,
    per_item: usize,
}

thread_local! {
    static BATCH_BODY: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        let mut body = std::mem::take(&mut self.body);
        if body.capacity() <= 1 << 20 {
            body.clear();
            BATCH_BODY.set(body);
        }
    }
}

impl<'h> Batch<'h> {
    fn new(cmd: &'h [u8], key: &'h [u8], per_item: usize) -> Self {
        Batch { cmd, key, body: BATCH_BODY.take(), args: 0, per_item }
    }

    fn arg(&mut self, a: &[u8]) {
        put_bulk(&mut self.body, a);
        self.args += 1;
    }

    fn elem(&mut self, e: &Elem<'_>) {
        e.with_bytes(|b| self.arg(b));
    }

    /// An item's arguments are in: write the command when it is full.
    fn item_done(&mut self, out: &mut Commands<'_, '_>) {
        if self.args >= ITEMS_PER_CMD * self.per_item {
            self.flush(out);
        }
    }

    fn flush(&mut self, out: &mut Commands<'_, '_>) {
        if self.args == 0 {
            return;
        }
        let buf = &mut out.out.buf;
        put_multibulk_header(buf, self.args + 2);
        put_bulk(buf, self.cmd);
        put_bulk(buf, self.key);
        buf.extend_from_slice(&self.body);
        out.count += 1;
        self.body.clear();
        self.args = 0;
    }
}

impl Writer for Resp {
    fn key(&mut self, out: &mut Out<'_>, k: &KeyRecord<'_>, f: &Filter) -> Result<(), ToolError> {
        if self.db != Some(k.db) {
            command(&mut out.buf, &[b"SELECT", k.db.to_string().as_bytes()]);
            self.db = Some(k.db);
        }
        let key = k.key.to_bytes();
        let key = key.as_ref();
        let restore_it = match self.opts.restore {
            Restore::Always => k.value.logical() != LogicalType::Module,
            Restore::Auto => needs_restore(k)?,
            Restore::Never => false,
        };
        if restore_it {
            restore(&mut out.buf, k, key, self.target())?;
            out.check()?;
            return Ok(());
        }
        if self.opts.restore == Restore::Never && needs_restore(k)? {
            report(k, "written as commands, which do not keep a -0 score or consumer group times");
        }
        key_commands(out, k, key, self.target(), f)?;
        Ok(())
    }

    fn function(&mut self, out: &mut Out<'_>, code: &Elem<'_>) -> Result<(), ToolError> {
        command(&mut out.buf, &[b"FUNCTION", b"LOAD", b"REPLACE", &code.to_bytes()]);
        Ok(())
    }
}

/// The commands [`key_commands`]' element walk writes for a value whose elements lie one
/// after another (in listpacks: most small lists, sets, zsets and hashes; hashtable sets
/// and hashes), straight from the bytes: no iterator, no element copied. False, with nothing written, when the value is stored otherwise or
/// does not read whole; the walk then writes it or says what is wrong.
fn packed_commands(out: &mut Commands<'_, '_>, v: &Value<'_>, key: &[u8]) -> bool {
    let (cmd, per_item): (&[u8], usize) = match v.logical() {
        LogicalType::List => (b"RPUSH", 1),
        LogicalType::Set => (b"SADD", 1),
        LogicalType::Zset => (b"ZADD", 2),
        LogicalType::Hash => (b"HSET", 2),
        _ => return false,
    };
    let (mark, count) = (out.out.buf.len(), out.count);
    let mut b = Batch::new(cmd, key, per_item);
    let mut score = Vec::with_capacity(32);
    let read = v.visit_items(|item| {
        match item {
            PackedItem::One(e) => b.elem(&e),
            PackedItem::Pair(field, value) => {
                b.elem(&field);
                b.elem(&value);
            }
            PackedItem::Scored(m, s) => {
                let Some(s) = s.value() else { return false };
                score.clear();
                score_text_into(&mut score, s);
                b.arg(&score);
                b.elem(&m);
            }
        }
        b.item_done(out);
        true
    });
    if read.is_none() {
        out.out.buf.truncate(mark);
        out.count = count;
        b.body.clear();
        b.args = 0;
        return false;
    }
    b.flush(out);
    true
}

/// Commands going to an [`Out`], counted (a caller waits for that many replies).
struct Commands<'o, 'w> {
    out: &'o mut Out<'w>,
    count: u64,
}

impl<'o, 'w> Commands<'o, 'w> {
    fn new(out: &'o mut Out<'w>) -> Self {
        Commands { out, count: 0 }
    }

    fn put(&mut self, args: &[&[u8]]) {
        command(&mut self.out.buf, args);
        self.count += 1;
    }

    fn check(&mut self) -> std::io::Result<()> {
        self.out.check()
    }
}

/// The commands that rebuild `k` under the name `key` (no SELECT, never RESTORE): SET,
/// RPUSH/SADD/ZADD/HSET in batches of 64 elements, XADD and the stream's tail, field TTLs
/// (for a target that has them), then PEXPIREAT. Returns how many commands.
pub fn key_commands(
    out: &mut Out<'_>,
    k: &KeyRecord<'_>,
    key: &[u8],
    target: Target,
    f: &Filter,
) -> Result<u64, ToolError> {
    let e = ctx(k);
    let mut out = Commands::new(out);
    let field_ttls = target == Target::Redis74 || target == Target::Valkey9;
    let packed = super::one_pass(&k.value) && packed_commands(&mut out, &k.value, key);
    match k.value.logical() {
        _ if packed => {}
        LogicalType::String => {
            let v = k.value.string().and_then(|s| s.to_elem()).map_err(&e)?;
            v.with_bytes(|v| out.put(&[b"SET", key, v]));
        }
        LogicalType::List | LogicalType::Set => {
            let (cmd, iter): (&[u8], Box<dyn Iterator<Item = Result<Elem<'_>, _>>>) =
                if k.value.logical() == LogicalType::List {
                    (b"RPUSH", Box::new(k.value.list().map_err(&e)?))
                } else {
                    (b"SADD", Box::new(k.value.set().map_err(&e)?))
                };
            let mut b = Batch::new(cmd, key, 1);
            for item in iter {
                b.elem(&item.map_err(&e)?);
                b.item_done(&mut out);
                out.check()?;
            }
            b.flush(&mut out);
        }
        LogicalType::Zset => {
            let mut b = Batch::new(b"ZADD", key, 2);
            // One buffer for every score's text (no allocation per member).
            let mut score = Vec::with_capacity(32);
            for item in k.value.zset().map_err(&e)? {
                let (m, s) = item.map_err(&e)?;
                score.clear();
                score_text_into(&mut score, s);
                b.arg(&score);
                b.elem(&m);
                b.item_done(&mut out);
                out.check()?;
            }
            b.flush(&mut out);
        }
        LogicalType::Hash => {
            let mut b = Batch::new(b"HSET", key, 2);
            let mut ttls: Vec<(Vec<u8>, i64)> = Vec::new();
            for item in k.value.hash().map_err(&e)? {
                let h = item.map_err(&e)?;
                if !f.wants_field(h.expire_ms) {
                    continue;
                }
                b.elem(&h.field);
                b.elem(&h.value);
                b.item_done(&mut out);
                if let Some(t) = h.expire_ms {
                    ttls.push((h.field.to_bytes().into_owned(), t));
                }
                out.check()?;
            }
            b.flush(&mut out);
            if !field_ttls && !ttls.is_empty() {
                report(k, &format!("{} field TTLs left out: {} has no form for them", ttls.len(), target.name()));
                ttls.clear();
            }
            for (field, t) in ttls {
                out.put(&[b"HPEXPIREAT", key, t.to_string().as_bytes(), b"FIELDS", b"1", &field]);
            }
        }
        LogicalType::Stream => {
            let s = k.value.stream().map_err(&e)?;
            let mut any = false;
            for entry in s.entries() {
                let entry = entry.map_err(&e)?;
                any = true;
                let fields: Vec<[Cow<'_, [u8]>; 2]> =
                    entry.fields.iter().map(|(f, v)| [f.to_bytes(), v.to_bytes()]).collect();
                stream_entry(key, entry.id, fields.iter().map(|[f, v]| (f.as_ref(), v.as_ref())), &mut |args| {
                    out.put(args)
                });
                out.check()?;
            }
            stream_tail(key, &s.meta, any, &mut |args: &[&[u8]]| out.put(args));
            out.check()?;
        }
        LogicalType::Module => {
            return Err(ToolError::Usage(format!(
                "key '{}' holds a module value ({}), which has no command form; use --type to leave modules out",
                ferrokv::format::rdb::escape_key(key),
                k.value.module().map(|m| m.name).unwrap_or_default()
            )));
        }
    }
    if let Some(ms) = k.expire_ms {
        out.put(&[b"PEXPIREAT", key, ms.to_string().as_bytes()]);
    }
    Ok(out.count)
}
