//! The library API: an engine over a data directory, run command by command.
//!
//! ```
//! use ferrokv::{Config, Engine, Session, Reply};
//! let mut engine = Engine::in_memory(Config::default());
//! let mut s = Session::default();
//! let argv = |a: &[&str]| a.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
//! assert_eq!(engine.execute(&mut s, &argv(&["SET", "k", "v"])), Reply::ok());
//! assert_eq!(engine.execute(&mut s, &argv(&["GET", "k"])), Reply::bulk(b"v"));
//! ```

use crate::command::{self, Argv, Ctx, Effects, ExpireMode, Reply, Stats};
use crate::config::Config;
use crate::keyspace::{Clock, CycleReport, ExpireCycle, Keyspace};
use crate::persist::Persistence;

/// Per-client state the engine needs: the selected database.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub db: usize,
}

pub struct Engine {
    pub ks: Keyspace,
    pub cfg: Config,
    pub clock: Clock,
    pub stats: Stats,
    /// How lookups treat expired keys (Master unless replaying).
    pub mode: ExpireMode,
    pub rng: fastrand::Rng,
    pub cycle: ExpireCycle,
    /// Effects of the commands run since the last flush.
    pub fx: Effects,
    pub persist: Persistence,
}

impl Engine {
    /// An engine with no files: nothing is loaded or written.
    pub fn in_memory(cfg: Config) -> Engine {
        Engine::with_clock(cfg, Clock::System)
    }

    pub fn with_clock(cfg: Config, clock: Clock) -> Engine {
        Engine {
            ks: Keyspace::new(cfg.databases),
            cycle: ExpireCycle::new(cfg.hz),
            cfg,
            clock,
            stats: Stats::default(),
            mode: ExpireMode::Master,
            rng: fastrand::Rng::new(),
            fx: Effects::default(),
            persist: Persistence::none(),
        }
    }

    /// Run one command and write what it propagates. The unit of atomicity: several
    /// propagated commands are wrapped in MULTI/EXEC, as Redis 7.0 does.
    pub fn execute(&mut self, sess: &mut Session, argv: &[Vec<u8>]) -> Reply {
        let r = self.call(sess, argv);
        self.flush();
        r
    }

    /// Run one command without flushing its propagation (for MULTI/EXEC and scripts,
    /// whose commands propagate as one unit).
    pub fn call(&mut self, sess: &mut Session, argv: &[Vec<u8>]) -> Reply {
        let now = self.clock.now_ms();
        let mut ctx =
            Ctx::new(&mut self.ks, &self.cfg, sess.db, now, self.mode, &mut self.rng, &mut self.stats, &mut self.fx);
        let r = command::execute(&mut ctx, argv);
        sess.db = ctx.db;
        r
    }

    /// Take the pending propagation as one unit (MULTI/EXEC around several commands) and
    /// hand it to the AOF. Returns what was written.
    pub fn flush(&mut self) {
        let _ = self.flush_collect();
    }

    /// [`Engine::flush`], returning the unit written.
    pub fn flush_collect(&mut self) -> Vec<(usize, Argv)> {
        let ops = wrap_unit(std::mem::take(&mut self.fx.propagate));
        if !ops.is_empty() {
            self.persist.feed(&ops, self.clock.now_ms());
        }
        ops
    }

    /// One active expiry cycle; each expired key propagates its DEL on its own.
    pub fn active_expire_cycle(&mut self) -> CycleReport {
        let now = self.clock.now_ms();
        let mut gone = Vec::new();
        let rep = self.cycle.run(&mut self.ks, now, |db, slot| gone.push((db, slot.key)));
        for (db, key) in gone {
            let mut ctx =
                Ctx::new(&mut self.ks, &self.cfg, db, now, self.mode, &mut self.rng, &mut self.stats, &mut self.fx);
            ctx.expired_deleted(db, &key);
            self.flush();
        }
        rep
    }
}

/// Redis 7.0's propagatePendingCommands: one command goes alone, several go inside
/// MULTI/EXEC (MULTI in the first command's database).
pub fn wrap_unit(ops: Vec<(usize, Argv)>) -> Vec<(usize, Argv)> {
    if ops.len() <= 1 {
        return ops;
    }
    let first = ops[0].0;
    let last = ops[ops.len() - 1].0;
    let mut out = Vec::with_capacity(ops.len() + 2);
    out.push((first, vec![b"MULTI".to_vec()]));
    out.extend(ops);
    out.push((last, vec![b"EXEC".to_vec()]));
    out
}
