//! What the `commands`, `aof` and `dump` fuzz targets run on one input, with the invariants
//! they check. Only `ferrokv` is used here: engine/tests/fuzz_seeds.rs includes this file
//! (`#[path]`) to replay fuzz/regressions/{commands,aof,dump}/ in `cargo test`.
//!
//! `commands` input: a script, one command a line (`\n`), arguments split on single
//! spaces (two spaces make an empty argument). A line starting with byte 0x01 moves the
//! virtual clock forward (the rest in decimal ms, else 10 ms per byte value of the
//! next byte), one starting with 0x02 runs an active expiry cycle.

use std::path::Path;

use ferrokv::command::{ExpireMode, Reply};
use ferrokv::digest::value_digest;
use ferrokv::keyspace::Clock;
use ferrokv::persist::{load, Manifest};
use ferrokv::{Config, Engine, Session, Source};

/// A fixed start time, so a crash reproduces: 2024-01-01T00:00:00Z.
pub const START_MS: i64 = 1_704_067_200_000;
/// First byte of a line that moves the clock.
pub const ADVANCE: u8 = 0x01;
/// First byte of a line that runs one active expiry cycle.
pub const CYCLE: u8 = 0x02;

/// Largest single clock step (a day), so TTLs of every size get crossed but time stays
/// far from overflow.
const MAX_STEP_MS: u64 = 86_400_000;

fn engine(clock: Clock) -> Engine {
    let mut e = Engine::with_clock(Config::default(), clock);
    // Random picks (SPOP, SRANDMEMBER, the expiry cycle's sampling) reproduce.
    e.rng_mut().seed(0);
    e
}

/// Milliseconds a clock line moves time by.
fn step_ms(rest: &[u8]) -> i64 {
    let decimal = !rest.is_empty() && rest.iter().all(u8::is_ascii_digit);
    let ms = if decimal {
        rest.iter().fold(0u64, |n, &d| n.saturating_mul(10).saturating_add(u64::from(d - b'0')))
    } else {
        rest.first().map_or(1, |&b| u64::from(b) * 10)
    };
    ms.min(MAX_STEP_MS) as i64
}

pub fn run_commands(data: &[u8]) {
    let clock = Clock::virtual_at(START_MS);
    let mut e = engine(clock.clone());
    let mut sess = Session::default();
    for line in data.split(|&b| b == b'\n') {
        match line.first() {
            None => continue,
            Some(&ADVANCE) => {
                clock.advance_ms(step_ms(&line[1..]));
                continue;
            }
            Some(&CYCLE) => {
                e.active_expire_cycle();
                check_keyspace(&e);
                continue;
            }
            Some(_) => {}
        }
        let argv: Vec<Vec<u8>> = line.split(|&b| b == b' ').map(<[u8]>::to_vec).collect();
        if asks_for_too_much(&argv) {
            continue;
        }
        let reply = e.execute(&mut sess, &argv);
        check_reply(&reply, &argv);
        check_keyspace(&e);
        let dbsize = e.execute(&mut sess, &[b"DBSIZE".to_vec()]);
        let want = Reply::Int(e.keyspace().db(sess.db).len() as i64);
        assert_eq!(dbsize, want, "DBSIZE of db {} after {:?}", sess.db, show(&argv));
    }
    dump_restore_round_trip(&mut e);
}

/// Largest reply (elements) or string (bytes) a number argument may ask for here.
const MAX_ASKED: i64 = 1 << 20;

/// Commands whose reply or value Redis makes as large as a number argument asks for:
/// SRANDMEMBER/HRANDFIELD/ZRANDMEMBER with a negative count reply with that many
/// elements (unbounded), SETRANGE/SETBIT grow a string up to 512 MB. Redis does the same
/// (and runs out of memory the same way); that is the client's request, not a parsing
/// bug, so such commands are skipped past [`MAX_ASKED`]. Beyond Redis's limits (an
/// offset past 512 MB) they still run, to check the error path.
fn asks_for_too_much(argv: &[Vec<u8>]) -> bool {
    let int = |i: usize| argv.get(i).and_then(|a| std::str::from_utf8(a).ok()?.parse::<i64>().ok());
    let name = argv[0].to_ascii_lowercase();
    match name.as_slice() {
        b"srandmember" | b"hrandfield" | b"zrandmember" => int(2).is_some_and(|n| n < -MAX_ASKED),
        b"setrange" => {
            let len = argv.get(3).map_or(0, |v| v.len() as i64);
            int(2).is_some_and(|off| off > MAX_ASKED && off.saturating_add(len) <= 512 << 20)
        }
        b"setbit" => int(2).is_some_and(|bit| bit > MAX_ASKED * 8 && bit < 1 << 32),
        b"bitfield" => bitfield_grows_past(argv, MAX_ASKED * 8),
        _ => false,
    }
}

/// Whether a BITFIELD SET or INCRBY writes a field at a bit offset past `bits` (and below
/// Redis's 2^32 limit): `#n` offsets count in fields of the type's width.
fn bitfield_grows_past(argv: &[Vec<u8>], bits: i64) -> bool {
    let text = |a: &Vec<u8>| String::from_utf8_lossy(a).to_ascii_lowercase();
    argv.windows(3).skip(2).any(|w| {
        let op = text(&w[0]);
        if op != "set" && op != "incrby" {
            return false;
        }
        let width = text(&w[1]).get(1..).and_then(|n| n.parse::<i64>().ok()).unwrap_or(1);
        let off = text(&w[2]);
        let bit = match off.strip_prefix('#') {
            Some(n) => n.parse::<i64>().ok().map(|n| n.saturating_mul(width)),
            None => off.parse::<i64>().ok(),
        };
        bit.is_some_and(|b| b > bits && b < 1 << 32)
    })
}

/// Every key's DUMP restores (in a second engine) to a value with the same digest.
fn dump_restore_round_trip(e: &mut Engine) {
    let mut other = engine(e.clock().clone());
    for db in 0..e.keyspace().dbs.len() {
        let keys: Vec<Vec<u8>> = e.keyspace().db(db).slots().iter().map(|s| s.key.to_vec()).collect();
        if keys.is_empty() {
            continue;
        }
        let mut sess = Session { db, ..Default::default() };
        let mut other_sess = Session { db, ..Default::default() };
        for key in keys {
            let payload = match e.execute(&mut sess, &[b"DUMP".to_vec(), key.clone()]) {
                Reply::Bulk(p) => p,
                Reply::Nil => continue, // expired on the way
                r => panic!("DUMP {:?}: {r:?}", show(&[key])),
            };
            let argv = [b"RESTORE".to_vec(), key.clone(), b"0".to_vec(), payload, b"REPLACE".to_vec()];
            let r = other.execute(&mut other_sess, &argv);
            assert_eq!(r, Reply::ok(), "RESTORE of the DUMP of {:?}", show(&[key]));
            let [before, after] =
                [&*e, &other].map(|e| e.keyspace().db(db).get(&key).map(|s| zero_signless(s.value.to_logical())));
            let digest = |v: &Option<ferrokv::logical::Logical>| {
                v.as_ref().map(|v| value_digest(v, false, ferrokv::command::Doubles::default()))
            };
            if digest(&before) != digest(&after) {
                panic!("DUMP/RESTORE changed {:?}\nbefore: {before:?}\nafter:  {after:?}", show(&[key]));
            }
        }
    }
}

/// A -0 score as 0: a small zset restores as a listpack, where Redis (and the engine)
/// read a -0 back as 0, so a skiplist's -0 legitimately comes back as 0.
fn zero_signless(mut v: ferrokv::logical::Logical) -> ferrokv::logical::Logical {
    if let ferrokv::logical::Logical::Zset(items) = &mut v {
        for (_, score) in items.iter_mut() {
            if *score == 0.0 {
                *score = 0.0;
            }
        }
    }
    v
}

/// The reply encodes in both protocols as one well-formed RESP value.
fn check_reply(reply: &Reply, argv: &[Vec<u8>]) {
    for resp3 in [false, true] {
        let mut out = Vec::new();
        reply.write_resp(&mut out, resp3);
        let end = resp_value(&out, 0);
        assert_eq!(end, Some(out.len()), "malformed reply to {:?}: {:?}", show(argv), String::from_utf8_lossy(&out));
    }
}

/// The end of the RESP value at `pos`, or None if it is malformed.
fn resp_value(b: &[u8], pos: usize) -> Option<usize> {
    let tag = *b.get(pos)?;
    let nl = pos + b.get(pos..)?.windows(2).position(|w| w == b"\r\n")?;
    let head = &b[pos + 1..nl];
    if head.contains(&b'\n') || head.contains(&b'\r') {
        return None;
    }
    let next = nl + 2;
    let count = || std::str::from_utf8(head).ok()?.parse::<i64>().ok();
    match tag {
        b'+' | b'-' | b'_' | b',' | b'#' => Some(next),
        b':' => count().map(|_| next),
        b'$' => match count()? {
            -1 => Some(next),
            n if n >= 0 => {
                let end = next.checked_add(n as usize)?;
                (b.get(end..end + 2)? == b"\r\n").then_some(end + 2)
            }
            _ => None,
        },
        b'*' | b'~' | b'%' => {
            let n = count()?;
            if n == -1 && tag == b'*' {
                return Some(next);
            }
            let items = if tag == b'%' { n.checked_mul(2)? } else { n };
            let mut p = next;
            for _ in 0..usize::try_from(items).ok()? {
                p = resp_value(b, p)?;
            }
            Some(p)
        }
        _ => None,
    }
}

/// No empty collection is stored (Redis deletes a key whose collection empties), the
/// TTL index matches the keys, and every key is found at its own position.
pub fn check_keyspace(e: &Engine) {
    for (i, db) in e.keyspace().dbs.iter().enumerate() {
        let mut volatile = 0;
        for (pos, slot) in db.slots().iter().enumerate() {
            assert!(
                !slot.value.is_empty_collection(),
                "db {i}: key {:?} holds an empty {}",
                show(&[slot.key.to_vec()]),
                slot.value.type_name()
            );
            volatile += usize::from(slot.has_ttl());
            assert_eq!(
                db.find(&slot.key),
                Some(pos),
                "db {i}: key {:?} not found where it is",
                show(&[slot.key.to_vec()])
            );
        }
        assert_eq!(volatile, db.volatile_len(), "db {i}: keys with a TTL vs the TTL index");
    }
}

fn show(argv: &[Vec<u8>]) -> Vec<String> {
    argv.iter().map(|a| String::from_utf8_lossy(&a[..a.len().min(64)]).into_owned()).collect()
}

/// `aof` input: the bytes of one AOF file replayed as at startup, then the same bytes
/// parsed as a manifest (whose text form must parse back to the same manifest).
pub fn run_aof(data: &[u8]) {
    let mut e = engine(Clock::virtual_at(START_MS));
    e.set_mode(ExpireMode::Loading);
    let src = Source::Buffered(data.to_vec());
    let limits = e.config().limits;
    let _ = load::replay_bytes(&mut e, &limits, &src, Path::new("fuzz.aof"));
    e.set_mode(ExpireMode::Master);
    check_keyspace(&e);
    let _ = e.digest();
    let parsed = Manifest::parse(data).ok();
    // An empty manifest (comments only) writes no text, which does not parse.
    if let Some(m) = parsed.filter(|m| m.base.is_some() || !m.history.is_empty() || !m.incr.is_empty()) {
        let text = m.to_text();
        let again = Manifest::parse(text.as_bytes());
        // A quoted name can grow past the 1024 bytes a line may hold: Redis writes such a
        // line too and then refuses it the same way.
        if text.lines().any(|l| l.len() >= 1024) {
            assert!(matches!(&again, Err((_, e)) if e.contains("too long line")), "manifest text {text:?}");
        } else {
            assert_eq!(again.as_ref(), Ok(&m), "manifest text {text:?}");
        }
    }
}

/// `dump` input: a RESTORE payload. Refused with an error, or restored into a value every
/// read gives back, whose DUMP restores again to the same value (equal DEBUG DIGEST-VALUE
/// digests).
pub fn run_dump(data: &[u8]) {
    let mut e = engine(Clock::virtual_at(START_MS));
    let mut s = Session::default();
    let mut run =
        |e: &mut Engine, argv: &[&[u8]]| e.execute(&mut s, &argv.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
    if run(&mut e, &[b"RESTORE", b"k", b"0", data]).is_error() {
        return;
    }
    let reads: [&[&[u8]]; 8] = [
        &[b"TYPE", b"k"],
        &[b"OBJECT", b"ENCODING", b"k"],
        &[b"STRLEN", b"k"],
        &[b"HGETALL", b"k"],
        &[b"LRANGE", b"k", b"0", b"-1"],
        &[b"SMEMBERS", b"k"],
        &[b"ZRANGE", b"k", b"0", b"-1", b"WITHSCORES"],
        &[b"XINFO", b"STREAM", b"k", b"FULL"],
    ];
    for argv in reads {
        let _ = run(&mut e, argv);
    }
    let digest = |e: &Engine| {
        let slot = e.keyspace().dbs[0].get(b"k")?;
        Some(value_digest(&slot.value.to_logical(), slot.has_ttl(), e.config().version.doubles()))
    };
    let before = digest(&e);
    let Reply::Bulk(dumped) = run(&mut e, &[b"DUMP", b"k"]) else { panic!("no DUMP of a restored key") };
    let again = run(&mut e, &[b"RESTORE", b"k", b"0", &dumped, b"REPLACE"]);
    assert!(!again.is_error(), "the DUMP of a restored value is refused: {again:?}");
    assert_eq!(before, digest(&e), "the value changed through DUMP and RESTORE");
}
