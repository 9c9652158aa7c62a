//! DUMP and RESTORE: values as the configured version serializes them (RDB 10 payloads
//! for Redis 7.0, 12 for 7.4).

use super::super::{arg_i64, eq_ic, notify, Ctx, Reply};
use super::already_expired;
use crate::format::crc::crc64;
use crate::format::rdb::{dump_payload_with, read_dump_payload_with, Dialect, Encoder, Family};
use crate::value::Value;

/// DUMP's encoder is SAVE's (rdbcompression included, as Redis's createDumpPayload).
fn encoder(ctx: &Ctx<'_>) -> Encoder {
    crate::persist::snapshot::encoder(ctx.cfg)
}

pub fn dump(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let enc = encoder(ctx);
    let Some(value) = ctx.lookup_read(&a[1]) else {
        return Reply::Nil;
    };
    let value = &*value;
    Reply::Bulk(dump_payload_with(&enc, |enc, out| {
        crate::persist::snapshot::encode_value(enc, value, out, &mut Vec::new())
    }))
}

/// verifyDumpPayload: a footer with a version the server knows and a matching CRC-64
/// (not checked after DEBUG SET-SKIP-CHECKSUM-VALIDATION 1).
fn payload_ok(p: &[u8], rdb_version: u32, skip_crc: bool) -> bool {
    if p.len() < 10 {
        return false;
    }
    let n = p.len();
    let version = u16::from_le_bytes([p[n - 10], p[n - 9]]);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&p[n - 8..]);
    u32::from(version) <= rdb_version && (skip_crc || u64::from_le_bytes(crc) == crc64(&p[..n - 8]))
}

/// The blobs Redis's loader validates entry by entry under sanitize-dump-payload, each
/// counted in `dump_payload_sanitizations`: an intset, a zset or hash listpack, each
/// listpack node of a quicklist or a stream.
fn sanitized_blobs(v: &crate::format::rdb::Value<'_>) -> u64 {
    use crate::format::rdb::ValueType::*;
    match v.vtype {
        SetIntset | ZsetListpack | HashListpack => 1,
        ListQuicklist2 => {
            v.quicklist_nodes().map_or(0, |nodes| nodes.filter(|n| matches!(n, Ok(Some(_)))).count() as u64)
        }
        Stream1 | Stream2 | Stream3 | Stream4 | Stream5 => v.stream().map_or(0, |s| s.node_count()),
        _ => 0,
    }
}

/// The value of a payload whose footer [`payload_ok`] accepted, as loading builds it (the
/// payload's element order kept); Err: why it is refused.
fn decode(ctx: &mut Ctx<'_>, p: &[u8]) -> Result<Value, String> {
    // The footer was checked by payload_ok: the CRC is not computed twice.
    let v = read_dump_payload_with(p, Family::Redis, false).map_err(|e| e.to_string())?;
    if ctx.cfg.sanitize_dump_payload {
        ctx.stats.dump_payload_sanitizations += sanitized_blobs(&v);
    }
    // What Redis's loader checks of every value (RESTORE loads as loading does).
    v.loader_check().map_err(|e| e.to_string())?;
    let v = Value::from_rdb_checked(&v, &ctx.cfg.limits, ctx.cfg.sanitize_dump_payload).map_err(|e| e.to_string())?;
    if v.is_empty_collection() {
        return Err("an empty collection".into());
    }
    Ok(v)
}

pub fn restore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < a.len() {
        let more = j + 1 < a.len();
        if eq_ic(&a[j], "replace") {
            replace = true;
        } else if eq_ic(&a[j], "absttl") {
            absttl = true;
        } else if eq_ic(&a[j], "idletime") && more && freq.is_none() {
            let v = match arg_i64(&a[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if v < 0 {
                return Reply::err("ERR Invalid IDLETIME value, must be >= 0");
            }
            idle = Some(v);
            j += 1;
        } else if eq_ic(&a[j], "freq") && more && idle.is_none() {
            let v = match arg_i64(&a[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if !(0..=255).contains(&v) {
                return Reply::err("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            freq = Some(v);
            j += 1;
        } else {
            return Reply::syntax();
        }
        j += 1;
    }
    if !replace && ctx.lookup_write(key).is_some() {
        return Reply::err("BUSYKEY Target key name already exists.");
    }
    let mut ttl = match arg_i64(&a[2]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if ttl < 0 {
        return Reply::err("ERR Invalid TTL value, must be >= 0");
    }
    if !payload_ok(&a[3], ctx.cfg.rdb_target().version(), ctx.cfg.skip_checksum_validation) {
        return Reply::err("ERR DUMP payload version or checksum are wrong");
    }
    let value = match decode(ctx, &a[3]) {
        Ok(v) => v,
        Err(why) => {
            let kind = Dialect::redis(0).value_type(a[3][0]).map_or("Value", |t| t.integrity_name());
            ctx.fx.log.push(format!("Internal error in RDB reading offset 0 -> {kind} integrity check failed: {why}"));
            return Reply::err("ERR Bad data format");
        }
    };
    // REPLACE deletes whatever is there, expired or not, as Redis's dbDelete.
    let deleted = replace && ctx.db_delete(key);
    if ttl != 0 && !absttl {
        ttl = ttl.saturating_add(ctx.now);
    }
    if ttl != 0 && already_expired(ctx, ttl) {
        if deleted {
            ctx.rewrite(vec![ctx.cfg.server_del_command().to_vec(), key.to_vec()]);
            ctx.notify(notify::GENERIC, "del", key);
            ctx.dirty += 1;
        }
        return Reply::ok();
    }
    ctx.db_add(key, value);
    if ttl != 0 {
        ctx.set_expire(key, ttl);
        if !absttl {
            let mut argv = a.to_vec();
            argv[2] = ttl.to_string().into_bytes();
            argv.push(b"ABSTTL".to_vec());
            ctx.rewrite(argv);
        }
    }
    // As Redis's objectSetLRUOrLFU: FREQ counts under an LFU policy, IDLETIME otherwise.
    if let Some(f) = freq.filter(|_| ctx.cfg.lfu) {
        let field = crate::keyspace::lfu::with_counter(ctx.now, f as u8);
        let db = ctx.db;
        if let Some(s) = ctx.ks.dbs[db].get_mut(key) {
            s.lru = field;
        }
    }
    if let Some(secs) = idle.filter(|_| !ctx.cfg.lfu) {
        // The LRU clock counts seconds in 24 bits.
        let back = u32::try_from(secs.min(i64::from(crate::keyspace::LRU_MAX))).unwrap_or(0);
        let lru = ctx.lru.wrapping_sub(back) & crate::keyspace::LRU_MAX;
        let db = ctx.db;
        if let Some(s) = ctx.ks.dbs[db].get_mut(key) {
            s.lru = lru;
        }
    }
    ctx.notify(notify::GENERIC, "restore", key);
    ctx.dirty += 1;
    Reply::ok()
}
