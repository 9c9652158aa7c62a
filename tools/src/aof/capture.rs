//! `aoftool capture`: a continuous backup of a live Redis (or ferrokv) as a multi-part AOF
//! directory that Redis itself loads. The tool attaches as a replica: the full sync's
//! snapshot becomes the base RDB, the replication stream the incr file (with `#TS:`
//! annotations, PINGs and REPLCONF left out), acknowledged every second as a replica
//! does. A dropped link resumes with PSYNC from the last applied offset; a full resync
//! starts a new base. The manifest is written last and atomically, so the directory
//! always loads: an incr file only ever ends at a whole command outside a MULTI (a
//! dropped link's unfinished tail is cut). A state file beside them records the offset
//! the files hold, so a capture started again on the same directory continues with PSYNC
//! instead of a full sync.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferrokv::format::aof::manifest::Manifest;
use ferrokv::format::aof::CommandReader;
use ferrokv::persist::feed::put_multibulk;

use crate::net::{self, Access, Conn};
use crate::out::ToolError;

/// What to capture, and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// `host:port` of the server to follow.
    pub addr: String,
    /// Its credentials and TLS.
    pub access: Access,
    /// The AOF directory written (created when missing).
    pub dir: PathBuf,
    /// The files' prefix, Redis's `appendfilename`.
    pub name: String,
    /// Stop after this long (else run until the process is stopped).
    pub duration: Option<Duration>,
}

/// Where a capture stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub replid: String,
    /// The stream offset the files hold everything up to.
    pub offset: u64,
    pub full_syncs: u64,
    pub partial_syncs: u64,
    pub commands: u64,
}

/// How long a silent link is waited for, and between reconnections.
const READ_TICK: Duration = Duration::from_millis(100);
const RETRY: Duration = Duration::from_secs(1);
const LINK_TIMEOUT: Duration = Duration::from_secs(60);

/// Follow `opts.addr` into `opts.dir` until the duration ends (or forever).
pub fn capture(opts: &Options, mut progress: impl FnMut(&str)) -> Result<Summary, ToolError> {
    std::fs::create_dir_all(&opts.dir)?;
    let started = Instant::now();
    let out_of_time = || opts.duration.is_some_and(|d| started.elapsed() >= d);
    let mut files = Files {
        dir: opts.dir.clone(),
        name: opts.name.clone(),
        manifest: Manifest::default(),
        incr: None,
        recorded: None,
    };
    let mut sum = Summary::default();
    match files.resume() {
        Ok(Some(state)) => {
            progress(&format!(
                "resuming {} from offset {} ({} of a previous capture)",
                state.replid,
                state.offset,
                files.incr_name().unwrap_or_default()
            ));
            sum.replid = state.replid;
            sum.offset = state.offset;
        }
        Ok(None) => {}
        Err(why) => {
            progress(&format!("not resuming the files in {}: {why}; starting with a full sync", opts.dir.display()))
        }
    }
    while !out_of_time() {
        match session(opts, &mut files, &mut sum, &out_of_time, &mut progress) {
            Ok(()) => {}
            Err(Failure::Disk(e)) => {
                files.cut_unfinished(&sum)?;
                return Err(ToolError::Io(e));
            }
            Err(Failure::Link(e)) => {
                files.cut_unfinished(&sum)?;
                progress(&format!("link to {} lost at offset {}: {e}; retrying", opts.addr, sum.offset));
                if !out_of_time() {
                    std::thread::sleep(RETRY);
                }
            }
        }
    }
    files.cut_unfinished(&sum)?;
    Ok(sum)
}

/// Why a link's session ended: the link (retried), or the directory (fatal).
enum Failure {
    Link(String),
    Disk(std::io::Error),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Disk(e)
    }
}

/// One connection: the handshake, a full sync or a continuation, then the stream.
fn session(
    opts: &Options,
    files: &mut Files,
    sum: &mut Summary,
    out_of_time: &dyn Fn() -> bool,
    progress: &mut impl FnMut(&str),
) -> Result<(), Failure> {
    let mut link = Link::connect(opts).map_err(Failure::Link)?;
    let from = (!sum.replid.is_empty()).then(|| (sum.replid.clone(), sum.offset + 1));
    match link.psync(from).map_err(Failure::Link)? {
        Sync::Continue(id) => {
            sum.partial_syncs += 1;
            if let Some(id) = id {
                sum.replid = id;
            }
            progress(&format!("continuing {} from offset {}", sum.replid, sum.offset));
        }
        Sync::Full { replid, offset, len } => {
            files.new_base(&mut link, len)?;
            sum.full_syncs += 1;
            sum.replid = replid;
            sum.offset = offset;
            files.sync(sum)?;
            progress(&format!("full sync: {len} bytes of snapshot, stream {}:{offset}", sum.replid));
        }
    }
    follow(&mut link, files, sum, out_of_time)
}

/// Run the stream into the incr file until the link fails or the time is up.
fn follow(
    link: &mut Link,
    files: &mut Files,
    sum: &mut Summary,
    out_of_time: &dyn Fn() -> bool,
) -> Result<(), Failure> {
    let mut buf: Vec<u8> = Vec::new();
    let mut pos = 0;
    // Bytes read of a unit not applied yet (inside a MULTI).
    let mut pending: u64 = 0;
    let mut in_multi = false;
    let (mut last_ack, mut last_io) = (Instant::now(), Instant::now());
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        while let Some((argv, end)) = CommandReader::command_at(&buf, pos) {
            let raw = &buf[pos..end];
            let name = argv[0].to_ascii_lowercase();
            pending += raw.len() as u64;
            match name.as_slice() {
                b"ping" => {}
                b"replconf" => {
                    if argv.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"getack")) {
                        // The offset applied before this command, as Redis replicas answer.
                        link.ack(sum.offset).map_err(|e| Failure::Link(e.to_string()))?;
                    }
                }
                _ => {
                    files.write_command(raw, !in_multi)?;
                    sum.commands += 1;
                    if name == b"multi" {
                        in_multi = true;
                    } else if name == b"exec" {
                        in_multi = false;
                    }
                }
            }
            pos = end;
            if !in_multi {
                sum.offset += pending;
                pending = 0;
                files.commit();
            }
        }
        buf.drain(..pos);
        pos = 0;
        if last_ack.elapsed() >= Duration::from_secs(1) {
            last_ack = Instant::now();
            files.sync(sum)?;
            link.ack(sum.offset).map_err(|e| Failure::Link(e.to_string()))?;
        }
        if out_of_time() {
            return Ok(());
        }
        match link.read(&mut chunk) {
            Ok(0) => return Err(Failure::Link("the server closed the connection".into())),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                last_io = Instant::now();
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if last_io.elapsed() >= LINK_TIMEOUT {
                    return Err(Failure::Link("no data from the server for 60 seconds".into()));
                }
            }
            Err(e) => return Err(Failure::Link(e.to_string())),
        }
    }
}

/// The directory's files: the manifest as written, and the incr file being appended.
struct Files {
    dir: PathBuf,
    name: String,
    manifest: Manifest,
    incr: Option<Incr>,
    /// The state last written to the state file.
    recorded: Option<State>,
}

struct Incr {
    file: File,
    /// Its length at the last applied command: what a dropped link cuts back to.
    committed: u64,
    written: u64,
    last_ts: i64,
}

impl Files {
    /// A full sync: the snapshot's `len` bytes become a new base, with a new empty incr
    /// file; the manifest switches to them, then the old files go.
    fn new_base(&mut self, link: &mut Link, len: u64) -> Result<(), Failure> {
        let m = &self.manifest;
        let old: Vec<String> = m.base.iter().chain(&m.incr).chain(&m.history).map(|f| f.name.clone()).collect();
        let mut next = self.manifest.clone();
        next.base = None;
        next.incr.clear();
        let base = next.new_base(&self.name, true);
        next.history.clear();
        let incr = next.new_incr(&self.name);
        let base_path = self.dir.join(&base);
        let mut f = File::create(&base_path)?;
        let mut left = len;
        let mut chunk = vec![0u8; 64 * 1024];
        while left > 0 {
            let want = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = match link.r.read(&mut chunk[..want]) {
                Ok(0) => return Err(Failure::Link(format!("closed after {} of {len} snapshot bytes", len - left))),
                Ok(n) => n,
                Err(e) => return Err(Failure::Link(e.to_string())),
            };
            f.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        f.sync_all()?;
        let stream_db = ferrokv::persist::replication::snapshot_stream_db(&base_path);
        let mut file = OpenOptions::new().create(true).write(true).truncate(true).open(self.dir.join(&incr))?;
        let mut head = Vec::new();
        if stream_db != 0 {
            // The stream goes on in the database it had selected; a loader starts in 0.
            let db = stream_db.to_string();
            put_multibulk(&mut head, &[b"SELECT".as_slice(), db.as_bytes()]);
            file.write_all(&head)?;
        }
        file.sync_all()?;
        ferrokv::persist::aof::persist_manifest(&self.dir, &self.name, &next)
            .map_err(|e| Failure::Disk(std::io::Error::other(e.to_string())))?;
        for name in old {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
        self.manifest = next;
        let n = head.len() as u64;
        self.incr = Some(Incr { file, committed: n, written: n, last_ts: 0 });
        Ok(())
    }

    /// Append one command; `unit_start` when it begins a unit (a `#TS:` line may precede
    /// it when the second changed).
    fn write_command(&mut self, raw: &[u8], unit_start: bool) -> std::io::Result<()> {
        let Some(incr) = &mut self.incr else { return Ok(()) };
        if unit_start {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
            if now > incr.last_ts {
                let ts = format!("#TS:{now}\r\n");
                incr.file.write_all(ts.as_bytes())?;
                incr.written += ts.len() as u64;
                incr.last_ts = now;
            }
        }
        incr.file.write_all(raw)?;
        incr.written += raw.len() as u64;
        Ok(())
    }

    /// Everything written is applied (no MULTI open).
    fn commit(&mut self) {
        if let Some(incr) = &mut self.incr {
            incr.committed = incr.written;
        }
    }

    /// fsync the incr file, then record where the capture stands (the state a later run
    /// resumes from: the offset applied and the incr file's length at it).
    fn sync(&mut self, sum: &Summary) -> std::io::Result<()> {
        let Some(name) = self.incr_name() else { return Ok(()) };
        let Some(incr) = &mut self.incr else { return Ok(()) };
        incr.file.sync_data()?;
        let state = State { replid: sum.replid.clone(), offset: sum.offset, incr: name, length: incr.committed };
        // A quiet second leaves the state as it was: no rename and directory fsync for it.
        if self.recorded.as_ref() == Some(&state) {
            return Ok(());
        }
        state.write(&self.dir, &self.name)?;
        self.recorded = Some(state);
        Ok(())
    }

    /// The link ended: cut what was written of an unfinished MULTI, so the file ends
    /// where the offset the next PSYNC asks from begins.
    fn cut_unfinished(&mut self, sum: &Summary) -> std::io::Result<()> {
        let Some(incr) = &mut self.incr else { return Ok(()) };
        if incr.written != incr.committed {
            incr.file.set_len(incr.committed)?;
            incr.file.seek(SeekFrom::Start(incr.committed))?;
            incr.written = incr.committed;
        }
        self.sync(sum)
    }

    /// The incr file being appended.
    fn incr_name(&self) -> Option<String> {
        self.manifest.incr.last().map(|f| f.name.clone())
    }

    /// Take up the files a previous capture left, as its state file says: the manifest, its
    /// last incr file cut back to the recorded length. None when there is nothing to
    /// resume; Err (why) when the files do not agree with the state.
    fn resume(&mut self) -> Result<Option<State>, String> {
        let manifest = ferrokv::persist::load::read_manifest_in(&self.dir, &self.name).map_err(|e| e.to_string())?;
        if manifest == Manifest::default() {
            return Ok(None);
        }
        // Whether or not it is resumed, the directory's manifest is taken up: a full sync's
        // files then take the next numbers, never the name of a file the manifest still
        // names (a capture stopped while writing them leaves the old set loadable).
        self.manifest = manifest;
        let Some(state) = State::read(&self.dir, &self.name)? else { return Ok(None) };
        if self.manifest.incr.last().map(|f| f.name.as_str()) != Some(state.incr.as_str())
            || self.manifest.base.is_none()
        {
            return Err(format!("the manifest's last incr file is not {}, which the state names", state.incr));
        }
        let incr_path = self.dir.join(&state.incr);
        let mut file =
            OpenOptions::new().write(true).open(&incr_path).map_err(|e| format!("{}: {e}", incr_path.display()))?;
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        if len < state.length {
            return Err(format!("{} has {len} bytes, fewer than the {} recorded", state.incr, state.length));
        }
        file.set_len(state.length).map_err(|e| e.to_string())?;
        file.seek(SeekFrom::Start(state.length)).map_err(|e| e.to_string())?;
        file.sync_data().map_err(|e| e.to_string())?;
        self.incr = Some(Incr { file, committed: state.length, written: state.length, last_ts: 0 });
        Ok(Some(state))
    }
}

/// Where a capture stands, kept beside its files (`<appendfilename>.capture`), written
/// atomically after each fsync of the incr file: the replication ID and offset applied, and
/// the incr file's length at that offset. Redis ignores the file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    replid: String,
    offset: u64,
    incr: String,
    length: u64,
}

impl State {
    fn path(dir: &std::path::Path, name: &str) -> PathBuf {
        dir.join(format!("{name}.capture"))
    }

    fn write(&self, dir: &std::path::Path, name: &str) -> std::io::Result<()> {
        let text =
            format!("replid {}\noffset {}\nincr {}\nlength {}\n", self.replid, self.offset, self.incr, self.length);
        let path = State::path(dir, name);
        let tmp = dir.join(format!("{name}.capture.tmp"));
        ferrokv::persist::snapshot::write_atomically(&tmp, &path, |mut w| {
            w.write_all(text.as_bytes())?;
            Ok(w)
        })
        .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// None when there is no state file.
    fn read(dir: &std::path::Path, name: &str) -> Result<Option<State>, String> {
        let path = State::path(dir, name);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(' ')))
                .ok_or_else(|| format!("{}: no {key}", path.display()))
        };
        let number = |key: &str| field(key)?.parse::<u64>().map_err(|_| format!("{}: bad {key}", path.display()));
        Ok(Some(State {
            replid: field("replid")?.to_string(),
            offset: number("offset")?,
            incr: field("incr")?.to_string(),
            length: number("length")?,
        }))
    }
}

enum Sync {
    Full { replid: String, offset: u64, len: u64 },
    Continue(Option<String>),
}

/// The replication link: blocking, with a short read timeout while streaming.
struct Link {
    r: BufReader<Conn>,
}

impl Link {
    fn connect(opts: &Options) -> Result<Link, String> {
        let sock = net::connect(&opts.addr, &opts.access, LINK_TIMEOUT).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(LINK_TIMEOUT)).map_err(|e| e.to_string())?;
        let mut link = Link { r: BufReader::new(sock) };
        if let Some(pass) = &opts.access.password {
            let reply = match &opts.access.user {
                Some(u) => link.ask(&["AUTH", u, pass])?,
                None => link.ask(&["AUTH", pass])?,
            };
            if reply.starts_with('-') {
                return Err(format!("AUTH: {reply}"));
            }
        }
        let pong = link.ask(&["PING"])?;
        if pong.starts_with('-') {
            return Err(format!("PING: {pong}"));
        }
        link.ask(&["REPLCONF", "capa", "psync2"])?;
        Ok(link)
    }

    fn ask(&mut self, args: &[&str]) -> Result<String, String> {
        let mut out = Vec::new();
        put_multibulk(&mut out, args);
        self.r.get_mut().write_all(&out).map_err(|e| e.to_string())?;
        self.line()
    }

    /// The next reply line.
    fn line(&mut self) -> Result<String, String> {
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("the server closed the connection".into());
            }
            let line = line.trim_end_matches(['\r', '\n']);
            // Newlines are keepalives while the server prepares the snapshot.
            if !line.is_empty() {
                return Ok(line.to_string());
            }
        }
    }

    /// PSYNC: continue `from` (replid, offset) when given, else a full sync.
    fn psync(&mut self, from: Option<(String, u64)>) -> Result<Sync, String> {
        let reply = match &from {
            Some((id, offset)) => self.ask(&["PSYNC", id, &offset.to_string()]),
            None => self.ask(&["PSYNC", "?", "-1"]),
        }?;
        if let Some(id) = reply.strip_prefix("+CONTINUE") {
            return Ok(Sync::Continue(Some(id.trim()).filter(|id| !id.is_empty()).map(str::to_string)));
        }
        let mut words = reply.split(' ');
        let (Some("+FULLRESYNC"), Some(replid), Some(offset)) = (words.next(), words.next(), words.next()) else {
            return Err(format!("unexpected reply to PSYNC: {reply}"));
        };
        let offset = offset.parse().map_err(|_| format!("bad offset in {reply}"))?;
        let bulk = self.line()?;
        let len = bulk
            .strip_prefix('$')
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| format!("the snapshot does not start with a length: {bulk}"))?;
        Ok(Sync::Full { replid: replid.to_string(), offset, len })
    }

    /// Stream bytes (those buffered past the handshake first), waiting at most a tick.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.r.get_ref().set_read_timeout(Some(READ_TICK))?;
        self.r.read(buf)
    }

    fn ack(&mut self, offset: u64) -> std::io::Result<()> {
        let mut out = Vec::new();
        let off = offset.to_string();
        put_multibulk(&mut out, &[b"REPLCONF".as_slice(), b"ACK", off.as_bytes()]);
        self.r.get_mut().write_all(&out)
    }
}
