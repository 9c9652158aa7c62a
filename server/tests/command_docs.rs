//! COMMAND INFO and COMMAND DOCS of every command the server has equal the real server's
//! of the version it stands in for, RESP2 and RESP3: Debian's Redis 7.0 always, Redis
//! 6.2.16, 7.4.1 and Valkey 8.0.1 of ../shared/bin in `make compat`. Both come from the command catalog,
//! the one table the dispatch checks, ACL and the tools read too.
//!
//! Subcommands are compared as sets: Redis lists them in its hash table's order, which
//! changes from run to run.

mod support;
use support::{shared_bin, start_shared, value_end, Ours};

use ferrokv_testkit::{Client, Server as Redis, TempDir};

/// A RESP value: a line or bulk as its bytes, or an aggregate's type byte and children.
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone)]
enum Node {
    Leaf(Vec<u8>),
    Agg(u8, Vec<Node>),
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Node::Leaf(l) => write!(f, "{:?}", String::from_utf8_lossy(l).trim_end()),
            Node::Agg(t, c) => write!(f, "{}{c:?}", *t as char),
        }
    }
}

fn parse(b: &[u8], pos: usize) -> (Node, usize) {
    let end = value_end(b, pos).expect("a whole reply");
    if !matches!(b[pos], b'*' | b'~' | b'%' | b'>') {
        return (Node::Leaf(b[pos..end].to_vec()), end);
    }
    let line_end = pos + b[pos..].windows(2).position(|w| w == b"\r\n").expect("a line");
    let n: i64 = std::str::from_utf8(&b[pos + 1..line_end]).ok().and_then(|s| s.parse().ok()).expect("a count");
    let items = if b[pos] == b'%' { n * 2 } else { n };
    let mut p = line_end + 2;
    let mut children = Vec::new();
    for _ in 0..items.max(0) {
        let (c, next) = parse(b, p);
        children.push(c);
        p = next;
    }
    (Node::Agg(b[pos], children), end)
}

fn is_bulk(n: &Node, text: &str) -> bool {
    n == &Node::Leaf(format!("${}\r\n{text}\r\n", text.len()).into_bytes())
}

/// RESP2 has no maps to find the subcommands in: every aggregate's children sorted (RESP3
/// holds the order).
fn sorted_all(n: Node) -> Node {
    match n {
        Node::Leaf(_) => n,
        Node::Agg(t, children) => {
            let mut children: Vec<Node> = children.into_iter().map(sorted_all).collect();
            children.sort();
            Node::Agg(t, children)
        }
    }
}

/// The subcommands of every entry in Redis's order-free form: COMMAND INFO's tenth field,
/// COMMAND DOCS' `subcommands` map (sorted as key/value pairs).
fn canonical(n: Node) -> Node {
    match n {
        Node::Leaf(_) => n,
        Node::Agg(t, children) => {
            let mut children: Vec<Node> = children.into_iter().map(canonical).collect();
            let info_entry =
                t == b'*' && children.len() == 10 && matches!(children[0], Node::Leaf(ref l) if l[0] == b'$');
            if info_entry {
                if let Node::Agg(_, subs) = &mut children[9] {
                    subs.sort();
                }
            }
            if t == b'%' || t == b'*' {
                for i in (1..children.len()).step_by(2) {
                    if is_bulk(&children[i - 1], "subcommands") {
                        if let Node::Agg(_, kv) = &mut children[i] {
                            let mut pairs: Vec<(Node, Node)> =
                                kv.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
                            pairs.sort();
                            *kv = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
                        }
                    }
                }
            }
            Node::Agg(t, children)
        }
    }
}

fn call(c: &mut Client, args: &[&str], resp3: bool) -> Node {
    let bytes = c.call(&args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>());
    let node = parse(&bytes, 0).0;
    if resp3 {
        canonical(node)
    } else {
        sorted_all(node)
    }
}

/// Every command of ours, its INFO and DOCS (DOCS only where the version has it) in both
/// protocols: the differences, by command.
fn differences(real: u16, ours: u16, docs: bool) -> (usize, Vec<String>) {
    let (mut r, mut o) = (Client::connect(real), Client::connect(ours));
    // COMMAND (Redis 6.2 has no COMMAND LIST): each entry's first field is the name.
    let all = o.call_str(&["COMMAND"]);
    let Node::Agg(_, entries) = parse(&all, 0).0 else { panic!("COMMAND") };
    let names: Vec<String> = entries
        .iter()
        .map(|e| match e {
            Node::Agg(_, fields) => match fields.first() {
                Some(Node::Leaf(l)) => {
                    let at = l.iter().position(|&b| b == b'\n').unwrap_or(0) + 1;
                    String::from_utf8_lossy(&l[at..l.len() - 2]).into_owned()
                }
                _ => panic!("an entry without a name"),
            },
            Node::Leaf(_) => panic!("an entry"),
        })
        .collect();
    let mut diffs = Vec::new();
    for proto in ["2", "3"] {
        let resp3 = proto == "3";
        call(&mut r, &["HELLO", proto], resp3);
        call(&mut o, &["HELLO", proto], resp3);
        for name in &names {
            let subs: &[&str] = if docs { &["INFO", "DOCS"] } else { &["INFO"] };
            for sub in subs {
                let (theirs, mine) =
                    (call(&mut r, &["COMMAND", sub, name], resp3), call(&mut o, &["COMMAND", sub, name], resp3));
                if theirs != mine {
                    diffs.push(format!("RESP{proto} COMMAND {sub} {name}:\n real {theirs:?}\n ours {mine:?}"));
                }
            }
        }
    }
    (names.len(), diffs)
}

#[test]
fn command_info_and_docs_are_redis_7_0_s() {
    let redis = Redis::start();
    let dir = TempDir::new("command-docs");
    let ours = Ours::start(dir.path(), &[]);
    let (count, diffs) = differences(redis.port, ours.port, true);
    assert!(count > 200, "{count} commands");
    assert!(diffs.is_empty(), "{} differences:\n{}", diffs.len(), diffs.join("\n"));
}

#[test]
#[ignore = "needs ../shared/bin (make compat)"]
fn command_info_and_docs_are_those_of_6_2_7_4_and_valkey_8_0() {
    for (bin, version, docs) in [
        ("redis-server-6.2.16", "6.2", false),
        ("redis-server-7.4.1", "7.4", true),
        ("valkey-server-8.0.1", "valkey-8.0", true),
    ] {
        let Some(bin) = shared_bin(bin) else {
            eprintln!("skipped: ../shared/bin/{bin} is absent");
            continue;
        };
        let (d1, d2) = (TempDir::new("cmd-docs-real"), TempDir::new("cmd-docs-ours"));
        let real = start_shared(&bin, d1.path(), &[]);
        let ours = Ours::start(d2.path(), &["--redis-version", version]);
        let (count, diffs) = differences(real.port, ours.port, docs);
        assert!(count > 150, "{version}: {count} commands");
        assert!(diffs.is_empty(), "{version}: {} differences:\n{}", diffs.len(), diffs.join("\n"));
    }
}

/// COMMAND GETKEYS and GETKEYSANDFLAGS (keys with the flags their key spec gives them, or
/// the command's own finder's), their errors, and COMMAND LIST FILTERBY, as Redis 7.0.
#[test]
fn getkeys_and_list_filters_are_redis_7_0_s() {
    let redis = Redis::start();
    let dir = TempDir::new("command-getkeys");
    let ours = Ours::start(dir.path(), &[]);
    let (mut r, mut o) = (Client::connect(redis.port), Client::connect(ours.port));
    let calls: &[&[&str]] = &[
        &["SET", "k1", "v1"],
        &["SET", "k1", "v1", "GET"],
        &["MSET", "k1", "v1", "k2", "v2"],
        &["LMOVE", "k1", "k2", "left", "right"],
        &["SORT", "k1", "STORE", "k2"],
        &["SORT", "k1", "BY", "w*", "GET", "o*"],
        &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
        &["ZUNIONSTORE", "d", "9", "a", "b"],
        &["ZUNION", "2", "a", "b"],
        &["EVAL", "return 1", "0"],
        &["EVAL", "return 1", "2", "a", "b", "c"],
        &["FCALL", "f", "1", "a"],
        &["XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", "0"],
        &["BITFIELD", "b", "GET", "u8", "0"],
        &["BITFIELD", "b", "SET", "u8", "0", "1"],
        &["MEMORY", "USAGE", "k"],
        &["OBJECT", "ENCODING", "k"],
        &["XGROUP", "CREATE", "s", "g", "$"],
        &["BLMPOP", "0", "2", "a", "b", "LEFT"],
        &["LCS", "a", "b"],
        &["SINTERCARD", "2", "a", "b", "LIMIT", "1"],
        &["RENAME", "a", "b"],
        &["GET"],
        &["PING"],
        &["NOSUCH", "a"],
        &["CLIENT", "NOSUCH"],
        &["SPUBLISH", "ch", "m"],
    ];
    for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
        for call in calls {
            let mut args = vec!["COMMAND", sub];
            args.extend_from_slice(call);
            assert_eq!(
                String::from_utf8_lossy(&o.call_str(&args)),
                String::from_utf8_lossy(&r.call_str(&args)),
                "{}",
                args.join(" ")
            );
        }
    }
    for bad in [&["COMMAND", "LIST", "x"][..], &["COMMAND", "LIST", "FILTERBY", "x", "y"], &["COMMAND", "GETKEYS"]] {
        assert_eq!(o.call_str(bad), r.call_str(bad), "{}", bad.join(" "));
    }
    // Filters, as sets (Redis lists in hash-table order), over the commands we both have.
    let ours_all = sorted_names(&o.call_str(&["COMMAND", "LIST"]));
    for filter in
        [["PATTERN", "config*"], ["PATTERN", "x*"], ["ACLCAT", "scripting"], ["ACLCAT", "nope"], ["MODULE", "m"]]
    {
        let args = ["COMMAND", "LIST", "FILTERBY", filter[0], filter[1]];
        let theirs: Vec<String> =
            sorted_names(&r.call_str(&args)).into_iter().filter(|n| ours_all.contains(n)).collect();
        assert_eq!(sorted_names(&o.call_str(&args)), theirs, "{}", args.join(" "));
    }
}

fn sorted_names(reply: &[u8]) -> Vec<String> {
    let Node::Agg(_, items) = parse(reply, 0).0 else { panic!("a list") };
    let mut names: Vec<String> = items
        .iter()
        .map(|n| match n {
            Node::Leaf(l) => {
                let at = l.iter().position(|&b| b == b'\n').unwrap_or(0) + 1;
                String::from_utf8_lossy(&l[at..l.len() - 2]).into_owned()
            }
            Node::Agg(..) => panic!("a name"),
        })
        .collect();
    names.sort();
    names
}
