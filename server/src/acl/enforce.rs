//! Where ACLs are checked: before a command runs (and when MULTI queues it), again at
//! EXEC, for each command a script runs and for `redis.acl_check_cmd`; AUTH and HELLO's
//! credentials; the ACL LOG entries each refusal leaves, and the clients a user change
//! disconnects.

use ferrokv::keyspace::Clock;
use ferrokv::Reply;

use super::registry::{registry, KEY_READ, KEY_WRITE};
use super::{channel_allowed, KeysOnce, LogEntry, Reason, Refusal, User};
use crate::client::Client;
use crate::cmd::Found;
use crate::server::Server;

/// Where a refusal happened, as ACL LOG names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// Each key of the command with the access it needs (Redis's ACLSelectorCheckKey: read
/// for an ACCESS key, write for INSERT, DELETE or UPDATE), from the flags the command's
/// key specs give each key.
fn key_refs(found: Found, argv: &[Vec<u8>]) -> Vec<(usize, u8)> {
    use ferrokv::command::key_flags as kf;
    found
        .key_refs(argv)
        .into_iter()
        .map(|(pos, f)| {
            let read = if f & kf::ACCESS != 0 { KEY_READ } else { 0 };
            let write = if f & (kf::INSERT | kf::DELETE | kf::UPDATE) != 0 { KEY_WRITE } else { 0 };
            (pos, read | write)
        })
        .collect()
}

/// The channels a pub/sub command names, and whether they are patterns. Unsubscribing
/// is never refused.
fn channel_refs(name: &str, argv: &[Vec<u8>]) -> Vec<(usize, bool)> {
    match name {
        "subscribe" | "ssubscribe" => (1..argv.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..argv.len()).map(|i| (i, true)).collect(),
        "publish" | "spublish" if argv.len() > 1 => vec![(1, false)],
        _ => Vec::new(),
    }
}

/// A container command's unknown subcommand or wrong arity, refused before anything else
/// as Redis's lookup does (so before NOAUTH, and inside MULTI at queue time).
pub fn subcommand_refusal(found: Found, argv: &[Vec<u8>]) -> Option<Reply> {
    let reg = registry();
    if argv.len() < 2 {
        return None;
    }
    let e = reg.get(reg.container_of(found)?);
    match reg.resolve(argv) {
        None => Some(crate::cmd::unknown_subcommand(&argv[1], &e.name)),
        Some(id) if !reg.arity_ok(id, argv.len()) => Some(crate::cmd::sub_arity(&e.name, &argv[1])),
        Some(_) => None,
    }
}

/// Check `argv` (a command of `found`) against `user`. Ok also for a container's
/// unknown subcommand or a wrong arity: the command's own error comes first, as in Redis.
pub fn check_user(user: &User, found: Found, argv: &[Vec<u8>]) -> Result<(), (usize, Refusal)> {
    if user.unrestricted() {
        return Ok(());
    }
    let reg = registry();
    let Some(id) = reg.resolve(argv) else { return Ok(()) };
    if !reg.arity_ok(id, argv.len()) {
        return Ok(());
    }
    check_user_command(user, found, id, argv).map_err(|r| (id, r))
}

/// Check `argv`, resolved to command `id`, against `user` (ACL DRYRUN, acl_check_cmd).
pub fn check_user_command(user: &User, found: Found, id: usize, argv: &[Vec<u8>]) -> Result<(), Refusal> {
    let mut keys = KeysOnce::new(|| key_refs(found, argv));
    let channels = channel_refs(found.name, argv);
    user.check(id, argv, &mut keys, &channels)
}

impl Server {
    /// NOAUTH applies: the client has not authenticated and the default user needs it.
    pub fn acl_auth_required(&self, c: &Client) -> bool {
        !c.authenticated && !self.acl.default_is_open()
    }

    /// Whether `c`'s user may run `argv`; Err: the command's id and the refusal.
    fn acl_check(&self, c: &Client, found: Found, argv: &[Vec<u8>]) -> Result<(), (usize, Refusal)> {
        if c.master {
            // Our master's stream runs unchecked, as Redis runs its master client.
            return Ok(());
        }
        match self.acl.users.get(&c.user) {
            Some(u) => check_user(u, found, argv),
            None => Err((registry().resolve(argv).unwrap_or(0), Refusal { reason: Reason::Command, pos: 0 })),
        }
    }

    fn acl_log_refusal(&mut self, c: &Client, id: usize, r: Refusal, argv: &[Vec<u8>], context: Context) {
        let object = match r.reason {
            Reason::Command => registry().get(id).name.as_bytes().to_vec(),
            _ => argv.get(r.pos).cloned().unwrap_or_default(),
        };
        let username = c.user.clone();
        self.acl_log(c, r.reason, context, object, username);
    }

    pub fn acl_log(&mut self, c: &Client, reason: Reason, context: Context, object: Vec<u8>, username: Vec<u8>) {
        let entry = LogEntry {
            count: 1,
            reason,
            context: context.name(),
            object,
            username,
            ctime: Clock::System.now_ms(),
            client_info: c.info_line(std::time::Instant::now(), true),
            entry_id: 0,
            created: 0,
        };
        let max = self.cfg.get("acllog-max-len").and_then(|v| v.parse().ok()).unwrap_or(128);
        self.stats.acl_denied[reason as usize - 1] += 1;
        self.acl.add_log(entry, max);
    }

    /// processCommand's check: None when allowed, else the NOPERM reply (logged).
    pub fn acl_refusal(&mut self, c: &Client, found: Found, argv: &[Vec<u8>]) -> Option<Reply> {
        let (id, r) = self.acl_check(c, found, argv).err()?;
        let context = if c.multi.is_some() { Context::Multi } else { Context::Toplevel };
        self.acl_log_refusal(c, id, r, argv, context);
        Some(match r.reason {
            Reason::Command => Reply::error(format!(
                "NOPERM this user has no permissions to run the '{}' command",
                registry().get(id).name
            )),
            Reason::Key => {
                Reply::err("NOPERM this user has no permissions to access one of the keys used as arguments")
            }
            _ => Reply::err("NOPERM this user has no permissions to access one of the channels used as arguments"),
        })
    }

    /// SORT's BY (with a `*` pattern) and GET read keys the command does not name: Redis
    /// refuses them to a user who may not read every key, with its own errors, at the first
    /// such option.
    pub fn sort_pattern_refusal(&self, c: &Client, found: Found, argv: &[Vec<u8>]) -> Option<Reply> {
        if !matches!(found.name, "sort" | "sort_ro") || c.master {
            return None;
        }
        let user = self.acl.users.get(&c.user)?;
        if user.unrestricted() {
            return None;
        }
        let id = registry().resolve(argv)?;
        let mut keys = KeysOnce::new(|| key_refs(found, argv));
        let mut full = None;
        let mut j = 2;
        while j < argv.len() {
            let left = argv.len() - j - 1;
            let word = argv[j].to_ascii_lowercase();
            let option = match word.as_slice() {
                b"asc" | b"desc" | b"alpha" => None,
                b"limit" if left >= 2 => {
                    j += 2;
                    None
                }
                b"store" if left >= 1 => {
                    j += 1;
                    None
                }
                b"by" if left >= 1 => {
                    j += 1;
                    argv[j].contains(&b'*').then_some("BY")
                }
                b"get" if left >= 1 => {
                    j += 1;
                    Some("GET")
                }
                // A syntax error: SORT itself answers it.
                _ => return None,
            };
            if let Some(option) = option {
                if !*full.get_or_insert_with(|| user.reads_every_key(id, argv, &mut keys, &[])) {
                    return Some(Reply::error(format!(
                        "ERR {option} option of SORT denied due to insufficient ACL permissions."
                    )));
                }
            }
            j += 1;
        }
        None
    }

    /// EXEC's check of each queued command: the rules may have changed since it queued.
    pub fn acl_exec_refusal(&mut self, c: &Client, found: Found, argv: &[Vec<u8>]) -> Option<Reply> {
        let (id, r) = self.acl_check(c, found, argv).err()?;
        self.acl_log_refusal(c, id, r, argv, Context::Multi);
        let why = match r.reason {
            Reason::Command => "no permission to execute the command or subcommand",
            Reason::Key => "no permission to touch the specified keys",
            _ => "no permission to access one of the channels used as arguments",
        };
        Some(Reply::error(format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. \
             This command is no longer allowed for the following reason: {why}"
        )))
    }

    /// A script's redis.call: None when allowed, else the error text (logged).
    pub fn acl_script_refusal(&mut self, c: &Client, found: Found, argv: &[Vec<u8>]) -> Option<String> {
        let (id, r) = self.acl_check(c, found, argv).err()?;
        self.acl_log_refusal(c, id, r, argv, Context::Lua);
        let why = match r.reason {
            Reason::Command => "can't run this command or subcommand",
            Reason::Key => "can't access at least one of the keys mentioned in the command arguments",
            _ => "can't publish to the channel mentioned in the command",
        };
        Some(format!("ERR The user executing the script {why}"))
    }

    /// redis.acl_check_cmd: None when there is no such command.
    pub fn acl_script_check(&self, c: &Client, argv: &[Vec<u8>]) -> Option<bool> {
        let found = crate::cmd::lookup(argv.first()?)?;
        let id = registry().resolve(argv)?;
        Some(self.acl.users.get(&c.user).is_some_and(|u| check_user_command(u, found, id, argv).is_ok()))
    }

    /// AUTH / HELLO AUTH: authenticate `c` as `user`, or log the failure.
    pub fn acl_authenticate(&mut self, c: &mut Client, user: &[u8], pass: &[u8], command: &[u8]) -> bool {
        if self.acl.credentials_ok(user, pass) {
            c.authenticated = true;
            c.user = user.to_vec();
            return true;
        }
        let context = if c.multi.is_some() || c.in_exec { Context::Multi } else { Context::Toplevel };
        self.acl_log(c, Reason::Auth, context, command.to_vec(), user.to_vec());
        false
    }

    /// Close the clients authenticated as one of `names` (the current one after its
    /// reply), as Redis does when a user is deleted.
    pub fn acl_kill_users(&mut self, current: &mut Client, names: &[Vec<u8>]) {
        let victims: Vec<u64> = self.clients.values().filter(|x| names.contains(&x.user)).map(|x| x.id).collect();
        for id in victims {
            self.kill_client(id);
        }
        if names.contains(&current.user) {
            current.user = b"default".to_vec();
            current.authenticated = false;
            current.close_after_reply = true;
        }
    }

    /// After a user's channel rules changed: close its subscribers whose channels or
    /// patterns the new rules no longer allow.
    pub fn acl_kill_pubsub_clients(&mut self, current: &mut Client, old: &User, new: &User) {
        if new.selectors.iter().any(|s| s.allchannels) {
            return;
        }
        let upcoming: Vec<Vec<u8>> = new.selectors.iter().flat_map(|s| s.channels.iter().cloned()).collect();
        let still_allowed =
            old.selectors.iter().all(|s| !s.allchannels && s.channels.iter().all(|ch| upcoming.contains(ch)));
        if still_allowed {
            return;
        }
        let violates = |x: &Client| {
            x.user == old.name
                && x.subs.active()
                && (x.subs.patterns.iter().any(|p| !channel_allowed(&upcoming, p, true))
                    || x.subs.channels.iter().chain(&x.subs.shard).any(|ch| !channel_allowed(&upcoming, ch, false)))
        };
        let victims: Vec<u64> = self.clients.values().filter(|x| violates(x)).map(|x| x.id).collect();
        for id in victims {
            self.kill_client(id);
        }
        if violates(current) {
            current.close_after_reply = true;
        }
    }

    /// CONFIG SET requirepass: the default user's password follows it.
    pub fn acl_requirepass_changed(&mut self) {
        let pass = self.cfg.requirepass.clone();
        self.acl.set_default_password(pass.as_deref());
    }
}
