//! WATCH on keys that were already expired when watched, byte for byte against a real
//! redis-server 7.0 (the cases of Redis's unit/multi, and two clients): deleting or
//! flushing such a key is no change, writing it is one; SWAPDB follows Redis's
//! touchAllWatchedKeysInDb rules.

mod support;
use support::{compare, send, Ours, Step};

fn stale_x() -> Vec<Step> {
    vec![
        send(0, &[&["DEBUG", "SET-ACTIVE-EXPIRE", "0"], &["SET", "x", "foo", "PX", "1"]]),
        Step::Recv(0, 2),
        Step::Pause(20),
    ]
}

fn then(mut first: Vec<Step>, rest: Vec<Step>) -> Vec<Step> {
    first.extend(rest);
    first
}

/// With active expiry off, `setup` (keys that expire at once), then WATCH x, SWAPDB 0 1 and
/// a transaction.
fn swapped_in(setup: &[&[&'static str]]) -> Vec<Step> {
    let mut first = vec![&["DEBUG", "SET-ACTIVE-EXPIRE", "0"][..]];
    first.extend_from_slice(setup);
    vec![
        send(0, &first),
        Step::Recv(0, first.len()),
        Step::Pause(20),
        send(
            0,
            &[
                &["WATCH", "x"],
                &["SWAPDB", "0", "1"],
                &["MULTI"],
                &["PING"],
                &["EXEC"],
                &["FLUSHALL"],
                &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
            ],
        ),
        Step::Recv(0, 7),
    ]
}

fn sessions() -> Vec<(&'static str, Vec<Step>)> {
    let exec = |n: usize| {
        vec![send(0, &[&["MULTI"], &["PING"], &["EXEC"], &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]]), Step::Recv(0, n)]
    };
    vec![
        (
            "delete a watched stale key",
            then(stale_x(), then(vec![send(0, &[&["WATCH", "x"], &["DEL", "x"]]), Step::Recv(0, 2)], exec(4))),
        ),
        (
            "flushdb while watching a stale key",
            then(stale_x(), then(vec![send(0, &[&["WATCH", "x"], &["FLUSHDB"]]), Step::Recv(0, 2)], exec(4))),
        ),
        (
            "swapdb with a watched stale key",
            then(
                stale_x(),
                then(
                    vec![send(0, &[&["WATCH", "x"], &["SWAPDB", "0", "1"], &["SWAPDB", "0", "1"]]), Step::Recv(0, 3)],
                    exec(4),
                ),
            ),
        ),
        (
            "a missing key replaced with a stale one",
            swapped_in(&[&["SELECT", "1"], &["SET", "x", "foo", "PX", "1"], &["SELECT", "0"]]),
        ),
        (
            "a stale key replaced with another stale key",
            swapped_in(&[
                &["SET", "x", "foo", "PX", "1"],
                &["SELECT", "1"],
                &["SET", "x", "bar", "PX", "1"],
                &["SELECT", "0"],
            ]),
        ),
        (
            "a write to a stale key watched by two clients",
            then(
                stale_x(),
                vec![
                    send(1, &[&["WATCH", "x"]]),
                    Step::Recv(1, 1),
                    send(2, &[&["WATCH", "x"]]),
                    Step::Recv(2, 1),
                    send(0, &[&["SET", "x", "new"]]),
                    Step::Recv(0, 1),
                    send(1, &[&["MULTI"], &["PING"], &["EXEC"]]),
                    Step::Recv(1, 3),
                    send(2, &[&["MULTI"], &["PING"], &["EXEC"]]),
                    Step::Recv(2, 3),
                    send(0, &[&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]]),
                    Step::Recv(0, 1),
                ],
            ),
        ),
        (
            "a live key that expires while watched",
            vec![
                send(0, &[&["SET", "x", "foo", "PX", "50"], &["WATCH", "x"]]),
                Step::Recv(0, 2),
                Step::Pause(300),
                send(0, &[&["MULTI"], &["PING"], &["EXEC"]]),
                Step::Recv(0, 3),
            ],
        ),
    ]
}

#[test]
fn watch_of_stale_keys_matches_redis() {
    let redis = ferrokv_testkit::Server::start();
    let dir = ferrokv_testkit::TempDir::new("watch-stale");
    let ours = Ours::start(dir.path(), &[]);
    let failures = compare(redis.port, ours.port, &sessions());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
