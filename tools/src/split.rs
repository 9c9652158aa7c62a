//! `rdbtool split FILE --out DIR (--slots RANGES | --shards N | --by-node URL)`: one RDB
//! per shard of a Redis Cluster, each key in the file of the shard that owns its hash slot. Records are
//! copied as they are (no decoding, nothing re-encoded: every version the file's own),
//! with the file's aux fields, function libraries and module aux data in every shard (a
//! cluster's masters each hold the functions). A cluster has only database 0: a file with
//! keys in another one is refused unless `--db N` names the database to split, whose keys
//! are written into database 0. Each output is written to a temporary file beside its
//! name and renamed when complete; nothing is left behind on an error.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ferrokv::format::crc::{hash_slot, Crc64, CLUSTER_SLOTS};
use ferrokv::format::rdb::{escape_key, put_select_db, RdbError, RdbReader, Record};

use crate::out::{AtomicFile, ToolError};

/// Arguments of `rdbtool split`.
#[derive(clap::Args, Debug)]
pub struct SplitArgs {
    /// RDB file.
    pub file: PathBuf,
    /// Directory for the shards' files (`shard-0.rdb`, `shard-1.rdb`, ...); created if missing.
    #[arg(long)]
    pub out: PathBuf,
    /// The shards' slots, one shard per comma-separated item; a shard owning several
    /// ranges joins them with `+`: `0-5460,5461-10922,10923-16383` or `0-99+200-299,100-199+300-16383`.
    #[arg(long, conflicts_with_all = ["shards", "by_node"], required_unless_present_any = ["shards", "by_node"])]
    pub slots: Option<String>,
    /// N shards with even slot ranges, as `redis-cli --cluster create` assigns them.
    #[arg(long, conflicts_with = "by_node")]
    pub shards: Option<usize>,
    /// One shard per master of a running cluster (redis://[user:password@]host:port, any
    /// node; rediss:// for TLS), with the slots it serves now (CLUSTER SLOTS). Every slot
    /// must be served.
    #[arg(long, value_name = "URL")]
    pub by_node: Option<String>,
    #[command(flatten)]
    pub tls: crate::net::TlsArgs,
    /// The database to split (its keys go into database 0). Without it, a key in a
    /// database other than 0 is an error.
    #[arg(long)]
    pub db: Option<u64>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The slots of each shard.
pub type Layout = Vec<Vec<(u16, u16)>>;

/// Even ranges for `n` shards, as redis-cli's `--cluster create` assigns them.
pub fn even_layout(n: usize) -> Result<Layout, ToolError> {
    if n == 0 || n > CLUSTER_SLOTS as usize {
        return Err(ToolError::Usage(format!("--shards must be 1 to {CLUSTER_SLOTS}, not {n}")));
    }
    let per = CLUSTER_SLOTS as f64 / n as f64;
    let (mut first, mut cursor) = (0i64, 0f64);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut last = (cursor + per - 1.0).round() as i64;
        if last > CLUSTER_SLOTS as i64 - 1 || i == n - 1 {
            last = CLUSTER_SLOTS as i64 - 1;
        }
        last = last.max(first);
        out.push(vec![(first as u16, last as u16)]);
        first = last + 1;
        cursor += per;
    }
    Ok(out)
}

/// `--slots`: every slot in exactly one shard.
pub fn parse_layout(text: &str) -> Result<Layout, ToolError> {
    let bad = |what: String| ToolError::Usage(format!("--slots: {what}"));
    let mut owner = vec![None; CLUSTER_SLOTS as usize];
    let mut out = Vec::new();
    for (shard, item) in text.split(',').enumerate() {
        let mut ranges = Vec::new();
        for range in item.split('+') {
            let (a, b) = range.trim().split_once('-').unwrap_or((range.trim(), range.trim()));
            let slot = |s: &str| -> Result<u16, ToolError> {
                s.parse::<u16>()
                    .ok()
                    .filter(|&n| n < CLUSTER_SLOTS)
                    .ok_or_else(|| bad(format!("'{s}' is not a slot (0-{})", CLUSTER_SLOTS - 1)))
            };
            let (first, last) = (slot(a)?, slot(b)?);
            if first > last {
                return Err(bad(format!("range {first}-{last} runs backwards")));
            }
            for s in first..=last {
                if let Some(other) = owner[s as usize].replace(shard) {
                    return Err(bad(format!("slot {s} is in shard {other} and shard {shard}")));
                }
            }
            ranges.push((first, last));
        }
        out.push(ranges);
    }
    if let Some(s) = owner.iter().position(|o| o.is_none()) {
        return Err(bad(format!("slot {s} is in no shard")));
    }
    Ok(out)
}

/// What went to one shard.
#[derive(Debug, Clone, Default)]
pub struct ShardSummary {
    pub file: PathBuf,
    /// The master it is for (`--by-node`).
    pub node: Option<String>,
    pub slots: Vec<(u16, u16)>,
    pub keys: u64,
    pub bytes: u64,
}

/// What split did.
#[derive(Debug, Clone, Default)]
pub struct SplitSummary {
    pub shards: Vec<ShardSummary>,
    /// Keys of databases `--db` did not name, left out.
    pub skipped: u64,
}

/// One shard's output while it is written (removed unless it completes).
struct ShardFile {
    file: AtomicFile,
    w: BufWriter<File>,
    crc: Crc64,
    summary: ShardSummary,
}

impl ShardFile {
    fn put(&mut self, bytes: &[u8]) -> Result<(), ToolError> {
        self.crc.update(bytes);
        self.w.write_all(bytes)?;
        self.summary.bytes += bytes.len() as u64;
        Ok(())
    }
}

/// Split `data` (an RDB) into `layout`'s shards, in `dir`; `release(offset)` is told when
/// everything before `offset` has been copied (its mapped pages may go).
pub fn split(
    data: &[u8],
    layout: &Layout,
    dir: &Path,
    db: Option<u64>,
    release: &dyn Fn(usize),
) -> Result<SplitSummary, ToolError> {
    let mut reader = RdbReader::new(data)?;
    let version = reader.dialect().version;
    std::fs::create_dir_all(dir).map_err(|e| ToolError::Usage(format!("cannot create {}: {e}", dir.display())))?;
    let mut shard_of = vec![0usize; CLUSTER_SLOTS as usize];
    for (i, ranges) in layout.iter().enumerate() {
        for &(a, b) in ranges {
            for s in a..=b {
                shard_of[s as usize] = i;
            }
        }
    }
    let mut files = Vec::with_capacity(layout.len());
    for (i, ranges) in layout.iter().enumerate() {
        let path = dir.join(format!("shard-{i}.rdb"));
        let (file, f) = AtomicFile::new(&path)?;
        let summary = ShardSummary { file: path, slots: ranges.clone(), ..Default::default() };
        files.push(ShardFile { file, w: BufWriter::with_capacity(1 << 20, f), crc: Crc64::new(), summary });
    }
    // The magic and version, then every record but the keys' to every shard until the
    // first database; then each key to its shard.
    let magic = &data[..reader.position()];
    for f in &mut files {
        f.put(magic)?;
    }
    let mut current_db = 0;
    let mut selected = vec![false; layout.len()];
    let mut skipped = 0;
    let mut progress = crate::progress::Progress::new(data.len() as u64);
    let mut released = 0;
    loop {
        let start = reader.position();
        if start - released >= 32 << 20 {
            release(start);
            progress.set(start as u64);
            released = start;
        }
        let Some(rec) = reader.next() else {
            return Err(ToolError::Data(RdbError::at(start, "the file ends before its EOF marker")));
        };
        let end = reader.position();
        match rec? {
            Record::Aux { .. } | Record::ModuleAux(_) | Record::Function { .. } | Record::FunctionPreGa { .. } => {
                for f in &mut files {
                    f.put(&data[start..end])?;
                }
            }
            Record::SelectDb { db: d, .. } => current_db = d,
            // Sizes are the whole file's: each shard's own table sizes itself as it loads.
            Record::ResizeDb { .. } | Record::SlotInfo { .. } | Record::SlotImport { .. } => {}
            Record::Key(k) => {
                let wanted = db.unwrap_or(0);
                if current_db != wanted {
                    if db.is_some() {
                        skipped += 1;
                        continue;
                    }
                    return Err(ToolError::Usage(format!(
                        "db {current_db} key '{}' (offset {}): a cluster has only database 0; --db {current_db} splits that database's keys instead",
                        escape_key(&k.key.to_bytes()),
                        k.offset
                    )));
                }
                let shard = shard_of[hash_slot(&k.key.to_bytes()) as usize];
                let f = &mut files[shard];
                if !selected[shard] {
                    let mut select = Vec::new();
                    put_select_db(&mut select, 0, None);
                    f.put(&select)?;
                    selected[shard] = true;
                }
                f.put(&data[start..end])?;
                f.summary.keys += 1;
            }
            Record::Eof { .. } => break,
        }
    }
    progress.finish();
    for f in &mut files {
        f.put(&[0xFF])?;
        if version >= 5 {
            let crc = f.crc.finish().to_le_bytes();
            f.w.write_all(&crc)?;
            f.summary.bytes += 8;
        }
    }
    let mut summary = SplitSummary { shards: Vec::new(), skipped };
    for f in files {
        let w = f.w.into_inner().map_err(|e| ToolError::Io(e.into_error()))?;
        f.file.commit(w)?;
        summary.shards.push(f.summary);
    }
    Ok(summary)
}

fn ranges_text(r: &[(u16, u16)]) -> String {
    r.iter().map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect::<Vec<_>>().join("+")
}

/// `rdbtool split` as the binary runs it.
pub fn run_cli(args: &SplitArgs, src: &ferrokv::Source, w: &mut dyn Write) -> Result<(), ToolError> {
    let mut nodes = Vec::new();
    let layout = match (&args.slots, args.shards, &args.by_node) {
        (Some(text), _, _) => parse_layout(text)?,
        (None, Some(n), _) => even_layout(n)?,
        (None, None, Some(url)) => {
            let (addr, access) = crate::net::parse_url(url, &args.tls).map_err(ToolError::Usage)?;
            let topo = crate::restore::Topology::discover(&[addr], &access)
                .map_err(|e| ToolError::Usage(format!("cannot reach {url}: {e}")))?;
            if !topo.cluster {
                return Err(ToolError::Usage(format!("{url} is not a cluster node")));
            }
            let mut layout = Vec::new();
            for (node, ranges) in topo.layout() {
                nodes.push(node);
                layout.push(ranges);
            }
            // Every slot in exactly one shard, as for --slots.
            let text: Vec<String> = layout.iter().map(|r| ranges_text(r)).collect();
            parse_layout(&text.join(",")).map_err(|e| match e {
                ToolError::Usage(m) => ToolError::Usage(format!("the cluster at {url} does not serve every slot: {m}")),
                other => other,
            })?
        }
        (None, None, None) => return Err(ToolError::Usage("--slots, --shards or --by-node is needed".into())),
    };
    let mut s = split(src, &layout, &args.out, args.db, &|off| src.release_before(off))?;
    for (shard, node) in s.shards.iter_mut().zip(nodes) {
        shard.node = Some(node);
    }
    if args.json {
        let shards: Vec<serde_json::Value> = s
            .shards
            .iter()
            .map(|sh| {
                serde_json::json!({
                    "file": sh.file.display().to_string(),
                    "node": sh.node,
                    "slots": ranges_text(&sh.slots),
                    "keys": sh.keys,
                    "bytes": sh.bytes,
                })
            })
            .collect();
        writeln!(w, "{}", serde_json::json!({"shards": shards, "skipped_keys": s.skipped}))?;
    } else {
        for sh in &s.shards {
            let node = sh.node.as_ref().map(|n| format!(" (for {n})")).unwrap_or_default();
            writeln!(
                w,
                "{}{node}: slots {}, {} keys, {} bytes",
                sh.file.display(),
                ranges_text(&sh.slots),
                sh.keys,
                sh.bytes
            )?;
        }
        if s.skipped > 0 {
            writeln!(w, "{} keys of other databases than --db left out", s.skipped)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_layout_is_redis_clis() {
        let three: Vec<(u16, u16)> = even_layout(3).unwrap().into_iter().flatten().collect();
        assert_eq!(three, [(0, 5460), (5461, 10922), (10923, 16383)]);
        assert_eq!(even_layout(1).unwrap(), vec![vec![(0, 16383)]]);
        assert!(even_layout(0).is_err());
    }

    #[test]
    fn layouts_cover_every_slot_once() {
        let l = parse_layout("0-99+200-16383,100-199").unwrap();
        assert_eq!(l, vec![vec![(0, 99), (200, 16383)], vec![(100, 199)]]);
        assert!(parse_layout("0-100,100-16383").is_err(), "a slot twice");
        assert!(parse_layout("0-100,102-16383").is_err(), "slot 101 nowhere");
        assert!(parse_layout("0-16384").is_err(), "no such slot");
        assert!(parse_layout("5-1,0,6-16383").is_err(), "backwards");
    }
}
