//! One command's entry in the table: name, arity, flags, key positions and handler.

use super::{flags, Handler};

/// Finds the key positions of a command whose keys are not a fixed range.
pub type KeyFinder = fn(&[Vec<u8>]) -> Vec<usize>;

/// One command: what COMMAND INFO reports, and the function that runs it.
#[derive(Clone, Copy)]
pub struct Spec {
    /// Lower case, as Redis names it.
    pub name: &'static str,
    /// Exact argument count (name included), or at least `-arity`.
    pub arity: i32,
    pub flags: u32,
    /// First key position (0: no keys), last (negative: from the end), step.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub handler: Handler,
    /// For commands with movable keys (ZUNIONSTORE, SORT ... STORE, ...).
    pub keys: Option<KeyFinder>,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spec").field("name", &self.name).field("arity", &self.arity).finish()
    }
}

impl Spec {
    pub const fn new(name: &'static str, arity: i32, flags: u32, keys: (i32, i32, i32), handler: Handler) -> Spec {
        Spec { name, arity, flags, first_key: keys.0, last_key: keys.1, step: keys.2, handler, keys: None }
    }

    pub const fn movable(mut self, finder: KeyFinder) -> Spec {
        self.keys = Some(finder);
        self.flags |= flags::MOVABLE_KEYS;
        self
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = i64::from(self.arity);
        if a >= 0 {
            argc == a
        } else {
            argc >= -a
        }
    }

    pub fn is_write(&self) -> bool {
        self.flags & flags::WRITE != 0
    }

    /// Positions of the keys in `argv`.
    pub fn key_positions(&self, argv: &[Vec<u8>]) -> Vec<usize> {
        if let Some(f) = self.keys {
            return f(argv);
        }
        if self.first_key <= 0 {
            return Vec::new();
        }
        let n = argv.len() as i32;
        let last = if self.last_key < 0 { n + self.last_key } else { self.last_key };
        let step = self.step.max(1);
        (self.first_key..=last.min(n - 1)).step_by(step as usize).map(|i| i as usize).collect()
    }
}
