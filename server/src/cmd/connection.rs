//! Connection commands: PING ECHO QUIT AUTH HELLO RESET and CLIENT.

use std::time::Instant;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::{Reply, Session};

use super::{sub_arity, text, unknown_subcommand};
use crate::client::Client;
use crate::server::Server;

pub fn ping(_: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len() <= 2 && !c.resp3 && c.subs.active() {
        // Subscribed mode in RESP2: a pub/sub-shaped reply.
        let arg = a.get(1).cloned().unwrap_or_default();
        return Reply::Array(vec![Reply::bulk(b"pong"), Reply::Bulk(arg)]);
    }
    match a.len() {
        1 => Reply::simple("PONG"),
        2 => Reply::Bulk(a[1].clone()),
        _ => Reply::err("ERR wrong number of arguments for 'ping' command"),
    }
}

pub fn echo(_: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    Reply::Bulk(a[1].clone())
}

pub fn quit(_: &mut Server, c: &mut Client, _: &[Vec<u8>]) -> Reply {
    c.close_after_reply = true;
    Reply::ok()
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

pub fn auth(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let (user, pass): (&[u8], &[u8]) = match a.len() {
        2 => {
            if s.acl.default_user().is_none_or(|u| u.nopass) {
                return Reply::err(
                    "ERR AUTH <password> called without any password configured for the default user. \
                     Are you sure your configuration is correct?",
                );
            }
            (b"default", &a[1])
        }
        3 => (&a[1], &a[2]),
        _ => return Reply::syntax(),
    };
    if s.acl_authenticate(c, user, pass, &a[0]) {
        Reply::ok()
    } else {
        Reply::err(WRONGPASS)
    }
}

/// Whether `name` is a valid client name: no spaces, newlines or other specials.
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

const BAD_NAME: &str = "ERR Client names cannot contain spaces, newlines or special characters.";

pub fn hello(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let mut proto = None;
    if a.len() >= 2 {
        let Some(v) = parse_i64(&a[1]) else {
            return Reply::err("ERR Protocol version is not an integer or out of range");
        };
        if !(2..=3).contains(&v) {
            return Reply::err("NOPROTO unsupported protocol version");
        }
        proto = Some(v);
    }
    let mut creds = None;
    let mut name = None;
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - i - 1;
        if eq_ic(&a[i], "auth") && more >= 2 {
            creds = Some((&a[i + 1], &a[i + 2]));
            i += 3;
        } else if eq_ic(&a[i], "setname") && more >= 1 {
            name = Some(&a[i + 1]);
            i += 2;
        } else {
            return Reply::error(format!("ERR Syntax error in HELLO option '{}'", text(&a[i])));
        }
    }
    if let Some((user, pass)) = creds {
        if !s.acl_authenticate(c, user, pass, &a[0]) {
            return Reply::err(WRONGPASS);
        }
    }
    if !c.authenticated {
        return Reply::err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH \
             <user> <pass> option can be used to authenticate the client and select the RESP protocol \
             version at the same time",
        );
    }
    if let Some(n) = name {
        if !valid_name(n) {
            return Reply::err(BAD_NAME);
        }
        c.name = (!n.is_empty()).then(|| n.clone());
    }
    if let Some(p) = proto {
        c.resp3 = p == 3;
    }
    let b = |x: &str| Reply::bulk(x.as_bytes());
    Reply::Map(vec![
        (b("server"), b(crate::version::hello_identity().0)),
        (b("version"), b(crate::version::hello_identity().1)),
        (b("proto"), Reply::Int(if c.resp3 { 3 } else { 2 })),
        (b("id"), Reply::Int(c.id as i64)),
        (b("mode"), b("standalone")),
        (b("role"), b("master")),
        (b("modules"), Reply::Array(Vec::new())),
    ])
}

pub fn reset(s: &mut Server, c: &mut Client, _: &[Vec<u8>]) -> Reply {
    c.reset_multi();
    s.unwatch_all(c);
    s.pubsub_forget(c);
    s.monitors.remove(c.id);
    s.tracking_off(c);
    c.monitor = false;
    c.reply_off = false;
    c.reply_skip_next = false;
    c.session = Session::default();
    c.resp3 = false;
    c.session.no_touch = false;
    c.name = None;
    c.user = b"default".to_vec();
    c.authenticated = s.acl.default_is_open();
    Reply::simple("RESET")
}

pub fn client(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = a[1].to_ascii_lowercase();
    let arity_ok = match sub.as_slice() {
        b"id" | b"getname" | b"info" | b"help" | b"getredir" | b"trackinginfo" => a.len() == 2,
        b"tracking" => a.len() >= 3,
        b"caching" => a.len() == 3,
        b"pause" => a.len() == 3 || a.len() == 4,
        b"unpause" => a.len() == 2,
        b"setname" => a.len() == 3,
        b"list" | b"kill" => a.len() >= 2,
        b"unblock" => a.len() == 3 || a.len() == 4,
        b"reply" => a.len() == 3,
        b"setinfo" | b"no-touch" if crate::version::version().behaves_as() < ServerVersion::Redis72 => {
            return unknown_subcommand(&a[1], "client")
        }
        b"setinfo" => a.len() == 4,
        b"no-touch" | b"no-evict" => a.len() == 3,
        b"capa" if crate::version::version() == ServerVersion::Valkey80 => a.len() >= 3,
        _ => return unknown_subcommand(&a[1], "client"),
    };
    if !arity_ok {
        return sub_arity("client", &a[1]);
    }
    match sub.as_slice() {
        b"id" => Reply::Int(c.id as i64),
        // Valkey 8.0's capabilities (REDIRECT): only a replica's or a cluster's redirections
        // read them, and this server makes none.
        b"capa" => Reply::ok(),
        b"getname" => c.name.clone().map_or(Reply::Nil, Reply::Bulk),
        b"setname" => {
            if !valid_name(&a[2]) {
                return Reply::err(BAD_NAME);
            }
            c.name = (!a[2].is_empty()).then(|| a[2].clone());
            Reply::ok()
        }
        b"info" => Reply::Verbatim(format!("{}\n", c.info_line(Instant::now(), true)).into_bytes()),
        b"list" => client_list(s, c, a),
        b"kill" => client_kill(s, c, a),
        b"unblock" => super::blocking::client_unblock(s, c, a),
        b"reply" => client_reply(c, &a[2]),
        b"tracking" => super::tracking::client_tracking(s, c, a),
        b"pause" => super::pause::client_pause(s, a),
        b"unpause" => super::pause::client_unpause(s),
        b"caching" => super::tracking::client_caching(c, a),
        b"getredir" => super::tracking::client_getredir(c),
        b"trackinginfo" => super::tracking::client_trackinginfo(c),
        b"setinfo" => client_setinfo(c, &a[2], &a[3]),
        b"no-touch" => on_off(&a[2], &mut c.session.no_touch),
        b"no-evict" => on_off(&a[2], &mut c.no_evict),
        _ => Reply::help("CLIENT", CLIENT_HELP, crate::version::version()),
    }
}

/// An `ON|OFF` argument into `flag`, or Redis's syntax error.
fn on_off(arg: &[u8], flag: &mut bool) -> Reply {
    match arg.to_ascii_lowercase().as_slice() {
        b"on" => *flag = true,
        b"off" => *flag = false,
        _ => return Reply::err("ERR syntax error"),
    }
    Reply::ok()
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2): printable characters, no spaces.
fn client_setinfo(c: &mut Client, attr: &[u8], value: &[u8]) -> Reply {
    let slot = if eq_ic(attr, "lib-name") {
        &mut c.lib_name
    } else if eq_ic(attr, "lib-ver") {
        &mut c.lib_ver
    } else {
        return Reply::error(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(attr)));
    };
    if value.iter().any(|b| !(b'!'..=b'~').contains(b)) {
        return Reply::error(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(attr)
        ));
    }
    *slot = value.to_vec();
    Reply::ok()
}

const CLIENT_HELP: &[&str] = &[
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are: ID, ADDR, LADDR, TYPE, USER, SKIPME.",
    "LIST [options ...]",
    "    Return information about client connections. Options: TYPE, ID.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Keep this connection out of client eviction.",
];

/// A client's type, as CLIENT LIST / KILL TYPE name it (Redis's getClientType): our
/// master's link, a replica (a MONITOR client is a normal one), a subscriber, or normal.
fn client_type(x: &Client) -> &'static str {
    if x.master {
        "master"
    } else if x.replica && !x.monitor {
        "slave"
    } else if x.subs.active() {
        "pubsub"
    } else {
        "normal"
    }
}

/// The type a `TYPE` argument names (`replica` is `slave`), or Redis's error.
fn parse_client_type(v: &[u8]) -> Result<&'static str, Reply> {
    match v.to_ascii_lowercase().as_slice() {
        b"normal" => Ok("normal"),
        b"pubsub" => Ok("pubsub"),
        b"master" => Ok("master"),
        b"replica" | b"slave" => Ok("slave"),
        _ => Err(Reply::error(format!("ERR Unknown client type '{}'", text(v)))),
    }
}

fn client_list(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut kind: Option<&str> = None;
    let mut i = 2;
    while i < a.len() {
        if eq_ic(&a[i], "type") && i + 1 < a.len() {
            match parse_client_type(&a[i + 1]) {
                Ok(k) => kind = Some(k),
                Err(e) => return e,
            }
            i += 2;
        } else if eq_ic(&a[i], "id") && i + 1 < a.len() {
            let mut v = Vec::new();
            for x in &a[i + 1..] {
                match parse_i64(x) {
                    Some(n) if n > 0 => v.push(n as u64),
                    _ => return Reply::err("ERR Invalid client ID"),
                }
            }
            ids = Some(v);
            i = a.len();
        } else {
            return Reply::syntax();
        }
    }
    s.count_replicas_owed();
    let now = Instant::now();
    let mut all: Vec<&Client> = s.clients.values().map(|c| &**c).collect();
    all.push(c);
    all.sort_by_key(|x| x.id);
    let mut out = String::new();
    for x in all {
        if ids.as_ref().is_some_and(|v| !v.contains(&x.id)) || kind.is_some_and(|k| k != client_type(x)) {
            continue;
        }
        out.push_str(&x.info_line(now, x.id == c.id));
        out.push('\n');
    }
    Reply::Verbatim(out.into_bytes())
}

fn client_kill(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let addr_of = |x: &Client| x.addr.as_ref().map(|a| a.to_string()).unwrap_or_default();
    let laddr_of = |x: &Client| x.laddr.as_ref().map(|a| a.to_string()).unwrap_or_default();
    if a.len() == 3 {
        // The old form: CLIENT KILL addr:port.
        let want = text(&a[2]);
        let target =
            if addr_of(c) == want { Some(c.id) } else { s.clients.values().find(|x| addr_of(x) == want).map(|x| x.id) };
        return match target {
            Some(id) if id == c.id => {
                c.close_after_reply = true;
                Reply::ok()
            }
            Some(id) => {
                s.kill_client(id);
                Reply::ok()
            }
            None => Reply::err("ERR No such client"),
        };
    }
    if !a.len().is_multiple_of(2) {
        return Reply::syntax();
    }
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut skipme = true;
    let mut kind: Option<&str> = None;
    let mut user: Option<Vec<u8>> = None;
    let mut max_age: Option<u64> = None;
    for pair in a[2..].chunks(2) {
        let (opt, v) = (&pair[0], &pair[1]);
        if eq_ic(opt, "id") {
            match parse_i64(v) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return Reply::err("ERR client-id should be greater than 0"),
            }
        } else if eq_ic(opt, "addr") {
            addr = Some(text(v));
        } else if eq_ic(opt, "laddr") {
            laddr = Some(text(v));
        } else if eq_ic(opt, "type") {
            match parse_client_type(v) {
                Ok(k) => kind = Some(k),
                Err(e) => return e,
            }
        } else if eq_ic(opt, "user") {
            if !s.acl.users.contains_key(v) {
                return Reply::error(format!("ERR No such user '{}'", text(v)));
            }
            user = Some(v.clone());
        } else if eq_ic(opt, "maxage") && s.engine.config().version.since_redis74() {
            match parse_i64(v) {
                Some(n) if n > 0 => max_age = Some(n as u64),
                Some(_) => return Reply::err("ERR maxage should be greater than 0"),
                None => return Reply::err("ERR maxage is not an integer or out of range"),
            }
        } else if eq_ic(opt, "skipme") {
            if eq_ic(v, "yes") {
                skipme = true;
            } else if eq_ic(v, "no") {
                skipme = false;
            } else {
                return Reply::syntax();
            }
        } else {
            return Reply::syntax();
        }
    }
    let now = Instant::now();
    let matches = |x: &Client| {
        kind.is_none_or(|k| k == client_type(x))
            && id.is_none_or(|i| x.id == i)
            && addr.as_ref().is_none_or(|a| &addr_of(x) == a)
            && laddr.as_ref().is_none_or(|a| &laddr_of(x) == a)
            && user.as_ref().is_none_or(|u| &x.user == u)
            && max_age.is_none_or(|m| now.duration_since(x.created).as_secs() >= m)
    };
    let victims: Vec<u64> = s.clients.values().filter(|x| matches(x)).map(|x| x.id).collect();
    let mut killed = 0;
    for v in victims {
        if s.kill_client(v) {
            killed += 1;
        }
    }
    if !skipme && matches(c) {
        c.close_after_reply = true;
        killed += 1;
    }
    Reply::Int(killed)
}

/// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP answer nothing; SKIP drops the next reply.
fn client_reply(c: &mut Client, mode: &[u8]) -> Reply {
    if eq_ic(mode, "on") {
        // Its own reply is sent even when a SKIP just before meant to skip it.
        c.reply_off = false;
        c.reply_skip = false;
        c.reply_skip_next = false;
        Reply::ok()
    } else if eq_ic(mode, "off") {
        c.reply_off = true;
        c.raw_reply = true;
        Reply::Nil
    } else if eq_ic(mode, "skip") {
        if !c.reply_off {
            c.reply_skip_next = true;
        }
        c.raw_reply = true;
        Reply::Nil
    } else {
        Reply::syntax()
    }
}
