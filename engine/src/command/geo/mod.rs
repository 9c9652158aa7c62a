//! The GEO commands (geo.c): members go into a sorted set under their 52-bit geohash as
//! the score. GEOADD runs and propagates as the ZADD it stands for, as in Redis; GEOPOS,
//! GEODIST and GEOHASH decode the score back to the centre of its cell; the searches
//! (GEORADIUS, GEOSEARCH and their kin) are in `search`.

mod cell;
mod search;

use super::catalog::ServerVersion;
use super::long_double::LongDouble;
use super::{eq_ic, parse_f64, Ctx, Reply, Spec};
use crate::value::Zset;
pub use cell::decode;
use cell::{Cell, Metric, LAT_MAX, LON_MAX, STEP_MAX};

pub const SPECS: &[Spec] = &[
    Spec::new("geoadd", geoadd),
    Spec::new("geopos", geopos),
    Spec::new("geodist", geodist),
    Spec::new("geohash", geohash_cmd),
    Spec::new("georadius", search::georadius).movable(search::georadius_keys),
    Spec::new("georadius_ro", search::georadius_ro),
    Spec::new("georadiusbymember", search::georadiusbymember).movable(search::georadius_keys),
    Spec::new("georadiusbymember_ro", search::georadiusbymember_ro),
    Spec::new("geosearch", search::geosearch),
    Spec::new("geosearchstore", search::geosearchstore),
];

/// The score GEOADD stores for a valid pair: its 52-bit geohash.
pub fn geohash(lon: f64, lat: f64) -> u64 {
    Cell::of(lon, lat, LAT_MAX, STEP_MAX).bits
}

/// How `version` measures distances.
fn metric(version: ServerVersion) -> Metric {
    Metric { meridian_shortcut: version.behaves_as() >= ServerVersion::Redis70 }
}

/// A distance as GEODIST prints it: four decimals, Redis 7's fixed point (the value
/// times 10^4 rounded half to even) or Redis 6.2's `%.4f`.
fn fmt_distance(d: f64, version: ServerVersion) -> String {
    if version.is_redis62() {
        return format!("{d:.4}");
    }
    let units = (d * 10_000.0).round_ties_even() as i64;
    if units == 0 {
        return "0.0000".into();
    }
    let sign = if units < 0 { "-" } else { "" };
    let abs = units.unsigned_abs();
    format!("{sign}{}.{:04}", abs / 10_000, abs % 10_000)
}

/// A coordinate as Redis's addReplyHumanLongDouble writes it (`%.17Lf`, trailing zeros
/// dropped): a bulk string in RESP2, a double in RESP3.
fn coordinate(v: f64) -> Reply {
    Reply::HumanDouble(LongDouble::from_f64(v).to_human())
}

/// A GEO read's sorted set: None when the key is missing, WRONGTYPE for another type.
fn geo_set<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c Zset>, Reply> {
    super::zset::zset_ref(ctx, key)
}

/// A reply per member of `a[2..]`: `found` of its score, or `missing`.
fn per_member(ctx: &mut Ctx<'_>, a: &[Vec<u8>], missing: Reply, found: impl Fn(f64) -> Reply) -> Reply {
    let z = match geo_set(ctx, &a[1]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    Reply::Array(a[2..].iter().map(|m| z.and_then(|z| z.score(m)).map_or_else(|| missing.clone(), &found)).collect())
}

/// GEOPOS key [member ...]: each member's position, or a null array.
fn geopos(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    per_member(ctx, a, Reply::NilArray, |score| {
        let (lon, lat) = decode(score);
        Reply::Array(vec![coordinate(lon), coordinate(lat)])
    })
}

/// GEODIST key member1 member2 [M|KM|FT|MI]: null when the key or a member is missing.
fn geodist(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let version = ctx.cfg.version;
    let to_meter = match a.get(4) {
        _ if a.len() > 5 => return Reply::syntax(),
        None => 1.0,
        Some(u) => match to_meters(u, version) {
            Ok(m) => m,
            Err(e) => return e,
        },
    };
    let z = match geo_set(ctx, &a[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    match (z.score(&a[2]), z.score(&a[3])) {
        (Some(s1), Some(s2)) => {
            Reply::Bulk(fmt_distance(metric(version).distance(decode(s1), decode(s2)) / to_meter, version).into_bytes())
        }
        _ => Reply::Nil,
    }
}

/// Meters per unit (Redis's extractUnitOrReply): compared as a C string (up to a NUL), in
/// any case from Redis 7.0, lower case only before.
fn to_meters(u: &[u8], version: ServerVersion) -> Result<f64, Reply> {
    let u = &u[..u.iter().position(|&b| b == 0).unwrap_or(u.len())];
    let redis62 = version.is_redis62();
    let same = |n: &str| if redis62 { u == n.as_bytes() } else { eq_ic(u, n) };
    match [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)].into_iter().find(|(n, _)| same(n)) {
        Some((_, m)) => Ok(m),
        None if redis62 => Err(Reply::err("ERR unsupported unit provided. please use m, km, ft, mi")),
        None => Err(Reply::err("ERR unsupported unit provided. please use M, KM, FT, MI")),
    }
}

/// A longitude and a latitude argument (extractLongLatOrReply).
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Reply> {
    let (Some(lon), Some(lat)) = (parse_f64(lon), parse_f64(lat)) else {
        return Err(Reply::not_float());
    };
    if !(-LON_MAX..=LON_MAX).contains(&lon) || !(-LAT_MAX..=LAT_MAX).contains(&lat) {
        return Err(Reply::error(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")));
    }
    Ok((lon, lat))
}

/// The standard geohash alphabet (base 32 without a, i, l, o).
const GEOHASH_ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";

/// GEOHASH key [member ...]: each member's 11-character geohash (latitudes over -90..90,
/// as the standard has them; 52 bits, so the last character is always '0'), or null.
fn geohash_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    per_member(ctx, a, Reply::Nil, |score| {
        let (lon, lat) = decode(score);
        let bits = Cell::of(lon, lat, 90.0, STEP_MAX).bits;
        let text = (0..11)
            .map(|i| if i == 10 { 0 } else { (bits >> (52 - (i + 1) * 5)) & 0x1f })
            .map(|idx| GEOHASH_ALPHABET[idx as usize])
            .collect();
        Reply::Bulk(text)
    })
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD with geohash scores.
fn geoadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let mut at = 2;
    let (mut nx, mut xx) = (false, false);
    while at < a.len() {
        if eq_ic(&a[at], "nx") {
            nx = true;
        } else if eq_ic(&a[at], "xx") {
            xx = true;
        } else if !eq_ic(&a[at], "ch") {
            break;
        }
        at += 1;
    }
    let triples = &a[at..];
    if triples.is_empty() || !triples.len().is_multiple_of(3) || (nx && xx) {
        return Reply::syntax();
    }
    // The ZADD it stands for: the options as given, then score member pairs.
    let mut zadd: Vec<Vec<u8>> = Vec::with_capacity(at + triples.len() / 3 * 2);
    zadd.push(b"zadd".to_vec());
    zadd.extend(a[1..at].iter().cloned());
    for t in triples.chunks(3) {
        let (lon, lat) = match lon_lat(&t[0], &t[1]) {
            Ok(p) => p,
            Err(e) => return e,
        };
        zadd.push(geohash(lon, lat).to_string().into_bytes());
        zadd.push(t[2].clone());
    }
    let reply = super::zset::zadd(ctx, &zadd);
    ctx.rewrite(zadd);
    reply
}
