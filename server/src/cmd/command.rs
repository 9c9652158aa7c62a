//! COMMAND: COUNT, INFO, DOCS, GETKEYS, LIST, from the command table and the catalog's facts
//! of the version stood in for.

use ferrokv::command::catalog::{Catalog, CommandDef, Docs, ServerVersion};
use ferrokv::command::{flags, key_flags, Sub};
use ferrokv::Reply;
use serde_json::Value as Json;

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
        b"list" => list(&a[2..]),
        b"info" => {
            if a.len() == 2 {
                return Reply::Array(all().map(info_entry).collect());
            }
            Reply::Array(
                a[2..]
                    .iter()
                    .map(|n| match named(n) {
                        Some((f, None)) => info_entry(f),
                        Some((_, Some(s))) => info_fields(s.def, s.arity, s.flags, s.keys, Reply::Set(Vec::new())),
                        None => Reply::Nil,
                    })
                    .collect(),
            )
        }
        b"docs" => {
            let found: Vec<(Found, Option<&Sub>)> = if a.len() == 2 {
                all().map(|f| (f, None)).collect()
            } else {
                a[2..].iter().filter_map(|n| named(n)).collect()
            };
            let docs = Catalog::get().docs();
            Reply::Map(
                found
                    .into_iter()
                    .filter_map(|(f, sub)| match sub {
                        Some(s) => Some((Reply::bulk(s.def.full_name().as_bytes()), docs_entry(&docs, s.def, &[]))),
                        None => {
                            let subs: Vec<&CommandDef> = f.subs.iter().map(|s| s.def).collect();
                            Some((Reply::bulk(f.name.as_bytes()), docs_entry(&docs, f.def?, &subs)))
                        }
                    })
                    .collect(),
            )
        }
        b"getkeys" if a.len() >= 3 => getkeys(&a[2..], false),
        b"getkeysandflags" if a.len() >= 3 => getkeys(&a[2..], true),
        b"help" if a.len() == 2 => Reply::help("COMMAND", HELP, crate::version::version()),
        b"count" | b"getkeys" | b"getkeysandflags" | b"help" => sub_arity("command", &a[1]),
        _ => unknown_subcommand(&a[1], "command"),
    }
}

const HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
];

/// A command by name, or a subcommand by its full name (`config|get`).
fn named(name: &[u8]) -> Option<(Found, Option<&'static Sub>)> {
    match name.iter().position(|&b| b == b'|') {
        None => lookup(name).map(|f| (f, None)),
        Some(bar) => {
            let f = lookup(&name[..bar])?;
            let sub = &name[bar + 1..];
            let s = f.subs.iter().find(|s| s.def.name.as_bytes().eq_ignore_ascii_case(sub))?;
            Some((f, Some(s)))
        }
    }
}

/// One COMMAND INFO entry, as the version stood in for writes it: Redis 6.2's seven
/// fields, or Redis 7's ten (tips, key specs and subcommands added).
fn info_entry(f: Found) -> Reply {
    let Some(def) = f.def else { return Reply::Nil };
    let (first, last, step) = (f.first_key, f.last_key, f.step);
    if def.from_reply() {
        return Reply::Array(vec![
            Reply::bulk(f.name.as_bytes()),
            Reply::Int(i64::from(f.arity)),
            flag_set(f.flags, flags::SHOWN_62),
            Reply::Int(i64::from(first)),
            Reply::Int(i64::from(last)),
            Reply::Int(i64::from(step)),
            crate::acl::registry::categories_reply(f.name),
        ]);
    }
    // No subcommands: an empty set; else an array of their entries.
    let subs = match f.subs.as_slice() {
        [] => Reply::Set(Vec::new()),
        subs => Reply::Array(
            subs.iter().map(|s| info_fields(s.def, s.arity, s.flags, s.keys, Reply::Set(Vec::new()))).collect(),
        ),
    };
    info_fields(def, f.arity, f.flags, (first, last, step), subs)
}

fn info_fields(def: &CommandDef, arity: i32, bits: u32, keys: (i32, i32, i32), subs: Reply) -> Reply {
    let name = def.full_name();
    let tips = def.facts["command_tips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str())
        .map(|t| Reply::bulk(t.to_ascii_lowercase().as_bytes()))
        .collect();
    Reply::Array(vec![
        Reply::bulk(name.as_bytes()),
        Reply::Int(i64::from(arity)),
        flag_set(bits, flags::SHOWN),
        Reply::Int(i64::from(keys.0)),
        Reply::Int(i64::from(keys.1)),
        Reply::Int(i64::from(keys.2)),
        crate::acl::registry::categories_reply(&name),
        Reply::Set(tips),
        Reply::Set(def.key_specs().iter().map(key_spec).collect()),
        subs,
    ])
}

fn flag_set(bits: u32, shown: &[u32]) -> Reply {
    Reply::Set(shown.iter().filter(|&&bit| bits & bit != 0).map(|&bit| Reply::simple(flags::name(bit))).collect())
}

/// Key spec flags as Redis lists them: the two-letter ones as they are, the others in
/// lower case.
fn key_flag_set(bits: u32) -> Reply {
    Reply::Set(
        key_flags::NAMES
            .iter()
            .filter(|(b, _)| bits & b != 0)
            .map(|(_, n)| if n.len() == 2 { Reply::simple(n) } else { Reply::Simple(n.to_ascii_lowercase().into()) })
            .collect(),
    )
}

fn key_spec(ks: &Json) -> Reply {
    let int = |v: &Json| Reply::Int(v.as_i64().unwrap_or(0));
    let kind =
        |t: &str, spec: Vec<(&str, Reply)>| pairs(vec![("type", Reply::bulk(t.as_bytes())), ("spec", pairs(spec))]);
    let bs = &ks["begin_search"];
    let begin = if let Some(i) = bs.get("index") {
        kind("index", vec![("index", int(&i["pos"]))])
    } else if let Some(k) = bs.get("keyword") {
        kind(
            "keyword",
            vec![
                ("keyword", Reply::bulk(k["keyword"].as_str().unwrap_or("").as_bytes())),
                ("startfrom", int(&k["startfrom"])),
            ],
        )
    } else {
        kind("unknown", Vec::new())
    };
    let fk = &ks["find_keys"];
    let find = if let Some(r) = fk.get("range") {
        kind("range", vec![("lastkey", int(&r["lastkey"])), ("keystep", int(&r["step"])), ("limit", int(&r["limit"]))])
    } else if let Some(k) = fk.get("keynum") {
        kind(
            "keynum",
            vec![("keynumidx", int(&k["keynumidx"])), ("firstkey", int(&k["firstkey"])), ("keystep", int(&k["step"]))],
        )
    } else {
        kind("unknown", Vec::new())
    };
    let mut fields = Vec::new();
    if let Some(n) = ks["notes"].as_str() {
        fields.push(("notes", Reply::bulk(n.as_bytes())));
    }
    fields.push(("flags", key_flag_set(key_flags::of(ks))));
    fields.push(("begin_search", begin));
    fields.push(("find_keys", find));
    pairs(fields)
}

fn pairs(fields: Vec<(&str, Reply)>) -> Reply {
    Reply::Map(fields.into_iter().map(|(k, v)| (Reply::bulk(k.as_bytes()), v)).collect())
}

fn text<'a>(def: &'a Json, field: &str) -> Option<&'a str> {
    def[field].as_str()
}

/// One COMMAND DOCS entry, from the version's command JSON.
fn docs_entry(docs: &Docs, def: &CommandDef, subs: &[&CommandDef]) -> Reply {
    let facts = docs.of(def);
    let newer = crate::version::version().behaves_as() >= ServerVersion::Redis72;
    let mut fields = Vec::new();
    for field in ["summary", "since"] {
        if let Some(t) = text(facts, field) {
            fields.push((field, Reply::bulk(t.as_bytes())));
        }
    }
    let group = text(facts, "group").unwrap_or("generic").replace('_', "-");
    fields.push(("group", Reply::bulk(group.as_bytes())));
    if let Some(t) = text(facts, "complexity") {
        fields.push(("complexity", Reply::bulk(t.as_bytes())));
    }
    if let Some(flags) = facts["doc_flags"].as_array().filter(|a| !a.is_empty()) {
        let names =
            flags.iter().filter_map(|f| f.as_str()).map(|f| Reply::Simple(f.to_ascii_lowercase().into())).collect();
        fields.push(("doc_flags", Reply::Set(names)));
    }
    for field in ["deprecated_since", "replaced_by"] {
        if let Some(t) = text(facts, field) {
            fields.push((field, Reply::bulk(t.as_bytes())));
        }
    }
    if let Some(history) = facts["history"].as_array().filter(|a| !a.is_empty()) {
        let entries = history
            .iter()
            .filter_map(|h| h.as_array())
            .map(|h| Reply::bulks(h.iter().filter_map(|x| x.as_str())))
            .collect();
        fields.push(("history", Reply::Set(entries)));
    }
    if let Some(args) = facts["arguments"].as_array().filter(|a| !a.is_empty()) {
        fields.push(("arguments", arg_list(args, newer)));
    }
    if !subs.is_empty() {
        let entries = subs.iter().map(|s| (Reply::bulk(s.full_name().as_bytes()), docs_entry(docs, s, &[]))).collect();
        fields.push(("subcommands", Reply::Map(entries)));
    }
    pairs(fields)
}

/// A command's arguments as COMMAND DOCS lists them (Redis 7.2 added `display_text`).
fn arg_list(args: &[Json], display_text: bool) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                // As Redis's generator writes them: names and display texts lower case,
                // tokens upper case.
                let name = a["name"].as_str().unwrap_or("").to_ascii_lowercase();
                let kind = a["type"].as_str().unwrap_or("string");
                let nested = matches!(kind, "oneof" | "block");
                let mut fields = vec![("name", Reply::bulk(name.as_bytes())), ("type", Reply::bulk(kind.as_bytes()))];
                if display_text && !nested {
                    let display = a["display"].as_str().map_or_else(|| name.clone(), str::to_ascii_lowercase);
                    fields.push(("display_text", Reply::bulk(display.as_bytes())));
                }
                if let Some(i) = a["key_spec_index"].as_i64() {
                    fields.push(("key_spec_index", Reply::Int(i)));
                }
                if let Some(t) = a["token"].as_str() {
                    // The JSON's token of two quotes (MIGRATE's empty key) is C's `""""`: empty.
                    let t = if t == "\"\"" { "" } else { t };
                    fields.push(("token", Reply::bulk(t.to_ascii_uppercase().as_bytes())));
                }
                for field in ["summary", "since", "deprecated_since"] {
                    if let Some(t) = a[field].as_str() {
                        fields.push((field, Reply::bulk(t.as_bytes())));
                    }
                }
                let arg_flags: Vec<Reply> = ["optional", "multiple", "multiple_token"]
                    .iter()
                    // As the generator reads the JSON: any true value (`"multiple": "true"`).
                    .filter(|f| a[**f].as_bool() == Some(true) || a[**f].as_str().is_some_and(|s| !s.is_empty()))
                    .map(|f| Reply::simple(f))
                    .collect();
                if !arg_flags.is_empty() {
                    fields.push(("flags", Reply::Set(arg_flags)));
                }
                if nested {
                    fields.push((
                        "arguments",
                        arg_list(a["arguments"].as_array().map_or(&[], Vec::as_slice), display_text),
                    ));
                }
                pairs(fields)
            })
            .collect(),
    )
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS, as Redis's getKeysSubcommandImpl: the command (or
/// its subcommand) must exist, have keys and take this many arguments.
fn getkeys(argv: &[Vec<u8>], with_flags: bool) -> Reply {
    let found = lookup(&argv[0]);
    let known = found.filter(|f| f.subs.is_empty() || argv.len() < 2 || f.sub(argv).is_some());
    let Some(f) = known else {
        return Reply::err("ERR Invalid command specified");
    };
    if !f.has_keys(argv) {
        return Reply::err("ERR The command has no key arguments");
    }
    let (arity, bits) = f.sub(argv).map_or((f.arity, f.flags), |s| (s.arity, s.flags));
    let argc = argv.len() as i64;
    if (arity > 0 && i64::from(arity) != argc) || argc < -i64::from(arity) {
        return Reply::err("ERR Invalid number of arguments specified for command");
    }
    let keys = f.key_refs(argv);
    if keys.is_empty() && bits & flags::NO_MANDATORY_KEYS == 0 {
        return Reply::err("ERR Invalid arguments specified for command");
    }
    Reply::Array(
        keys.into_iter()
            .map(|(pos, kf)| {
                let key = Reply::Bulk(argv[pos].clone());
                if with_flags {
                    Reply::Array(vec![key, key_flag_set(kf)])
                } else {
                    key
                }
            })
            .collect(),
    )
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: every command
/// and subcommand (`config|get`) that passes the filter.
fn list(args: &[Vec<u8>]) -> Reply {
    enum Filter<'a> {
        None,
        Module,
        Category(u32),
        Pattern(&'a [u8]),
    }
    let filter = match args {
        [] => Filter::None,
        [by, kind, value] if by.eq_ignore_ascii_case(b"filterby") => {
            match kind.to_ascii_lowercase().as_slice() {
                // No modules here: no command is a module's.
                b"module" => Filter::Module,
                b"aclcat" => Filter::Category(crate::acl::categories::by_name(value).unwrap_or(0)),
                b"pattern" => Filter::Pattern(value),
                _ => return Reply::err("ERR syntax error"),
            }
        }
        _ => return Reply::err("ERR syntax error"),
    };
    let registry = crate::acl::registry::registry();
    let keep = |name: &str| match filter {
        Filter::None => true,
        Filter::Module => false,
        Filter::Category(cat) => {
            cat != 0 && registry.lookup(name.as_bytes()).is_some_and(|id| registry.get(id).categories & cat != 0)
        }
        Filter::Pattern(p) => ferrokv::glob::matches_nocase(p, name.as_bytes()),
    };
    let mut names = Vec::new();
    for f in all() {
        let subs = f.subs.iter().map(|s| s.def.full_name());
        names.extend(std::iter::once(f.name.to_string()).chain(subs).filter(|n| keep(n)));
    }
    Reply::bulks(names)
}
