//! RDB snapshots of the keyspace (SAVE, and the RDB form of an AOF base), written as
//! Redis 7.0 writes them: RDB 10, its aux fields, per database SELECTDB + RESIZEDB, the
//! keys with their expiry, EOF and the CRC-64.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::PersistError;
use crate::config::Config;
use crate::format::rdb::{Encoder, RdbWriter, Target};
use crate::keyspace::{Keyspace, SnapChunk};
use crate::value::Value;
use std::sync::mpsc::Receiver;

/// The encoder for `cfg`: Redis 7.0's format at the configured thresholds.
pub fn encoder(cfg: &Config) -> Encoder {
    let mut enc = Encoder::new(Target::Redis70);
    let l = &cfg.limits;
    enc.limits.hash_entries = l.hash_max_listpack_entries;
    enc.limits.hash_value = l.hash_max_listpack_value;
    enc.limits.zset_entries = l.zset_max_listpack_entries;
    enc.limits.zset_value = l.zset_max_listpack_value;
    enc.limits.intset_entries = l.set_max_intset_entries;
    enc.limits.compression = cfg.rdbcompression;
    enc
}

/// Where a snapshot's keys come from: the keyspace itself (on its owner's thread), or the
/// chunks a [`crate::keyspace::SnapshotWalker`] sends from a live one, each key after
/// `rdb-key-save-delay` ([`Config::rdb_key_save_delay`]).
pub enum Source<'a> {
    Keyspace(&'a Keyspace),
    Stream { rx: Receiver<SnapChunk>, key_delay_us: i32 },
}

/// Redis's per-key save delay: `n` > 0 sleeps n µs; `n` < 0 sleeps 1 µs once in -n keys
/// (a sleep costs far more than a microsecond, so short delays are statistical).
fn key_delay(n: i32) {
    let us = match n {
        0 => return,
        n if n > 0 => n.unsigned_abs(),
        n => u32::from(fastrand::u32(..n.unsigned_abs()) == 0),
    };
    if us > 0 {
        std::thread::sleep(std::time::Duration::from_micros(u64::from(us)));
    }
}

/// What a snapshot is written as: an RDB or a RESP AOF base.
pub trait KeySink {
    /// The next database, with its key and TTL counts.
    fn db(&mut self, index: usize, keys: u64, volatile: u64) -> io::Result<()>;
    fn key(&mut self, key: &[u8], value: &Value, expire_ms: Option<i64>) -> io::Result<()>;
}

impl Source<'_> {
    /// Hand every database and key to `sink`, in database order.
    pub fn feed(self, sink: &mut dyn KeySink) -> io::Result<()> {
        match self {
            Source::Keyspace(ks) => {
                for (i, db) in ks.dbs.iter().enumerate() {
                    if db.is_empty() {
                        continue;
                    }
                    sink.db(i, db.len() as u64, db.volatile_len() as u64)?;
                    for slot in db.slots() {
                        sink.key(&slot.key, &slot.value, slot.expire_ms())?;
                    }
                }
                Ok(())
            }
            Source::Stream { rx, key_delay_us } => loop {
                match rx.recv() {
                    Ok(SnapChunk::Db { index, keys, volatile }) => sink.db(index, keys, volatile)?,
                    Ok(SnapChunk::Keys(records)) => {
                        for r in &records {
                            key_delay(key_delay_us);
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

impl<W: Write> KeySink for RdbSink<W> {
    fn db(&mut self, index: usize, keys: u64, volatile: u64) -> io::Result<()> {
        self.rdb.select_db(index as u64, Some((keys, volatile)))
    }

    fn key(&mut self, key: &[u8], value: &Value, expire_ms: Option<i64>) -> io::Result<()> {
        self.rdb.key(key, expire_ms, None, None, &value.to_logical_in_order(), &mut self.losses)?;
        match self.losses.pop() {
            Some(l) => Err(io::Error::new(io::ErrorKind::InvalidData, l.what)),
            None => Ok(()),
        }
    }
}

/// Write `ks` as an RDB file to `w`.
pub fn write_rdb<W: Write>(w: W, ks: &Keyspace, cfg: &Config, now_ms: i64, aof_base: bool) -> io::Result<W> {
    write_rdb_from(w, Source::Keyspace(ks), cfg, now_ms, aof_base)
}

/// Write a snapshot as an RDB file to `w`.
pub fn write_rdb_from<W: Write>(w: W, src: Source, cfg: &Config, now_ms: i64, aof_base: bool) -> io::Result<W> {
    let mut rdb = RdbWriter::with_aof_base(w, Target::Redis70, now_ms.div_euclid(1000), aof_base)?;
    rdb.enc = encoder(cfg);
    let mut sink = RdbSink { rdb, losses: Vec::new() };
    src.feed(&mut sink)?;
    sink.rdb.finish()
}

/// Write `path` atomically: build `tmp` with `fill`, fsync it, rename it over `path`, and
/// fsync the directory so the rename itself is durable.
pub fn write_atomically(
    tmp: &Path,
    path: &Path,
    fill: impl FnOnce(BufWriter<File>) -> io::Result<BufWriter<File>>,
) -> Result<(), PersistError> {
    let file = File::create(tmp).map_err(|e| PersistError::io(tmp, "create", e))?;
    let written =
        fill(BufWriter::with_capacity(1 << 20, file)).and_then(|w| w.into_inner().map_err(|e| e.into_error()));
    let file = match written {
        Ok(f) => f,
        Err(e) => {
            let _ = fs::remove_file(tmp);
            return Err(PersistError::io(tmp, "write", e));
        }
    };
    if let Err(e) = file.sync_all() {
        let _ = fs::remove_file(tmp);
        return Err(PersistError::io(tmp, "fsync", e));
    }
    drop(file);
    if let Err(e) = fs::rename(tmp, path) {
        let _ = fs::remove_file(tmp);
        return Err(PersistError::io(path, "rename", e));
    }
    sync_dir(path)
}

/// fsync the directory holding `path`.
pub fn sync_dir(path: &Path) -> Result<(), PersistError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| PersistError::io(dir, "fsync directory", e))
}

/// SAVE: the keyspace to `dir/dbfilename`, through `dir/temp-<pid>.rdb`.
pub fn save(ks: &Keyspace, cfg: &Config, now_ms: i64) -> Result<(), PersistError> {
    save_from(Source::Keyspace(ks), cfg, now_ms)
}

/// BGSAVE's writer: a snapshot to `dir/dbfilename`, through `dir/temp-<pid>.rdb` (Redis's
/// child names it after its own pid; there is no child here).
pub fn save_from(src: Source, cfg: &Config, now_ms: i64) -> Result<(), PersistError> {
    let path = cfg.dir.join(&cfg.dbfilename);
    let tmp = cfg.dir.join(format!("temp-{}.rdb", std::process::id()));
    write_atomically(&tmp, &path, |w| write_rdb_from(w, src, cfg, now_ms, false))
}
