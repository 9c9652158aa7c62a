//! Expiry on a virtual clock: the active cycle's effect and budget, and lazy expiry on every
//! access path, each deletion propagated as DEL.

use ferrokv::keyspace::Clock;
use ferrokv::{Config, Engine, Reply, Session};

fn argv(line: &str) -> Vec<Vec<u8>> {
    ferrokv_testkit::split_args(line).expect("a command line")
}

const T0: i64 = 1_700_000_000_000;

fn engine() -> (Engine, Clock) {
    let clock = Clock::virtual_at(T0);
    (Engine::with_clock(Config::default(), clock.clone()), clock)
}

#[test]
fn active_cycles_remove_most_untouched_keys_within_their_budget() {
    let (mut e, clock) = engine();
    let mut s = Session::default();
    for i in 0..10_000 {
        let ttl = 100 + (i % 900);
        assert_eq!(e.execute(&mut s, &argv(&format!("SET k{i} v PX {ttl}"))), Reply::ok());
    }
    for i in 0..1000 {
        e.execute(&mut s, &argv(&format!("SET keep{i} v")));
    }
    clock.advance_ms(2_000);
    let mut cycles = 0;
    while e.keyspace().len() > 1000 + 2_500 && cycles < 10_000 {
        let (rep, units) = e.active_expire_cycle_collect();
        assert!(rep.elapsed <= e.expire_cycle().budget + std::time::Duration::from_millis(2), "{:?}", rep.elapsed);
        // One DEL per expired key, each its own unit.
        assert_eq!(units.len(), rep.expired);
        assert!(units.iter().all(|u| u.len() == 1 && u[0].1[0] == b"DEL"));
        cycles += 1;
    }
    let gone = 11_000 - e.keyspace().len();
    assert!(gone * 100 >= 10_000 * 75, "{gone} of 10000 expired keys removed in {cycles} cycles");
    assert_eq!(e.stats().expired_keys as usize, gone);
    // Keys without a TTL are never sampled.
    for i in 0..1000 {
        assert!(e.keyspace().db(0).get(format!("keep{i}").as_bytes()).is_some());
    }
}

#[test]
fn nothing_expires_before_its_time_and_expiry_is_strictly_after() {
    let (mut e, clock) = engine();
    let mut s = Session::default();
    e.execute(&mut s, &argv("SET k v PX 1000"));
    clock.advance_ms(1000);
    // Redis: expired when now > when; at exactly `when` the key is still there.
    assert_eq!(e.execute(&mut s, &argv("GET k")), Reply::bulk(b"v"));
    assert_eq!(e.active_expire_cycle().expired, 0);
    clock.advance_ms(1);
    assert_eq!(e.execute(&mut s, &argv("GET k")), Reply::Nil);
}

/// Every access path: a command touching an expired key finds it missing and deletes it
/// first, propagating DEL (and, for a write, MULTI/DEL/write/EXEC).
#[test]
fn lazy_expiry_on_every_access_path() {
    let setups =
        [("s", "SET s 5"), ("l", "RPUSH l a b c"), ("h", "HSET h f v"), ("z", "ZADD z 1 m"), ("t", "SADD t x")];
    let reads: &[(&str, &str, Reply)] = &[
        ("s", "GET s", Reply::Nil),
        ("s", "STRLEN s", Reply::Int(0)),
        ("s", "GETRANGE s 0 -1", Reply::bulk(b"")),
        ("s", "EXISTS s", Reply::Int(0)),
        ("s", "TYPE s", Reply::simple("none")),
        ("s", "TTL s", Reply::Int(-2)),
        ("s", "MGET s", Reply::Array(vec![Reply::Nil])),
        ("l", "LRANGE l 0 -1", Reply::Array(vec![])),
        ("l", "LLEN l", Reply::Int(0)),
        ("l", "LINDEX l 0", Reply::Nil),
        ("h", "HGET h f", Reply::Nil),
        ("h", "HGETALL h", Reply::Array(vec![])),
        ("h", "HLEN h", Reply::Int(0)),
        ("z", "ZSCORE z m", Reply::Nil),
        ("z", "ZCARD z", Reply::Int(0)),
        ("z", "ZRANGE z 0 -1", Reply::Array(vec![])),
        ("t", "SCARD t", Reply::Int(0)),
        ("t", "SISMEMBER t x", Reply::Int(0)),
    ];
    for (key, cmd, want) in reads {
        let (mut e, clock) = engine();
        let mut s = Session::default();
        let setup = setups.iter().find(|(k, _)| k == key).map(|(_, c)| *c).unwrap_or_default();
        e.execute(&mut s, &argv(setup));
        e.execute(&mut s, &argv(&format!("PEXPIRE {key} 10")));
        let _ = e.flush_collect();
        clock.advance_ms(11);
        let got = e.call(&mut s, &argv(cmd));
        assert_eq!(got.to_resp2(), want.to_resp2(), "{cmd}");
        let unit = e.flush_collect();
        assert_eq!(unit, vec![(0, vec![b"DEL".to_vec(), key.as_bytes().to_vec()])], "{cmd}");
        assert!(e.keyspace().db(0).get(key.as_bytes()).is_none(), "{cmd}");
    }
    let writes = [
        ("s", "INCR s"),
        ("s", "APPEND s x"),
        ("l", "LPUSH l x"),
        ("h", "HSET h f2 v"),
        ("z", "ZADD z 2 n"),
        ("t", "SADD t y"),
    ];
    for (key, cmd) in writes {
        let (mut e, clock) = engine();
        let mut s = Session::default();
        let setup = setups.iter().find(|(k, _)| *k == key).map(|(_, c)| *c).unwrap_or_default();
        e.execute(&mut s, &argv(setup));
        e.execute(&mut s, &argv(&format!("PEXPIRE {key} 10")));
        let _ = e.flush_collect();
        clock.advance_ms(11);
        e.call(&mut s, &argv(cmd));
        let unit: Vec<Vec<Vec<u8>>> = e.flush_collect().into_iter().map(|(_, a)| a).collect();
        assert_eq!(unit.len(), 4, "{cmd}: {unit:?}");
        assert_eq!(unit[0], vec![b"MULTI".to_vec()]);
        assert_eq!(unit[1], vec![b"DEL".to_vec(), key.as_bytes().to_vec()]);
        assert_eq!(unit[2], argv(cmd));
        assert_eq!(unit[3], vec![b"EXEC".to_vec()]);
        // The new key has no TTL left over.
        assert_eq!(e.execute(&mut s, &argv(&format!("TTL {key}"))), Reply::Int(-1), "{cmd}");
    }
}

#[test]
fn loading_never_expires_and_a_replica_keeps_expired_keys() {
    let (mut e, clock) = engine();
    let mut s = Session::default();
    e.execute(&mut s, &argv("SET k v PX 10"));
    clock.advance_ms(100);
    e.set_mode(ferrokv::command::ExpireMode::Loading);
    assert_eq!(e.execute(&mut s, &argv("GET k")), Reply::bulk(b"v"));
    e.set_mode(ferrokv::command::ExpireMode::Replica);
    assert_eq!(e.execute(&mut s, &argv("GET k")), Reply::Nil);
    assert!(e.keyspace().db(0).get(b"k").is_some());
    assert!(e.flush_collect().is_empty());
}
