//! MONITOR: clients that see every command the server runs, one status line each, as
//! Redis's replicationFeedMonitors writes it: `+<secs>.<usecs> [<db> <client>] "arg" ...`
//! (`[<db> lua]` for a script's commands), secrets shown as `"(redacted)"`.

use ferrokv::command::flags;
use ferrokv::format::args::repr_into;

mod feed;

/// The clients in MONITOR mode, by id, in the order they asked.
#[derive(Debug, Default)]
pub struct Monitors {
    pub(crate) ids: Vec<u64>,
}

impl Monitors {
    pub fn add(&mut self, id: u64) {
        if !self.ids.contains(&id) {
            self.ids.push(id);
        }
    }

    pub fn remove(&mut self, id: u64) {
        self.ids.retain(|&i| i != id);
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// The scripting commands, which show themselves before the commands their script runs.
pub fn shown_before(name: &str) -> bool {
    matches!(name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro")
}

/// Whether a command of these flags is shown after it ran: not the scripting commands
/// (shown before) nor administrative ones, too dangerous to show (CONFIG, ACL, DEBUG,
/// MONITOR itself, ...).
pub fn shown_after(command_flags: u32) -> bool {
    command_flags & (flags::SKIP_MONITOR | flags::ADMIN) == 0
}

/// The line for `argv` run on `db` by `who` (`None`: a script) at `unix_us`, the
/// positions in `hidden` shown as `(redacted)`.
pub(crate) fn line(unix_us: i64, db: usize, who: Option<&str>, argv: &[Vec<u8>], hidden: &[usize]) -> Vec<u8> {
    let mut s = format!(
        "+{}.{:06} [{db} {}] ",
        unix_us.div_euclid(1_000_000),
        unix_us.rem_euclid(1_000_000),
        who.unwrap_or("lua")
    );
    for (j, a) in argv.iter().enumerate() {
        if j > 0 {
            s.push(' ');
        }
        repr_into(&mut s, if hidden.contains(&j) { b"(redacted)" } else { a });
    }
    s.push_str("\r\n");
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_redis_writes_them() {
        let argv: Vec<Vec<u8>> = vec![b"set".to_vec(), b"k\n".to_vec(), b"v \x01".to_vec()];
        assert_eq!(
            line(1_700_000_000_000_042, 3, Some("127.0.0.1:5000"), &argv, &[]),
            b"+1700000000.000042 [3 127.0.0.1:5000] \"set\" \"k\\n\" \"v \\x01\"\r\n".to_vec()
        );
        let auth: Vec<Vec<u8>> = vec![b"auth".to_vec(), b"pw".to_vec()];
        assert_eq!(line(1_000_001, 0, None, &auth, &[1]), b"+1.000001 [0 lua] \"auth\" \"(redacted)\"\r\n".to_vec());
    }
}
