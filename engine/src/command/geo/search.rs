//! GEORADIUS, GEORADIUSBYMEMBER (and their _RO forms), GEOSEARCH and GEOSEARCHSTORE: one
//! search as Redis's georadiusGeneric runs it. The arguments are read in Redis's order (so
//! the first error is Redis's), the nine cells around the centre are read in Redis's
//! order, and the members found are sorted by distance only when asked (or when COUNT
//! needs the nearest), so replies and stored sets come out as Redis's do.

use super::cell::{c_double_to_i64, decode, Cell, Metric, Shape, ShapeKind};
use super::{coordinate, fmt_distance, lon_lat, metric, to_meters};
use crate::command::catalog::ServerVersion;
use crate::command::pqsort::partial_sort;
use crate::command::{arg_i64, eq_ic, parse_f64, zset, Ctx, Reply};
use crate::value::{Limits, Zset};

/// Which command runs the search.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS key lon lat radius unit ...
    Coords { store_allowed: bool },
    /// GEORADIUSBYMEMBER key member radius unit ...
    Member { store_allowed: bool },
    /// GEOSEARCH key FROM... BY... ...
    Search,
    /// GEOSEARCHSTORE dst key FROM... BY... ...
    SearchStore,
}

impl Form {
    fn is_search(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }

    fn store_allowed(self) -> bool {
        matches!(self, Form::Coords { store_allowed: true } | Form::Member { store_allowed: true })
    }
}

pub fn georadius(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    search(ctx, a, Form::Coords { store_allowed: true })
}

pub fn georadius_ro(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    search(ctx, a, Form::Coords { store_allowed: false })
}

pub fn georadiusbymember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    search(ctx, a, Form::Member { store_allowed: true })
}

pub fn georadiusbymember_ro(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    search(ctx, a, Form::Member { store_allowed: false })
}

pub fn geosearch(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    search(ctx, a, Form::Search)
}

pub fn geosearchstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    search(ctx, a, Form::SearchStore)
}

/// GEORADIUS and GEORADIUSBYMEMBER's keys: the source, and the last STORE or STOREDIST
/// key named from the sixth argument on (Redis's georadiusGetKeys).
pub fn georadius_keys(a: &[Vec<u8>]) -> Vec<usize> {
    let mut store = None;
    let mut i = 5;
    while i < a.len() {
        if (eq_ic(&a[i], "store") || eq_ic(&a[i], "storedist")) && i + 1 < a.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    std::iter::once(1).chain(store).collect()
}

/// A member found in the shape.
struct Found {
    member: Vec<u8>,
    score: f64,
    pos: (f64, f64),
    dist: f64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// The options after the fixed arguments.
struct Options {
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    any: bool,
    sort: Sort,
    /// 0: no limit.
    count: i64,
    store: Option<Vec<u8>>,
    store_dist: bool,
    from_member: bool,
    from_lonlat: bool,
    by_radius: bool,
    by_box: bool,
}

/// A radius and its unit (extractDistanceOrReply): (radius, meters per unit).
fn radius_arg(a: &[Vec<u8>], version: ServerVersion) -> Result<(f64, f64), Reply> {
    let r = parse_f64(&a[0]).ok_or_else(|| Reply::err("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(Reply::err("ERR radius cannot be negative"));
    }
    Ok((r, to_meters(&a[1], version)?))
}

/// A box's width, height and unit (extractBoxOrReply).
fn box_arg(a: &[Vec<u8>], version: ServerVersion) -> Result<(f64, f64, f64), Reply> {
    let w = parse_f64(&a[0]).ok_or_else(|| Reply::err("ERR need numeric width"))?;
    let h = parse_f64(&a[1]).ok_or_else(|| Reply::err("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(Reply::err("ERR height or width cannot be negative"));
    }
    Ok((w, h, to_meters(&a[2], version)?))
}

/// The position of `member` in `z` (longLatFromMember).
fn member_pos(z: &Zset, member: &[u8]) -> Result<(f64, f64), Reply> {
    z.score(member).map(decode).ok_or_else(|| Reply::err("ERR could not decode requested zset member"))
}

fn search(ctx: &mut Ctx<'_>, a: &[Vec<u8>], form: Form) -> Reply {
    let version = ctx.cfg.version;
    let limits = ctx.cfg.limits;
    let src_at = if form == Form::SearchStore { 2 } else { 1 };
    let z = match super::geo_set(ctx, &a[src_at]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    let mut shape = Shape { centre: (0.0, 0.0), to_meters: 1.0, kind: ShapeKind::Radius(0.0) };
    let mut opts = Options {
        with_dist: false,
        with_hash: false,
        with_coord: false,
        any: false,
        sort: Sort::None,
        count: 0,
        store: None,
        store_dist: false,
        from_member: false,
        from_lonlat: false,
        by_radius: false,
        by_box: false,
    };
    let base = match form {
        Form::Coords { .. } => {
            shape.centre = match lon_lat(&a[2], &a[3]) {
                Ok(p) => p,
                Err(e) => return e,
            };
            match radius_arg(&a[4..6], version) {
                Ok((r, m)) => (shape.kind, shape.to_meters) = (ShapeKind::Radius(r), m),
                Err(e) => return e,
            }
            6
        }
        Form::Member { .. } => {
            // Without a source the rest is still parsed, for the reply's shape.
            if let Some(z) = z {
                shape.centre = match member_pos(z, &a[2]) {
                    Ok(p) => p,
                    Err(e) => return e,
                };
                match radius_arg(&a[3..5], version) {
                    Ok((r, m)) => (shape.kind, shape.to_meters) = (ShapeKind::Radius(r), m),
                    Err(e) => return e,
                }
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            opts.store = Some(a[1].clone());
            3
        }
    };
    if let Err(e) = parse_options(a, base, form, z, version, &mut shape, &mut opts) {
        return e;
    }
    if opts.store.is_some() && (opts.with_dist || opts.with_hash || opts.with_coord) {
        return Reply::err(match form {
            _ if version.is_redis62() => {
                "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORDS options"
            }
            Form::SearchStore => "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            _ => "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
        });
    }
    let name = String::from_utf8_lossy(&a[0]);
    if form.is_search() && !(opts.from_member || opts.from_lonlat) {
        return Reply::error(format!("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"));
    }
    if form.is_search() && !(opts.by_radius || opts.by_box) {
        return Reply::error(format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"));
    }
    if opts.any && opts.count == 0 {
        return Reply::err("ERR the ANY argument requires COUNT argument");
    }
    let Some(z) = z else {
        return match opts.store {
            Some(dst) => zset::store_result(ctx, &dst, Zset::default(), "", 0),
            None => Reply::Array(Vec::new()),
        };
    };
    // COUNT keeps the nearest, so it sorts unless ANY takes the first found.
    if opts.count != 0 && opts.sort == Sort::None && !opts.any {
        opts.sort = Sort::Asc;
    }
    let limit = if opts.any { opts.count as usize } else { 0 };
    let mut found = members_in(z, &shape, metric(version), limit);
    if found.is_empty() && opts.store.is_none() {
        return Reply::Array(Vec::new());
    }
    // A total order: a distance can be NaN (antipodes, where rounding takes asin past 1).
    let asc = |x: &Found, y: &Found| x.dist.total_cmp(&y.dist);
    let desc = |x: &Found, y: &Found| asc(x, y).reverse();
    let returned = if opts.count == 0 { found.len() } else { found.len().min(opts.count as usize) };
    // Redis sorts with the C library's qsort (glibc's is a stable merge sort) or, when
    // COUNT keeps fewer, its own partial quicksort, whose order of equal distances differs.
    match (opts.sort, returned < found.len()) {
        (Sort::None, _) => {}
        (Sort::Asc, false) => found.sort_by(asc),
        (Sort::Desc, false) => found.sort_by(desc),
        (Sort::Asc, true) => partial_sort(&mut found, (0, returned - 1), &asc),
        (Sort::Desc, true) => partial_sort(&mut found, (0, returned - 1), &desc),
    }
    found.truncate(returned);
    for f in &mut found {
        f.dist /= shape.to_meters;
    }
    match opts.store {
        None => reply(found, &opts, version),
        Some(dst) => store(ctx, &dst, found, opts.store_dist, form.is_search(), &limits),
    }
}

/// The options from `a[base..]`, in Redis's order; FROMMEMBER, FROMLONLAT, BYRADIUS and
/// BYBOX fill `shape` as they come.
fn parse_options(
    a: &[Vec<u8>],
    base: usize,
    form: Form,
    z: Option<&Zset>,
    version: ServerVersion,
    shape: &mut Shape,
    o: &mut Options,
) -> Result<(), Reply> {
    let search = form.is_search();
    let mut i = base;
    while i < a.len() {
        let arg = &a[i];
        let left = a.len() - i - 1;
        if eq_ic(arg, "withdist") {
            o.with_dist = true;
        } else if eq_ic(arg, "withhash") {
            o.with_hash = true;
        } else if eq_ic(arg, "withcoord") {
            o.with_coord = true;
        } else if eq_ic(arg, "any") {
            o.any = true;
        } else if eq_ic(arg, "asc") {
            o.sort = Sort::Asc;
        } else if eq_ic(arg, "desc") {
            o.sort = Sort::Desc;
        } else if eq_ic(arg, "count") && left >= 1 {
            o.count = arg_i64(&a[i + 1])?;
            if o.count <= 0 {
                return Err(Reply::err("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (eq_ic(arg, "store") || eq_ic(arg, "storedist")) && left >= 1 && form.store_allowed() {
            o.store = Some(a[i + 1].clone());
            o.store_dist = eq_ic(arg, "storedist");
            i += 1;
        } else if eq_ic(arg, "storedist") && form == Form::SearchStore {
            o.store_dist = true;
        } else if eq_ic(arg, "frommember") && left >= 1 && search && !o.from_lonlat {
            if let Some(z) = z {
                shape.centre = member_pos(z, &a[i + 1])?;
            }
            o.from_member = true;
            i += 1;
        } else if eq_ic(arg, "fromlonlat") && left >= 2 && search && !o.from_member {
            shape.centre = lon_lat(&a[i + 1], &a[i + 2])?;
            o.from_lonlat = true;
            i += 2;
        } else if eq_ic(arg, "byradius") && left >= 2 && search && !o.by_box {
            let (r, m) = radius_arg(&a[i + 1..i + 3], version)?;
            (shape.kind, shape.to_meters) = (ShapeKind::Radius(r), m);
            o.by_radius = true;
            i += 2;
        } else if eq_ic(arg, "bybox") && left >= 3 && search && !o.by_radius {
            let (width, height, m) = box_arg(&a[i + 1..i + 4], version)?;
            (shape.kind, shape.to_meters) = (ShapeKind::Box { width, height }, m);
            o.by_box = true;
            i += 3;
        } else {
            return Err(Reply::syntax());
        }
        i += 1;
    }
    Ok(())
}

/// The members of `z` in `shape`: each of the nine cells' score range in turn (a cell
/// equal to the last one read is skipped), members in score order, stopping at `limit`
/// when it is not 0 (ANY).
fn members_in(z: &Zset, shape: &Shape, metric: Metric, limit: usize) -> Vec<Found> {
    let mut found = Vec::new();
    let full = |found: &Vec<Found>| limit != 0 && found.len() >= limit;
    let cells = shape.cells();
    let mut last = 0;
    for (i, cell) in cells.iter().enumerate() {
        let Some(cell) = *cell else { continue };
        // Redis compares with the last cell read only once one past the centre was read.
        if last != 0 && cells[last] == Some(cell) {
            continue;
        }
        if full(&found) {
            break;
        }
        let min = cell.score_bits() as f64;
        let max = Cell { bits: cell.bits + 1, step: cell.step }.score_bits() as f64;
        let start = z.partition_point(|_, s| s < min);
        for (m, score) in z.range(start, z.len()) {
            if score >= max {
                break;
            }
            let pos = decode(score);
            if let Some(dist) = metric.within(shape, pos) {
                found.push(Found { member: m.to_vec(), score, pos, dist });
            }
            if full(&found) {
                break;
            }
        }
        last = i;
    }
    found
}

/// The reply: members, or per member an array of the member and what WITH... asks for.
fn reply(found: Vec<Found>, o: &Options, version: ServerVersion) -> Reply {
    let nested = o.with_dist || o.with_hash || o.with_coord;
    Reply::Array(
        found
            .into_iter()
            .map(|f| {
                if !nested {
                    return Reply::Bulk(f.member);
                }
                let mut item = vec![Reply::Bulk(f.member)];
                if o.with_dist {
                    item.push(Reply::Bulk(fmt_distance(f.dist, version).into_bytes()));
                }
                if o.with_hash {
                    item.push(Reply::Int(c_double_to_i64(f.score)));
                }
                if o.with_coord {
                    item.push(Reply::Array(vec![coordinate(f.pos.0), coordinate(f.pos.1)]));
                }
                Reply::Array(item)
            })
            .collect(),
    )
}

/// STORE / STOREDIST / GEOSEARCHSTORE: the members found under their scores (or their
/// distances in the unit asked), built as a skiplist and made a listpack when small.
fn store(ctx: &mut Ctx<'_>, dst: &[u8], found: Vec<Found>, by_dist: bool, search: bool, limits: &Limits) -> Reply {
    let mut z = Zset::Skiplist(Default::default());
    for f in &found {
        z.insert(&f.member, if by_dist { f.dist } else { f.score }, limits);
    }
    z.shrink_if_small(limits);
    let event = if search { "geosearchstore" } else { "georadiusstore" };
    zset::store_result(ctx, dst, z, event, found.len() as u64)
}
