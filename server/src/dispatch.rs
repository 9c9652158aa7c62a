//! From a parsed command to its reply: the refusal chain (lookup, arity, ACL, auth,
//! subscribed mode, busy script, MULTI queueing, maxmemory) and the call itself, with its
//! statistics, time and propagation.

use std::time::Instant;

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::Argv;
use ferrokv::Reply;

use crate::blocking::Op;
use crate::client::Client;
use crate::cmd::{self, Found, Run};
use crate::server::Server;
use crate::stats::StatKey;

impl Server {
    /// Run one command from `c` as Redis's processCommand does: lookup, arity, auth,
    /// MULTI queueing, then the command itself.
    /// `argv` is taken (left empty) only when MULTI queues it.
    pub fn dispatch(&mut self, c: &mut Client, argv: &mut Argv) {
        self.stats.commands_processed += 1;
        let Some(found) = cmd::lookup(&argv[0]) else {
            self.reject(c, ferrokv::command::unknown_command(argv, crate::version::version()), None);
            return;
        };
        let key = cmd::stat_key(found, argv);
        c.last_cmd = match (key.sub, argv.get(1)) {
            // Container commands show their subcommand, as Redis 7.0 (`client|list`).
            (Some(sub), _) => format!("{}|{sub}", found.name).into(),
            (None, Some(sub)) if matches!(found.name, "client" | "config" | "command" | "debug") => {
                format!("{}|{}", found.name, String::from_utf8_lossy(sub).to_ascii_lowercase()).into()
            }
            _ => found.name.into(),
        };
        if !found.arity_ok(argv.len()) {
            let e = Reply::error(format!("ERR wrong number of arguments for '{}' command", found.name));
            self.reject(c, e, Some(key));
            return;
        }
        if let Some(e) = crate::acl::enforce::subcommand_refusal(found, argv) {
            self.reject(c, e, Some(key));
            return;
        }
        if self.acl_auth_required(c) && found.flags_for(argv) & ferrokv::command::flags::NO_AUTH == 0 {
            self.reject(c, Reply::err("NOAUTH Authentication required."), Some(key));
            return;
        }
        if c.multi.is_some() && found.flags_for(argv) & ferrokv::command::flags::NO_MULTI != 0 {
            self.reject(c, Reply::err("ERR Command not allowed inside a transaction"), Some(key));
            return;
        }
        if let Some(e) = self.acl_refusal(c, found, argv) {
            self.reject(c, e, Some(key));
            return;
        }
        if let Some(e) = crate::admission::refusal(self, c, found, argv) {
            self.reject(c, e, Some(key));
            return;
        }
        if let Some(e) = crate::cmd::pubsub::refused_in_subscribed_mode(c, found, argv) {
            self.reject(c, e, Some(key));
            return;
        }
        // Nor for a replica (its commands are not paused with the others'), nor for a
        // client in MONITOR mode, which counts as one.
        let keyspace =
            ferrokv::command::flags::WRITE | ferrokv::command::flags::READONLY | ferrokv::command::flags::MAY_REPLICATE;
        if (c.monitor || c.replica) && found.flags_for(argv) & keyspace != 0 {
            self.reject(c, Reply::err("ERR Replica can't interact with the keyspace"), Some(key));
            return;
        }
        if let Some(e) = crate::admission::loading_refusal(self, c, found, argv) {
            self.reject(c, e, Some(key));
            return;
        }
        if let Some(busy) = crate::script::busy_refusal(self, argv) {
            let busy = if found.name == "exec" && c.multi.is_some() {
                c.reset_multi();
                self.unwatch_all(c);
                crate::script::exec_abort(&busy)
            } else {
                busy
            };
            self.reject(c, busy, Some(key));
            return;
        }
        if self.tracking.is_active() {
            self.tracking_limit(Some(c));
        }
        if self.postpone_if_paused(c, found, argv) {
            return;
        }
        if c.multi.is_some() && !matches!(found.name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset") {
            if let Some(q) = c.multi.as_mut() {
                q.push(std::mem::take(argv));
            }
            c.reply(&Reply::simple("QUEUED"));
            return;
        }
        let mark = c.out.len();
        // From 7.2 a push to itself waits for the command's reply, except for the commands
        // whose reply is a push (SUBSCRIBE and its kin).
        let hold_pushes = self.engine.config().version.behaves_as() >= ServerVersion::Redis72
            && !crate::cmd::pubsub::replies_with_push(found.name);
        if hold_pushes {
            c.pushes_after_reply = Some(Vec::new());
        }
        let mut reply = self.call(c, found, argv);
        for line in std::mem::take(&mut self.engine.effects_mut().log) {
            crate::log::verbose(&line);
        }
        if let Some(e) = self.engine.take_unacknowledged() {
            // Under appendfsync always what the command propagated is not on disk: it is
            // not acknowledged (Redis exits there; writes are refused until the AOF works).
            c.out.truncate(mark);
            c.raw_reply = false;
            reply = Reply::error(e);
        }
        self.count_reply(&reply);
        if !std::mem::take(&mut c.raw_reply) {
            c.reply(&reply);
        }
        if let Some(held) = c.pushes_after_reply.take() {
            c.out.extend_from_slice(&held);
        }
        if c.tracking.is_some() || self.tracking.has_pending() {
            self.tracking_after_command(c, found.name);
        }
    }

    /// Run a command (directly or from EXEC) and account for it.
    pub fn call(&mut self, c: &mut Client, found: Found, argv: &[Vec<u8>]) -> Reply {
        // One clock reading per command: a top-level command's start is the engine's time
        // (the end of the previous command of the batch when there was one).
        let top = self.call_depth == 0;
        let start = match self.fresh.take() {
            Some(t) if top => t,
            _ => Instant::now(),
        };
        if top {
            self.command_us = self.wall.unix_us(start);
            self.time.set_ms(self.command_us / 1000);
        }
        self.call_depth += 1;
        if !self.monitors.is_empty() && crate::monitor::shown_before(found.name) {
            // So the script's own commands follow it.
            self.feed_monitors(c, argv);
        }
        // SORT's BY and GET need read access to every key (an error SORT itself answers).
        let refused = self.sort_pattern_refusal(c, found, argv);
        let reply = match (refused, found.run) {
            (Some(e), _) => e,
            (None, Run::Server(run)) => run(self, c, argv),
            // XREAD / XREADGROUP, which may block (Redis 6.2's, by their @blocking category).
            (None, Run::Engine(spec)) if spec.has(ferrokv::command::flags::BLOCKING) => {
                crate::cmd::xread::xread(self, c, argv)
            }
            (None, Run::Engine(spec)) => {
                // A command called by a rename-command name is logged (AOF, replicas)
                // under its own, which every loader knows.
                let own;
                let argv = if argv[0].eq_ignore_ascii_case(found.name.as_bytes()) {
                    argv
                } else {
                    own = [vec![found.name.as_bytes().to_vec()], argv[1..].to_vec()].concat();
                    &own[..]
                };
                // The client's output limit cuts a reply short only when the reply is the
                // client's (its command's, or EXEC's), not a script's.
                let scripted = self.engine.effects().from_script;
                c.session.reply_limit = if scripted { 0 } else { self.cfg.obuf_limits.of(c).hard };
                let in_background = self.flushes_in_background(c, found.name, argv, top, scripted);
                self.engine.effects_mut().flush_in_background = in_background;
                let r = if c.in_exec {
                    // Inside EXEC: one propagation unit, flushed by EXEC.
                    self.engine.call_spec(&mut c.session, spec, argv)
                } else {
                    self.engine.execute_spec(&mut c.session, spec, argv)
                };
                self.engine.effects_mut().flush_in_background = false;
                self.touch_modified(c);
                self.deliver_events(Some(c));
                if found.name == "flushall" && !r.is_error() {
                    self.after_flushall();
                }
                if in_background && !r.is_error() {
                    // Answered when the lazyfree thread has freed the keys.
                    self.park(c, Op::Flush { job: ferrokv::keyspace::lazyfree::last_job() }, Vec::new(), None);
                    Reply::Nil
                } else {
                    r
                }
            }
        };
        self.call_depth -= 1;
        if c.tracking.is_some() {
            self.tracking_remember(c, found, argv);
        }
        if !self.monitors.is_empty() && crate::monitor::shown_after(found.flags_for(argv)) {
            self.feed_monitors(c, argv);
        }
        let end = Instant::now();
        if top {
            self.fresh = Some(end);
        }
        let micros = end.saturating_duration_since(start).as_micros() as u64;
        if top {
            self.stats.eventloop_cmd_us += micros;
        }
        let st = self.stats.commands.entry(cmd::stat_key(found, argv)).or_default();
        st.calls += 1;
        st.usec += micros;
        if reply.is_error() {
            st.failed += 1;
        }
        if c.blocked.is_none() {
            self.note_latency(found, argv, end.saturating_duration_since(start));
        }
        // The slow log, as Redis's call(): a client left blocked is logged when it is served
        // (blocking/serve.rs); EXEC is not logged, its commands are, one by one.
        if let Some(b) = c.blocked.as_mut() {
            b.argv = argv.to_vec();
            b.micros = micros;
        } else if !crate::cmd::skips_slowlog(found) {
            self.note_slow(c, argv, micros);
        }
        reply
    }

    /// Redis 7.4 runs a synchronous FLUSHALL / FLUSHDB of a client that may block as an
    /// asynchronous one, the client answered once the keys are freed: not in MULTI, a
    /// script or for a client that may not block.
    fn flushes_in_background(&self, c: &Client, name: &str, argv: &[Vec<u8>], top: bool, scripted: bool) -> bool {
        if !matches!(name, "flushall" | "flushdb") || self.engine.config().version != ServerVersion::Redis74 {
            return false;
        }
        let sync = match argv.get(1) {
            Some(mode) => mode.eq_ignore_ascii_case(b"sync"),
            None => !self.engine.config().lazyfree_lazy_user_flush,
        };
        sync && argv.len() <= 2 && top && !scripted && !c.in_exec && !c.deny_blocking && !c.master
    }

    pub(crate) fn count_reply(&mut self, r: &Reply) {
        if std::mem::take(&mut self.error_counted) {
            return;
        }
        if let Reply::Error(text) = r {
            self.stats.error_replies += 1;
            self.stats.count_error(text);
        }
    }

    /// Refuse a command before it runs; inside MULTI this aborts the transaction.
    pub(crate) fn reject(&mut self, c: &mut Client, e: Reply, name: Option<StatKey>) {
        // A refused EXEC discards the transaction, as Redis's execCommandAbort.
        let e = match &e {
            Reply::Error(text) if name.is_some_and(|k| k.name == "exec") && !text.starts_with("EXECABORT") => {
                c.reset_multi();
                self.unwatch_all(c);
                crate::script::exec_abort(&e)
            }
            _ => e,
        };
        if c.multi.is_some() {
            c.multi_error = true;
        }
        if let Some(n) = name {
            self.stats.commands.entry(n).or_default().rejected += 1;
        }
        self.stats.error_replies += 1;
        if let Reply::Error(text) = &e {
            self.stats.count_error(text);
        }
        c.reply(&e);
    }

    /// Log a command of `c` that ran `micros` in the slow log, when the configuration says
    /// so (`slowlog-log-slower-than`; Redis 7.4 also takes `slowlog-max-len 0` as off).
    pub(crate) fn note_slow(&mut self, c: &Client, argv: &[Vec<u8>], micros: u64) {
        let threshold = self.cfg.slowlog_log_slower_than;
        let off = self.cfg.slowlog_max_len == 0 && crate::version::version().behaves_as() >= ServerVersion::Redis74;
        if threshold < 0 || off || micros < threshold as u64 {
            return;
        }
        let peer = c.addr.as_ref().map(|a| a.to_string()).unwrap_or_default();
        let name = c.name.clone().unwrap_or_default();
        let now = self.wall.unix_ms(Instant::now()) / 1000;
        self.slowlog.note(threshold, self.cfg.slowlog_max_len as usize, micros, argv, now, peer, &name);
    }
}
