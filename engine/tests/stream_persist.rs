//! Streams survive DUMP/RESTORE and COPY whole: entries, IDs, groups, PEL and consumers.

use ferrokv::command::Reply;
use ferrokv::{Config, Engine, Session};

fn run(e: &mut Engine, s: &mut Session, line: &str) -> Reply {
    let argv: Vec<Vec<u8>> = line.split(' ').map(|a| a.as_bytes().to_vec()).collect();
    e.execute(s, &argv)
}

#[test]
fn dump_restore_and_copy_keep_groups_and_pel() {
    let mut e = Engine::in_memory(Config::default());
    let mut s = Session { db: 0, ..Default::default() };
    for line in [
        "XADD s 1-0 a 1",
        "XADD s 2-0 b 2 c 3",
        "XADD s 3-0 a 4",
        "XADD s 4-0 d 5",
        "XDEL s 3-0",
        "XGROUP CREATE s g1 0",
        "XGROUP CREATE s g2 $ ENTRIESREAD 3",
        "XREADGROUP GROUP g1 alice COUNT 2 STREAMS s >",
        "XREADGROUP GROUP g1 bob STREAMS s >",
        "XCLAIM s g1 carol 0 2-0 TIME 1000 RETRYCOUNT 4",
        "XGROUP CREATECONSUMER s g2 idle",
        "XSETID s 10-0 ENTRIESADDED 9 MAXDELETEDID 5-0",
    ] {
        assert!(!run(&mut e, &mut s, line).is_error(), "{line}");
    }
    let Reply::Bulk(payload) = run(&mut e, &mut s, "DUMP s") else { panic!("DUMP") };
    let argv = vec![b"RESTORE".to_vec(), b"r".to_vec(), b"0".to_vec(), payload];
    assert_eq!(e.execute(&mut s, &argv), Reply::ok());
    assert_eq!(run(&mut e, &mut s, "COPY s c"), Reply::Int(1));
    let want = run(&mut e, &mut s, "XINFO STREAM s FULL");
    for key in ["r", "c"] {
        assert_eq!(run(&mut e, &mut s, &format!("XINFO STREAM {key} FULL")), want, "{key}");
        assert_eq!(run(&mut e, &mut s, &format!("XINFO GROUPS {key}")), run(&mut e, &mut s, "XINFO GROUPS s"));
    }
    // The restored stream goes on as the original would.
    for key in ["s", "r"] {
        assert!(!run(&mut e, &mut s, &format!("XADD {key} * f v")).is_error());
        let r = run(&mut e, &mut s, &format!("XREADGROUP GROUP g2 x STREAMS {key} >"));
        assert!(matches!(r, Reply::KeyedArrays(ref v) if v.len() == 1), "{key}: {r:?}");
    }
}

/// What a stream holds apart from delivery and seen times (which replay sets anew) and a
/// group's entries-read / lag: Redis 7.0 propagates group reads as XCLAIM ... LASTID, which
/// does not carry entries-read, so its own AOF replay also ends with another estimate.
fn timeless_view(e: &mut Engine, s: &mut Session, key: &str) -> Vec<Reply> {
    let mut out: Vec<Reply> = ["XRANGE {} - +", "XINFO STREAM {}", "XPENDING {} g1", "XPENDING {} g2"]
        .iter()
        .map(|cmd| run(e, s, &cmd.replace("{}", key)))
        .collect();
    if let Reply::Array(groups) = run(e, s, &format!("XINFO GROUPS {key}")) {
        for g in groups {
            if let Reply::Map(fields) = g {
                let keep = |(k, _): &(Reply, Reply)| *k != Reply::bulk(b"entries-read") && *k != Reply::bulk(b"lag");
                out.push(Reply::Map(fields.into_iter().filter(keep).collect()));
            }
        }
    }
    out
}

/// The AOF (a RESP base after a rewrite, then the propagated XCLAIM / XGROUP forms of group
/// reads) replays to the same streams.
#[test]
fn streams_replay_from_a_resp_aof() {
    for preamble in [false, true] {
        let dir = ferrokv_testkit::TempDir::new("stream-aof");
        let cfg = Config {
            dir: dir.path().to_path_buf(),
            appendonly: true,
            aof_use_rdb_preamble: preamble,
            ..Config::default()
        };
        let mut e = Engine::open(cfg.clone(), ferrokv::keyspace::Clock::System).unwrap();
        let mut s = Session { db: 0, ..Default::default() };
        for line in [
            "XADD s 1-0 a 1",
            "XADD s 2-0 b 2",
            "XADD s 3-0 c 3",
            "XGROUP CREATE s g1 0",
            "XGROUP CREATE s g2 0",
            "XREADGROUP GROUP g1 alice COUNT 2 STREAMS s >",
            "XGROUP CREATECONSUMER s g1 idle",
            "XADD empty MAXLEN 0 5-0 x y",
            "XGROUP CREATE empty g1 $",
        ] {
            assert!(!run(&mut e, &mut s, line).is_error(), "{line}");
        }
        e.rewrite_aof().unwrap();
        for line in [
            "XADD s 4-0 d 4",
            "XDEL s 1-0",
            "XREADGROUP GROUP g2 bob NOACK COUNT 2 STREAMS s >",
            "XREADGROUP GROUP g1 carol STREAMS s >",
            "XCLAIM s g1 dave 0 2-0 TIME 1000",
            "XAUTOCLAIM s g1 erin 0 0 COUNT 1",
            "XADD s MAXLEN ~ 1 5-0 e 5",
            "XTRIM s MINID 3",
        ] {
            assert!(!run(&mut e, &mut s, line).is_error(), "{line}");
        }
        let want = [timeless_view(&mut e, &mut s, "s"), timeless_view(&mut e, &mut s, "empty")];
        e.close().unwrap();
        let mut e = Engine::open(cfg, ferrokv::keyspace::Clock::System).unwrap();
        let got = [timeless_view(&mut e, &mut s, "s"), timeless_view(&mut e, &mut s, "empty")];
        assert_eq!(got, want, "preamble {preamble}");
    }
}
