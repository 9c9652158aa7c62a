//! Geohash arithmetic as Redis's geohash.c and geohash_helper.c do it: interleaved cell
//! indexes, cells' bounds and neighbours, the haversine distance, and the nine cells a
//! search reads. Every step follows Redis's floating-point operations in the same order,
//! so a search finds exactly the members Redis finds.

use std::cmp::Ordering;

/// The coordinates a geohash covers (Web Mercator's latitude limits).
pub const LON_MAX: f64 = 180.0;
pub const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate of a stored score: 26, interleaved into 52.
pub const STEP_MAX: u32 = 26;

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

/// A geohash cell: `step` bits per coordinate, latitude on the even bits and longitude
/// on the odd ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub bits: u64,
    pub step: u32,
}

/// A cell's bounds in degrees.
#[derive(Debug, Clone, Copy, Default)]
pub struct Area {
    pub lon: (f64, f64),
    pub lat: (f64, f64),
}

impl Cell {
    /// The cell of `step` bits holding a valid pair, latitudes spanning
    /// `-lat_max..lat_max`: each coordinate's offset in its range as a fraction of 2^step.
    pub fn of(lon: f64, lat: f64, lat_max: f64, step: u32) -> Cell {
        let scale = (1u64 << step) as f64;
        let lat_off = (lat - -lat_max) / (lat_max - -lat_max) * scale;
        let lon_off = (lon - -LON_MAX) / (LON_MAX - -LON_MAX) * scale;
        Cell { bits: spread(lat_off as u32) | spread(lon_off as u32) << 1, step }
    }

    /// The 52-bit score of a cell: its bits moved to the top of 52.
    pub fn score_bits(self) -> u64 {
        self.bits << (52 - self.step * 2)
    }

    /// Bounds over -180..180 and `-lat_max..lat_max`: `min + (i / 2^step) * span`.
    pub fn area(self, lat_max: f64) -> Area {
        let scale = (1u64 << self.step) as f64;
        let bounds = |i: u32, max: f64| {
            let span = max - -max;
            (-max + (f64::from(i) / scale) * span, -max + (f64::from(i.wrapping_add(1)) / scale) * span)
        };
        Area { lon: bounds(gather(self.bits >> 1), LON_MAX), lat: bounds(gather(self.bits), lat_max) }
    }

    /// The cell `dx` columns east (or west when negative), wrapping around.
    fn moved_x(self, dx: i8) -> Cell {
        self.moved(dx, 0xaaaa_aaaa_aaaa_aaaa, 0x5555_5555_5555_5555)
    }

    /// The cell `dy` rows north (or south when negative), wrapping around.
    fn moved_y(self, dy: i8) -> Cell {
        self.moved(dy, 0x5555_5555_5555_5555, 0xaaaa_aaaa_aaaa_aaaa)
    }

    /// Add ±1 to the coordinate on the bits of `mine`: the other coordinate's bits within
    /// the cell's width are filled with ones so the carry (or borrow) crosses them.
    fn moved(self, d: i8, mine: u64, other: u64) -> Cell {
        if d == 0 {
            return self;
        }
        let shift = 64 - self.step * 2;
        let fill = other >> shift;
        let v = self.bits & mine;
        let kept = self.bits & other;
        let v = if d > 0 { v.wrapping_add(fill + 1) } else { (v | fill).wrapping_sub(fill + 1) };
        Cell { bits: (v & (mine >> shift)) | kept, step: self.step }
    }
}

/// The centre of the cell a score names, (longitude, latitude), as Redis decodes it: the
/// score as C converts a double to uint64_t on x86-64, each coordinate's cell centre,
/// clamped to the valid range.
pub fn decode(score: f64) -> (f64, f64) {
    let a = Cell { bits: c_double_to_u64(score), step: STEP_MAX }.area(LAT_MAX);
    (((a.lon.0 + a.lon.1) / 2.0).clamp(-LON_MAX, LON_MAX), ((a.lat.0 + a.lat.1) / 2.0).clamp(-LAT_MAX, LAT_MAX))
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

/// `(long long)d` as x86-64 computes it: out of range (or NaN) gives i64::MIN.
pub fn c_double_to_i64(d: f64) -> i64 {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

/// Earth's radius as Redis's geohash_helper.c uses it, in meters.
const EARTH_RADIUS_M: f64 = 6_372_797.560856;
/// Longitudes of the Mercator projection's edges, in meters.
const MERCATOR_MAX: f64 = 20_037_726.37;

fn radians(deg: f64) -> f64 {
    deg * (std::f64::consts::PI / 180.0)
}

fn degrees(rad: f64) -> f64 {
    rad / (std::f64::consts::PI / 180.0)
}

/// How Redis measures: Redis 7.0 and later take a meridian's distance straight from the
/// latitudes; Redis 6.2 runs the full haversine for it too.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    pub meridian_shortcut: bool,
}

impl Metric {
    /// The haversine distance in meters between two (lon, lat) points.
    pub fn distance(self, a: (f64, f64), b: (f64, f64)) -> f64 {
        let v = ((radians(b.0) - radians(a.0)) / 2.0).sin();
        if v == 0.0 && self.meridian_shortcut {
            return lat_distance(a.1, b.1);
        }
        let (lat1, lat2) = (radians(a.1), radians(b.1));
        let u = ((lat2 - lat1) / 2.0).sin();
        let h = u * u + lat1.cos() * lat2.cos() * v * v;
        2.0 * EARTH_RADIUS_M * h.sqrt().asin()
    }

    /// The distance from `centre` to `p` when `p` is in `shape`.
    pub fn within(self, shape: &Shape, p: (f64, f64)) -> Option<f64> {
        let c = shape.centre;
        match shape.kind {
            // Redis leaves a point out when `d > r`: a NaN distance stays in.
            ShapeKind::Radius(r) => {
                Some(self.distance(c, p)).filter(|d| d.partial_cmp(&(r * shape.to_meters)) != Some(Ordering::Greater))
            }
            ShapeKind::Box { width, height } => {
                let (w, h) = (width * shape.to_meters, height * shape.to_meters);
                if self.meridian_shortcut {
                    // Redis 7: the cheap latitude test first.
                    if lat_distance(p.1, c.1) > h / 2.0 || self.distance(p, (c.0, p.1)) > w / 2.0 {
                        return None;
                    }
                } else if self.distance(p, (c.0, p.1)) > w / 2.0 || self.distance(p, (p.0, c.1)) > h / 2.0 {
                    return None;
                }
                Some(self.distance(c, p))
            }
        }
    }
}

/// Distance along a meridian between two latitudes.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (radians(lat2) - radians(lat1)).abs()
}

/// What a search covers around `centre`, in `to_meters` units.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub centre: (f64, f64),
    pub to_meters: f64,
    pub kind: ShapeKind,
}

#[derive(Debug, Clone, Copy)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

impl Shape {
    /// Half the extent north-south and east-west, in meters.
    fn half_extent(&self) -> (f64, f64) {
        match self.kind {
            ShapeKind::Radius(r) => (r * self.to_meters, r * self.to_meters),
            ShapeKind::Box { width, height } => (height / 2.0 * self.to_meters, width / 2.0 * self.to_meters),
        }
    }

    /// (min lon, min lat, max lon, max lat) of the shape's bounding box; longitudes are
    /// widened at the latitude edge nearer the pole.
    fn bounds(&self) -> (f64, f64, f64, f64) {
        let (lon, lat) = self.centre;
        let (height, width) = self.half_extent();
        let lat_delta = degrees(height / EARTH_RADIUS_M);
        let top = degrees(width / EARTH_RADIUS_M / radians(lat + lat_delta).cos());
        let bottom = degrees(width / EARTH_RADIUS_M / radians(lat - lat_delta).cos());
        let lon_delta = if lat < 0.0 { bottom } else { top };
        (lon - lon_delta, lat - lat_delta, lon + lon_delta, lat + lat_delta)
    }

    /// The radius whose circle holds the shape, in meters.
    fn radius_m(&self) -> f64 {
        match self.kind {
            ShapeKind::Radius(r) => r * self.to_meters,
            ShapeKind::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt() * self.to_meters
            }
        }
    }

    /// The cells a search reads, in Redis's order ([`AROUND`]), `None` for the neighbours
    /// the bounding box does not reach.
    pub fn cells(&self) -> [Option<Cell>; 9] {
        let (min_lon, min_lat, max_lon, max_lat) = self.bounds();
        let (lon, lat) = self.centre;
        let mut step = estimate_step(self.radius_m(), lat);
        let mut cell = Cell::of(lon, lat, LAT_MAX, step);
        // A neighbour may still fall short of the box at this step: one step coarser then.
        let short = |c: Cell| {
            c.moved_y(1).area(LAT_MAX).lat.1 < max_lat
                || c.moved_y(-1).area(LAT_MAX).lat.0 > min_lat
                || c.moved_x(1).area(LAT_MAX).lon.1 < max_lon
                || c.moved_x(-1).area(LAT_MAX).lon.0 > min_lon
        };
        if step > 1 && short(cell) {
            step -= 1;
            cell = Cell::of(lon, lat, LAT_MAX, step);
        }
        let area = cell.area(LAT_MAX);
        let mut cells = AROUND.map(|(dx, dy)| Some(cell.moved_x(dx).moved_y(dy)));
        if step >= 2 {
            // Neighbours on a side the box does not cross are not read.
            let (south, north) = (area.lat.0 < min_lat, area.lat.1 > max_lat);
            let (west, east) = (area.lon.0 < min_lon, area.lon.1 > max_lon);
            for (i, (dx, dy)) in AROUND.into_iter().enumerate() {
                if (dy < 0 && south) || (dy > 0 && north) || (dx < 0 && west) || (dx > 0 && east) {
                    cells[i] = None;
                }
            }
        }
        cells
    }
}

/// The nine cells a search reads as (columns east, rows north) of the centre's, in
/// Redis's order: the centre, N, S, E, W, NE, NW, SE, SW.
const AROUND: [(i8, i8); 9] = [(0, 0), (0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1)];

/// The step whose cells are about as large as a search of `range_m` meters at `lat`.
fn estimate_step(range_m: f64, lat: f64) -> u32 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let mut range = range_m;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    // Cells narrow towards the poles.
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_of_known_places() {
        // Scores Redis 7.0 stores for GEOADD Sicily 13.361389 38.115556 Palermo
        // 15.087269 37.502669 Catania (ZSCORE after the GEOADD).
        assert_eq!(Cell::of(13.361389, 38.115556, LAT_MAX, STEP_MAX).bits, 3479099956230698);
        assert_eq!(Cell::of(15.087269, 37.502669, LAT_MAX, STEP_MAX).bits, 3479447370796909);
    }

    #[test]
    fn decode_undoes_encode_to_the_cell() {
        for (lon, lat) in [(13.361389, 38.115556), (-122.27652, 37.805186), (179.9, -85.0), (0.0, 0.0)] {
            let (x, y) = decode(Cell::of(lon, lat, LAT_MAX, STEP_MAX).bits as f64);
            assert!((x - lon).abs() < 1e-5 && (y - lat).abs() < 1e-5, "{lon},{lat} -> {x},{y}");
        }
        assert_eq!(gather(spread(0x03ff_ffff)), 0x03ff_ffff);
    }

    #[test]
    fn neighbours_are_adjacent_and_wrap() {
        let c = Cell::of(10.0, 10.0, LAT_MAX, 10);
        let (a, e, n) = (c.area(LAT_MAX), c.moved_x(1).area(LAT_MAX), c.moved_y(1).area(LAT_MAX));
        assert_eq!(a.lon.1, e.lon.0);
        assert_eq!(a.lat.1, n.lat.0);
        assert_eq!(c.moved_x(1).moved_x(-1), c);
        let west_edge = Cell::of(-180.0, 0.0, LAT_MAX, 4);
        assert_eq!(west_edge.moved_x(-1).area(LAT_MAX).lon.1, 180.0);
    }
}
