//! Access control lists, as Redis 7.0: users with passwords and flags, and selectors
//! (the root one, plus any given in parentheses) that say which commands, keys and pub/sub
//! channels a user may touch. The rules are Redis's ACL SETUSER language; a selector keeps
//! one bit per command and subcommand (registry.rs), and ACL GETUSER / LIST rebuild the
//! shortest rules for those bits the way Redis does, trying categories first.
//!
//! Enforcement (enforce.rs) runs before a command executes, when it is queued in MULTI
//! and again at EXEC, and for each `redis.call` of a script. The ACL command is in
//! command.rs.

pub mod categories;
pub mod command;
pub mod enforce;
pub mod registry;
pub mod sha256;

use std::collections::{BTreeMap, VecDeque};

use registry::registry;

/// Key pattern permissions (`%R~`, `%W~`, `~` = both).
pub const READ_PERM: u8 = 1;
pub const WRITE_PERM: u8 = 2;
pub const ALL_PERM: u8 = READ_PERM | WRITE_PERM;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub perm: u8,
    pub pattern: Vec<u8>,
}

impl KeyPattern {
    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.perm {
            READ_PERM => b"%R~".as_slice(),
            WRITE_PERM => b"%W~",
            _ => b"~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// Why an ACL SETUSER rule was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetError {
    UnknownName,
    Syntax,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    Duplicate,
    FirstArgOfSubcommand,
}

impl SetError {
    pub fn text(self) -> &'static str {
        match self {
            SetError::UnknownName => "Unknown command or category name in ACL",
            SetError::Syntax => "Syntax error",
            SetError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any \
                 effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            SetError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have \
                 any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            SetError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            SetError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            SetError::Duplicate => "Duplicate user found. A user can only be defined once in config files",
            SetError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// Redis rejects names and patterns with white space or NUL bytes.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&b| b == 0 || b.is_ascii_whitespace() || b == 0x0b)
}

/// The commands, keys and channels one selector allows.
#[derive(Clone, Debug, Default)]
pub struct Selector {
    pub root: bool,
    pub allkeys: bool,
    pub allchannels: bool,
    /// Every command, checked without the bits (cleared by any `-command`).
    pub allcommands: bool,
    /// One bit per registry id.
    bits: Vec<u64>,
    /// Set by `+@all` / `allcommands` only: the rules start from +@all (commands added
    /// later are allowed too); Redis keeps it as a reserved command bit.
    future: bool,
    /// First arguments allowed for otherwise denied commands (`+select|0`), by id.
    firstargs: BTreeMap<usize, Vec<Vec<u8>>>,
    pub patterns: Vec<KeyPattern>,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    pub fn new(root: bool, all_channels_default: bool) -> Selector {
        Selector {
            root,
            allchannels: all_channels_default,
            bits: vec![0; registry().len() / 64 + 1],
            ..Selector::default()
        }
    }

    pub fn bit(&self, id: usize) -> bool {
        self.bits.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if self.bits.len() <= id / 64 {
            self.bits.resize(id / 64 + 1, 0);
        }
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// Allow or deny a command; for a container, its subcommands too.
    fn change_perm(&mut self, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.firstargs.remove(&id);
        for &sub in &registry().get(id).subs {
            self.set_bit(sub, allow);
        }
    }

    fn set_category(&mut self, flag: u32, allow: bool) {
        let reg = registry();
        for &top in &reg.top {
            if reg.get(top).categories & flag != 0 {
                self.change_perm(top, allow);
            }
            for &sub in &reg.get(top).subs {
                if reg.get(sub).categories & flag != 0 {
                    self.change_perm(sub, allow);
                }
            }
        }
    }

    fn set_all(&mut self, allow: bool) {
        let fill = if allow { u64::MAX } else { 0 };
        self.bits.iter_mut().for_each(|w| *w = fill);
        self.future = allow;
        self.allcommands = allow;
        self.firstargs.clear();
    }

    /// Commands of a category allowed and denied.
    fn count_category(&self, flag: u32) -> (u64, u64) {
        let (mut on, mut off) = (0, 0);
        for (id, e) in registry().entries.iter().enumerate() {
            if e.categories & flag != 0 {
                if self.bit(id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// Apply one rule that concerns a selector (keys, channels, commands).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), SetError> {
        let reg = registry();
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.patterns.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(SetError::KeyAfterAll);
            }
            let (perm, offset) = if op[0] == b'%' { key_perm_prefix(op)? } else { (ALL_PERM, 1) };
            let pattern = &op[offset..];
            if has_spaces(pattern) {
                return Err(SetError::Syntax);
            }
            match self.patterns.iter_mut().find(|p| p.pattern == pattern) {
                Some(p) => p.perm |= perm,
                None => self.patterns.push(KeyPattern { perm, pattern: pattern.to_vec() }),
            }
            self.allkeys = false;
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(SetError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(SetError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.allchannels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let id = reg.lookup(name).ok_or(SetError::UnknownName)?;
                    self.change_perm(id, true);
                }
                Some(bar) => {
                    let id = reg.lookup(&name[..bar]).ok_or(SetError::UnknownName)?;
                    if reg.get(id).parent.is_some() {
                        return Err(SetError::FirstArgOfSubcommand);
                    }
                    let first = &name[bar + 1..];
                    if first.is_empty() {
                        return Err(SetError::Syntax);
                    }
                    if !reg.get(id).subs.is_empty() {
                        let sub = reg.lookup(name).ok_or(SetError::UnknownName)?;
                        self.change_perm(sub, true);
                    } else {
                        // Redis warns this use is deprecated, and still honours it.
                        let allowed = self.firstargs.entry(id).or_default();
                        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(first)) {
                            allowed.push(first.to_vec());
                        }
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = reg.lookup(&op[1..]).ok_or(SetError::UnknownName)?;
            self.change_perm(id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let flag = categories::by_name(&op[2..]).ok_or(SetError::UnknownName)?;
            self.set_category(flag, op[0] == b'+');
        } else {
            return Err(SetError::Syntax);
        }
        Ok(())
    }

    /// The command rules, shortest first as Redis builds them: +@all or -@all, then the
    /// categories that fit best, then single commands for what differs.
    pub fn describe_commands(&self) -> String {
        let reg = registry();
        let mut rules = String::new();
        let mut fake = Selector::new(false, false);
        let additive = !self.future;
        if additive {
            rules.push_str("-@all ");
            fake.set_all(false);
        } else {
            rules.push_str("+@all ");
            fake.set_all(true);
        }
        // Categories applied so far are taken out of `temp`, so each round measures
        // what is left to explain.
        let mut temp = Selector { bits: self.bits.clone(), ..Selector::default() };
        let mut applied = [false; categories::NAMES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (u64::from(u32::MAX >> 1), 0);
            for (j, &(_, flag)) in categories::NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(flag);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let (name, flag) = categories::NAMES[j];
            fake.set_category(flag, additive);
            temp.set_category(flag, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(name);
            rules.push(' ');
            applied[j] = true;
        }
        for &top in &reg.top {
            self.describe_single(top, &mut fake, &mut rules);
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, id: usize, fake: &mut Selector, rules: &mut String) {
        let e = registry().get(id);
        let mine = self.bit(id);
        if mine != fake.bit(id) {
            rules.push(if mine { '+' } else { '-' });
            rules.push_str(&e.name);
            rules.push(' ');
            fake.change_perm(id, mine);
        }
        for &sub in &e.subs {
            self.describe_single(sub, fake, rules);
        }
        if !mine {
            for first in self.firstargs.get(&id).into_iter().flatten() {
                rules.push('+');
                rules.push_str(&e.name);
                rules.push('|');
                rules.push_str(&String::from_utf8_lossy(first));
                rules.push(' ');
            }
        }
    }

    /// Keys, channels and commands, as ACL LIST shows a selector.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.allkeys {
            out.extend_from_slice(b"~* ");
        } else {
            for p in &self.patterns {
                p.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.allchannels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands().as_bytes());
        out
    }

    /// ACL GETUSER's `keys` field.
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, p) in self.patterns.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            p.describe(&mut out);
        }
        out
    }

    /// ACL GETUSER's `channels` field.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    fn unrestricted(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    /// May this selector run command `id` with `argv`? `keys` gives each key's position
    /// and the access it needs, `channels` each channel's position and whether it is a
    /// pattern (PSUBSCRIBE's, compared literally).
    fn check(
        &self,
        id: usize,
        argv: &[Vec<u8>],
        keys: &mut KeysOnce,
        channels: &[(usize, bool)],
    ) -> Result<(), Refusal> {
        let e = registry().get(id);
        if !self.allcommands && !e.no_auth && !self.bit(id) {
            let idx = if e.parent.is_some() { 2 } else { 1 };
            let allowed = argv.len() >= 2
                && self.firstargs.get(&id).is_some_and(|firsts| {
                    argv.get(idx).is_some_and(|a| firsts.iter().any(|f| f.eq_ignore_ascii_case(a)))
                });
            if !allowed {
                return Err(Refusal { reason: Reason::Command, pos: 0 });
            }
        }
        if !self.allkeys {
            for &(pos, need) in keys.get() {
                let key = &argv[pos];
                let ok = self.patterns.iter().any(|p| p.perm & need == need && ferrokv::glob::matches(&p.pattern, key));
                if !ok {
                    return Err(Refusal { reason: Reason::Key, pos });
                }
            }
        }
        if !self.allchannels {
            for &(pos, is_pattern) in channels {
                if !channel_allowed(&self.channels, &argv[pos], is_pattern) {
                    return Err(Refusal { reason: Reason::Channel, pos });
                }
            }
        }
        Ok(())
    }
}

/// `%R~`, `%W~`, `%RW~`: the permissions and where the pattern starts.
fn key_perm_prefix(op: &[u8]) -> Result<(u8, usize), SetError> {
    let mut perm = 0;
    let mut offset = 1;
    while offset < op.len() {
        match op[offset] {
            b'R' | b'r' if perm & READ_PERM == 0 => perm |= READ_PERM,
            b'W' | b'w' if perm & WRITE_PERM == 0 => perm |= WRITE_PERM,
            b'~' => {
                offset += 1;
                break;
            }
            _ => return Err(SetError::Syntax),
        }
        offset += 1;
    }
    if perm == 0 {
        return Err(SetError::Syntax);
    }
    Ok((perm, offset))
}

/// A channel (or, for PSUBSCRIBE, a pattern taken literally) against a channel list.
pub fn channel_allowed(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| if is_pattern { p == channel } else { ferrokv::glob::matches(p, channel) })
}

/// Key positions with the access each needs.
pub type KeyRefs = Vec<(usize, u8)>;

/// The key references of a command, computed once for all selectors.
pub struct KeysOnce<'a> {
    compute: Option<Box<dyn FnOnce() -> KeyRefs + 'a>>,
    keys: Vec<(usize, u8)>,
}

impl<'a> KeysOnce<'a> {
    pub fn new(compute: impl FnOnce() -> Vec<(usize, u8)> + 'a) -> KeysOnce<'a> {
        KeysOnce { compute: Some(Box::new(compute)), keys: Vec::new() }
    }

    fn get(&mut self) -> &[(usize, u8)] {
        if let Some(f) = self.compute.take() {
            self.keys = f();
        }
        &self.keys
    }
}

/// Why a command was refused, in Redis's order of relevance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    Command = 1,
    Key = 2,
    Auth = 3,
    Channel = 4,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Auth => "auth",
            Reason::Channel => "channel",
        }
    }
}

/// A refused command: why, and the argument (key or channel) at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub pos: usize,
}

#[derive(Clone, Debug)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (true) or `skip-sanitize-payload` (false); neither at first.
    pub sanitize: Option<bool>,
    /// SHA-256 hex of each password.
    pub passwords: Vec<String>,
    /// The root selector first.
    pub selectors: Vec<Selector>,
}

impl User {
    pub fn new(name: &[u8], all_channels_default: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, all_channels_default)],
        }
    }

    /// The default user: every command, key and channel, no password.
    pub fn default_user() -> User {
        let mut u = User::new(b"default", false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.apply(op.as_bytes(), false);
        }
        u
    }

    /// Apply one ACL SETUSER rule.
    pub fn apply(&mut self, op: &[u8], all_channels_default: bool) -> Result<(), SetError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' { sha256::hex(&op[1..]) } else { valid_hash(&op[1..])? };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' { sha256::hex(&op[1..]) } else { valid_hash(&op[1..])? };
            let at = self.passwords.iter().position(|p| *p == hash).ok_or(SetError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut sel = Selector::new(false, all_channels_default);
            let inner = &op[1..op.len() - 1];
            for word in crate::resp::split_args(inner).unwrap_or_default() {
                if !word.is_empty() {
                    sel.apply(&word)?;
                }
            }
            self.selectors.push(sel);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.allkeys = false;
            root.patterns.clear();
            root.allchannels = all_channels_default;
            root.channels.clear();
            self.enabled = false;
            self.sanitize = Some(true);
            self.selectors.truncate(1);
            self.selectors[0].set_all(false);
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// Flags in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        match self.sanitize {
            Some(false) => v.push("skip-sanitize-payload"),
            Some(true) => v.push("sanitize-payload"),
            None => {}
        }
        v
    }

    /// The user as ACL LIST and ACL SAVE write it (without `user <name> `).
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.flag_names() {
            out.extend_from_slice(f.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for s in &self.selectors {
            if s.root {
                out.extend_from_slice(&s.describe());
            } else {
                out.extend_from_slice(b" (");
                out.extend_from_slice(&s.describe());
                out.push(b')');
            }
        }
        out
    }

    /// Allowed everything: checks can be skipped.
    pub fn unrestricted(&self) -> bool {
        self.selectors.iter().any(Selector::unrestricted)
    }

    pub fn password_matches(&self, pass: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hash = sha256::hex(pass);
        // Compared without an early exit, as Redis does.
        self.passwords.iter().any(|p| p.bytes().zip(hash.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0)
    }

    /// May this user run command `id` with `argv`? As Redis, when no selector allows
    /// it, the refusal reported is a command one unless some selector allowed the
    /// command, then the key or channel furthest in the arguments.
    pub fn check(
        &self,
        id: usize,
        argv: &[Vec<u8>],
        keys: &mut KeysOnce,
        channels: &[(usize, bool)],
    ) -> Result<(), Refusal> {
        let mut relevant = Refusal { reason: Reason::Command, pos: 0 };
        for s in &self.selectors {
            match s.check(id, argv, keys, channels) {
                Ok(()) => return Ok(()),
                Err(r) => {
                    if r.reason > relevant.reason || (r.reason == relevant.reason && r.pos > relevant.pos) {
                        relevant = r;
                    }
                }
            }
        }
        Err(relevant)
    }
}

impl User {
    /// Whether a selector that allows command `id` with `argv` also reads every key (all
    /// keys, or a `*` pattern with read permission): Redis's
    /// ACLUserCheckCmdWithUnrestrictedKeyAccess, asked by SORT's BY and GET patterns.
    pub fn reads_every_key(
        &self,
        id: usize,
        argv: &[Vec<u8>],
        keys: &mut KeysOnce,
        channels: &[(usize, bool)],
    ) -> bool {
        self.selectors.iter().any(|s| {
            s.check(id, argv, keys, channels).is_ok()
                && (s.allkeys || s.patterns.iter().any(|p| p.perm & READ_PERM != 0 && p.pattern == b"*"))
        })
    }
}

fn valid_hash(h: &[u8]) -> Result<String, SetError> {
    if h.len() != 64 || !h.iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)) {
        return Err(SetError::BadHash);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// Join the words of a selector given over several arguments (`(~x` `+get)`) into one.
/// Err: the index of the argument whose parenthesis is never closed.
pub fn merge_selector_args(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, op) in args.iter().enumerate() {
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                if let Some((_, sel)) = open.take() {
                    out.push(sel);
                }
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.clone()));
            continue;
        }
        out.push(op.clone());
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(out),
    }
}

/// One ACL LOG entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    /// toplevel, multi, lua.
    pub context: &'static str,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix milliseconds of the last occurrence.
    pub ctime: i64,
    pub client_info: String,
    /// Redis 7.2's `entry-id` (entries created before it, counted from 0) and
    /// `timestamp-created`; set when the entry joins the log.
    pub entry_id: u64,
    pub created: i64,
}

/// Entries this close in time, alike otherwise, are counted as one.
const LOG_GROUPING_MS: i64 = 60_000;

/// The users and the ACL log.
pub struct Acl {
    pub users: BTreeMap<Vec<u8>, User>,
    /// Newest first.
    pub log: VecDeque<LogEntry>,
    /// Entries ever created (ACL LOG RESET keeps counting, as Redis's ACLLogEntryCount).
    pub log_entries_created: u64,
}

impl Default for Acl {
    fn default() -> Self {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), User::default_user());
        Acl { users, log: VecDeque::new(), log_entries_created: 0 }
    }
}

impl Acl {
    /// Every user as a `user <name> <rules>` line (ACL LIST, CONFIG REWRITE).
    pub fn list_lines(&self) -> Vec<Vec<u8>> {
        self.users
            .values()
            .map(|u| {
                let mut line = b"user ".to_vec();
                line.extend_from_slice(&u.name);
                line.push(b' ');
                line.extend_from_slice(&u.describe());
                line
            })
            .collect()
    }

    pub fn default_user(&self) -> Option<&User> {
        self.users.get(b"default".as_slice())
    }

    /// Clients start authenticated when the default user needs no password.
    pub fn default_is_open(&self) -> bool {
        self.default_user().is_some_and(|u| u.nopass && u.enabled)
    }

    /// requirepass: the default user's only password, or nopass when empty.
    pub fn set_default_password(&mut self, pass: Option<&[u8]>) {
        if let Some(u) = self.users.get_mut(b"default".as_slice()) {
            let _ = u.apply(b"resetpass", false);
            match pass {
                Some(p) => {
                    let mut op = b">".to_vec();
                    op.extend_from_slice(p);
                    let _ = u.apply(&op, false);
                }
                None => {
                    let _ = u.apply(b"nopass", false);
                }
            }
        }
    }

    /// Whether `user` exists, is enabled and `pass` is one of its passwords.
    pub fn credentials_ok(&self, user: &[u8], pass: &[u8]) -> bool {
        self.users.get(user).is_some_and(|u| u.enabled && u.password_matches(pass))
    }

    /// Add an entry, or count it on a similar recent one (among the last ten).
    pub fn add_log(&mut self, entry: LogEntry, max_len: usize) {
        let similar = self.log.iter().take(10).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && (e.ctime - entry.ctime).abs() <= LOG_GROUPING_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        match similar {
            Some(i) => {
                if let Some(mut e) = self.log.remove(i) {
                    e.count += 1;
                    e.ctime = entry.ctime;
                    e.client_info = entry.client_info;
                    self.log.push_front(e);
                }
            }
            None => {
                let mut entry = entry;
                entry.entry_id = self.log_entries_created;
                entry.created = entry.ctime;
                self.log_entries_created += 1;
                self.log.push_front(entry);
                self.log.truncate(max_len);
            }
        }
    }

    /// ACL SETUSER's work: the user as it would be after `args` (nothing changes on an
    /// error, whose text is returned).
    pub fn staged_user(&self, name: &[u8], args: &[Vec<u8>], all_channels_default: bool) -> Result<User, String> {
        let merged = merge_selector_args(args).map_err(|i| {
            format!("Unmatched parenthesis in acl selector starting at '{}'.", String::from_utf8_lossy(&args[i]))
        })?;
        let mut user = self.users.get(name).cloned().unwrap_or_else(|| User::new(name, all_channels_default));
        for op in &merged {
            user.apply(op, all_channels_default).map_err(|e| {
                format!("Error in ACL SETUSER modifier '{}': {}", String::from_utf8_lossy(op), e.text())
            })?;
        }
        Ok(user)
    }

    /// The users an ACL file describes (ACL LOAD, and `aclfile` at startup), or the
    /// errors found, as Redis reports them.
    pub fn parse_file(
        text: &[u8],
        filename: &str,
        all_channels_default: bool,
    ) -> Result<BTreeMap<Vec<u8>, User>, String> {
        let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
        let mut errors = String::new();
        for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(raw, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            if argv[0] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{filename}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = argv[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{filename}:{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            if users.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let mut user = User::new(name, all_channels_default);
            let ops: Vec<Vec<u8>> = argv[2..].iter().map(|a| a.to_vec()).collect();
            let merged = match merge_selector_args(&ops) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&format!("{filename}:{linenum}: Unmatched parenthesis in selector definition."));
                    Vec::new()
                }
            };
            let mut syntax_error = false;
            for op in &merged {
                let op = trim(op, b"\t\r\n");
                if let Err(e) = user.apply(op, all_channels_default) {
                    if e == SetError::UnknownName {
                        errors.push_str(&format!(
                            "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        ));
                    } else if !syntax_error {
                        errors.push_str(&format!("{filename}:{linenum}: {}. ", e.text()));
                        syntax_error = true;
                    }
                }
            }
            users.insert(name.to_vec(), user);
        }
        if !errors.is_empty() {
            errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
            return Err(errors);
        }
        users.entry(b"default".to_vec()).or_insert_with(User::default_user);
        Ok(users)
    }

    /// The ACL file's text for the current users.
    pub fn file_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for u in self.users.values() {
            out.extend_from_slice(b"user ");
            out.extend_from_slice(&u.name);
            out.push(b' ');
            out.extend_from_slice(&u.describe());
            out.push(b'\n');
        }
        out
    }
}

fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|b| !set.contains(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !set.contains(b)).map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(ops: &[&str]) -> User {
        let mut u = User::new(b"u", false);
        for op in ops {
            u.apply(op.as_bytes(), false).unwrap();
        }
        u
    }

    fn list(u: &User) -> String {
        String::from_utf8(u.describe()).unwrap()
    }

    #[test]
    fn describes_like_redis() {
        assert_eq!(list(&User::default_user()), "on nopass ~* &* +@all");
        assert_eq!(list(&user(&[])), "off resetchannels -@all");
        assert_eq!(list(&user(&["on", "+@all", "-@string"])), "on resetchannels +@all -@string");
        assert_eq!(list(&user(&["-@all", "+get"])), "off resetchannels -@all +get");
        assert_eq!(list(&user(&["+select|0"])), "off resetchannels -@all +select|0");
        assert_eq!(list(&user(&["%R~a", "%W~b", "%RW~c", "%W~a"])), "off ~a %W~b ~c resetchannels -@all");
        assert_eq!(list(&user(&["+@all", "-config|set"])), "off resetchannels +@all -config|set");
        assert_eq!(list(&user(&["(~x +get)"])), "off resetchannels -@all (~x resetchannels -@all +get)");
    }

    #[test]
    fn rule_errors() {
        let mut u = User::new(b"u", false);
        for (op, e) in [
            ("+nosuch", SetError::UnknownName),
            ("+get|", SetError::Syntax),
            ("-select|0", SetError::UnknownName),
            ("+config|nosuch", SetError::UnknownName),
            ("+acl|cat|x", SetError::FirstArgOfSubcommand),
            ("%~x", SetError::Syntax),
            ("%RR~x", SetError::Syntax),
            ("#abc", SetError::BadHash),
            ("<nosuch", SetError::NoSuchPassword),
            (")", SetError::Syntax),
        ] {
            assert_eq!(u.apply(op.as_bytes(), false), Err(e), "{op}");
        }
        u.apply(b"allkeys", false).unwrap();
        assert_eq!(u.apply(b"~x", false), Err(SetError::KeyAfterAll));
    }

    #[test]
    fn merges_selector_words() {
        let args: Vec<Vec<u8>> = ["on", "(~x", "+get)", ">p"].iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(merge_selector_args(&args).unwrap()[1], b"(~x +get)".to_vec());
        assert_eq!(merge_selector_args(&args[..2]), Err(1));
    }
}
