//! The slow log: commands that ran at least `slowlog-log-slower-than` microseconds, newest
//! first, at most `slowlog-max-len` of them (Redis's slowlog.c).

use std::collections::VecDeque;

/// Arguments kept per entry; the last kept one then says how many were left out.
const MAX_ARGC: usize = 32;
/// Bytes kept of one argument; the rest is summarised.
const MAX_STRING: usize = 128;

/// One logged command.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: u64,
    /// Unix seconds when it was logged.
    pub time: i64,
    pub micros: u64,
    pub argv: Vec<Vec<u8>>,
    /// The client's `ip:port`, and its name.
    pub peer: String,
    pub name: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct SlowLog {
    entries: VecDeque<Entry>,
    next_id: u64,
}

impl SlowLog {
    /// Log a command that took `micros` when the threshold says so (negative: never), and
    /// keep at most `max_len` entries.
    #[allow(clippy::too_many_arguments)]
    pub fn note(
        &mut self,
        threshold: i64,
        max_len: usize,
        micros: u64,
        argv: &[Vec<u8>],
        time: i64,
        peer: String,
        name: &[u8],
    ) {
        if threshold < 0 || micros < threshold as u64 {
            return;
        }
        let hidden = redacted(argv);
        let keep = argv.len().min(MAX_ARGC);
        let argv = (0..keep)
            .map(|j| {
                if keep != argv.len() && j == keep - 1 {
                    format!("... ({} more arguments)", argv.len() - keep + 1).into_bytes()
                } else if hidden.contains(&j) {
                    b"(redacted)".to_vec()
                } else if argv[j].len() > MAX_STRING {
                    let mut s = argv[j][..MAX_STRING].to_vec();
                    s.extend_from_slice(format!("... ({} more bytes)", argv[j].len() - MAX_STRING).as_bytes());
                    s
                } else {
                    argv[j].clone()
                }
            })
            .collect();
        self.entries.push_front(Entry { id: self.next_id, time, micros, argv, peer, name: name.to_vec() });
        self.next_id += 1;
        self.trim(max_len);
    }

    /// Keep the newest `max_len` entries (CONFIG SET slowlog-max-len trims at the next log).
    pub fn trim(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// The newest `count` entries, newest first.
    pub fn newest(&self, count: usize) -> impl Iterator<Item = &Entry> {
        self.entries.iter().take(count)
    }
}

/// The positions of `argv` that hold secrets Redis hides from the slow log (and MONITOR)
/// as `(redacted)`: AUTH's arguments, HELLO's AUTH pair, MIGRATE's AUTH and AUTH2 secrets,
/// ACL SETUSER's rules (and from 7.4
/// the user names of ACL GETUSER and DELUSER), the values of CONFIG SET's sensitive
/// parameters.
pub(crate) fn redacted(argv: &[Vec<u8>]) -> Vec<usize> {
    let since_74 = crate::version::version() >= ferrokv::command::catalog::ServerVersion::Redis74;
    let is = |i: usize, s: &str| argv.get(i).is_some_and(|a| a.eq_ignore_ascii_case(s.as_bytes()));
    let mut hidden = Vec::new();
    if is(0, "auth") && argv.len() <= 3 {
        hidden.extend(1..argv.len());
    } else if is(0, "hello") {
        let mut j = 2;
        while j < argv.len() {
            let more = argv.len() - 1 - j;
            if is(j, "auth") && more >= 2 {
                hidden.extend([j + 1, j + 2]);
                j += 3;
            } else if is(j, "setname") && more >= 1 {
                j += 2;
            } else {
                break;
            }
        }
    } else if is(0, "acl") && argv.len() >= 3 && (is(1, "setuser") || (since_74 && is(1, "deluser"))) {
        hidden.extend(2..argv.len());
    } else if since_74 && is(0, "acl") && is(1, "getuser") && argv.len() == 3 {
        hidden.push(2);
    } else if is(0, "migrate") {
        // AUTH password, AUTH2 username password (up to the KEYS list).
        let mut j = 6;
        while j < argv.len() {
            if is(j, "keys") {
                break;
            } else if is(j, "auth") && j + 1 < argv.len() {
                hidden.push(j + 1);
                j += 1;
            } else if is(j, "auth2") && j + 2 < argv.len() {
                hidden.extend([j + 1, j + 2]);
                j += 2;
            }
            j += 1;
        }
    } else if is(0, "config") && is(1, "set") {
        let sensitive: &[&str] = if since_74 {
            &["requirepass", "masterauth", "masteruser", "tls-key-file-pass", "tls-client-key-file-pass"]
        } else {
            &["requirepass", "masterauth", "masteruser"]
        };
        hidden.extend(
            (2..argv.len().saturating_sub(1)).step_by(2).filter(|&j| sensitive.iter().any(|p| is(j, p))).map(|j| j + 1),
        );
    }
    hidden
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Vec<u8>> {
        a.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn long_commands_are_trimmed_as_redis_trims_them() {
        let mut log = SlowLog::default();
        let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let mut argv = vec!["sadd".to_string(), "k".into()];
        argv.extend(many);
        let argv: Vec<Vec<u8>> = argv.into_iter().map(String::into_bytes).collect();
        log.note(0, 128, 5, &argv, 1, "127.0.0.1:1".into(), b"");
        let e = log.newest(1).next().expect("logged");
        assert_eq!(e.argv.len(), 32);
        assert_eq!(e.argv[31], b"... (11 more arguments)".to_vec());
        log.note(0, 128, 5, &args(&["set", "k", &"x".repeat(200)]), 1, String::new(), b"");
        let e = log.newest(1).next().expect("logged");
        assert_eq!(e.argv[2], format!("{}... (72 more bytes)", "x".repeat(128)).into_bytes());
        log.note(-1, 128, 5, &args(&["get", "k"]), 1, String::new(), b"");
        log.note(10, 128, 9, &args(&["get", "k"]), 1, String::new(), b"");
        assert_eq!(log.len(), 2);
        log.note(0, 1, 5, &args(&["auth", "a", "b"]), 1, String::new(), b"");
        assert_eq!(log.len(), 1);
        assert_eq!(log.newest(5).next().expect("logged").argv, args(&["auth", "(redacted)", "(redacted)"]));
    }
}
