//! A command as a family file declares it (its name and the function that runs it), and
//! as a version's table holds it: that function with the version's facts from the catalog.

use super::catalog::{Catalog, CommandDef, ServerVersion};
use super::{flags, Handler};

/// Finds the key positions of a command whose keys are not a fixed range.
pub type KeyFinder = fn(&[Vec<u8>]) -> Vec<usize>;

/// A command's function bound to its name. Everything else about it (arity, flags, key
/// range, categories, documentation) is the catalog's, for the version a table is built
/// for ([`Command::bind`]).
#[derive(Clone, Copy)]
pub struct Spec<H = Handler> {
    /// Lower case, as Redis names it.
    pub name: &'static str,
    pub run: H,
    /// For commands whose keys move (ZUNIONSTORE, SORT ... STORE, ...): where they are.
    pub keys: Option<KeyFinder>,
}

impl Spec {
    /// An engine command.
    pub const fn new(name: &'static str, run: Handler) -> Spec {
        Spec { name, run, keys: None }
    }
}

impl<H> Spec<H> {
    /// A command whose function has another signature (the server's own commands).
    pub const fn with(name: &'static str, run: H) -> Spec<H> {
        Spec { name, run, keys: None }
    }

    pub const fn movable(mut self, finder: KeyFinder) -> Spec<H> {
        self.keys = Some(finder);
        self
    }
}

/// A container's subcommand (CLIENT KILL, OBJECT ENCODING) as a Redis 7 version has it:
/// its own arity, flags and keys.
#[derive(Debug, Clone)]
pub struct Sub {
    pub arity: i32,
    pub flags: u32,
    /// First key, last key, step.
    pub keys: (i32, i32, i32),
    pub def: &'static CommandDef,
}

/// One command of one version: the facts COMMAND INFO reports, and its function.
pub struct Command<H = Handler> {
    pub name: &'static str,
    /// Exact argument count (name included), or at least `-arity`.
    pub arity: i32,
    /// [`flags`] bits.
    pub flags: u32,
    /// First key position (0: no keys), last (negative: from the end), step.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    /// Everything else the catalog knows (None only for a command no version has).
    pub def: Option<&'static CommandDef>,
    pub run: H,
    pub keys: Option<KeyFinder>,
    /// A Redis 7 container's subcommands (none for Redis 6.2, where they are one command).
    pub subs: Vec<Sub>,
}

impl<H> std::fmt::Debug for Command<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command").field("name", &self.name).field("arity", &self.arity).finish()
    }
}

impl<H: Copy> Command<H> {
    /// `spec` with the facts `version` has for it, or the newest version's when `version`
    /// lacks the command.
    pub fn bind(spec: &Spec<H>, version: ServerVersion) -> Command<H> {
        let cat = Catalog::get();
        let def = cat
            .lookup(None, spec.name.as_bytes(), Some(version))
            .or_else(|| cat.lookup(None, spec.name.as_bytes(), None));
        let (arity, bits, (first_key, last_key, step)) = match def {
            Some(d) => (d.arity, d.flag_bits(), d.legacy_range().0),
            None => (-1, 0, (0, 0, 0)),
        };
        let subs = match def {
            Some(d) if !d.from_reply() => {
                let version =
                    if d.in_version(version) { version } else { d.versions().last().copied().unwrap_or(version) };
                cat.subcommands(spec.name, version)
                    .map(|s| Sub { arity: s.arity, flags: s.flag_bits(), keys: s.legacy_range().0, def: s })
                    .collect()
            }
            _ => Vec::new(),
        };
        Command {
            name: spec.name,
            arity,
            flags: bits,
            first_key,
            last_key,
            step,
            def,
            run: spec.run,
            keys: spec.keys,
            subs,
        }
    }
}

impl<H> Command<H> {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = i64::from(self.arity);
        if a >= 0 {
            argc == a
        } else {
            argc >= -a
        }
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The subcommand `argv` names, for a container that has them.
    pub fn sub(&self, argv: &[Vec<u8>]) -> Option<&Sub> {
        let name = argv.get(1)?;
        self.subs.iter().find(|s| s.def.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// The flags Redis judges `argv` by: its subcommand's, for a container.
    pub fn flags_for(&self, argv: &[Vec<u8>]) -> u32 {
        self.sub(argv).map_or(self.flags, |s| s.flags)
    }

    pub fn is_write(&self) -> bool {
        self.has(flags::WRITE)
    }

    /// Positions of the keys in `argv`.
    pub fn key_positions(&self, argv: &[Vec<u8>]) -> Vec<usize> {
        if let Some(f) = self.keys {
            return f(argv);
        }
        let (first, last, step) = self.sub(argv).map_or((self.first_key, self.last_key, self.step), |s| s.keys);
        if first <= 0 {
            return Vec::new();
        }
        let n = argv.len() as i32;
        let last = if last < 0 { n + last } else { last };
        (first..=last.min(n - 1)).step_by(step.max(1) as usize).map(|i| i as usize).collect()
    }
}

/// Keys of `CMD numkeys key...` (SINTERCARD, ZUNION, ZINTER, ZDIFF, LMPOP, ZMPOP).
pub fn numkeys_at_1(a: &[Vec<u8>]) -> Vec<usize> {
    numkeys_keys(a, 1)
}

/// Keys of `CMD arg numkeys key...` (EVAL, FCALL, BLMPOP, BZMPOP).
pub fn numkeys_at_2(a: &[Vec<u8>]) -> Vec<usize> {
    numkeys_keys(a, 2)
}

/// The keys that follow a numkeys argument at `at`.
pub fn numkeys_keys(a: &[Vec<u8>], at: usize) -> Vec<usize> {
    let n = a.get(at).and_then(|n| super::parse_i64(n)).unwrap_or(0).max(0) as usize;
    (at + 1..a.len().min((at + 1).saturating_add(n))).collect()
}
