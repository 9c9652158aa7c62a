//! `rdbtool memory --html FILE`: the report as one self-contained page (no scripts, no
//! network): totals, a treemap of the key prefixes, the type/encoding breakdown, the
//! biggest keys, the histograms. The whole JSON report is embedded in it
//! (`<script type="application/json" id="report">`) for tools that read the page.

use std::fmt::Write as _;

use ferrokv::format::rdb::escape_key;

use super::{human, json, share, MemoryReport, Tally, ELEMENT_CLASSES, SIZE_CLASSES, TTL_CLASSES};

/// Text made safe inside HTML elements and attributes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A rectangle of the treemap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

/// Squarified treemap (Bruls, Huizing, van Wijk): `values` (largest first) laid out in
/// `area`, rows along the shorter side, each row grown while its worst aspect ratio
/// improves. One cell per value, in order.
pub fn treemap(values: &[f64], area: Cell) -> Vec<Cell> {
    let total: f64 = values.iter().sum();
    let mut out = Vec::with_capacity(values.len());
    if total <= 0.0 || values.is_empty() {
        return out;
    }
    let areas: Vec<f64> = values.iter().map(|v| v * area.w * area.h / total).collect();
    let mut rest = area;
    let mut i = 0;
    while i < values.len() {
        let side = rest.w.min(rest.h);
        // The worst aspect ratio of a row of these areas along `side`.
        let worst = |row: &[f64]| {
            let sum: f64 = row.iter().sum();
            let (max, min) = row.iter().fold((0f64, f64::MAX), |(a, b), &v| (a.max(v), b.min(v)));
            let s2 = sum * sum;
            let w2 = side * side;
            (w2 * max / s2).max(s2 / (w2 * min))
        };
        let mut j = i + 1;
        while j < values.len() && worst(&areas[i..=j]) <= worst(&areas[i..j]) {
            j += 1;
        }
        let row = &areas[i..j];
        let sum: f64 = row.iter().sum();
        let thick = if side > 0.0 { sum / side } else { 0.0 };
        let mut at = 0.0;
        for &a in row {
            let len = if thick > 0.0 { a / thick } else { 0.0 };
            out.push(if rest.w >= rest.h {
                Cell { x: rest.x, y: rest.y + at, w: thick, h: len }
            } else {
                Cell { x: rest.x + at, y: rest.y, w: len, h: thick }
            });
            at += len;
        }
        rest = if rest.w >= rest.h {
            Cell { x: rest.x + thick, w: (rest.w - thick).max(0.0), ..rest }
        } else {
            Cell { y: rest.y + thick, h: (rest.h - thick).max(0.0), ..rest }
        };
        i = j;
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}\
h1{font-size:20px}h2{font-size:16px;margin-top:28px}table{border-collapse:collapse}\
td,th{padding:3px 10px;text-align:right;border-bottom:1px solid #eee}td.l,th.l{text-align:left}\
.bar{background:#4a7fb5;height:12px;display:inline-block}.k{font-family:monospace}\
.sum{display:flex;gap:28px;flex-wrap:wrap}.sum div{background:#f4f6f9;padding:8px 14px;border-radius:6px}\
.sum b{display:block;font-size:18px}svg text{font:11px system-ui,sans-serif;fill:#fff;pointer-events:none}";

/// Rows of a class histogram: name, keys, bytes, a bar by share of the data.
fn histogram(s: &mut String, id: &str, title: &str, names: &[&str], tallies: &[Tally], whole: u64) {
    let _ = write!(
        s,
        "<h2>{title}</h2><table id=\"{id}\"><tr><th class=l>class</th><th>keys</th><th>allocated</th><th class=l></th></tr>"
    );
    for (name, t) in names.iter().zip(tallies) {
        let pct = if whole == 0 { 0.0 } else { t.allocated as f64 * 100.0 / whole as f64 };
        let _ = write!(
            s,
            "<tr data-keys=\"{}\" data-allocated=\"{}\"><td class=l>{}</td><td>{}</td><td>{}</td><td class=l><span class=bar style=\"width:{:.1}px\"></span> {}</td></tr>",
            t.keys,
            t.allocated,
            esc(name),
            t.keys,
            human(t.allocated),
            pct * 3.0,
            share(t.allocated, whole)
        );
    }
    s.push_str("</table>");
}

/// The page for report `r` of file `name`.
pub fn page(r: &MemoryReport, name: &str) -> String {
    let whole = r.total.allocated;
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>rdbtool memory: {}</title><style>{STYLE}</style></head><body>",
        esc(name)
    );
    let _ = write!(s, "<h1>Where the memory goes: {}</h1>", esc(name));
    let _ = write!(
        s,
        "<div class=sum id=totals data-keys=\"{}\" data-total=\"{}\" data-dataset=\"{}\" data-usage=\"{}\">\
         <div>modelled server<b>{}</b></div><div>keys<b>{}</b></div><div>total<b>{}</b></div>\
         <div>their data (used_memory_dataset)<b>{}</b></div><div>the databases' tables<b>{}</b></div>\
         <div>MEMORY USAGE would sum to<b>{}</b></div></div>",
        r.total.keys,
        r.total_bytes(),
        r.total.allocated,
        r.total.bytes,
        esc(&r.version.display()),
        r.total.keys,
        human(r.total_bytes()),
        human(r.total.allocated),
        human(r.tables_bytes()),
        human(r.total.bytes)
    );
    if !r.config.is_empty() {
        let set: Vec<String> = r.config.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = write!(s, "<p>With the thresholds of --config: {}</p>", esc(&set.join(", ")));
    }

    // The treemap of the first-level prefixes, biggest first; past 300 the rest is one cell.
    let mut pre: Vec<(String, Tally)> =
        r.prefixes.iter().filter(|(_, (d, _))| *d == 1).map(|(p, (_, t))| (escape_key(p), *t)).collect();
    pre.sort_by(|a, b| b.1.allocated.cmp(&a.1.allocated).then_with(|| a.0.cmp(&b.0)));
    let mut other = r.other_prefixes;
    for (_, t) in pre.iter().skip(300) {
        other.keys += t.keys;
        other.bytes += t.bytes;
        other.allocated += t.allocated;
    }
    pre.truncate(300);
    if other.keys > 0 {
        pre.push(("(other prefixes)".into(), other));
    }
    pre.retain(|(_, t)| t.allocated > 0);
    let (w, h) = (1100.0, 460.0);
    let cells =
        treemap(&pre.iter().map(|(_, t)| t.allocated as f64).collect::<Vec<_>>(), Cell { x: 0.0, y: 0.0, w, h });
    let _ = write!(s, "<h2>Key prefixes</h2><svg id=treemap width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">");
    for (i, ((p, t), c)) in pre.iter().zip(&cells).enumerate() {
        let hue = (i * 47) % 360;
        let _ = write!(
            s,
            "<g><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"hsl({hue},45%,45%)\" stroke=\"#fff\"><title>{}: {} keys, {} ({})</title></rect>",
            c.x,
            c.y,
            c.w,
            c.h,
            esc(p),
            t.keys,
            human(t.allocated),
            share(t.allocated, whole)
        );
        if c.w > 60.0 && c.h > 18.0 {
            let chars = ((c.w - 8.0) / 6.5) as usize;
            let label: String = p.chars().take(chars).collect();
            let _ = write!(s, "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>", c.x + 4.0, c.y + 14.0, esc(&label));
            if c.h > 34.0 {
                let size = format!("{} · {}", human(t.allocated), share(t.allocated, whole));
                let _ = write!(s, "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>", c.x + 4.0, c.y + 28.0, esc(&size));
            }
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");

    let mut enc: Vec<_> = r.by_encoding.iter().collect();
    enc.sort_by_key(|e| std::cmp::Reverse(e.1.allocated));
    s.push_str("<h2>By type and encoding</h2><table id=encodings><tr><th class=l>type</th><th class=l>encoding</th><th>keys</th><th>allocated</th><th class=l></th></tr>");
    for ((kind, encoding), t) in enc {
        let pct = if whole == 0 { 0.0 } else { t.allocated as f64 * 100.0 / whole as f64 };
        let _ = write!(
            s,
            "<tr data-keys=\"{}\" data-allocated=\"{}\"><td class=l>{kind}</td><td class=l>{encoding}</td><td>{}</td><td>{}</td><td class=l><span class=bar style=\"width:{:.1}px\"></span> {}</td></tr>",
            t.keys,
            t.allocated,
            t.keys,
            human(t.allocated),
            pct * 3.0,
            share(t.allocated, whole)
        );
    }
    s.push_str("</table>");

    let _ = write!(s, "<h2>The {} biggest keys (as MEMORY USAGE answers)</h2><table id=top><tr><th>bytes</th><th class=l>db</th><th class=l>type</th><th class=l>encoding</th><th>elements</th><th class=l>key</th></tr>", r.top.len());
    for c in &r.top {
        let _ = write!(
            s,
            "<tr data-bytes=\"{}\"><td>{}</td><td class=l>{}</td><td class=l>{}</td><td class=l>{}</td><td>{}</td><td class=\"l k\">{}</td></tr>",
            c.bytes,
            human(c.bytes as u64),
            c.db,
            c.kind,
            c.encoding,
            c.elements,
            esc(&escape_key(&c.key))
        );
    }
    s.push_str("</table>");

    let names = |c: &[(&'static str, usize)]| c.iter().map(|x| x.0).collect::<Vec<_>>();
    histogram(&mut s, "sizes", "Key sizes", &names(&SIZE_CLASSES), &r.sizes, whole);
    histogram(&mut s, "elements", "Elements per key", &names(&ELEMENT_CLASSES), &r.element_counts, whole);
    histogram(&mut s, "ttl", "TTL left", &TTL_CLASSES, &r.ttls, whole);
    if !r.conversions.is_empty() {
        s.push_str("<h2>Keys the server holds in another encoding than the file's</h2><table id=conversions><tr><th class=l>type</th><th class=l>file</th><th class=l>server</th><th>keys</th><th>allocated</th></tr>");
        for ((kind, from, to), t) in &r.conversions {
            let _ = write!(
                s,
                "<tr><td class=l>{kind}</td><td class=l>{from}</td><td class=l>{to}</td><td>{}</td><td>{}</td></tr>",
                t.keys,
                human(t.allocated)
            );
        }
        s.push_str("</table>");
    }
    // The JSON report, with `<` escaped so that no string in it can end the script element.
    let data = json(r, name).trim_end().replace('<', "\\u003c");
    let _ = writeln!(s, "<script type=\"application/json\" id=report>{data}</script></body></html>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn treemap_fills_the_area_in_proportion() {
        let values = [6.0, 6.0, 4.0, 3.0, 2.0, 2.0, 1.0];
        let area = Cell { x: 0.0, y: 0.0, w: 6.0, h: 4.0 };
        let cells = treemap(&values, area);
        assert_eq!(cells.len(), values.len());
        for (v, c) in values.iter().zip(&cells) {
            assert!((c.w * c.h - v).abs() < 1e-9, "{v} -> {c:?}");
            assert!(c.x >= -1e-9 && c.y >= -1e-9 && c.x + c.w <= 6.0 + 1e-9 && c.y + c.h <= 4.0 + 1e-9, "{c:?}");
        }
        // The first row is the paper's: 6 and 6 stacked along the shorter side.
        assert_eq!((cells[0].w, cells[0].h), (3.0, 2.0));
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
