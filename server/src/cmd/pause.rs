//! CLIENT PAUSE timeout [WRITE|ALL] and CLIENT UNPAUSE, over crate::pause: a command the
//! pause holds waits, its client blocked, until the pause ends; keys do not expire meanwhile
//! (reads see them gone, as Redis: the dataset stays as it is).

use std::time::{Duration, Instant};

use ferrokv::command::{eq_ic, parse_i64, Argv, ExpireMode};
use ferrokv::Reply;

use super::Found;
use crate::client::Client;
use crate::pause::{PauseKind, PausePurpose};
use crate::server::Server;

/// CLIENT PAUSE timeout [WRITE|ALL]
pub fn client_pause(s: &mut Server, a: &[Vec<u8>]) -> Reply {
    let kind = match a.get(3) {
        None => PauseKind::All,
        Some(m) if eq_ic(m, "write") => PauseKind::Write,
        Some(m) if eq_ic(m, "all") => PauseKind::All,
        Some(_) => return Reply::err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let ms = match parse_i64(&a[2]) {
        None => return Reply::err("ERR timeout is not an integer or out of range"),
        Some(n) if n < 0 => return Reply::err("ERR timeout is negative"),
        Some(n) => n as u64,
    };
    let now = Instant::now();
    let end = now.checked_add(Duration::from_millis(ms));
    s.pause.start(PausePurpose::Client, kind, end);
    s.refresh_expire_mode();
    Reply::ok()
}

/// CLIENT UNPAUSE
pub fn client_unpause(s: &mut Server) -> Reply {
    s.end_pause(PausePurpose::Client);
    Reply::ok()
}

impl Server {
    /// processCommand's pause check: true when `c`'s command now waits for the end of the
    /// pause (replicas never wait).
    pub(crate) fn postpone_if_paused(&mut self, c: &mut Client, found: Found, argv: &mut Argv) -> bool {
        if c.replica || !self.pause.any() {
            return false;
        }
        let now = Instant::now();
        if !self.pause.is_on(now) {
            return false;
        }
        let may_replicate = crate::admission::may_replicate(self, c, found, argv);
        if !self.pause.holds(now, may_replicate) {
            return false;
        }
        // Counted when it runs.
        self.stats.commands_processed -= 1;
        c.postponed = Some(std::mem::take(argv));
        self.pause.postpone(c.id);
        true
    }

    /// `purpose`'s pause ended: the waiting clients run their commands at their next
    /// turn (or wait again for another pause).
    pub(crate) fn end_pause(&mut self, purpose: PausePurpose) {
        let waiting = self.pause.stop(purpose);
        self.refresh_expire_mode();
        self.pending.extend(waiting);
    }

    /// The expiry rule for clients' commands from now: a replica's (reads see expired
    /// keys missing, writes delete them, only its master's DELs otherwise), a paused
    /// server's (keys stay as they are), a master's.
    pub(crate) fn refresh_expire_mode(&mut self) {
        let mode = if self.link.is_some() {
            ExpireMode::Writable
        } else if self.pause.is_on(Instant::now()) {
            ExpireMode::Replica
        } else {
            ExpireMode::Master
        };
        self.engine.set_mode(mode);
        self.sync_modified_tracking();
    }

    /// At each round of the event loop: a pause whose time is up ends.
    pub(crate) fn end_pause_when_due(&mut self) {
        if self.pause.deadline().is_some_and(|end| end < Instant::now()) {
            if let Some(waiting) = self.pause.stop_expired(Instant::now()) {
                self.refresh_expire_mode();
                self.pending.extend(waiting);
            }
        }
    }

    /// Run the command `c` left waiting, once the pause is over. False while it still waits.
    pub(crate) fn resume_postponed(&mut self, c: &mut Client) -> bool {
        // Still in the pause's list: the pause it waits for goes on.
        if self.pause.is_waiting(c.id) {
            return false;
        }
        let Some(mut argv) = c.postponed.take() else { return true };
        // Run again from the top, as Redis reprocesses it: a new pause holds it again.
        c.reply_skip = std::mem::take(&mut c.reply_skip_next);
        self.dispatch(c, &mut argv);
        c.parser.recycle(argv);
        c.reply_skip = false;
        if c.postponed.is_some() || self.exit {
            return false;
        }
        self.after_command(c);
        true
    }
}
