//! Keyspace events of the key and string commands: Redis 7.0's names, classes and order.

use ferrokv::command::{notify, Event};
use ferrokv::{Config, Engine, Session};

/// One event: class, name, database, key.
type Fired = (u32, &'static str, usize, String);

/// The events of one command, `new` (key creation) events left out unless `with_new`.
fn run_with(engine: &mut Engine, sess: &mut Session, line: &str, with_new: bool) -> Vec<Fired> {
    let argv = ferrokv_testkit::split_args(line).expect("a command line");
    engine.effects_mut().events.clear();
    engine.execute(sess, &argv);
    engine
        .effects_mut()
        .events
        .drain(..)
        .filter(|e| with_new || e.class != notify::NEW)
        .map(|Event { class, name, db, key }| (class, name, db, String::from_utf8_lossy(&key).into_owned()))
        .collect()
}

fn run(engine: &mut Engine, sess: &mut Session, line: &str) -> Vec<Fired> {
    run_with(engine, sess, line, false)
}

#[test]
fn creating_a_key_fires_new_before_the_command_event() {
    let mut e = Engine::in_memory(Config::default());
    e.effects_mut().track_events = true;
    let mut s = Session::default();
    let (n, st, l) = (notify::NEW, notify::STRING, notify::LIST);
    assert_eq!(run_with(&mut e, &mut s, "SET a 1", true), vec![(n, "new", 0, "a".into()), (st, "set", 0, "a".into())]);
    assert_eq!(run_with(&mut e, &mut s, "SET a 2", true), vec![(st, "set", 0, "a".into())]);
    assert_eq!(
        run_with(&mut e, &mut s, "RPUSH q x", true),
        vec![(n, "new", 0, "q".into()), (l, "rpush", 0, "q".into())]
    );
    assert_eq!(run_with(&mut e, &mut s, "RPUSH q y", true), vec![(l, "rpush", 0, "q".into())]);
}

#[test]
fn event_names_follow_redis() {
    let mut e = Engine::in_memory(Config::default());
    e.effects_mut().track_events = true;
    let mut s = Session::default();
    let (g, st, l) = (notify::GENERIC, notify::STRING, notify::LIST);
    let k = |x: &str| x.to_string();
    let cases: &[(&str, Vec<Fired>)] = &[
        ("SET a 1", vec![(st, "set", 0, k("a"))]),
        ("SET a 1 EX 100", vec![(st, "set", 0, k("a")), (g, "expire", 0, k("a"))]),
        ("SET a 1 NX", vec![]),
        ("SETEX b 100 v", vec![(st, "set", 0, k("b")), (g, "expire", 0, k("b"))]),
        ("INCR a", vec![(st, "incrby", 0, k("a"))]),
        ("DECRBY a 2", vec![(st, "incrby", 0, k("a"))]),
        ("INCRBYFLOAT a 1.5", vec![(st, "incrbyfloat", 0, k("a"))]),
        ("APPEND a x", vec![(st, "append", 0, k("a"))]),
        ("SETRANGE a 0 y", vec![(st, "setrange", 0, k("a"))]),
        ("SETBIT a 0 1", vec![(st, "setbit", 0, k("a"))]),
        ("SETBIT a 0 1", vec![]),
        ("MSET m1 1 m2 2", vec![(st, "set", 0, k("m1")), (st, "set", 0, k("m2"))]),
        ("GETSET m1 3", vec![(st, "set", 0, k("m1"))]),
        ("GETDEL m1", vec![(g, "del", 0, k("m1"))]),
        ("GETEX m2 EX 100", vec![(g, "expire", 0, k("m2"))]),
        ("GETEX m2 PERSIST", vec![(g, "persist", 0, k("m2"))]),
        ("EXPIRE m2 100", vec![(g, "expire", 0, k("m2"))]),
        ("PERSIST m2", vec![(g, "persist", 0, k("m2"))]),
        ("EXPIRE m2 -1", vec![(g, "del", 0, k("m2"))]),
        ("RENAME a r", vec![(g, "rename_from", 0, k("a")), (g, "rename_to", 0, k("r"))]),
        ("MOVE r 3", vec![(g, "move_from", 0, k("r")), (g, "move_to", 3, k("r"))]),
        ("COPY b c DB 2", vec![(g, "copy_to", 2, k("c"))]),
        ("DEL b missing", vec![(g, "del", 0, k("b"))]),
        (
            r#"RESTORE l 0 "\x12\x01\x02\x0d\x0d\x00\x00\x00\x03\x00\x01\x01\x02\x01\x03\x01\xff\x0a\x00\xca\xba\x35\x84\xf9\x8a\xd7\xae""#,
            vec![(g, "restore", 0, k("l"))],
        ),
        ("SORT l STORE out", vec![(l, "sortstore", 0, k("out"))]),
        ("SORT l LIMIT 0 0 STORE out", vec![(g, "del", 0, k("out"))]),
        ("FLUSHALL", vec![]),
    ];
    for (line, want) in cases {
        assert_eq!(&run(&mut e, &mut s, line), want, "{line}");
    }
}
