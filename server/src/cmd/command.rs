//! COMMAND: COUNT, INFO, DOCS (minimal), GETKEYS, LIST, from the joined command table.

use ferrokv::command::flags;
use ferrokv::Reply;

use super::{all, lookup, sub_arity, unknown_subcommand, Found};
use crate::client::Client;
use crate::server::Server;

pub fn command(_: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len() == 1 {
        return Reply::Array(all().map(info_entry).collect());
    }
    let sub = a[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"count" if a.len() == 2 => Reply::Int(all().count() as i64),
        b"list" if a.len() == 2 => Reply::bulks(all().map(|f| f.name())),
        b"info" => {
            if a.len() == 2 {
                return Reply::Array(all().map(info_entry).collect());
            }
            Reply::Array(a[2..].iter().map(|n| lookup(n).map_or(Reply::Nil, info_entry)).collect())
        }
        b"docs" => {
            let found: Vec<Found> =
                if a.len() == 2 { all().collect() } else { a[2..].iter().filter_map(|n| lookup(n)).collect() };
            Reply::Map(found.into_iter().map(|f| (Reply::bulk(f.name().as_bytes()), docs_entry(f))).collect())
        }
        b"getkeys" if a.len() >= 4 => getkeys(&a[2..]),
        b"help" if a.len() == 2 => Reply::bulks(HELP),
        b"count" | b"list" | b"getkeys" | b"help" => sub_arity("command", &a[1]),
        _ => unknown_subcommand(&a[1], "command"),
    }
}

const HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "HELP",
    "    Print this help.",
];

/// One COMMAND INFO entry: name, arity, flags, first/last/step, ACL categories, tips,
/// key specs, subcommands.
fn info_entry(f: Found) -> Reply {
    let (first, last, step) = f.key_range();
    let fl = f.flags();
    let names = flags::NAMES.iter().filter(|(bit, _)| fl & bit != 0).map(|(_, n)| Reply::simple(n)).collect();
    Reply::Array(vec![
        Reply::bulk(f.name().as_bytes()),
        Reply::Int(i64::from(f.arity())),
        Reply::Set(names),
        Reply::Int(i64::from(first)),
        Reply::Int(i64::from(last)),
        Reply::Int(i64::from(step)),
        crate::acl::registry::categories_reply(f.name()),
        Reply::Set(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

fn docs_entry(f: Found) -> Reply {
    let group = match f {
        Found::Server(_) => "server",
        Found::Engine(_) => "generic",
    };
    Reply::Map(vec![
        (Reply::bulk(b"summary"), Reply::bulk(format!("The {} command", f.name().to_ascii_uppercase()).as_bytes())),
        (Reply::bulk(b"since"), Reply::bulk(b"1.0.0")),
        (Reply::bulk(b"group"), Reply::bulk(group.as_bytes())),
    ])
}

fn getkeys(argv: &[Vec<u8>]) -> Reply {
    let Some(f) = lookup(&argv[0]) else {
        return Reply::err("ERR Invalid command specified");
    };
    if !f.arity_ok(argv.len()) {
        return Reply::err("ERR Invalid number of arguments specified for command");
    }
    let keys = f.key_positions(argv);
    if keys.is_empty() {
        return Reply::err("ERR The command has no key arguments");
    }
    Reply::Array(keys.into_iter().filter_map(|i| argv.get(i)).map(|k| Reply::Bulk(k.clone())).collect())
}
