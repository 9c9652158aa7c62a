//! The ACL command: SETUSER GETUSER DELUSER USERS LIST WHOAMI CAT GENPASS DRYRUN LOG
//! LOAD SAVE HELP, with Redis 7.0's replies and error texts.

use std::io::Read;
use std::path::PathBuf;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::parse_i64;
use ferrokv::keyspace::Clock;
use ferrokv::Reply;

use super::enforce::check_user_command;
use super::registry::registry;
use super::{categories, has_spaces, Acl, Reason, Selector};
use crate::client::Client;
use crate::cmd::{sub_arity, text, unknown_subcommand};
use crate::server::Server;

const NO_ACL_FILE: &str =
    "ERR This Redis instance is not configured to use an ACL file. You may want to specify users \
                           via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis \
                           configuration file set) in order to store users in the Redis configuration.";

const HELP: &[&str] = &[
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];

/// `acl-pubsub-default`: new users and `reset` get every channel when `allchannels`.
pub fn all_channels_default(s: &Server) -> bool {
    s.cfg.get("acl-pubsub-default").is_some_and(|v| v == "allchannels")
}

/// The ACL file, when `aclfile` is set (relative to `dir`).
pub fn acl_file(s: &Server) -> Option<PathBuf> {
    let name = s.cfg.get("aclfile").filter(|f| !f.is_empty())?;
    let path = PathBuf::from(&name);
    Some(if path.is_absolute() { path } else { s.cfg.engine.dir.join(path) })
}

pub fn acl(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let reg = registry();
    let Some(id) = reg.resolve(a) else {
        return unknown_subcommand(&a[1], "acl");
    };
    if !reg.arity_ok(id, a.len()) {
        return sub_arity("acl", &a[1]);
    }
    let sub = a[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"setuser" => setuser(s, c, a),
        b"deluser" => deluser(s, c, a),
        b"getuser" if a.len() == 3 => getuser(s, &a[2]),
        b"users" if a.len() == 2 => Reply::Array(s.acl.users.keys().map(|n| Reply::Bulk(n.clone())).collect()),
        b"list" if a.len() == 2 => Reply::Array(s.acl.list_lines().into_iter().map(Reply::Bulk).collect()),
        b"whoami" if a.len() == 2 => Reply::Bulk(c.user.clone()),
        b"load" | b"save" if acl_file(s).is_none() => Reply::err(NO_ACL_FILE),
        b"load" if a.len() == 2 => load(s, c),
        b"save" if a.len() == 2 => save(s),
        b"cat" if a.len() == 2 => Reply::bulks(categories::NAMES.iter().map(|(n, _)| *n)),
        b"cat" if a.len() == 3 => cat(&a[2]),
        b"genpass" if a.len() <= 3 => genpass(a.get(2)),
        b"log" if a.len() <= 3 => log(s, a.get(2)),
        b"dryrun" => dryrun(s, &a[2], &a[3..]),
        b"help" if a.len() == 2 => Reply::help("ACL", HELP, crate::version::version()),
        _ => Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            String::from_utf8_lossy(&a[1][..a[1].len().min(128)])
        )),
    }
}

fn setuser(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let name = &a[2];
    if has_spaces(name) {
        return Reply::err("ERR Usernames can't contain spaces or null characters");
    }
    let user = match s.acl.staged_user(name, &a[3..], all_channels_default(s)) {
        Ok(u) => u,
        // As addReplyErrorSdsSafe: the text stays on one line.
        Err(e) => return Reply::error(format!("ERR {}", e.replace(['\r', '\n'], " "))),
    };
    if let Some(old) = s.acl.users.get(name).cloned() {
        s.acl_kill_pubsub_clients(c, &old, &user);
    }
    s.acl.users.insert(name.clone(), user);
    Reply::ok()
}

fn deluser(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a[2..].iter().any(|n| n == b"default") {
        return Reply::err("ERR The 'default' user cannot be removed");
    }
    let mut deleted = Vec::new();
    for name in &a[2..] {
        if s.acl.users.remove(name).is_some() {
            deleted.push(name.clone());
        }
    }
    s.acl_kill_users(c, &deleted);
    Reply::Int(deleted.len() as i64)
}

fn selector_fields(sel: &Selector) -> Vec<(Reply, Reply)> {
    vec![
        (Reply::bulk(b"commands"), Reply::bulk(sel.describe_commands().as_bytes())),
        (Reply::bulk(b"keys"), Reply::Bulk(sel.describe_keys())),
        (Reply::bulk(b"channels"), Reply::Bulk(sel.describe_channels())),
    ]
}

fn getuser(s: &Server, name: &[u8]) -> Reply {
    let Some(u) = s.acl.users.get(name) else {
        return Reply::Nil;
    };
    let mut fields = vec![
        (Reply::bulk(b"flags"), Reply::Set(u.flag_names().into_iter().map(|f| Reply::bulk(f.as_bytes())).collect())),
        (Reply::bulk(b"passwords"), Reply::bulks(u.passwords.iter().map(|p| p.as_bytes()))),
    ];
    fields.extend(selector_fields(&u.selectors[0]));
    let selectors = u.selectors[1..].iter().map(|sel| Reply::Map(selector_fields(sel))).collect();
    fields.push((Reply::bulk(b"selectors"), Reply::Array(selectors)));
    Reply::Map(fields)
}

fn cat(name: &[u8]) -> Reply {
    let Some(flag) = categories::by_name(name) else {
        return Reply::error(format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(&name[..name.len().min(128)])
        ));
    };
    let reg = registry();
    let mut out = Vec::new();
    for &top in &reg.top {
        for id in std::iter::once(top).chain(reg.get(top).subs.iter().copied()) {
            if reg.get(id).categories & flag != 0 {
                out.push(Reply::bulk(reg.get(id).name.as_bytes()));
            }
        }
    }
    Reply::Array(out)
}

/// Hex digits from the system's random source.
fn random_hex(chars: usize) -> String {
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_ok();
    if !filled {
        let mut rng = fastrand::Rng::new();
        bytes.iter_mut().for_each(|b| *b = rng.u8(..));
    }
    let mut hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(chars);
    hex
}

fn genpass(bits: Option<&Vec<u8>>) -> Reply {
    let bits = match bits {
        None => 256,
        Some(b) => match parse_i64(b) {
            Some(n) => n,
            None => return Reply::not_integer(),
        },
    };
    if bits <= 0 || bits > 4096 {
        return Reply::err(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
        );
    }
    Reply::Bulk(random_hex(((bits + 3) / 4) as usize).into_bytes())
}

fn log(s: &mut Server, arg: Option<&Vec<u8>>) -> Reply {
    let mut count = 10;
    if let Some(arg) = arg {
        if arg.eq_ignore_ascii_case(b"reset") {
            s.acl.log.clear();
            return Reply::ok();
        }
        match parse_i64(arg) {
            Some(n) => count = n.max(0) as usize,
            None => return Reply::not_integer(),
        }
    }
    let now = Clock::System.now_ms();
    let since_72 = crate::version::version().behaves_as() >= ServerVersion::Redis72;
    let b = |x: &[u8]| Reply::bulk(x);
    let entries = s
        .acl
        .log
        .iter()
        .take(count)
        .map(|e| {
            let mut fields = vec![
                (b(b"count"), Reply::Int(e.count as i64)),
                (b(b"reason"), b(e.reason.name().as_bytes())),
                (b(b"context"), b(e.context.as_bytes())),
                (b(b"object"), Reply::Bulk(e.object.clone())),
                (b(b"username"), Reply::Bulk(e.username.clone())),
                (b(b"age-seconds"), Reply::Double((now - e.ctime) as f64 / 1000.0)),
                (b(b"client-info"), b(e.client_info.as_bytes())),
            ];
            // Redis 7.2 names each entry and tells when it was created and last updated.
            if since_72 {
                fields.extend([
                    (b(b"entry-id"), Reply::Int(e.entry_id as i64)),
                    (b(b"timestamp-created"), Reply::Int(e.created)),
                    (b(b"timestamp-last-updated"), Reply::Int(e.ctime)),
                ]);
            }
            Reply::Map(fields)
        })
        .collect();
    Reply::Array(entries)
}

fn dryrun(s: &Server, name: &[u8], argv: &[Vec<u8>]) -> Reply {
    let Some(user) = s.acl.users.get(name) else {
        return Reply::error(format!("ERR User '{}' not found", text(name)));
    };
    let reg = registry();
    let found = crate::cmd::lookup(&argv[0]);
    let (Some(found), Some(id)) = (found, reg.resolve(argv)) else {
        return Reply::error(format!("ERR Command '{}' not found", text(&argv[0])));
    };
    if !reg.arity_ok(id, argv.len()) {
        return Reply::error(format!("ERR wrong number of arguments for '{}' command", reg.get(id).name));
    }
    match check_user_command(user, found, id, argv) {
        Ok(()) => Reply::ok(),
        Err(r) => {
            let what = match r.reason {
                Reason::Command => format!("This user has no permissions to run the '{}' command", reg.get(id).name),
                Reason::Key => format!("This user has no permissions to access the '{}' key", text(&argv[r.pos])),
                _ => format!("This user has no permissions to access the '{}' channel", text(&argv[r.pos])),
            };
            Reply::Bulk(what.into_bytes())
        }
    }
}

/// Read the ACL file into a new user set (nothing changes on an error).
pub fn read_acl_file(s: &Server) -> Result<Option<Acl>, String> {
    let Some(path) = acl_file(s) else { return Ok(None) };
    let name = s.cfg.get("aclfile").unwrap_or_default();
    let text = std::fs::read(&path)
        .map_err(|e| format!("Error loading ACLs, opening file '{}': {}", name, crate::log::strerror(&e)))?;
    let users = Acl::parse_file(&text, &name, all_channels_default(s))?;
    Ok(Some(Acl { users, ..Acl::default() }))
}

fn load(s: &mut Server, c: &mut Client) -> Reply {
    match read_acl_file(s) {
        Ok(Some(new)) => {
            let old = std::mem::replace(&mut s.acl.users, new.users);
            if crate::version::version().acl_load_keeps_unaffected_clients() {
                // Only the clients of users gone, and subscribers to channels their user
                // may no longer use, are closed.
                for (name, old_user) in old {
                    match s.acl.users.get(&name).cloned() {
                        Some(new_user) => s.acl_kill_pubsub_clients(c, &old_user, &new_user),
                        None => s.acl_kill_users(c, &[name]),
                    }
                }
            } else {
                // Every connection of a user of the old set is closed; the default user's stay.
                let gone: Vec<Vec<u8>> = old.into_keys().filter(|n| n.as_slice() != b"default").collect();
                s.acl_kill_users(c, &gone);
            }
            Reply::ok()
        }
        Ok(None) => Reply::err(NO_ACL_FILE),
        Err(e) => Reply::error(format!("ERR {e}")),
    }
}

fn save(s: &mut Server) -> Reply {
    let Some(path) = acl_file(s) else { return Reply::err(NO_ACL_FILE) };
    let tmp = PathBuf::from(format!("{}.tmp-{}-{}", path.display(), std::process::id(), Clock::System.now_ms()));
    let written = std::fs::write(&tmp, s.acl.file_text()).and_then(|()| std::fs::rename(&tmp, &path));
    match written {
        Ok(()) => Reply::ok(),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            crate::log::log(&format!("Writing ACL file for ACL SAVE: {e}"));
            Reply::err(
                "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
            )
        }
    }
}

/// Users at startup: requirepass for the default user, then `user` lines of the
/// configuration, then the ACL file (both at once is refused, as Redis does).
pub fn load_at_startup(s: &mut Server) -> Result<(), String> {
    let pass = s.cfg.requirepass.clone();
    s.acl.set_default_password(pass.as_deref());
    let configured = std::mem::take(&mut s.cfg.acl_users);
    if !configured.is_empty() && acl_file(s).is_some() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is \
                    invalid. This setup is very likely to lead to configuration errors and security holes, please \
                    define either an ACL file or declare users directly in your redis.conf, but not both."
            .into());
    }
    let all_channels = all_channels_default(s);
    let mut seen: Vec<&[u8]> = Vec::new();
    for words in &configured {
        let Some((name, ops)) = words.split_first() else { continue };
        let name = name.as_bytes();
        if seen.contains(&name) {
            return Err(format!("Error in user declaration '{}': {}", text(name), super::SetError::Duplicate.text()));
        }
        seen.push(name);
        if has_spaces(name) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        let mut user = match s.acl.users.get(name) {
            Some(u) => {
                // Only the default user exists before: a `user default` line starts it afresh.
                let mut u = u.clone();
                let _ = u.apply(b"reset", all_channels);
                u
            }
            None => super::User::new(name, all_channels),
        };
        let ops: Vec<Vec<u8>> = ops.iter().map(|o| o.as_bytes().to_vec()).collect();
        let merged =
            super::merge_selector_args(&ops).map_err(|_| "Unmatched parenthesis in acl selector".to_string())?;
        for op in &merged {
            user.apply(op, all_channels).map_err(|e| {
                format!("Error loading ACL rule '{}' for the user named '{}': {}", text(op), text(name), e.text())
            })?;
        }
        s.acl.users.insert(name.to_vec(), user);
    }
    if let Some(acl) = read_acl_file(s).map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))? {
        s.acl.users = acl.users;
    }
    Ok(())
}
