//! `rdbtool verify` and `rdbtool info`: walk a file and gather what it holds.
//!
//! verify decodes every element of every key and checks every internal blob (lengths,
//! back-lengths, terminators, counts, intset order, duplicates in compact encodings, stream
//! PEL consistency) plus the CRC. info only walks the record structure.

use std::collections::BTreeMap;
use std::collections::HashSet;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::format::rdb::{Checksum, KeyRecord, LogicalType, RdbError, RdbReader, Record, Value, ValueType};
use ferrokv::format::{Elem, FormatError};

use crate::out::ToolError;
use crate::pipeline::{Batch, Pipeline, Stage};
use crate::progress::Progress;

/// What the walk found in one database.
#[derive(Debug, Default, Clone)]
pub struct DbStats {
    pub keys: u64,
    pub types: BTreeMap<&'static str, u64>,
    pub encodings: BTreeMap<&'static str, u64>,
    pub with_expiry: u64,
    pub already_expired: u64,
    pub resize_hint: Option<(u64, u64)>,
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub magic: String,
    pub version: u32,
    pub size: u64,
    pub aux: Vec<(String, String)>,
    pub dbs: BTreeMap<u64, DbStats>,
    pub functions: u64,
    pub module_aux: Vec<String>,
    pub checksum: Option<Checksum>,
    pub eof_offset: Option<usize>,
    pub trailing_bytes: u64,
    pub with_idle: u64,
    pub with_freq: u64,
    pub elements: u64,
    pub warnings: Vec<String>,
    pub warnings_total: u64,
}

impl Report {
    pub fn keys(&self) -> u64 {
        self.dbs.values().map(|d| d.keys).sum()
    }

    fn warn(&mut self, w: String) {
        self.warnings_total += 1;
        if self.warnings.len() < 20 {
            self.warnings.push(w);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Structure only: values are skipped, not decoded.
    Records,
    /// Every element decoded and checked.
    Deep,
}

/// The databases a server has unless its configuration says more (`databases 16`): it
/// refuses a file that selects a higher one.
pub const DEFAULT_DATABASES: u64 = 16;

/// Walk `data` on every core. On error the partial report comes back with the error.
pub fn walk(data: &[u8], depth: Depth, now_ms: i64) -> Result<Report, (Box<Report>, RdbError)> {
    walk_with(data, depth, now_ms, DEFAULT_DATABASES, &Pipeline::default(), &|_| {})
}

/// Deep-check results of one batch: (elements, warnings) or the first error.
struct Checked_ {
    elements: u64,
    warnings: Vec<String>,
}

fn check_key(k: &KeyRecord<'_>, rdb_version: u32) -> Result<Checked, RdbError> {
    check_value(k, rdb_version).map_err(|e| RdbError::in_key(e, k))
}

/// A function library as Redis's loader takes it: a shebang naming the Lua engine and a
/// valid library name, Lua code that compiles, and that, run, registers at least one
/// function with `redis.register_function` and fails nowhere. Returns the library's name
/// and its functions' (lower-cased: Redis finds functions by any case).
///
/// The server's interpreter (ferrokv-server's script module) is not shared here: loading
/// needs only `redis.register_function`, which this reimplements with Redis's checks.
pub fn check_function(offset: usize, code: &Elem<'_>) -> Result<(String, Vec<String>), RdbError> {
    use std::cell::RefCell;
    use std::rc::Rc;
    let code = code.to_bytes();
    let fail = |what: String| RdbError::at(offset, format!("function library: {what} (Redis refuses to load it)"));
    let name = ferrokv::functions::check(&code).map_err(fail)?;
    let body = ferrokv::functions::header(&code).map(|h| h.body).unwrap_or(0);
    let lua = mlua::Lua::new_with(
        mlua::StdLib::TABLE | mlua::StdLib::STRING | mlua::StdLib::MATH,
        mlua::LuaOptions::default(),
    )
    .map_err(|e| fail(format!("cannot start Lua: {e}")))?;
    let func = lua
        .load(&code[body..])
        .set_name("@user_function")
        .into_function()
        .map_err(|e| fail(format!("Error compiling function: {e}")))?;
    let registered: Rc<RefCell<Vec<String>>> = Rc::default();
    let reg = Rc::clone(&registered);
    let register = lua
        .create_function(move |_, args: mlua::MultiValue| register_function(&reg, args))
        .map_err(|e| fail(e.to_string()))?;
    let redis = lua.create_table().map_err(|e| fail(e.to_string()))?;
    let set = |k: &str, v: mlua::Value| redis.raw_set(k, v).map_err(|e| fail(e.to_string()));
    set("register_function", mlua::Value::Function(register))?;
    set(
        "log",
        mlua::Value::Function(lua.create_function(|_, _: mlua::MultiValue| Ok(())).map_err(|e| fail(e.to_string()))?),
    )?;
    for (i, level) in ["LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"].iter().enumerate() {
        set(level, mlua::Value::Integer(i as i64))?;
    }
    lua.globals().raw_set("redis", redis).map_err(|e| fail(e.to_string()))?;
    // Loading a library runs it: a budget stops one that would never end.
    let left = std::cell::Cell::new(100u32);
    lua.set_hook(mlua::HookTriggers::new().every_nth_instruction(1_000_000), move |_, _| {
        left.set(left.get().saturating_sub(1));
        if left.get() == 0 {
            return Err(mlua::Error::RuntimeError("the library did not finish loading".into()));
        }
        Ok(mlua::VmState::Continue)
    })
    .map_err(|e| fail(e.to_string()))?;
    func.call::<()>(()).map_err(|e| fail(format!("Error registering functions: {e}")))?;
    let fns = registered.borrow().clone();
    if fns.is_empty() {
        return Err(fail("No functions registered".into()));
    }
    Ok((name, fns))
}

/// `redis.register_function` while a library loads, with Redis's argument checks.
fn register_function(reg: &std::cell::RefCell<Vec<String>>, args: mlua::MultiValue) -> mlua::Result<()> {
    use mlua::Value;
    let err = |m: &str| mlua::Error::RuntimeError(m.to_string());
    let name = match (args.len(), args.front()) {
        (1, Some(Value::Table(t))) => {
            let mut name = None;
            let mut callback = false;
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Value::String(k) = k else {
                    return Err(err("named argument key given to redis.register_function is not a string"));
                };
                match (&k.as_bytes()[..], v) {
                    (b"function_name", Value::String(s)) => name = Some(s.as_bytes().to_vec()),
                    (b"callback", Value::Function(_)) => callback = true,
                    (b"description", Value::String(_)) => {}
                    (b"flags", Value::Table(ft)) => {
                        for f in ft.sequence_values::<Value>() {
                            let known =
                                ["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];
                            match f? {
                                Value::String(f) if known.iter().any(|n| n.as_bytes() == &f.as_bytes()[..]) => {}
                                _ => return Err(err("unknown flag given")),
                            }
                        }
                    }
                    _ => return Err(err("unknown argument given to redis.register_function")),
                }
            }
            if !callback {
                return Err(err("redis.register_function must get a callback argument"));
            }
            name.ok_or_else(|| err("redis.register_function must get a function name argument"))?
        }
        (2, _) => {
            let mut it = args.into_iter();
            match (it.next(), it.next()) {
                (Some(Value::String(n)), Some(Value::Function(_))) => n.as_bytes().to_vec(),
                _ => return Err(err("wrong argument types given to redis.register_function")),
            }
        }
        _ => return Err(err("wrong number of arguments to redis.register_function")),
    };
    let name = String::from_utf8_lossy(&name).into_owned();
    if !ferrokv::functions::valid_name(&name) {
        return Err(err(
            "Function names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    let mut list = reg.borrow_mut();
    if list.iter().any(|n| n == &name) {
        return Err(err("Function already exists in the library"));
    }
    list.push(name);
    Ok(())
}

fn check_record(rec: &Record<'_>, rdb_version: u32) -> Result<Option<Checked>, RdbError> {
    match rec {
        Record::Key(k) => check_key(k, rdb_version).map(Some),
        _ => Ok(None),
    }
}

fn key_warning(k: &KeyRecord<'_>, w: &str) -> String {
    format!(
        "offset {}: db {} key '{}' (type {}): {w}",
        k.offset,
        k.db,
        ferrokv::format::rdb::escape_key(&k.key.to_bytes()),
        k.value.vtype.name(),
    )
}

/// `release(offset)` is told when everything before `offset` has been checked; a database
/// at or past `databases` is one the server refuses.
pub fn walk_with(
    data: &[u8],
    depth: Depth,
    now_ms: i64,
    databases: u64,
    pipeline: &Pipeline,
    release: &dyn Fn(usize),
) -> Result<Report, (Box<Report>, RdbError)> {
    let mut rep = Report { size: data.len() as u64, ..Report::default() };
    let reader = match RdbReader::new(data) {
        Ok(r) => r,
        Err(e) => return Err((Box::new(rep), e)),
    };
    let rdb_version = reader.dialect().version;
    rep.magic = reader.dialect().magic();
    rep.version = reader.dialect().version;
    let mut stage = VerifyStage {
        rep,
        current_db: 0,
        databases,
        function_names: HashSet::new(),
        refused: None,
        now_ms,
        data_len: data.len(),
        rdb_version,
        redis_family: reader.dialect().family == ferrokv::format::rdb::Family::Redis,
        writer_rdb: rdb_version,
        release,
        progress: Progress::new(data.len() as u64),
        tally: Tally::default(),
    };
    let result = if depth == Depth::Records {
        let mut res = Ok(());
        for r in reader {
            match r {
                Ok(rec) => {
                    stage.record(&rec);
                    if let Record::Key(k) = &rec {
                        release(k.end);
                    }
                }
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        res
    } else {
        let work = |batch: &Batch<'_>| -> Result<Checked_, ToolError> {
            let mut c = Checked_ { elements: 0, warnings: Vec::new() };
            for rec in &batch.records {
                if let (Some(r), Record::Key(k)) = (check_record(rec, rdb_version)?, rec) {
                    c.elements += r.elements;
                    if let Some(w) = r.warning {
                        c.warnings.push(key_warning(k, &w));
                    }
                }
            }
            Ok(c)
        };
        pipeline.run(reader, work, &mut stage).map_err(|e| match e {
            ToolError::Data(e) => e,
            other => RdbError::at(0, format!("{other:?}")),
        })
    };
    stage.progress.finish();
    let mut rep = stage.rep;
    stage.tally.fold_into(&mut rep);
    // A library the loader would refuse: the file does not load.
    let result = match (result, stage.refused) {
        (Ok(()), Some(e)) => Err(e),
        (r, _) => r,
    };
    match result {
        Ok(()) => Ok(rep),
        Err(e) => Err((Box::new(rep), e)),
    }
}

/// Verify's side of the pipeline: the file's structure and counts from every record as it
/// is read, the workers' element counts and warnings in file order, big keys checked here.
struct VerifyStage<'s> {
    rep: Report,
    current_db: u64,
    databases: u64,
    /// `lib:NAME` and `fn:NAME` of the libraries loaded so far.
    function_names: HashSet<String>,
    /// The first thing the loader refuses that reading on does not show: a library, a
    /// database past the configured number.
    refused: Option<RdbError>,
    now_ms: i64,
    data_len: usize,
    rdb_version: u32,
    /// A Redis-magic file (Valkey's own magic numbers its versions apart).
    redis_family: bool,
    /// The newest RDB version the writing server knows: the header's, or the one its
    /// `redis-ver` / `valkey-ver` aux field names when newer (the loader of that release
    /// is the one whose verdict verify gives).
    writer_rdb: u32,
    release: &'s dyn Fn(usize),
    progress: Progress,
    tally: Tally,
}

/// Keys counted per database and encoding as they are read (a map lookup per key costs
/// more than the rest of the structure walk), folded into the report at the end.
#[derive(Default)]
struct Tally {
    dbs: Vec<(u64, DbTally)>,
}

#[derive(Default)]
struct DbTally {
    keys: [u64; ValueType::ALL.len()],
    with_expiry: u64,
    already_expired: u64,
}

impl Tally {
    fn of(&mut self, db: u64) -> &mut DbTally {
        // Files hold one database after another: the last one is nearly always the one.
        let i = match self.dbs.iter().rposition(|(d, _)| *d == db) {
            Some(i) => i,
            None => {
                self.dbs.push((db, DbTally::default()));
                self.dbs.len() - 1
            }
        };
        &mut self.dbs[i].1
    }

    fn fold_into(self, rep: &mut Report) {
        for (db, t) in self.dbs {
            let st = rep.dbs.entry(db).or_default();
            for (code, &n) in t.keys.iter().enumerate() {
                let Some(vtype) = ValueType::from_code(code as u8).filter(|_| n > 0) else { continue };
                st.keys += n;
                *st.types.entry(vtype.logical().name()).or_default() += n;
                *st.encodings.entry(vtype.name()).or_default() += n;
            }
            st.with_expiry += t.with_expiry;
            st.already_expired += t.already_expired;
        }
    }
}

impl VerifyStage<'_> {
    /// Libraries load in file order: a name twice, or a function two libraries register,
    /// makes the loader refuse the file.
    fn check_library(&mut self, offset: usize, code: &Elem<'_>) {
        if self.refused.is_some() {
            return;
        }
        match check_function(offset, code) {
            Ok((name, fns)) => {
                let seen = &mut self.function_names;
                if !seen.insert(format!("lib:{name}")) {
                    self.refused = Some(RdbError::at(
                        offset,
                        format!("function library: Library '{name}' already exists (Redis refuses to load it)"),
                    ));
                } else if let Some(f) = fns.iter().find(|f| !seen.insert(format!("fn:{}", f.to_ascii_lowercase()))) {
                    self.refused = Some(RdbError::at(
                        offset,
                        format!("function library '{name}': Function {f} already exists (Redis refuses to load it)"),
                    ));
                }
            }
            Err(e) => self.refused = Some(e),
        }
    }
}

impl<'a> Stage<'a, Checked_> for VerifyStage<'_> {
    fn record(&mut self, rec: &Record<'a>) {
        let rep = &mut self.rep;
        match rec {
            Record::Aux { key, value } => {
                let (field, version) = (lossy(key), lossy(value));
                if let Some(writer) = ServerVersion::of_writer_field(&field, &version) {
                    self.writer_rdb = self.writer_rdb.max(writer.rdb_version());
                }
                rep.aux.push((field, version));
            }
            Record::SelectDb { offset, db } => {
                self.current_db = *db;
                if *db >= self.databases && self.refused.is_none() {
                    self.refused = Some(RdbError::at(
                        *offset,
                        format!(
                            "the file selects database {db}: a server with `databases {}` refuses to load it (\"Data file was created with a Redis server configured to handle more than {} databases\"); --databases sets how many the server has",
                            self.databases, self.databases
                        ),
                    ));
                }
            }
            Record::ResizeDb { db_size, expires_size } => {
                rep.dbs.entry(self.current_db).or_default().resize_hint = Some((*db_size, *expires_size));
            }
            Record::Function { offset, code } => {
                rep.functions += 1;
                self.check_library(*offset, code);
            }
            Record::FunctionPreGa { .. } => rep.functions += 1,
            Record::ModuleAux(m) => rep.module_aux.push(m.name.clone()),
            Record::SlotInfo { .. } | Record::SlotImport { .. } => {}
            Record::Key(k) => {
                let first = k.value.vtype.first_rdb_version();
                if first > self.writer_rdb && self.redis_family && self.refused.is_none() {
                    let e = FormatError::new(
                        k.offset,
                        format!(
                            "value type {} in an RDB {} file: the server that wrote it (RDB {}) does not know the type and refuses the file (\"Unknown RDB encoding type\"); servers writing RDB {first} and later read it",
                            k.value.vtype.name(),
                            self.rdb_version,
                            self.writer_rdb,
                        ),
                    );
                    self.refused = Some(RdbError::in_key(e, k));
                }
                let t = self.tally.of(k.db);
                t.keys[usize::from(k.value.vtype.code())] += 1;
                if let Some(ms) = k.expire_ms {
                    t.with_expiry += 1;
                    t.already_expired += u64::from(ms <= self.now_ms);
                }
                rep.with_idle += u64::from(k.idle.is_some());
                rep.with_freq += u64::from(k.freq.is_some());
            }
            Record::Eof { offset, end, checksum } => {
                rep.checksum = Some(*checksum);
                rep.eof_offset = Some(*offset);
                rep.trailing_bytes = (self.data_len - end) as u64;
            }
        }
    }

    fn batch(&mut self, c: Checked_) -> Result<(), ToolError> {
        self.rep.elements += c.elements;
        for w in c.warnings {
            self.rep.warn(w);
        }
        Ok(())
    }

    fn big_key(&mut self, rec: &Record<'a>, _: Option<u64>) -> Result<(), ToolError> {
        if let (Some(c), Record::Key(k)) = (check_record(rec, self.rdb_version)?, rec) {
            self.rep.elements += c.elements;
            if let Some(w) = c.warning {
                self.rep.warn(key_warning(k, &w));
            }
        }
        Ok(())
    }

    fn done(&mut self, offset: usize) {
        (self.release)(offset);
    }

    fn progress(&mut self, offset: usize) {
        self.progress.set(offset as u64);
    }
}

fn lossy(e: &Elem<'_>) -> String {
    String::from_utf8_lossy(&e.to_bytes()).into_owned()
}

/// A 64-bit hash for duplicate detection inside one container (foldhash: a few cycles
/// for the short strings most members are).
fn hash_bytes(b: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0).hash_one(b)
}

fn elem_hash(e: &Elem<'_>) -> u64 {
    match e {
        Elem::Bytes(b) => hash_bytes(b),
        Elem::Int(i) => {
            let mut buf = ferrokv::format::blob::itoa_buf();
            hash_bytes(ferrokv::format::blob::fmt_i64(*i, &mut buf))
        }
    }
}

/// Duplicate check over hashes; an equal hash is confirmed by comparing bytes.
struct DupCheck {
    on: bool,
    hashes: Vec<u64>,
}

thread_local! {
    /// DupCheck's buffer, kept between values: most hold a few elements, and an allocation
    /// per key would cost more than hashing them.
    static DUP_HASHES: std::cell::Cell<Vec<u64>> = const { std::cell::Cell::new(Vec::new()) };
    /// The table [`DupCheck::suspicious`] looks for a repeat in, kept the same way.
    static DUP_TABLE: std::cell::Cell<Vec<u64>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Drop for DupCheck {
    fn drop(&mut self) {
        let mut hashes = std::mem::take(&mut self.hashes);
        // A check that was off never took the kept buffer: giving back its empty one would
        // throw the kept one away (a list or intset between two sets meant a new buffer,
        // grown push by push, for the next set: 3.5 % of verify's instructions).
        if self.on && hashes.capacity() <= 1 << 16 {
            hashes.clear();
            DUP_HASHES.set(hashes);
        }
    }
}

impl DupCheck {
    fn new(on: bool) -> Self {
        DupCheck { on, hashes: if on { DUP_HASHES.take() } else { Vec::new() } }
    }
    fn add(&mut self, e: &Elem<'_>) {
        if self.on {
            self.hashes.push(elem_hash(e));
        }
    }
    fn suspicious(&self) -> bool {
        let h = &self.hashes;
        if !self.on || h.len() < 2 {
            return false;
        }
        // Most containers are small: comparing each pair costs less than anything else.
        if h.len() <= 16 {
            return (1..h.len()).any(|i| h[..i].contains(&h[i]));
        }
        // An open-addressing table at most half full (sorting cost several times more).
        let size = (h.len() * 2).next_power_of_two();
        let mut table = DUP_TABLE.take();
        table.clear();
        table.resize(size, 0);
        let mask = size - 1;
        let mut repeat = false;
        'hashes: for &x in h.iter() {
            // 0 marks a free slot: the low bit is dropped, and a false match only sends
            // the value to the exact comparison.
            let x = x | 1;
            let mut i = (x >> 40) as usize & mask;
            loop {
                match table[i] {
                    0 => {
                        table[i] = x;
                        break;
                    }
                    y if y == x => {
                        repeat = true;
                        break 'hashes;
                    }
                    _ => i = (i + 1) & mask,
                }
            }
        }
        if size <= 1 << 16 {
            DUP_TABLE.set(table);
        }
        repeat
    }
}

fn find_dup<'a>(items: impl Iterator<Item = Result<Elem<'a>, FormatError>>) -> Result<Option<Vec<u8>>, FormatError> {
    let mut seen = std::collections::HashSet::new();
    for e in items {
        let b = e?.to_bytes().into_owned();
        if !seen.insert(b.clone()) {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

fn dup_error(kind: &str, b: &[u8]) -> FormatError {
    FormatError::new(0, format!("duplicate {kind} '{}'", ferrokv::format::rdb::escape_key(b)))
}

/// What a deep check of one value found.
pub struct Checked {
    pub elements: u64,
    /// Something Redis accepts but an operator should know about.
    pub warning: Option<String>,
}

/// Check a value as Redis's loader would, then decode every element: what the loader
/// refuses is an error; damage it lets through (inside a listpack or an intset, which it
/// checks by their headers only) is a warning, as the file does load.
pub fn check_value(k: &KeyRecord<'_>, rdb_version: u32) -> Result<Checked, FormatError> {
    let v = &k.value;
    if !v.loader_checks_headers_only(rdb_version) {
        return walk_value(v, rdb_version);
    }
    // A listpack set, hash or zset, an intset or a list that the one pass finds sound
    // passes what the loader checks of it too (the header; members unique where it
    // converts the value; a list's nodes all listpacks that read whole): the loader's own
    // pass is needed only to tell whether damage is fatal.
    if matches!(
        v.vtype,
        ValueType::SetIntset
            | ValueType::SetListpack
            | ValueType::HashListpack
            | ValueType::ZsetListpack
            | ValueType::ListQuicklist2
    ) {
        if let Some(c) = check_in_one_pass(v) {
            return Ok(c);
        }
    }
    v.loader_check()?;
    if v.logical() == LogicalType::Stream {
        return check_stream(v, rdb_version);
    }
    match walk_value(v, rdb_version) {
        Ok(c) => Ok(c),
        Err(e) => Ok(Checked { elements: 0, warning: Some(tolerated(&e)) }),
    }
}

/// The warning for damage Redis's loader lets through.
fn tolerated(e: &FormatError) -> String {
    format!(
        "{e}: Redis loads it (its loader checks only the blob's header unless sanitize-dump-payload is on), and a \
         command reading the value may fail or crash the server"
    )
}

/// A stream: its entries' damage (inside their listpacks, IDs out of order) is tolerated by
/// Redis's loader; its consumer groups' consistency is not.
fn check_stream(v: &Value<'_>, rdb_version: u32) -> Result<Checked, FormatError> {
    let s = v.stream()?;
    let mut live = 0u64;
    let mut prev = None;
    let mut warning = None;
    for e in s.entries() {
        let e = match e {
            Ok(e) => e,
            Err(err) => {
                warning = Some(tolerated(&err));
                break;
            }
        };
        if prev.is_some_and(|p| e.id <= p) && warning.is_none() {
            warning = Some(tolerated(&FormatError::new(0, format!("stream entry IDs not increasing at {}", e.id))));
        }
        prev = Some(e.id);
        live += 1;
    }
    if warning.is_none() && live != s.meta.length {
        // Redis 5 could save a stale length after XTRIM; Redis loads such files.
        warning =
            Some(format!("stream length says {} but {live} live entries were read (Redis loads it)", s.meta.length));
    }
    check_groups(&s.meta, rdb_version)?;
    Ok(Checked { elements: live, warning })
}

/// A stream's consumer groups as Redis's loader checks them: group names unique, a group's
/// PEL without repeats, consumer names unique in a group (Redis 7 and later, RDB 10+),
/// and every entry a consumer owns in its group's PEL, once.
fn check_groups(meta: &ferrokv::format::rdb::StreamMeta<'_>, rdb_version: u32) -> Result<(), FormatError> {
    use std::collections::HashSet;
    let mut names = HashSet::new();
    for g in &meta.groups {
        if !names.insert(g.name.to_bytes()) {
            return Err(FormatError::new(0, format!("duplicated consumer group name '{}'", lossy(&g.name))));
        }
        let mut pel = HashSet::new();
        for p in &g.pending {
            if !pel.insert(p.id) {
                return Err(FormatError::new(
                    0,
                    format!("duplicated PEL entry {} in group '{}'", p.id, lossy(&g.name)),
                ));
            }
        }
        let mut consumers = HashSet::new();
        for c in &g.consumers {
            if rdb_version >= 10 && !consumers.insert(c.name.to_bytes()) {
                return Err(FormatError::new(
                    0,
                    format!("duplicate consumer '{}' in group '{}'", lossy(&c.name), lossy(&g.name)),
                ));
            }
            let mut owned = HashSet::new();
            for id in &c.pending {
                if !owned.insert(*id) {
                    return Err(FormatError::new(
                        0,
                        format!("consumer '{}' in group '{}' owns {id} twice", lossy(&c.name), lossy(&g.name)),
                    ));
                }
                if !pel.contains(id) {
                    return Err(FormatError::new(
                        0,
                        format!(
                            "consumer '{}' in group '{}' owns {id}, which is not in the group PEL",
                            lossy(&c.name),
                            lossy(&g.name)
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// What [`walk_value`] finds for a value whose elements lie one after another (in
/// listpacks: most small hashes, zsets, sets and lists; or hashtable-encoded sets and
/// hashes), in one pass over its bytes without the iterators; None when the value is
/// stored otherwise or calls for the full walk (damage, a possible duplicate, an empty
/// value), which then gives the answer.
fn check_in_one_pass(v: &Value<'_>) -> Option<Checked> {
    use ferrokv::format::rdb::PackedItem;
    // An intset's reader refuses a repeat itself (its members must ascend).
    let mut d = DupCheck::new(v.logical() != LogicalType::List && v.vtype != ValueType::SetIntset);
    let n = v.visit_items(|item| match item {
        PackedItem::One(e) | PackedItem::Pair(e, _) => {
            d.add(&e);
            true
        }
        PackedItem::Scored(m, s) => {
            d.add(&m);
            s.is_number()
        }
    })?;
    if n == 0 || d.suspicious() {
        return None;
    }
    Some(Checked { elements: n, warning: None })
}

/// Decode every element of a value and check it.
fn walk_value(v: &Value<'_>, rdb_version: u32) -> Result<Checked, FormatError> {
    // Most keys are strings: one check, no element pass to try first.
    if v.logical() == LogicalType::String {
        return check_string(v);
    }
    match check_in_one_pass(v) {
        Some(checked) => Ok(checked),
        None => walk_elements(v, rdb_version),
    }
}

/// A string value: it reads (an LZF stream is checked without being kept).
fn check_string(v: &Value<'_>) -> Result<Checked, FormatError> {
    v.string()?.validate()?;
    Ok(Checked { elements: 1, warning: None })
}

/// Every element of the value read through its iterator and checked.
fn walk_elements(v: &Value<'_>, rdb_version: u32) -> Result<Checked, FormatError> {
    use ValueType::*;
    // Duplicates: Redis's loader refuses them in a hashtable-encoded value (its dict add
    // fails); an intset's order and uniqueness are checked only under deep sanitization.
    let mut n = 0u64;
    match v.logical() {
        LogicalType::String => return check_string(v),
        LogicalType::List => {
            for e in v.list()? {
                e?;
                n += 1;
            }
        }
        LogicalType::Set => {
            let mut d = DupCheck::new(v.vtype != SetIntset);
            for e in v.set()? {
                d.add(&e?);
                n += 1;
            }
            if d.suspicious() {
                if let Some(b) = find_dup(v.set()?)? {
                    return Err(dup_error("set member", &b));
                }
            }
        }
        LogicalType::Zset => {
            let mut d = DupCheck::new(true);
            for e in v.zset()? {
                let (m, s) = e?;
                if s.is_nan() {
                    return Err(FormatError::new(0, "zset score is NaN"));
                }
                d.add(&m);
                n += 1;
            }
            if d.suspicious() {
                if let Some(b) = find_dup(v.zset()?.map(|r| r.map(|(m, _)| m)))? {
                    return Err(dup_error("zset member", &b));
                }
            }
        }
        LogicalType::Hash => {
            let mut d = DupCheck::new(true);
            // A type-4 hash the loader keeps as a listpack (at most 512 fields, none
            // longer than 64 bytes): a duplicate goes unnoticed there.
            let mut listpack_phase = matches!(v.vtype, Hash | HashMetadata | HashMetadataPreGa)
                && v.hash()?.declared_len().is_some_and(|n| n <= 512);
            for e in v.hash()? {
                let h = e?;
                if let Some(t) = h.expire_ms {
                    if !(0..=0xFFFF_FFFF_FFFF).contains(&t) && v.vtype != ValkeyHash2 {
                        return Err(FormatError::new(0, format!("hash field TTL {t} is out of range")));
                    }
                }
                listpack_phase &= h.field.to_bytes().len() <= 64 && h.value.to_bytes().len() <= 64;
                d.add(&h.field);
                n += 1;
            }
            if d.suspicious() {
                if let Some(b) = find_dup(v.hash()?.map(|r| r.map(|h| h.field)))? {
                    let e = dup_error("hash field", &b);
                    if listpack_phase {
                        return Ok(Checked { elements: n, warning: Some(tolerated(&e)) });
                    }
                    return Err(e);
                }
            }
        }
        LogicalType::Stream => {
            let s = v.stream()?;
            let mut live = 0u64;
            let mut prev = None;
            for e in s.entries() {
                let e = e?;
                if prev.is_some_and(|p| e.id <= p) {
                    return Err(FormatError::new(0, format!("stream entry IDs not increasing at {}", e.id)));
                }
                prev = Some(e.id);
                live += 1;
            }
            let warning = (live != s.meta.length).then(|| {
                format!("stream length says {} but {live} live entries were read (Redis loads it)", s.meta.length)
            });
            check_groups(&s.meta, rdb_version)?;
            return Ok(Checked { elements: live, warning });
        }
        LogicalType::Module => {
            v.module()?;
            return Ok(Checked { elements: 1, warning: None });
        }
    }
    let warning = (n == 0).then(|| format!("empty {} (Redis skips it on load)", v.logical()));
    Ok(Checked { elements: n, warning })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokv::format::Input;

    /// A repeat is found at every size and position, and distinct members are not taken
    /// for one.
    #[test]
    fn the_duplicate_check_finds_every_repeat() {
        for n in 2..300usize {
            let members: Vec<Vec<u8>> = (0..n).map(|i| format!("member:{i}").into_bytes()).collect();
            let mut d = DupCheck::new(true);
            for m in &members {
                d.add(&Elem::borrowed(m));
            }
            assert!(!d.suspicious(), "{n} distinct members");
            for (a, b) in [(0, n - 1), (n / 2, n / 3), (n - 1, 0)] {
                let mut d = DupCheck::new(true);
                for (i, m) in members.iter().enumerate() {
                    d.add(&Elem::borrowed(if i == b && a != b { &members[a] } else { m }));
                }
                assert_eq!(d.suspicious(), a != b, "{n} members, {a} repeated at {b}");
            }
            // An integer and its text are the same member.
            let mut d = DupCheck::new(true);
            for m in &members[1..] {
                d.add(&Elem::borrowed(m));
            }
            d.add(&Elem::borrowed(b"7"));
            d.add(&Elem::Int(7));
            assert!(d.suspicious(), "{n}: 7 and \"7\"");
        }
        // Short members of every length that differ in one byte, or only in length, are
        // told apart.
        for len in 0..=24usize {
            let base = vec![b'a'; len];
            let mut d = DupCheck::new(true);
            d.add(&Elem::borrowed(&base));
            d.add(&Elem::borrowed(&base[..len.saturating_sub(1)]));
            for at in 0..len {
                let mut m = base.clone();
                m[at] = b'b';
                d.add(&Elem::Bytes(m.into()));
            }
            if len > 0 {
                assert!(!d.suspicious(), "length {len}");
            }
        }
    }

    /// `f(copy, at, flip)` on `body` as it is (at None), then with each byte flipped by
    /// each of four masks.
    fn each_damage(body: &[u8], mut f: impl FnMut(&[u8], Option<usize>, u8)) {
        let mut copy = body.to_vec();
        f(&copy, None, 0);
        for at in 0..body.len() {
            for flip in [0x01u8, 0x40, 0x80, 0xFF] {
                copy.copy_from_slice(body);
                copy[at] ^= flip;
                f(&copy, Some(at), flip);
            }
        }
    }

    /// When the one-pass check answers, it answers what the element walk does: on the
    /// fixtures as written and with each byte of their values damaged.
    #[test]
    fn the_one_pass_agrees_with_the_element_walk() {
        let (samples, with_sets) = crate::one_pass_samples::samples();
        let values: Vec<(ValueType, Vec<u8>)> =
            samples.iter().map(|s| (s.vtype, s.file[s.body.clone()].to_vec())).collect();
        let mut wanted = vec![
            ValueType::HashListpack,
            ValueType::ZsetListpack,
            ValueType::ListQuicklist2,
            ValueType::Hash,
            ValueType::SetHashtable,
            ValueType::SetIntset,
            ValueType::Zset2,
        ];
        if with_sets {
            wanted.push(ValueType::SetListpack);
        }
        let types: HashSet<_> = values.iter().map(|(t, _)| *t).collect();
        for t in wanted {
            assert!(types.contains(&t), "the fixtures hold no {t:?}");
        }
        let (mut answered, mut declined) = (0, 0);
        for (vtype, body) in &values {
            each_damage(body, |copy, at, flip| {
                let v = Value { vtype: *vtype, body: Input::new(copy) };
                let Some(fast) = check_in_one_pass(&v) else {
                    declined += 1;
                    return;
                };
                answered += 1;
                match walk_elements(&v, 10) {
                    Ok(slow) => assert!(
                        slow.elements == fast.elements && slow.warning.is_none(),
                        "{vtype:?}, byte {at:?} ^ {flip:#x}: walk {} {:?}, pass {}",
                        slow.elements,
                        slow.warning,
                        fast.elements
                    ),
                    Err(e) => panic!("{vtype:?}, byte {at:?} ^ {flip:#x}: the walk fails ({e}), the pass accepts"),
                }
            });
        }
        eprintln!("{} values: the pass answered {answered} times, declined {declined}", values.len());
        assert!(answered > 100 && declined > 100, "answered {answered}, declined {declined}");
    }

    /// check_value skips the loader's pass for a listpack set, hash or zset, an intset or a
    /// list that the one pass finds sound: the loader's checks pass on every such value, as
    /// written and with each byte damaged.
    #[test]
    fn a_sound_walk_passes_the_loaders_checks() {
        let (samples, _) = crate::one_pass_samples::samples();
        let shortcut = [
            ValueType::SetIntset,
            ValueType::SetListpack,
            ValueType::HashListpack,
            ValueType::ZsetListpack,
            ValueType::ListQuicklist2,
        ];
        let (mut answered, mut declined) = (0, 0);
        for s in samples.iter().filter(|s| shortcut.contains(&s.vtype)) {
            each_damage(&s.file[s.body.clone()], |copy, at, flip| {
                let v = Value { vtype: s.vtype, body: Input::new(copy) };
                if check_in_one_pass(&v).is_none() {
                    declined += 1;
                    return;
                }
                answered += 1;
                if let Err(e) = v.loader_check() {
                    panic!("{:?}, byte {at:?} ^ {flip:#x}: the one pass answers, the loader refuses: {e}", s.vtype);
                }
            });
        }
        assert!(answered > 100 && declined > 100, "answered {answered}, declined {declined}");
    }
}
