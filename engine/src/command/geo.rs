//! GEOADD (geo.c): members go into a sorted set under their 52-bit geohash as the score,
//! and the command runs and propagates as the ZADD it stands for, as in Redis. The other
//! GEO commands are not built yet.

use super::flags::*;
use super::{eq_ic, parse_f64, Ctx, Reply, Spec};

pub const SPECS: &[Spec] = &[Spec::new("geoadd", -5, WRITE | DENYOOM, (1, 1, 1), geoadd)];

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

/// The geohash of a valid pair: each coordinate's offset in its range as a 26-bit
/// fraction, latitude on the even bits and longitude on the odd ones.
pub fn geohash(lon: f64, lat: f64) -> u64 {
    let scale = f64::from(1u32 << STEP);
    let lat_off = (lat - -LAT_MAX) / (LAT_MAX - -LAT_MAX) * scale;
    let lon_off = (lon - -LON_MAX) / (LON_MAX - -LON_MAX) * scale;
    spread(lat_off as u32) | spread(lon_off as u32) << 1
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
}
