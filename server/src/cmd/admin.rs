//! Persistence and server control: SAVE BGSAVE BGREWRITEAOF LASTSAVE SHUTDOWN DEBUG TIME WAIT.

use std::time::Duration;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::{eq_ic, parse_f64};
use ferrokv::keyspace::idle_secs;
use ferrokv::{Reply, Session};

use super::text;
use crate::client::Client;
use crate::log::log;
use crate::server::Server;
use crate::shutdown::{ShutdownMode, ShutdownRequest, ShutdownStep, SHUTDOWN_FAILED};

pub fn save(s: &mut Server, _: &mut Client, _: &[Vec<u8>]) -> Reply {
    if s.jobs.bgsave.is_some() || s.replicas.syncs.is_running() {
        return Reply::err("ERR Background save already in progress");
    }
    match s.save_now() {
        Ok(()) => Reply::ok(),
        Err(e) => {
            log(&format!("Failed saving the DB: {e}"));
            Reply::err("ERR")
        }
    }
}

/// Inside EXEC a snapshot would hold half of the transaction (and a rewrite would cut its
/// propagated unit in two): BGSAVE and BGREWRITEAOF start as EXEC ends (cmd/multi.rs), as
/// Redis 7.0 on schedules them. Redis 6.2 forks at once and answers `started`: its answer
/// is kept, not its half-transaction snapshot.
fn snapshot_deferred(c: &Client) -> bool {
    c.in_exec
}

fn scheduled_reply(s: &Server, scheduled: &'static str, started: &'static str) -> Reply {
    let v70 = s.engine.config().version.behaves_as() >= ServerVersion::Redis70;
    Reply::simple(if v70 { scheduled } else { started })
}

pub fn bgsave(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let schedule = match a.len() {
        1 => false,
        2 if eq_ic(&a[1], "schedule") => true,
        _ => return Reply::syntax(),
    };
    if s.jobs.bgsave.is_some() || s.replicas.syncs.is_running() {
        return Reply::err("ERR Background save already in progress");
    }
    if snapshot_deferred(c) {
        s.jobs.bgsave_scheduled = true;
        return scheduled_reply(s, "Background saving scheduled", "Background saving started");
    }
    if s.jobs.bgrewrite.is_some() {
        if schedule {
            s.jobs.bgsave_scheduled = true;
            return Reply::simple("Background saving scheduled");
        }
        return Reply::err(
            "ERR Another child process is active (AOF?): can't BGSAVE right now. \
             Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        );
    }
    s.start_bgsave();
    Reply::simple("Background saving started")
}

pub fn bgrewriteaof(s: &mut Server, c: &mut Client, _: &[Vec<u8>]) -> Reply {
    if s.jobs.bgrewrite.is_some() {
        return Reply::err("ERR Background append only file rewriting already in progress");
    }
    if snapshot_deferred(c) {
        s.jobs.rewrite_scheduled = true;
        return scheduled_reply(
            s,
            "Background append only file rewriting scheduled",
            "Background append only file rewriting started",
        );
    }
    if s.jobs.bgsave.is_some() || s.replicas.syncs.is_running() {
        s.jobs.rewrite_scheduled = true;
        return Reply::simple("Background append only file rewriting scheduled");
    }
    match s.start_bgrewrite() {
        Ok(()) => Reply::simple("Background append only file rewriting started"),
        Err(e) => {
            log(&format!("Can't rewrite append only file in background: {e}"));
            Reply::err(
                "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.",
            )
        }
    }
}

pub fn lastsave(s: &mut Server, _: &mut Client, _: &[Vec<u8>]) -> Reply {
    Reply::Int(s.jobs.last_save)
}

pub fn shutdown(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let (mut nosave, mut save, mut force, mut abort, mut now) = (false, false, false, false, false);
    for arg in &a[1..] {
        if eq_ic(arg, "nosave") {
            nosave = true;
        } else if eq_ic(arg, "save") {
            save = true;
        } else if eq_ic(arg, "now") {
            now = true;
        } else if eq_ic(arg, "force") {
            force = true;
        } else if eq_ic(arg, "abort") {
            abort = true;
        } else {
            return Reply::syntax();
        }
    }
    if (abort && (nosave || save || now || force)) || (nosave && save) {
        return Reply::syntax();
    }
    if abort {
        if s.abort_shutdown() {
            return Reply::ok();
        }
        return Reply::err("ERR No shutdown in progress.");
    }
    let since_7_0 = s.engine.config().version.behaves_as() >= ServerVersion::Redis70;
    if !now && (c.in_exec || c.deny_blocking) && since_7_0 {
        return Reply::err("ERR SHUTDOWN without NOW or ABORT isn't allowed for DENY BLOCKING client");
    }
    let mode = if nosave {
        ShutdownMode::NoSave
    } else if save {
        ShutdownMode::Save
    } else {
        ShutdownMode::Default
    };
    match s.request_shutdown(ShutdownRequest { mode, force, now }) {
        ShutdownStep::Exit => {
            c.close_after_reply = true;
            Reply::ok()
        }
        ShutdownStep::Waiting => {
            s.wait_for_shutdown(c);
            Reply::Nil
        }
        ShutdownStep::Failed => Reply::err(SHUTDOWN_FAILED),
    }
}

/// Redis's refusal of a command its `enable-*-command` option keeps off.
fn protected_refusal(command: &str, option: &str) -> Reply {
    Reply::error(format!(
        "ERR {command} command not allowed. If the {option} option is set to \"local\", you can run it from a local \
         connection, otherwise you need to set this option in the configuration file, and then restart the server."
    ))
}

const MODULE_HELP: &[&str] = &[
    "LIST",
    "    List the modules loaded (none: modules are not supported here).",
    "LOAD <path> [<arg> ...]",
    "    Load the module at <path> (refused: modules are not supported here).",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load the module at <path> with configurations and arguments (refused likewise).",
    "UNLOAD <name>",
    "    Unload the module <name>.",
];

/// MODULE: refused unless `enable-module-command` allows it (off by default, as in Redis
/// 7); where allowed, no module is loaded and none can be (modules are not supported).
pub fn module(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = a[1].to_ascii_lowercase();
    // LIST is not protected; LOAD, LOADEX and UNLOAD are.
    let protected = matches!(sub.as_slice(), b"load" | b"loadex" | b"unload");
    if protected && !s.cfg.enable_module_command.allows(c.addr.as_ref()) {
        return protected_refusal("MODULE", "enable-module-command");
    }
    match (sub.as_slice(), a.len()) {
        (b"help", 2) => Reply::help("MODULE", MODULE_HELP, crate::version::version()),
        (b"list", 2) => Reply::Array(Vec::new()),
        (b"load" | b"loadex", n) if n >= 3 => {
            log(&format!("Module {} failed to load: modules are not supported", text(&a[2])));
            Reply::err("ERR Error loading the extension. Please check the server logs.")
        }
        (b"unload", 3) => Reply::err("ERR Error unloading module: no such module with that name"),
        (b"list" | b"load" | b"loadex" | b"unload", _) => crate::cmd::sub_arity("module", &a[1]),
        _ => crate::cmd::unknown_subcommand(&a[1], "module"),
    }
}

/// TIME: the clock read now (Redis 6.2, 7.0), or the command's cached start (7.2 on,
/// where a script or a transaction sees one time).
pub fn time(s: &mut Server, _: &mut Client, _: &[Vec<u8>]) -> Reply {
    let us = if s.engine.config().version.behaves_as() >= ServerVersion::Redis72 {
        s.command_us
    } else {
        crate::server::unix_us()
    };
    Reply::bulks([us.div_euclid(1_000_000).to_string(), us.rem_euclid(1_000_000).to_string()])
}

pub fn debug(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if !s.cfg.enable_debug_command.allows(c.addr.as_ref()) {
        return protected_refusal("DEBUG", "enable-debug-command");
    }
    let harmless =
        ["log", "sleep", "help", "protocol", "error", "pause-cron", "segfault", "panic", "set-active-expire"];
    if s.is_loading() && !harmless.iter().any(|h| eq_ic(&a[1], h)) {
        // The engine is empty until the load ends (DEBUG RELOAD would save it).
        return Reply::err(crate::admission::LOADING_ERROR);
    }
    if eq_ic(&a[1], "reload") {
        // Every key is replaced: WATCHes fail.
        s.touch_all_watched(c);
    }
    let sub = a[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"digest" if a.len() == 2 => Reply::Simple(s.engine.digest().into()),
        b"digest-value" => {
            let db = &s.engine.keyspace().dbs[c.session.db];
            let digests = a[2..]
                .iter()
                .map(|k| {
                    let d = match db.get(k) {
                        Some(slot) => ferrokv::digest::value_digest(
                            &slot.value.to_logical(),
                            slot.has_ttl(),
                            crate::version::doubles(),
                        ),
                        None => [0u8; 20],
                    };
                    Reply::Simple(ferrokv::digest::hex(&d).into())
                })
                .collect();
            Reply::Array(digests)
        }
        b"reload" => {
            let r = debug_reload(s, &a[2..]);
            // The dataset was emptied and loaded again: WATCH sees every key touched, as
            // Redis's emptyData signals (unless the load merged into what was there).
            if r == Reply::ok() && !a[2..].iter().any(|o| eq_ic(o, "noflush") || eq_ic(o, "merge")) {
                s.touch_all_watched(c);
                s.tracking_flushed(Some(c));
            }
            r
        }
        b"config-rewrite-force-all" if a.len() == 2 => super::config::rewrite(s, true),
        b"set-disable-deny-scripts" if a.len() == 3 => {
            s.scripts.disable_deny = super::debug::atoi(&a[2]) != 0;
            Reply::ok()
        }
        b"set-active-expire" if a.len() == 3 => {
            s.active_expire = super::debug::atoi(&a[2]) != 0;
            Reply::ok()
        }
        b"loadaof" => super::debug::loadaof(s, c),
        b"quicklist-packed-threshold" if a.len() == 3 => super::debug::quicklist_packed_threshold(a),
        b"change-repl-id" if a.len() == 2 => {
            log("Changing replication IDs after receiving DEBUG change-repl-id");
            s.replicas.history.renew();
            Reply::ok()
        }
        b"replicate" if a.len() >= 3 => {
            // To the replicas only (not the AOF), in the stream's current database.
            if let Some(feed) = s.engine.persistence_mut().replication.as_mut() {
                let db = feed.selected().unwrap_or(c.session.db);
                feed.unit(&[(db, a[2..].to_vec())]);
            }
            Reply::ok()
        }
        b"sleep" if a.len() == 3 => {
            let secs = parse_f64(&a[2]).unwrap_or(0.0).max(0.0);
            std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
            Reply::ok()
        }
        b"object" if a.len() == 3 => debug_object(s, c, &a[2]),
        b"listpack" if a.len() == 3 => debug_listpack(s, c, &a[2]),
        b"populate" => super::debug::populate(s, c, a),
        b"aof-flush-sleep" if a.len() == 3 => {
            let us = u64::try_from(super::debug::atoi(&a[2])).unwrap_or(0);
            s.cfg.engine.aof_flush_sleep_us = us;
            s.engine.config_mut().aof_flush_sleep_us = us;
            if let Some(aof) = &mut s.engine.persistence_mut().aof {
                aof.reconfigure(&s.cfg.engine);
            }
            Reply::ok()
        }
        // Crashes on purpose, as Redis's: a real SIGSEGV (its crash report, then death by the
        // signal) and a panic (its report, then the process exits).
        b"segfault" => {
            let _ = signal_hook::low_level::raise(signal_hook::consts::SIGSEGV);
            Reply::ok()
        }
        b"panic" => panic!("DEBUG PANIC"),
        b"set-skip-checksum-validation" if a.len() == 3 => {
            let skip = super::debug::atoi(&a[2]) != 0;
            s.cfg.engine.skip_checksum_validation = skip;
            s.engine.config_mut().skip_checksum_validation = skip;
            Reply::ok()
        }
        b"pause-cron" if a.len() == 3 => {
            s.cron_paused = super::debug::atoi(&a[2]) != 0;
            Reply::ok()
        }
        b"help" => Reply::help("DEBUG", HELP, crate::version::version()),
        b"replybuffer" if a.len() == 4 => replybuffer(s, a),
        // A client library's test asks for an error reply of its choosing (on one line).
        b"error" if a.len() == 3 => Reply::error(text(&a[2]).replace(['\r', '\n'], " ")),
        b"protocol" if a.len() == 3 => super::debug::protocol(c, &a[2]),
        b"log" if a.len() == 3 => {
            log(&format!("DEBUG LOG: {}", text(&a[2])));
            Reply::ok()
        }
        _ => super::debug::subcommand_syntax_error(&a[1], "debug"),
    }
}

/// DEBUG REPLYBUFFER PEAK-RESET-TIME <ms|NEVER|RESET> | RESIZING <0|1>.
fn replybuffer(s: &mut Server, a: &[Vec<u8>]) -> Reply {
    if eq_ic(&a[2], "peak-reset-time") {
        s.reply_buffers.peak_reset = if eq_ic(&a[3], "never") {
            None
        } else if eq_ic(&a[3], "reset") {
            Some(crate::reply_buffer::DEFAULT_PEAK_RESET)
        } else {
            match ferrokv::command::parse_i64(&a[3]) {
                // A negative time means never, as in Redis.
                Some(ms) => u64::try_from(ms).ok().map(Duration::from_millis),
                None => return Reply::err("ERR value is not an integer or out of range"),
            }
        };
    } else if eq_ic(&a[2], "resizing") {
        s.reply_buffers.resizing = super::debug::atoi(&a[3]) != 0;
    } else {
        return super::debug::subcommand_syntax_error(&a[1], "debug");
    }
    Reply::ok()
}

const HELP: &[&str] = &[
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Answer with an error whose text is <string>.",
    "REPLYBUFFER PEAK-RESET-TIME <never||reset|time>",
    "    How long a client's reply buffer peak counts before it restarts (ms).",
    "REPLYBUFFER RESIZING <0|1>",
    "    Turn the timer's resizing of client reply buffers off or on.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "OBJECT <key>",
    "    Show low level info about the `key` and associated value.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Options: MERGE, NOFLUSH, NOSAVE.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not accessed.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
];

fn debug_reload(s: &mut Server, opts: &[Vec<u8>]) -> Reply {
    let mut save = true;
    let mut flush = true;
    let mut merge = false;
    for o in opts {
        if eq_ic(o, "nosave") {
            save = false;
        } else if eq_ic(o, "noflush") {
            flush = false;
        } else if eq_ic(o, "merge") {
            merge = true;
        } else {
            return Reply::error(format!("ERR unknown DEBUG RELOAD option '{}'", text(o)));
        }
    }
    if save {
        if let Err(e) = s.save_now() {
            return Reply::error(format!("ERR Error trying to save the DB: {e}"));
        }
    }
    let loaded = match s.read_dump_file() {
        Ok(ks) => ks,
        Err(e) => return Reply::error(format!("ERR Error trying to load the RDB dump: {e}")),
    };
    if !flush && !merge {
        // Without MERGE a library the server has already fails the load, as in Redis
        // (its libraries are read before any key).
        if let Some(name) =
            loaded.functions.iter().map(|(n, _)| n).find(|n| s.engine.keyspace().functions.get(n).is_some())
        {
            crate::log::warn(&format!("Failed loading library {name}: Library '{name}' already exists"));
            return Reply::err("ERR Error trying to load the RDB dump");
        }
    }
    let installed = if flush {
        s.replace_dataset(loaded)
    } else {
        merge_keyspace(s, loaded);
        crate::script::functions::install(s)
    };
    if let Err(e) = installed {
        return Reply::error(format!("ERR Error trying to load the RDB dump: {e}"));
    }
    log("DB reloaded by DEBUG RELOAD");
    Reply::ok()
}

/// DEBUG RELOAD MERGE: libraries of the file replace those of the same name, keys
/// already there win.
fn merge_keyspace(s: &mut Server, loaded: ferrokv::keyspace::Keyspace) {
    for (name, code) in loaded.functions.iter() {
        s.engine.keyspace_mut().functions.insert(name.to_string(), code.to_vec());
    }
    for (i, db) in loaded.dbs.iter().enumerate() {
        let Some(mine) = s.engine.keyspace_mut().dbs.get_mut(i) else { continue };
        for (slot, expire) in db.iter() {
            if let Some(pos) = mine.add_new(&slot.key, slot.value.clone(), slot.lru) {
                if let Some(t) = expire {
                    mine.set_expire_at(pos, t);
                }
            }
        }
    }
}

/// DEBUG LISTPACK key: the entries of a listpack-encoded value, printed on stdout (as
/// Redis prints its lpRepr there; the text is ours, the reply is Redis's).
fn debug_listpack(s: &mut Server, c: &mut Client, key: &[u8]) -> Reply {
    let Some(slot) = s.engine.keyspace().dbs[c.session.db].get(key) else {
        return Reply::err("ERR no such key");
    };
    if !matches!(slot.value.encoding(), "listpack" | "listpackex") {
        return Reply::err("ERR Not a listpack encoded object.");
    }
    let logical = slot.value.to_logical();
    println!("{{listpack of '{}' ({}): {logical:?}}}", String::from_utf8_lossy(key), slot.value.encoding());
    Reply::simple("Listpack structure printed on stdout")
}

fn debug_object(s: &mut Server, c: &mut Client, key: &[u8]) -> Reply {
    let db = c.session.db;
    let Some(slot) = s.engine.keyspace().dbs[db].get(key) else {
        return Reply::err("ERR no such key");
    };
    let encoding = slot.value.encoding();
    let lru = slot.lru;
    // Where the value lives: the same after a write in place (INCR), as Redis's object.
    let addr = &slot.value as *const ferrokv::value::Value as usize;
    let idle = idle_secs(s.engine.clock().lru(), lru);
    let mut extra = String::new();
    if let (ferrokv::value::Value::List(l), "quicklist") = (&slot.value, encoding) {
        // Our nodes, the fill and whether list-compress-depth asks for compression (the
        // nodes themselves are kept uncompressed).
        let nodes = l.node_count();
        extra = format!(
            " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{}",
            l.len() as f64 / nodes as f64,
            s.cfg.engine.limits.list_max_listpack_size,
            i32::from(s.cfg.list_compress_depth != 0)
        );
    }
    // The serialized length is DUMP's payload less its type byte, version and checksum.
    let dumped = s.engine.call(&mut Session { db, ..Default::default() }, &[b"DUMP".to_vec(), key.to_vec()]);
    let serialized = match dumped {
        Reply::Bulk(b) => b.len().saturating_sub(11),
        _ => 0,
    };
    Reply::Simple(
        format!(
            "Value at:0x{addr:x} refcount:1 encoding:{encoding} serializedlength:{serialized} lru:{lru} lru_seconds_idle:{idle}{extra}"
        )
        .into(),
    )
}
