//! RDB snapshots of the keyspace (SAVE, and the RDB form of an AOF base), written as
//! Redis 7.0 writes them: RDB 10, its aux fields, per database SELECTDB + RESIZEDB, the
//! keys with their expiry, EOF and the CRC-64.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::{disk, PersistError};
use crate::config::Config;
use crate::format::rdb::{put_key_with, Encoder, Form, KeyParts, Loss, RdbWriter, Target};
use crate::keyspace::{Db, Keyspace, SnapChunk, SnapFeed};
use crate::value::Value;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;

/// The encoder for `cfg`: its version's format at the configured thresholds.
pub fn encoder(cfg: &Config) -> Encoder {
    encoder_for(cfg, cfg.rdb_target())
}

/// The encoder for `target` at `cfg`'s thresholds.
pub fn encoder_for(cfg: &Config, target: Target) -> Encoder {
    let mut enc = Encoder::new(target);
    let l = &cfg.limits;
    enc.limits.hash_entries = l.hash_max_listpack_entries;
    enc.limits.hash_value = l.hash_max_listpack_value;
    enc.limits.zset_entries = l.zset_max_listpack_entries;
    enc.limits.zset_value = l.zset_max_listpack_value;
    enc.limits.intset_entries = l.set_max_intset_entries;
    enc.limits.compression = cfg.rdbcompression;
    match l.list_max_listpack_size {
        fill if fill >= 0 => enc.limits.list_node_entries = fill.max(1) as usize,
        fill => enc.limits.list_node_bytes = 4096 << (-fill - 1).clamp(0, 4),
    }
    enc
}

/// Where a snapshot's keys come from: the keyspace itself (on its owner's thread), or the
/// chunks a [`crate::keyspace::SnapshotWalker`] sends from a live one, each key after
/// `rdb-key-save-delay` ([`Config::rdb_key_save_delay`]).
pub enum Source<'a> {
    Keyspace(&'a Keyspace),
    Stream { rx: SnapFeed, key_delay_us: i32 },
}

/// Redis's per-key save delay: `n` > 0 sleeps n µs; `n` < 0 sleeps 1 µs once in -n keys
/// (a sleep costs far more than a microsecond, so short delays are statistical).
/// A long sleep is cut short when `stop` is set (an aborted snapshot).
pub(crate) fn key_delay(n: i32, stop: Option<&AtomicBool>) {
    let us = match n {
        0 => return,
        n if n > 0 => n.unsigned_abs(),
        n => u32::from(fastrand::u32(..n.unsigned_abs()) == 0),
    };
    let mut left = std::time::Duration::from_micros(u64::from(us));
    const SLICE: std::time::Duration = std::time::Duration::from_millis(10);
    while !left.is_zero() && !stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
        let now = left.min(SLICE);
        std::thread::sleep(now);
        left -= now;
    }
}

/// What a snapshot is written as: an RDB or a RESP AOF base.
pub trait KeySink {
    /// The function libraries, before the first database.
    fn functions(&mut self, codes: &[Vec<u8>]) -> io::Result<()>;
    /// The next database, with its key and TTL counts.
    fn db(&mut self, index: usize, keys: u64, volatile: u64) -> io::Result<()>;
    fn key(&mut self, key: &[u8], value: &Value, expire_ms: Option<i64>) -> io::Result<()>;
    /// Keys [`KeySink::encode`] turned into bytes, to append as they are.
    fn raw(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// What gives the bytes `key` would append for each of some slots, on worker threads.
    fn encoder(&self) -> Box<SlotEncoder>;
}

/// Encodes a run of keys to bytes (see [`KeySink::encoder`]).
pub type SlotEncoder = dyn Fn(&Db, Range<usize>) -> io::Result<Vec<u8>> + Sync;

/// Keys per piece of work when a keyspace is encoded on several threads.
const ENCODE_CHUNK_KEYS: usize = 1024;

/// Threads that encode a keyspace: `FERROKV_THREADS`, else one per core (at most 8).
fn encode_threads() -> usize {
    crate::config::threads(crate::config::cores).min(8)
}

/// `work(0..count)` on `threads` threads, each result handed to `sink` in index order.
/// Worker `t` takes indices t, t + threads, ... and queues at most two results, so memory
/// stays bounded whichever side is slower.
fn in_order<R: Send>(
    count: usize,
    threads: usize,
    work: &(dyn Fn(usize) -> R + Sync),
    sink: &mut dyn FnMut(R) -> io::Result<()>,
) -> io::Result<()> {
    if threads <= 1 || count <= 1 {
        return (0..count).try_for_each(|i| sink(work(i)));
    }
    std::thread::scope(|s| {
        let queues: Vec<Receiver<R>> = (0..threads)
            .map(|t| {
                let (tx, rx) = std::sync::mpsc::sync_channel(2);
                s.spawn(move || {
                    for i in (t..count).step_by(threads) {
                        if tx.send(work(i)).is_err() {
                            return; // The writer stopped on an error.
                        }
                    }
                });
                rx
            })
            .collect();
        for i in 0..count {
            let r = queues[i % threads].recv().map_err(|_| io::Error::other("an encoding thread stopped"))?;
            sink(r)?;
        }
        Ok(())
    })
}

impl Source<'_> {
    /// Hand every database and key to `sink`, in database order. A whole keyspace is
    /// encoded on every core ([`KeySink::encode`]) and written in order.
    /// `key_delay_us`: rdb-key-save-delay for a keyspace written here (a stream has its own).
    pub fn feed(self, sink: &mut dyn KeySink, key_delay_us: i32) -> io::Result<()> {
        match self {
            Source::Keyspace(ks) => {
                sink.functions(&ks.functions.codes())?;
                // (database, range of its slots) per piece of work.
                let mut chunks: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
                for (i, db) in ks.dbs.iter().enumerate() {
                    let n = db.len();
                    chunks.extend((0..n).step_by(ENCODE_CHUNK_KEYS).map(|a| (i, a..(a + ENCODE_CHUNK_KEYS).min(n))));
                }
                let encode = sink.encoder();
                let work = |c: usize| {
                    let (db, range) = &chunks[c];
                    (*db, range.start, encode(&ks.dbs[*db], range.clone()))
                };
                let mut write = |(db, start, bytes): (usize, usize, io::Result<Vec<u8>>)| {
                    if start == 0 {
                        let d = &ks.dbs[db];
                        sink.db(db, d.len() as u64, d.volatile_len() as u64)?;
                    }
                    if key_delay_us != 0 {
                        (0..ks.dbs[db].len().saturating_sub(start).min(ENCODE_CHUNK_KEYS))
                            .for_each(|_| key_delay(key_delay_us, None));
                    }
                    sink.raw(&bytes?)
                };
                in_order(chunks.len(), encode_threads(), &work, &mut write)
            }
            Source::Stream { rx, key_delay_us } => loop {
                match rx.recv() {
                    Ok(SnapChunk::Functions(codes)) => sink.functions(&codes)?,
                    Ok(SnapChunk::Db { index, keys, volatile }) => sink.db(index, keys, volatile)?,
                    Ok(SnapChunk::Keys(records)) => {
                        for r in &records {
                            key_delay(key_delay_us, Some(rx.abort_flag()));
                            if rx.aborted() {
                                return Err(io::Error::other("the snapshot was abandoned"));
                            }
                            sink.key(&r.key, &r.value, r.expire_ms())?;
                        }
                        // Dropped here, on the writer's thread, not the owner's.
                        drop(records);
                    }
                    Ok(SnapChunk::End) => return Ok(()),
                    Err(_) => return Err(io::Error::other("the snapshot was abandoned")),
                }
            },
        }
    }
}

struct RdbSink<W: Write> {
    rdb: RdbWriter<W>,
    losses: Vec<crate::format::rdb::Loss>,
}

/// A value the target cannot hold, as the error that stops the snapshot.
fn refuse(losses: &mut Vec<crate::format::rdb::Loss>) -> io::Result<()> {
    match losses.pop() {
        Some(l) => Err(io::Error::new(io::ErrorKind::InvalidData, l.what)),
        None => Ok(()),
    }
}

impl<W: Write> KeySink for RdbSink<W> {
    fn functions(&mut self, codes: &[Vec<u8>]) -> io::Result<()> {
        for c in codes {
            if let Some(l) = self.rdb.function(c)? {
                self.losses.push(l);
                refuse(&mut self.losses)?;
            }
        }
        Ok(())
    }

    fn db(&mut self, index: usize, keys: u64, volatile: u64) -> io::Result<()> {
        self.rdb.select_db(index as u64, Some((keys, volatile)))
    }

    fn key(&mut self, key: &[u8], value: &Value, expire_ms: Option<i64>) -> io::Result<()> {
        let losses = &mut self.losses;
        let parts = KeyParts { key, expire_ms, idle: None, freq: None };
        self.rdb.key_with(parts, |enc, out| encode_value(enc, value, out, losses))?;
        refuse(&mut self.losses)
    }

    fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.rdb.raw(bytes, None)
    }

    fn encoder(&self) -> Box<SlotEncoder> {
        let enc = self.rdb.enc.clone();
        Box::new(move |db, range| {
            let (mut out, mut losses) = (Vec::new(), Vec::new());
            for (s, expire_ms) in db.iter_range(range) {
                let parts = KeyParts { key: &s.key, expire_ms, idle: None, freq: None };
                put_key_with(&enc, &mut out, parts, |enc, out| encode_value(enc, &s.value, out, &mut losses));
                refuse(&mut losses)?;
            }
            Ok(out)
        })
    }
}

/// A value's RDB encoding (type byte returned), as the server holding it writes it: a
/// Redis 7.4 listpackex as itself (type 25 with the time it is registered under), the
/// rest from its element view.
pub fn encode_value(enc: &Encoder, value: &Value, out: &mut Vec<u8>, losses: &mut Vec<Loss>) -> u8 {
    // Lists, streams and the big forms are written from the value itself: the element view
    // is a copy of every element as a vector, several times the value (ten for a stream).
    match value {
        Value::List(l) => return enc.list_of(l.iter(), out),
        Value::Set(s) if s.encoding() == "hashtable" => return enc.set_table(s.len(), s.iter(), out),
        Value::Zset(z) if z.encoding() == "skiplist" => return enc.zset_table(z.len(), z.iter().rev(), out),
        Value::Hash(h) if h.encoding() == "hashtable" && !h.has_field_ttls() => {
            return enc.hash_table(h.len(), h.iter(), out)
        }
        Value::Stream(st) => {
            let mut meta = st.meta();
            if enc.target == Target::Redis62 {
                // The engine writes RDB 9 only when it stands in for Redis 6.2, whose
                // streams have no entries-added or max-deleted-id: nothing is dropped.
                meta.entries_added = None;
                meta.max_deleted_id = None;
            }
            return enc.stream_of(st.entries().map(|(id, f)| (id, f.iter())), &meta, out, losses);
        }
        _ => {}
    }
    let logical = value.to_logical_in_order();
    match (value, &logical) {
        (Value::Hash(h), crate::format::logical::Logical::Hash(fields))
            if enc.target == Target::Redis74 && matches!(**h, crate::value::Hash::ListpackEx(_)) =>
        {
            enc.hash_listpack_ex(fields, h.registered().unwrap_or(0), out)
        }
        _ => enc.value_in(&logical, Form::of_encoding(value.encoding()), out, losses),
    }
}

/// The configuration a snapshot of `ks` is written with: the configured version's, or
/// Redis 7.4's (RDB 12) when the keyspace holds hash field TTLs the configured version has
/// no form for: they are kept, not dropped.
pub fn config_for(cfg: &Config, ks: &Keyspace) -> Config {
    let mut cfg = cfg.clone();
    if cfg.rdb_target() != Target::Redis74 && ks.dbs.iter().any(|d| d.hash_ttl_len() > 0) {
        cfg.version = crate::command::catalog::ServerVersion::Redis74;
    }
    cfg
}

/// Write `ks` as an RDB file to `w`.
pub fn write_rdb<W: Write>(w: W, ks: &Keyspace, cfg: &Config, now_ms: i64, aof_base: bool) -> io::Result<W> {
    write_rdb_from(w, Source::Keyspace(ks), cfg, now_ms, aof_base)
}

/// What a snapshot made for a replica says of the stream it precedes (Redis's
/// `repl-stream-db`, `repl-id` and `repl-offset` fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplAux {
    /// The database the stream has selected where it goes on.
    pub stream_db: usize,
    pub replid: String,
    pub offset: u64,
}

/// A snapshot for a replica's full resync.
pub fn write_replication_rdb<W: Write>(w: W, src: Source, cfg: &Config, now_ms: i64, repl: &ReplAux) -> io::Result<W> {
    write_rdb_with(w, src, cfg, now_ms, false, Some(repl))
}

/// Write a snapshot as an RDB file to `w`.
pub fn write_rdb_from<W: Write>(w: W, src: Source, cfg: &Config, now_ms: i64, aof_base: bool) -> io::Result<W> {
    write_rdb_with(w, src, cfg, now_ms, aof_base, None)
}

fn write_rdb_with<W: Write>(
    w: W,
    src: Source,
    cfg: &Config,
    now_ms: i64,
    aof_base: bool,
    repl: Option<&ReplAux>,
) -> io::Result<W> {
    let adjusted;
    let cfg = match &src {
        Source::Keyspace(ks) => {
            adjusted = config_for(cfg, ks);
            &adjusted
        }
        // The caller adjusted it ([`config_for`]) when it took the snapshot.
        Source::Stream { .. } => cfg,
    };
    let target = cfg.rdb_target();
    let (db, offset);
    let repl_aux = match repl {
        Some(r) => {
            db = r.stream_db.to_string();
            offset = r.offset.to_string();
            vec![
                (&b"repl-stream-db"[..], db.as_bytes()),
                (&b"repl-id"[..], r.replid.as_bytes()),
                (&b"repl-offset"[..], offset.as_bytes()),
            ]
        }
        None => Vec::new(),
    };
    let writer = cfg.version.rdb_writer_aux();
    let mut rdb = RdbWriter::with_writer(w, target, writer, &repl_aux, now_ms.div_euclid(1000), aof_base)?;
    rdb.enc = encoder_for(cfg, target);
    let mut sink = RdbSink { rdb, losses: Vec::new() };
    src.feed(&mut sink, cfg.rdb_key_save_delay)?;
    sink.rdb.finish()
}

/// Write `path` atomically: build `tmp` with `fill`, fsync it, rename it over `path`, and
/// fsync the directory so the rename itself is durable. On a failure before the rename
/// `tmp` is removed and `path` is left as it was; when only the directory's fsync fails,
/// the error is [`PersistError::RenameNotDurable`] (the new file is in place).
pub fn write_atomically(
    tmp: &Path,
    path: &Path,
    fill: impl FnOnce(Buffered) -> io::Result<Buffered>,
) -> Result<(), PersistError> {
    let file = disk::create(tmp).map_err(|e| PersistError::io(tmp, "create", e))?;
    let written = fill(BufWriter::with_capacity(1 << 20, disk::Checked(file)))
        .and_then(|w| w.into_inner().map_err(|e| e.into_error()));
    let file = match written {
        Ok(f) => f.0,
        Err(e) => {
            let _ = fs::remove_file(tmp);
            return Err(PersistError::io(tmp, "write", e));
        }
    };
    if let Err(e) = disk::fsync_all(&file) {
        let _ = fs::remove_file(tmp);
        return Err(PersistError::io(tmp, "fsync", e));
    }
    drop(file);
    if let Err(e) = disk::rename(tmp, path) {
        let _ = fs::remove_file(tmp);
        return Err(PersistError::io(path, "rename", e));
    }
    sync_dir(path).map_err(|e| match e {
        PersistError::Io { source, .. } => PersistError::RenameNotDurable { path: path.to_path_buf(), source },
        other => other,
    })
}

/// A file being written through the fault seam, buffered.
pub type Buffered = BufWriter<disk::Checked<File>>;

/// fsync the directory holding `path`.
pub fn sync_dir(path: &Path) -> Result<(), PersistError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    disk::sync_dir(dir).map_err(|e| PersistError::io(dir, "fsync directory", e))
}

/// SAVE: the keyspace to `dir/dbfilename`, through `dir/temp-<pid>.rdb`; with the
/// replication fields of the stream the data follows, when there is one.
pub fn save(ks: &Keyspace, cfg: &Config, now_ms: i64, repl: Option<&ReplAux>) -> Result<(), PersistError> {
    save_from(Source::Keyspace(ks), cfg, now_ms, repl)
}

/// BGSAVE's writer: a snapshot to `dir/dbfilename`, through `dir/temp-<pid>.rdb` (Redis's
/// child names it after its own pid; there is no child here).
pub fn save_from(src: Source, cfg: &Config, now_ms: i64, repl: Option<&ReplAux>) -> Result<(), PersistError> {
    let path = cfg.dir.join(&cfg.dbfilename);
    let tmp = cfg.dir.join(format!("temp-{}.rdb", std::process::id()));
    write_atomically(&tmp, &path, |w| write_rdb_with(w, src, cfg, now_ms, false, repl))
}
