//! `rdbtool convert FILE --to parquet DIR`: the dataset as two Parquet files for engines
//! that query fleets of backups (DuckDB, Spark): `DIR/keys.parquet`, a row per key (its
//! type, encoding, TTL, elements and what it costs the server), and `DIR/elements.parquet`,
//! a row per element (a string's value, a list's items by index, set and zset members
//! with scores, hash fields with values and TTLs, stream entries by ID). Both carry a
//! `source` column (`--source`, default the file's name), so the files of many backups
//! read as one dataset. Row groups are written as the file is read (memory bounded by a
//! few row groups), encoded and zstd-compressed on a thread of their own, with dictionary encoding; each file is written beside its
//! name and renamed when complete.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use ferrokv::format::rdb::{LogicalType, RdbReader, Record};
use ferrokv::format::Elem;
use ferrokv::logical::Logical;
use parquet::basic::{Compression, ZstdLevel};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;

use crate::memory::Sizer;
use crate::out::{AtomicFile, ToolError};

const KEYS_SCHEMA: &str = "message keys {
    required binary source (STRING);
    required int64 db;
    required binary key;
    required binary type (STRING);
    required binary encoding (STRING);
    optional int64 expire_ms;
    required int64 size;
    required int64 elements;
}";

const ELEMENTS_SCHEMA: &str = "message elements {
    required binary source (STRING);
    required int64 db;
    required binary key;
    optional int64 index;
    optional binary id (STRING);
    optional binary field;
    optional binary value;
    optional double score;
    optional int64 expire_ms;
}";

/// Rows buffered before a row group is written.
const ROWS_PER_GROUP: usize = 1 << 18;
/// Or bytes of values, whichever comes first.
const BYTES_PER_GROUP: usize = 64 << 20;

/// One column's values of the row group being built; `present` holds the definition
/// levels of an optional column (1 present, 0 null).
enum Values {
    /// The values end to end, and where each ends (one allocation per row group, not
    /// one per value).
    Bytes(Vec<u8>, Vec<usize>),
    Int(Vec<i64>),
    Double(Vec<f64>),
}

struct Column {
    values: Values,
    present: Option<Vec<i16>>,
}

impl Column {
    fn new(values: Values, optional: bool) -> Column {
        Column { values, present: optional.then(Vec::new) }
    }

    fn mark(&mut self, present: bool) {
        if let Some(p) = &mut self.present {
            p.push(i16::from(present));
        }
    }

    fn bytes(&mut self, b: Option<&[u8]>) {
        self.mark(b.is_some());
        if let (Values::Bytes(buf, ends), Some(b)) = (&mut self.values, b) {
            buf.extend_from_slice(b);
            ends.push(buf.len());
        }
    }

    /// An element's bytes (an integer as its decimal text).
    fn elem(&mut self, e: Option<&Elem<'_>>) {
        self.mark(e.is_some());
        if let (Values::Bytes(buf, ends), Some(e)) = (&mut self.values, e) {
            match e {
                Elem::Bytes(b) => buf.extend_from_slice(b),
                Elem::Int(i) => {
                    let _ = write!(buf, "{i}");
                }
            }
            ends.push(buf.len());
        }
    }

    fn int(&mut self, n: Option<i64>) {
        self.mark(n.is_some());
        if let (Values::Int(v), Some(n)) = (&mut self.values, n) {
            v.push(n);
        }
    }

    fn double(&mut self, x: Option<f64>) {
        self.mark(x.is_some());
        if let (Values::Double(v), Some(x)) = (&mut self.values, x) {
            v.push(x);
        }
    }

    fn clear(&mut self) {
        match &mut self.values {
            Values::Bytes(buf, ends) => {
                buf.clear();
                ends.clear();
            }
            Values::Int(v) => v.clear(),
            Values::Double(v) => v.clear(),
        }
        if let Some(p) = &mut self.present {
            p.clear();
        }
    }
}

fn pq(e: parquet::errors::ParquetError) -> ToolError {
    ToolError::Usage(format!("parquet: {e}"))
}

/// The rows of a table's row group being built (on the reading thread).
struct Rows {
    columns: Vec<Column>,
    rows: usize,
    bytes: usize,
}

impl Rows {
    /// A row was added (`bytes` of values); true when the row group is full.
    fn row_done(&mut self, bytes: usize) -> bool {
        self.rows += 1;
        self.bytes += bytes;
        self.rows >= ROWS_PER_GROUP || self.bytes >= BYTES_PER_GROUP
    }

    /// Empty columns of the same kinds.
    fn empty_like(columns: &[Column]) -> Vec<Column> {
        columns
            .iter()
            .map(|c| {
                let values = match c.values {
                    Values::Bytes(..) => Values::Bytes(Vec::new(), Vec::new()),
                    Values::Int(_) => Values::Int(Vec::new()),
                    Values::Double(_) => Values::Double(Vec::new()),
                };
                Column::new(values, c.present.is_some())
            })
            .collect()
    }
}

/// One Parquet file being written (on the writing thread).
struct Sink {
    /// Renamed to its name when complete, removed if not.
    file: AtomicFile,
    w: SerializedFileWriter<File>,
    written: u64,
}

impl Sink {
    /// `plain`: columns of mostly distinct values, written without a dictionary.
    fn create(path: &Path, schema: &str, plain: &[&str]) -> Result<Sink, ToolError> {
        let schema = Arc::new(parse_message_type(schema).map_err(pq)?);
        let zstd = ZstdLevel::try_new(1).map_err(pq)?;
        let mut props = WriterProperties::builder().set_compression(Compression::ZSTD(zstd));
        for name in plain {
            props = props.set_column_dictionary_enabled(ColumnPath::from(*name), false);
        }
        let props = Arc::new(props.build());
        let (file, f) = AtomicFile::new(path)?;
        let w = SerializedFileWriter::new(f, schema, props).map_err(pq)?;
        Ok(Sink { file, w, written: 0 })
    }

    /// Encode, compress and write one row group.
    fn write_group(&mut self, columns: &mut [Column], rows: usize) -> Result<(), ToolError> {
        let mut rg = self.w.next_row_group().map_err(pq)?;
        let mut i = 0;
        while let Some(mut col) = rg.next_column().map_err(pq)? {
            let c = &mut columns[i];
            let levels = c.present.as_deref();
            let written = match (&mut c.values, col.untyped()) {
                (Values::Bytes(buf, ends), ColumnWriter::ByteArrayColumnWriter(w)) => {
                    // The values' buffer becomes the one the column's values share (no copy).
                    let shared = bytes::Bytes::from(std::mem::take(buf));
                    let mut start = 0;
                    let v: Vec<ByteArray> = ends
                        .iter()
                        .map(|&end| {
                            let a = ByteArray::from(shared.slice(start..end));
                            start = end;
                            a
                        })
                        .collect();
                    w.write_batch(&v, levels, None)
                }
                (Values::Int(v), ColumnWriter::Int64ColumnWriter(w)) => w.write_batch(v, levels, None),
                (Values::Double(v), ColumnWriter::DoubleColumnWriter(w)) => w.write_batch(v, levels, None),
                _ => return Err(ToolError::Usage(format!("parquet: column {i} does not match its schema"))),
            };
            written.map_err(pq)?;
            col.close().map_err(pq)?;
            i += 1;
        }
        rg.close().map_err(pq)?;
        self.written += rows as u64;
        Ok(())
    }

    /// Close the file and give it its name; the rows written.
    fn finish(self) -> Result<u64, ToolError> {
        let f = self.w.into_inner().map_err(pq)?;
        self.file.commit(f)?;
        Ok(self.written)
    }
}

/// The two tables, keys and elements.
const KEYS: usize = 0;
const ELEMENTS: usize = 1;

/// A full row group on its way to the writing thread: its table, columns and rows.
type Group = (usize, Vec<Column>, usize);

/// The reading thread's side of the tables: rows being built, full groups sent to the
/// writing thread, whose emptied columns come back to be filled again.
struct Tables {
    rows: [Rows; 2],
    to_writer: SyncSender<Group>,
    spare: Receiver<(usize, Vec<Column>)>,
    /// Columns the writer has emptied, by table.
    emptied: [Vec<Vec<Column>>; 2],
}

impl Tables {
    /// The row just added to table `t` is done: send its group when full.
    fn row_done(&mut self, t: usize, bytes: usize) -> Result<(), ToolError> {
        if self.rows[t].row_done(bytes) {
            self.send(t)?;
        }
        Ok(())
    }

    fn send(&mut self, t: usize) -> Result<(), ToolError> {
        let r = &mut self.rows[t];
        if r.rows == 0 {
            return Ok(());
        }
        while let Ok((st, cols)) = self.spare.try_recv() {
            self.emptied[st].push(cols);
        }
        let fresh = self.emptied[t].pop().unwrap_or_else(|| Rows::empty_like(&r.columns));
        let full = std::mem::replace(&mut r.columns, fresh);
        let rows = std::mem::take(&mut r.rows);
        r.bytes = 0;
        // A closed channel: the writing thread stopped on an error, which `write` reports.
        self.to_writer.send((t, full, rows)).map_err(|_| ToolError::Usage("parquet: the writer stopped".into()))
    }
}

/// Rows written.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ParquetSummary {
    pub keys: u64,
    pub elements: u64,
}

/// Write `data` (an RDB) as `dir/keys.parquet` and `dir/elements.parquet`: this thread
/// decodes and fills the columns, another encodes, compresses and writes each row group.
pub fn write(data: &[u8], dir: &Path, source: &str, release: &dyn Fn(usize)) -> Result<ParquetSummary, ToolError> {
    std::fs::create_dir_all(dir).map_err(|e| ToolError::Usage(format!("cannot create {}: {e}", dir.display())))?;
    let sinks = [
        Sink::create(&dir.join("keys.parquet"), KEYS_SCHEMA, &["key", "expire_ms", "size", "elements"])?,
        Sink::create(
            &dir.join("elements.parquet"),
            ELEMENTS_SCHEMA,
            &["index", "field", "value", "score", "expire_ms"],
        )?,
    ];
    let b = |optional| Column::new(Values::Bytes(Vec::new(), Vec::new()), optional);
    let i = |optional| Column::new(Values::Int(Vec::new()), optional);
    let keys = vec![b(false), i(false), b(false), b(false), b(false), i(true), i(false), i(false)];
    let elements = vec![
        b(false),
        i(false),
        b(false),
        i(true),
        b(true),
        b(true),
        b(true),
        Column::new(Values::Double(Vec::new()), true),
        i(true),
    ];
    // Set once every row is sent: without it (the input failed) the files are dropped,
    // never given their names.
    let complete = AtomicBool::new(false);
    let done = &complete;
    std::thread::scope(|scope| {
        // A group is handed over only when the writer takes it: one being written and one
        // being filled per table, at most.
        let (to_writer, groups) = sync_channel::<Group>(0);
        let (give_back, spare) = channel();
        let writer = scope.spawn(move || -> Result<Option<ParquetSummary>, ToolError> {
            let mut sinks = sinks;
            for (t, mut columns, rows) in groups {
                sinks[t].write_group(&mut columns, rows)?;
                columns.iter_mut().for_each(Column::clear);
                let _ = give_back.send((t, columns));
            }
            if !done.load(Ordering::SeqCst) {
                return Ok(None);
            }
            let [keys, elements] = sinks;
            Ok(Some(ParquetSummary { keys: keys.finish()?, elements: elements.finish()? }))
        });
        let mut tables = Tables {
            rows: [Rows { columns: keys, rows: 0, bytes: 0 }, Rows { columns: elements, rows: 0, bytes: 0 }],
            to_writer,
            spare,
            emptied: [Vec::new(), Vec::new()],
        };
        let read = fill(data, source, release, &mut tables).and_then(|()| {
            tables.send(KEYS)?;
            tables.send(ELEMENTS)
        });
        complete.store(read.is_ok(), Ordering::SeqCst);
        // Closing the channel lets the writer finish.
        drop(tables);
        let written = writer.join().unwrap_or_else(|_| Err(ToolError::Usage("parquet: the writer panicked".into())));
        // The writer's own error explains a read that stopped because it had gone.
        match (read, written) {
            (_, Err(w)) => Err(w),
            (Err(r), Ok(_)) => Err(r),
            (Ok(()), Ok(Some(sum))) => Ok(sum),
            (Ok(()), Ok(None)) => Err(ToolError::Usage("parquet: the writer stopped early".into())),
        }
    })
}

/// Every key of `data` as rows of the two tables.
fn fill(data: &[u8], source: &str, release: &dyn Fn(usize), tables: &mut Tables) -> Result<(), ToolError> {
    let sizer = Sizer::for_file(data);
    let mut progress = crate::progress::Progress::new(data.len() as u64);
    let mut released = 0;
    for rec in RdbReader::new(data)? {
        let rec = rec?;
        let Record::Key(k) = &rec else { continue };
        if k.offset - released >= 32 << 20 {
            release(k.offset);
            progress.set(k.offset as u64);
            released = k.offset;
        }
        let at = |e| ToolError::Data(ferrokv::format::rdb::RdbError::in_key(e, k));
        let cost = sizer.cost(&rec)?;
        let key = k.key.to_bytes();
        let db = k.db as i64;

        // The elements, straight from the record (file order); a stream (and a module
        // value, which has none) through its logical form.
        let mut count = 0usize;
        let mut row = |index: Option<i64>,
                       id: Option<&[u8]>,
                       field: Option<&Elem<'_>>,
                       value: Option<&Elem<'_>>,
                       score: Option<f64>,
                       ttl: Option<i64>|
         -> Result<(), ToolError> {
            let c = &mut tables.rows[ELEMENTS].columns;
            c[0].bytes(Some(source.as_bytes()));
            c[1].int(Some(db));
            c[2].bytes(Some(&key));
            c[3].int(index);
            c[4].bytes(id);
            c[5].elem(field);
            c[6].elem(value);
            c[7].double(score);
            c[8].int(ttl);
            count += 1;
            tables.row_done(ELEMENTS, key.len() + field.map_or(0, Elem::len) + value.map_or(0, Elem::len))
        };
        let v = &k.value;
        let mut entries = None;
        match v.logical() {
            LogicalType::String => {
                row(None, None, None, Some(&v.string().and_then(|s| s.to_elem()).map_err(at)?), None, None)?
            }
            LogicalType::List => {
                for (n, item) in v.list().map_err(at)?.enumerate() {
                    row(Some(n as i64), None, None, Some(&item.map_err(at)?), None, None)?;
                }
            }
            LogicalType::Set => {
                for m in v.set().map_err(at)? {
                    row(None, None, Some(&m.map_err(at)?), None, None, None)?;
                }
            }
            LogicalType::Zset => {
                for p in v.zset().map_err(at)? {
                    let (m, score) = p.map_err(at)?;
                    row(None, None, Some(&m), None, Some(score), None)?;
                }
            }
            LogicalType::Hash => {
                for e in v.hash().map_err(at)? {
                    let e = e.map_err(at)?;
                    row(None, None, Some(&e.field), Some(&e.value), None, e.expire_ms)?;
                }
            }
            LogicalType::Stream | LogicalType::Module => {
                if let Logical::Stream(s) = Logical::from_record(k).map_err(at)? {
                    entries = Some(s.entries.len());
                    for (id, pairs) in &s.entries {
                        let id = id.to_string();
                        for (f, val) in pairs {
                            let (f, val) = (Elem::borrowed(f), Elem::borrowed(val));
                            row(None, Some(id.as_bytes()), Some(&f), Some(&val), None, None)?;
                        }
                    }
                }
            }
        }
        let c = &mut tables.rows[KEYS].columns;
        c[0].bytes(Some(source.as_bytes()));
        c[1].int(Some(db));
        c[2].bytes(Some(&key));
        c[3].bytes(Some(v.logical().name().as_bytes()));
        c[4].bytes(Some(v.vtype.encoding().as_bytes()));
        c[5].int(k.expire_ms);
        c[6].int(Some(cost.map_or(0, |c| c.bytes as i64)));
        // Elements as the dump counts them: a stream's entries, a string's 1.
        c[7].int(Some(entries.unwrap_or(count) as i64));
        tables.row_done(KEYS, key.len())?;
    }
    progress.finish();
    Ok(())
}
