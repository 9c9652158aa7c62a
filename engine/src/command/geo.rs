//! The GEO commands (geo.c): members go into a sorted set under their 52-bit geohash as
//! the score. GEOADD runs and propagates as the ZADD it stands for, as in Redis; GEOPOS,
//! GEODIST and GEOHASH decode the score back to the centre of its cell. GEORADIUS,
//! GEOSEARCH and their kin are not built yet.

use super::catalog::ServerVersion;
use super::long_double::LongDouble;
use super::{eq_ic, parse_f64, Ctx, Reply, Spec};
use crate::value::Zset;

pub const SPECS: &[Spec] = &[
    Spec::new("geoadd", geoadd),
    Spec::new("geopos", geopos),
    Spec::new("geodist", geodist),
    Spec::new("geohash", geohash_cmd),
];

/// The coordinates a geohash covers (Web Mercator's latitude limits).
const LON_MAX: f64 = 180.0;
const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate: 26, interleaved into 52.
const STEP: u32 = 26;

/// `v`'s bits spread to the even positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
    x = (x | x << 8) & 0x00FF_00FF_00FF_00FF;
    x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | x << 2) & 0x3333_3333_3333_3333;
    x = (x | x << 1) & 0x5555_5555_5555_5555;
    x
}

/// The even bits of `x` gathered into the low 32 (`spread` undone).
fn gather(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | x >> 1) & 0x3333_3333_3333_3333;
    x = (x | x >> 2) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | x >> 4) & 0x00FF_00FF_00FF_00FF;
    x = (x | x >> 8) & 0x0000_FFFF_0000_FFFF;
    x = (x | x >> 16) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// The geohash of a valid pair: each coordinate's offset in its range as a 26-bit
/// fraction, latitude on the even bits and longitude on the odd ones.
pub fn geohash(lon: f64, lat: f64) -> u64 {
    encode(lon, lat, LAT_MAX)
}

/// [`geohash`] with latitudes spanning `-lat_max..lat_max` (GEOHASH's strings use 90).
fn encode(lon: f64, lat: f64, lat_max: f64) -> u64 {
    let scale = f64::from(1u32 << STEP);
    let lat_off = (lat - -lat_max) / (lat_max - -lat_max) * scale;
    let lon_off = (lon - -LON_MAX) / (LON_MAX - -LON_MAX) * scale;
    spread(lat_off as u32) | spread(lon_off as u32) << 1
}

/// The centre of the cell a score names, (longitude, latitude), as Redis decodes it: the
/// score as C converts a double to uint64_t on x86-64, each coordinate's cell bounds as
/// `min + (i / 2^26) * span`, their mean, clamped to the valid range.
pub fn decode(score: f64) -> (f64, f64) {
    let bits = c_double_to_u64(score);
    let scale = (1u64 << STEP) as f64;
    let centre = |i: u32, max: f64| {
        let span = max - -max;
        let lo = -max + (f64::from(i) / scale) * span;
        let hi = -max + (f64::from(i.wrapping_add(1)) / scale) * span;
        ((lo + hi) / 2.0).clamp(-max, max)
    };
    (centre(gather(bits >> 1), LON_MAX), centre(gather(bits), LAT_MAX))
}

/// `(uint64_t)d` as gcc compiles it for x86-64 (cvttsd2si, with 2^63 subtracted first
/// when `d` is at least that): what Redis reads from a score that is not a geohash.
fn c_double_to_u64(d: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() {
        // Unordered: the compare sends it to cvttsd2si, which gives i64::MIN.
        i64::MIN as u64
    } else if d < TWO_63 {
        // Below i64's range cvttsd2si gives i64::MIN, as the cast saturates to.
        (d as i64) as u64
    } else {
        let low = d - TWO_63;
        let low = if low < TWO_63 { low as i64 } else { i64::MIN };
        (low as u64) ^ (1 << 63)
    }
}

/// Earth's radius as Redis's geohash_helper.c uses it, in meters.
const EARTH_RADIUS_M: f64 = 6_372_797.560856;

fn radians(deg: f64) -> f64 {
    deg * (std::f64::consts::PI / 180.0)
}

/// The haversine distance in meters between two (lon, lat) points, as Redis computes it
/// (a meridian's distance straight from the latitudes when the longitudes' sine is 0).
pub fn distance(a: (f64, f64), b: (f64, f64)) -> f64 {
    let v = ((radians(b.0) - radians(a.0)) / 2.0).sin();
    if v == 0.0 {
        return EARTH_RADIUS_M * (radians(b.1) - radians(a.1)).abs();
    }
    let (lat1, lat2) = (radians(a.1), radians(b.1));
    let u = ((lat2 - lat1) / 2.0).sin();
    let h = u * u + lat1.cos() * lat2.cos() * v * v;
    2.0 * EARTH_RADIUS_M * h.sqrt().asin()
}

/// A distance as GEODIST prints it: four decimals, Redis 7's fixed point (the value
/// times 10^4 rounded half to even) or Redis 6.2's `%.4f`.
fn fmt_distance(d: f64, version: ServerVersion) -> String {
    if version.behaves_as() < ServerVersion::Redis70 {
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
        Some(u) => match unit(u, version) {
            Some(m) => m,
            None if version.behaves_as() < ServerVersion::Redis70 => {
                return Reply::err("ERR unsupported unit provided. please use m, km, ft, mi")
            }
            None => return Reply::err("ERR unsupported unit provided. please use M, KM, FT, MI"),
        },
    };
    let z = match geo_set(ctx, &a[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    match (z.score(&a[2]), z.score(&a[3])) {
        (Some(s1), Some(s2)) => {
            Reply::Bulk(fmt_distance(distance(decode(s1), decode(s2)) / to_meter, version).into_bytes())
        }
        _ => Reply::Nil,
    }
}

/// Meters per unit (Redis's extractUnitOrReply): compared as a C string (up to a NUL), in
/// any case from Redis 7.0, lower case only before.
fn unit(u: &[u8], version: ServerVersion) -> Option<f64> {
    let u = &u[..u.iter().position(|&b| b == 0).unwrap_or(u.len())];
    let same = |n: &str| if version.behaves_as() < ServerVersion::Redis70 { u == n.as_bytes() } else { eq_ic(u, n) };
    [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)].into_iter().find(|(n, _)| same(n)).map(|(_, m)| m)
}

/// The standard geohash alphabet (base 32 without a, i, l, o).
const GEOHASH_ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";

/// GEOHASH key [member ...]: each member's 11-character geohash (latitudes over -90..90,
/// as the standard has them; 52 bits, so the last character is always '0'), or null.
fn geohash_cmd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    per_member(ctx, a, Reply::Nil, |score| {
        let (lon, lat) = decode(score);
        let bits = encode(lon, lat, 90.0);
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
        let (Some(lon), Some(lat)) = (parse_f64(&t[0]), parse_f64(&t[1])) else {
            return Reply::not_float();
        };
        if !(-LON_MAX..=LON_MAX).contains(&lon) || !(-LAT_MAX..=LAT_MAX).contains(&lat) {
            return Reply::error(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"));
        }
        zadd.push(geohash(lon, lat).to_string().into_bytes());
        zadd.push(t[2].clone());
    }
    let reply = super::zset::zadd(ctx, &zadd);
    ctx.rewrite(zadd);
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geohash_of_known_places() {
        // Scores Redis 7.0 stores for GEOADD Sicily 13.361389 38.115556 Palermo
        // 15.087269 37.502669 Catania (ZSCORE after the GEOADD).
        assert_eq!(geohash(13.361389, 38.115556), 3479099956230698);
        assert_eq!(geohash(15.087269, 37.502669), 3479447370796909);
    }

    #[test]
    fn decode_undoes_encode_to_the_cell() {
        for (lon, lat) in [(13.361389, 38.115556), (-122.27652, 37.805186), (179.9, -85.0), (0.0, 0.0)] {
            let (x, y) = decode(geohash(lon, lat) as f64);
            assert!((x - lon).abs() < 1e-5 && (y - lat).abs() < 1e-5, "{lon},{lat} -> {x},{y}");
        }
        assert_eq!(gather(spread(0x03ff_ffff)), 0x03ff_ffff);
    }
}
