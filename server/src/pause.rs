//! The pauses of client commands, each for its own purpose as in Redis: CLIENT PAUSE
//! (writes, or every command, until a time), a FAILOVER and a SHUTDOWN waiting for
//! replicas (writes, until they end). A command waits while any pause holds it; the
//! clients waiting are kept in the order they came.

use std::time::Instant;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseKind {
    #[default]
    Off,
    /// Commands that may write or replicate (writes, PUBLISH, EVAL without no-writes...).
    Write,
    All,
}

/// Who paused: ending one pause leaves the others on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PausePurpose {
    Client = 0,
    Failover = 1,
    Shutdown = 2,
}

#[derive(Debug, Default)]
pub struct Pause {
    /// Per purpose: what it holds, until when (None: until it is ended).
    by: [(PauseKind, Option<Instant>); 3],
    postponed: Vec<u64>,
}

impl Pause {
    /// Start a pause for `purpose`; CLIENT PAUSE over one already on keeps the stronger
    /// kind and the later end. `end` None: until [`Pause::stop`].
    pub fn start(&mut self, purpose: PausePurpose, kind: PauseKind, end: Option<Instant>) {
        let (k, e) = &mut self.by[purpose as usize];
        let later = match (*k, *e, end) {
            (PauseKind::Off, _, end) | (_, _, end @ None) | (_, None, end) => end,
            (_, Some(a), Some(b)) => Some(a.max(b)),
        };
        *k = (*k).max(kind);
        *e = later;
    }

    /// `purpose`'s pause ends: the clients to run again (another pause may hold them again).
    pub fn stop(&mut self, purpose: PausePurpose) -> Vec<u64> {
        self.by[purpose as usize] = (PauseKind::Off, None);
        std::mem::take(&mut self.postponed)
    }

    /// What holds now: the strongest kind among the pauses whose end has not passed.
    fn kind_at(&self, now: Instant) -> PauseKind {
        self.by.iter().filter(|(_, end)| end.is_none_or(|e| e >= now)).map(|(k, _)| *k).max().unwrap_or_default()
    }

    /// Whether a pause is on (its end not passed).
    pub fn is_on(&self, now: Instant) -> bool {
        self.kind_at(now) != PauseKind::Off
    }

    /// Whether a command (that may write or replicate, or not) waits.
    pub fn holds(&self, now: Instant, may_replicate: bool) -> bool {
        match self.kind_at(now) {
            PauseKind::Off => false,
            PauseKind::Write => may_replicate,
            PauseKind::All => true,
        }
    }

    /// The earliest end of a timed pause on (the event loop wakes for it).
    pub fn deadline(&self) -> Option<Instant> {
        self.by.iter().filter(|(k, _)| *k != PauseKind::Off).filter_map(|(_, e)| *e).min()
    }

    /// The timed pauses whose end has passed: ended; the clients to run again.
    pub fn stop_expired(&mut self, now: Instant) -> Option<Vec<u64>> {
        let mut ended = false;
        for p in &mut self.by {
            if p.0 != PauseKind::Off && p.1.is_some_and(|e| e < now) {
                *p = (PauseKind::Off, None);
                ended = true;
            }
        }
        ended.then(|| std::mem::take(&mut self.postponed))
    }

    /// A pause was asked (it may have run out already): cheap, for every command.
    pub fn any(&self) -> bool {
        self.by.iter().any(|(k, _)| *k != PauseKind::Off)
    }

    /// Whether client `id` waits for the pause on now.
    pub fn is_waiting(&self, id: u64) -> bool {
        self.postponed.contains(&id)
    }

    pub fn postpone(&mut self, id: u64) {
        self.postponed.push(id);
    }

    /// Clients waiting (INFO blocked_clients counts them, as Redis).
    pub fn waiting(&self) -> usize {
        self.postponed.len()
    }

    /// A waiting client went away.
    pub fn forget(&mut self, id: u64) {
        self.postponed.retain(|&i| i != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ending_one_purpose_leaves_the_others() {
        let now = Instant::now();
        let mut p = Pause::default();
        p.start(PausePurpose::Shutdown, PauseKind::Write, None);
        p.start(PausePurpose::Client, PauseKind::All, Some(now + Duration::from_secs(60)));
        assert!(p.holds(now, false));
        p.postpone(7);
        assert_eq!(p.stop(PausePurpose::Client), vec![7]);
        assert!(!p.holds(now, false) && p.holds(now, true));
        assert_eq!(p.deadline(), None);
        p.stop(PausePurpose::Shutdown);
        assert!(!p.any());
    }

    #[test]
    fn a_timed_pause_ends_by_itself() {
        let now = Instant::now();
        let mut p = Pause::default();
        p.start(PausePurpose::Client, PauseKind::Write, Some(now + Duration::from_millis(5)));
        p.start(PausePurpose::Client, PauseKind::All, Some(now + Duration::from_millis(1)));
        assert_eq!(p.deadline(), Some(now + Duration::from_millis(5)));
        assert!(p.holds(now, false));
        assert!(p.stop_expired(now).is_none());
        assert!(p.stop_expired(now + Duration::from_millis(6)).is_some());
        assert!(!p.any());
    }
}
