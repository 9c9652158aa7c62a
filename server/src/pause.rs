//! CLIENT PAUSE's state: what is paused (writes, or every command) until when, and the
//! clients whose command waits for the end of the pause, in the order they came.

use std::time::Instant;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseKind {
    #[default]
    Off,
    /// Commands that may write or replicate (writes, PUBLISH, EVAL without no-writes...).
    Write,
    All,
}

#[derive(Debug, Default)]
pub struct Pause {
    kind: PauseKind,
    end: Option<Instant>,
    postponed: Vec<u64>,
}

impl Pause {
    /// CLIENT PAUSE: a pause already on keeps the stronger kind and the later end.
    pub fn start(&mut self, kind: PauseKind, end: Instant) {
        self.kind = self.kind.max(kind);
        self.end = Some(self.end.map_or(end, |e| e.max(end)));
    }

    /// The pause ends (UNPAUSE, or its time is up): the clients to serve again.
    pub fn stop(&mut self) -> Vec<u64> {
        self.kind = PauseKind::Off;
        self.end = None;
        std::mem::take(&mut self.postponed)
    }

    /// Whether the pause is on (its end not passed).
    pub fn is_on(&self, now: Instant) -> bool {
        self.kind != PauseKind::Off && self.end.is_some_and(|e| e >= now)
    }

    /// Whether a command (that may write or replicate, or not) waits.
    pub fn holds(&self, now: Instant, may_replicate: bool) -> bool {
        self.is_on(now) && (self.kind == PauseKind::All || may_replicate)
    }

    /// The end, while a pause is on (the event loop wakes for it).
    pub fn deadline(&self) -> Option<Instant> {
        self.end.filter(|_| self.kind != PauseKind::Off)
    }

    /// A pause was asked (it may have run out already): cheap, for every command.
    pub fn any(&self) -> bool {
        self.kind != PauseKind::Off
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
