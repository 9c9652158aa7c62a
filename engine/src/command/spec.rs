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

/// Redis's key spec flags (CMD_KEY_*), as bits.
pub mod key_flags {
    use serde_json::Value as Json;

    pub const RO: u32 = 1 << 0;
    pub const RW: u32 = 1 << 1;
    pub const OW: u32 = 1 << 2;
    pub const RM: u32 = 1 << 3;
    pub const ACCESS: u32 = 1 << 4;
    pub const UPDATE: u32 = 1 << 5;
    pub const INSERT: u32 = 1 << 6;
    pub const DELETE: u32 = 1 << 7;
    pub const NOT_KEY: u32 = 1 << 8;
    pub const INCOMPLETE: u32 = 1 << 9;
    pub const VARIABLE_FLAGS: u32 = 1 << 10;

    /// Each flag with the catalog's name, in the order Redis lists them (COMMAND INFO
    /// prints the two-letter ones as they are, the others in lower case).
    pub const NAMES: &[(u32, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "ACCESS"),
        (UPDATE, "UPDATE"),
        (INSERT, "INSERT"),
        (DELETE, "DELETE"),
        (NOT_KEY, "NOT_KEY"),
        (INCOMPLETE, "INCOMPLETE"),
        (VARIABLE_FLAGS, "VARIABLE_FLAGS"),
    ];

    /// A key spec's flags.
    pub fn of(spec: &Json) -> u32 {
        let names = spec["flags"].as_array().map_or(&[][..], Vec::as_slice);
        NAMES.iter().filter(|(_, n)| names.iter().any(|x| x == n)).fold(0, |a, (b, _)| a | b)
    }
}

/// Redis's getKeysUsingKeySpecs: each key the specs find in `argv`, with its spec's flags;
/// None when a spec cannot be followed (an unknown one, a bad numkeys, a range past the end).
fn keys_from_specs(def: &CommandDef, argv: &[Vec<u8>], arity: i32) -> Option<Vec<(usize, u32)>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in def.key_specs() {
        let kf = key_flags::of(spec);
        if kf & key_flags::NOT_KEY != 0 {
            continue;
        }
        if kf & key_flags::INCOMPLETE != 0 {
            // Redis's getKeysUsingKeySpecs gives up on an incomplete spec (MIGRATE's KEYS):
            // the command's own key finder decides.
            return None;
        }
        let bs = &spec["begin_search"];
        let first = if let Some(pos) = bs["index"]["pos"].as_i64() {
            pos
        } else if let Some(word) = bs["keyword"]["keyword"].as_str() {
            let from = bs["keyword"]["startfrom"].as_i64().unwrap_or(1);
            let (start, end) = if from > 0 { (from, argc - 1) } else { (argc + from, 1) };
            let mut i = start;
            let mut found = 0;
            loop {
                if i >= argc || i < 1 {
                    break;
                }
                if argv[i as usize].eq_ignore_ascii_case(word.as_bytes()) {
                    found = i + 1;
                    break;
                }
                if i == end {
                    break;
                }
                i += if start <= end { 1 } else { -1 };
            }
            if found == 0 {
                continue;
            }
            found
        } else {
            return None;
        };
        let fk = &spec["find_keys"];
        let (first, last, step) = if let Some(range) = fk.get("range") {
            let lastkey = range["lastkey"].as_i64().unwrap_or(0);
            let limit = range["limit"].as_i64().unwrap_or(0);
            let last = if lastkey >= 0 {
                first + lastkey
            } else if limit == 0 {
                argc + lastkey
            } else {
                first + ((argc - first) / limit + lastkey)
            };
            (first, last, range["step"].as_i64().unwrap_or(1))
        } else if let Some(keynum) = fk.get("keynum") {
            let idx = first + keynum["keynumidx"].as_i64().unwrap_or(0);
            let n = argv.get(usize::try_from(idx).ok()?).and_then(|b| super::parse_i64(b)).filter(|n| *n >= 0)?;
            let first = first + keynum["firstkey"].as_i64().unwrap_or(0);
            (first, first + n - 1, keynum["step"].as_i64().unwrap_or(1))
        } else {
            return None;
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            if i < argc {
                keys.push((i as usize, kf));
            } else if arity >= 0 {
                return None;
            }
            i += step.max(1);
        }
    }
    Some(keys)
}

impl<H> Command<H> {
    /// Each key `argv` names with the flags it is used with, as Redis's
    /// getKeysFromCommandWithSpecs: the key specs when they can be followed and their
    /// flags do not vary, else the command's own key finder (SET and BITFIELD's flags
    /// follow their arguments, as setGetKeys and bitfieldGetKeys say).
    pub fn key_refs(&self, argv: &[Vec<u8>]) -> Vec<(usize, u32)> {
        let sub = self.sub(argv);
        let Some(def) = sub.map(|s| s.def).or(self.def) else { return Vec::new() };
        let specs: Vec<u32> = def.key_specs().iter().map(key_flags::of).collect();
        let has_keys = specs.iter().any(|f| f & key_flags::NOT_KEY == 0);
        let varies = specs.iter().any(|f| f & key_flags::VARIABLE_FLAGS != 0);
        if has_keys && !varies {
            if let Some(keys) = keys_from_specs(def, argv, sub.map_or(self.arity, |s| s.arity)) {
                return keys;
            }
        }
        let positions: Vec<usize> = self.key_positions(argv).into_iter().filter(|&p| p < argv.len()).collect();
        match self.name {
            "set" => {
                let get = argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
                let f = if get {
                    key_flags::RW | key_flags::ACCESS | key_flags::UPDATE
                } else {
                    key_flags::OW | key_flags::UPDATE
                };
                return positions.into_iter().map(|p| (p, f)).collect();
            }
            "bitfield" => {
                let f = if bitfield_reads_only(argv) {
                    key_flags::RO | key_flags::ACCESS
                } else {
                    key_flags::RW | key_flags::ACCESS | key_flags::UPDATE
                };
                return positions.into_iter().map(|p| (p, f)).collect();
            }
            _ => {}
        }
        // The specs that find keys by position (SORT's BY/GET patterns find none), the
        // last one standing for the keys after.
        let usable: Vec<u32> = def
            .key_specs()
            .iter()
            .enumerate()
            .filter(|(i, ks)| ks["begin_search"].get("unknown").is_none() || i + 1 == specs.len())
            .map(|(_, ks)| key_flags::of(ks))
            .filter(|f| f & key_flags::NOT_KEY == 0)
            .collect();
        let Some(&last) = usable.last() else { return Vec::new() };
        positions.into_iter().enumerate().map(|(i, p)| (p, usable.get(i).copied().unwrap_or(last))).collect()
    }

    /// Whether the command (or `argv`'s subcommand) has keys at all (Redis's
    /// doesCommandHaveKeys).
    pub fn has_keys(&self, argv: &[Vec<u8>]) -> bool {
        let def = self.sub(argv).map(|s| s.def).or(self.def);
        self.keys.is_some()
            || def.is_some_and(|d| d.key_specs().iter().any(|ks| key_flags::of(ks) & key_flags::NOT_KEY == 0))
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

/// MIGRATE's keys, as Redis's migrateGetKeys: the key argument, or the ones after KEYS
/// (none when the key argument is not empty then: the command refuses it).
pub fn migrate_keys(a: &[Vec<u8>]) -> Vec<usize> {
    let mut i = 6;
    while i < a.len() {
        let word = a[i].to_ascii_lowercase();
        match word.as_slice() {
            b"keys" if a[3].is_empty() => return (i + 1..a.len()).collect(),
            b"keys" => return Vec::new(),
            b"auth" => i += 1,
            b"auth2" => i += 2,
            _ => {}
        }
        i += 1;
    }
    if a.len() > 3 {
        vec![3]
    } else {
        Vec::new()
    }
}

/// Keys of `CMD arg numkeys key...` (EVAL, FCALL, BLMPOP, BZMPOP).
pub fn numkeys_at_2(a: &[Vec<u8>]) -> Vec<usize> {
    numkeys_keys(a, 2)
}

/// The keys that follow a numkeys argument at `at`: none when the count is below one or
/// more than the arguments left, as Redis's genericGetKeys (the command will refuse it).
pub fn numkeys_keys(a: &[Vec<u8>], at: usize) -> Vec<usize> {
    let n = a.get(at).and_then(|n| super::parse_i64(n)).unwrap_or(0);
    let left = a.len().saturating_sub(at + 1) as i64;
    if n < 1 || n > left {
        return Vec::new();
    }
    (at + 1..at + 1 + n as usize).collect()
}

/// BITFIELD with GET and OVERFLOW only reads its key (Redis's bitfieldGetKeys: anything
/// else, a syntax error included, counts as a write).
pub fn bitfield_reads_only(argv: &[Vec<u8>]) -> bool {
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let is = |s: &str| argv[i].eq_ignore_ascii_case(s.as_bytes());
        if is("get") && more >= 2 {
            i += 3;
        } else if is("overflow") && more >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}
