//! An RDB written from a base RDB streamed through and a keyspace that holds only what
//! changed since: an offline AOF rewrite without the whole dataset in memory.
//!
//! The base's key records are copied as they are (the output is in the base's format),
//! except the keys the keyspace holds — it has their current state, or they were deleted
//! — and keys expired at `now`. Each database's held keys follow its base keys; the
//! function libraries are the keyspace's.

use std::io::{self, Write};

use super::load::KeepKey;
use super::snapshot::{config_for, encode_value, encoder_for};
use crate::config::Config;
use crate::format::rdb::{KeyParts, RdbReader, RdbWriter, ReadOptions, Record};
use crate::keyspace::Keyspace;
use crate::source::Source;

/// What a merge wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Merged {
    /// Base keys copied.
    pub copied: u64,
    /// Base keys left out as expired at `now`.
    pub expired: u64,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Write the merge of `base` and `ks` to `w`. `held(db, key)`: the keyspace has the key's
/// state (its base record is left out). The caller makes sure the output's format (`cfg`'s
/// version, see [`config_for`]) is the base's, and that the base lists its databases in
/// order, as every Redis writes them.
pub fn write_merged_rdb<W: Write>(
    w: W,
    base: &Source,
    held: &KeepKey<'_>,
    ks: &Keyspace,
    cfg: &Config,
    now_ms: i64,
    aof_base: bool,
) -> io::Result<(W, Merged)> {
    let cfg = config_for(cfg, ks);
    let target = cfg.rdb_target();
    let records = || -> io::Result<RdbReader<'_>> {
        // The loader checked the checksum: these passes only walk.
        RdbReader::with_options(base, ReadOptions { check_crc: false }).map_err(|e| invalid(e.to_string()))
    };
    if records()?.dialect() != target.dialect() {
        return Err(invalid(format!(
            "internal: the base is {} but the output would be {}",
            records()?.dialect().magic(),
            target.dialect().magic()
        )));
    }
    // What becomes of a base key: None when the keyspace holds it, else whether it is
    // copied (not expired at `now`).
    let fate = |k: &crate::format::rdb::KeyRecord<'_>| {
        (!held(k.db as usize, &k.key.to_bytes())).then(|| k.expire_ms.is_none_or(|t| t >= now_ms))
    };
    // RESIZEDB comes before a database's keys: count what each will hold first.
    let mut sizes = vec![(0u64, 0u64); ks.dbs.len()];
    for rec in records()? {
        if let Record::Key(k) = rec.map_err(|e| invalid(e.to_string()))? {
            let Some(size) = sizes.get_mut(k.db as usize) else {
                return Err(invalid(format!("the base selects database {}, past the last one", k.db)));
            };
            if fate(&k) == Some(true) {
                size.0 += 1;
                size.1 += u64::from(k.expire_ms.is_some());
            }
            base.release_before(k.end);
        }
    }
    for (size, db) in sizes.iter_mut().zip(&ks.dbs) {
        size.0 += db.len() as u64;
        size.1 += db.volatile_len() as u64;
    }
    let ctime = now_ms.div_euclid(1000);
    let mut rdb = RdbWriter::with_writer(w, target, cfg.version.rdb_writer_aux(), &[], ctime, aof_base)?;
    rdb.enc = encoder_for(&cfg, target);
    for code in ks.functions.codes() {
        if let Some(loss) = rdb.function(&code)? {
            return Err(invalid(loss.what));
        }
    }
    let mut m = Merge { rdb, ks, sizes, next: 0, open: None, merged: Merged::default() };
    for rec in records()? {
        match rec.map_err(|e| invalid(e.to_string()))? {
            Record::Key(k) => {
                match fate(&k) {
                    None => continue,
                    Some(false) => {
                        m.merged.expired += 1;
                        continue;
                    }
                    Some(true) => {}
                }
                m.reach(k.db as usize)?;
                m.rdb.raw(&base[k.offset..k.end], None)?;
                m.merged.copied += 1;
                base.release_before(k.end);
            }
            Record::ModuleAux(_) => return Err(invalid("the base holds module data".into())),
            Record::Eof { .. } => break,
            // The header and libraries are written anew; databases as keys reach them.
            _ => {}
        }
    }
    m.reach(ks.dbs.len())?;
    let merged = m.merged;
    Ok((m.rdb.finish()?, merged))
}

/// The output's databases as the base's keys reach them.
struct Merge<'k, W: Write> {
    rdb: RdbWriter<W>,
    ks: &'k Keyspace,
    /// (keys, keys with a TTL) of each database in the output.
    sizes: Vec<(u64, u64)>,
    /// The first database not yet started.
    next: usize,
    /// The database being written, whose held keys are still to come.
    open: Option<usize>,
    merged: Merged,
}

impl<W: Write> Merge<'_, W> {
    /// Make `db` the open database: the open one is finished with its held keys, and every
    /// database between them written whole. `db` past the last finishes them all.
    fn reach(&mut self, db: usize) -> io::Result<()> {
        if self.open == Some(db) {
            return Ok(());
        }
        if db < self.next {
            return Err(invalid(format!("the base lists database {db} again after database {}", self.next - 1)));
        }
        if let Some(open) = self.open.take() {
            self.held_keys(open)?;
        }
        while self.next <= db && self.next < self.sizes.len() {
            let d = self.next;
            self.next += 1;
            if self.sizes[d].0 == 0 {
                continue;
            }
            self.rdb.select_db(d as u64, Some(self.sizes[d]))?;
            if d == db {
                self.open = Some(d);
            } else {
                self.held_keys(d)?;
            }
        }
        Ok(())
    }

    fn held_keys(&mut self, db: usize) -> io::Result<()> {
        let mut losses = Vec::new();
        for (s, expire_ms) in self.ks.dbs[db].iter() {
            let parts = KeyParts { key: &s.key, expire_ms, idle: None, freq: None };
            self.rdb.key_with(parts, |enc, out| encode_value(enc, &s.value, out, &mut losses))?;
            if let Some(loss) = losses.pop() {
                return Err(invalid(loss.what));
            }
        }
        Ok(())
    }
}
