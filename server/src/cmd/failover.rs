//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms], as Redis 7.0 coordinates it:
//! writes are paused until the target replica (or the first one found) has acknowledged
//! the whole stream; then this server becomes that replica's replica and sends it
//! `PSYNC <replid> <offset> FAILOVER`, which makes it a master that continues our history.
//! A timeout aborts (or, with FORCE, hands over anyway); ABORT ends it at any point.

use std::time::{Duration, Instant};

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::Reply;

use crate::client::Client;
use crate::log::log;
use crate::pause::{PauseKind, PausePurpose};
use crate::replication::Failover;
use crate::server::Server;

pub fn failover(s: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len() == 2 && eq_ic(&a[1], "abort") {
        if s.replicas.failover.is_none() {
            return Reply::err("ERR No failover in progress.");
        }
        s.abort_failover("Failover manually aborted");
        return Reply::ok();
    }
    let (mut timeout, mut force, mut target) = (0i64, false, None);
    let mut j = 1;
    while j < a.len() {
        if eq_ic(&a[j], "timeout") && j + 1 < a.len() && timeout == 0 {
            timeout = match parse_i64(&a[j + 1]) {
                Some(t) => t,
                None => return Reply::not_integer(),
            };
            if timeout <= 0 {
                return Reply::err("ERR FAILOVER timeout must be greater than 0");
            }
            j += 2;
        } else if eq_ic(&a[j], "to") && j + 2 < a.len() && target.is_none() {
            let Some(port) = parse_i64(&a[j + 2]) else { return Reply::not_integer() };
            target = Some((String::from_utf8_lossy(&a[j + 1]).into_owned(), port));
            j += 3;
        } else if eq_ic(&a[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return Reply::syntax();
        }
    }
    if s.replicas.failover.is_some() {
        return Reply::err("ERR FAILOVER already in progress.");
    }
    if s.link.is_some() {
        return Reply::err("ERR FAILOVER is not valid when server is a replica.");
    }
    if s.replicas.is_empty() {
        return Reply::err("ERR FAILOVER requires connected replicas.");
    }
    if force && (timeout == 0 || target.is_none()) {
        return Reply::err("ERR FAILOVER with force option requires both a timeout and target HOST and IP.");
    }
    let target = match target {
        Some((host, port)) => {
            let found = u16::try_from(port).ok().filter(|&p| s.replicas.ack_of(&host, p).is_some());
            let Some(port) = found else {
                return Reply::err("ERR FAILOVER target HOST and PORT is not a replica.");
            };
            log(&format!("FAILOVER requested to {host}:{port}."));
            Some((host, port))
        }
        None => {
            log("FAILOVER requested to any replica.");
            None
        }
    };
    let deadline = (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    s.replicas.failover = Some(Failover { target, deadline, force, in_progress: false });
    // Writes wait until the handover is done (or given up).
    s.pause.start(PausePurpose::Failover, PauseKind::Write, None);
    s.refresh_expire_mode();
    Reply::ok()
}

impl Server {
    /// From the cron: hand over once the target has caught up (or the time is up).
    pub fn failover_cron(&mut self) {
        let Some(f) = &self.replicas.failover else { return };
        if f.in_progress {
            return;
        }
        let offset = self.repl_offset();
        if f.deadline.is_some_and(|d| d <= Instant::now()) {
            match (&f.target, f.force) {
                (Some((host, port)), true) => {
                    log(&format!("FAILOVER to {host}:{port} time out exceeded, failing over."));
                    let (host, port) = (host.clone(), *port);
                    self.hand_over(host, port);
                }
                _ => self.abort_failover("Replica never caught up before timeout"),
            }
            return;
        }
        let ready = match &f.target {
            Some((host, port)) => (self.replicas.ack_of(host, *port) == Some(offset)).then(|| (host.clone(), *port)),
            None => self.replicas.caught_up(offset),
        };
        if let Some((host, port)) = ready {
            log(&format!("Failover target {host}:{port} is synced, failing over."));
            self.hand_over(host, port);
        }
    }

    fn hand_over(&mut self, host: String, port: u16) {
        if let Some(f) = &mut self.replicas.failover {
            f.target = Some((host.clone(), port));
            f.in_progress = true;
        }
        self.follow_master(host, port);
    }

    /// The handover's PSYNC was answered: the target leads now.
    pub fn failover_done(&mut self) {
        if self.replicas.failover.take().is_some() {
            self.end_pause(PausePurpose::Failover);
        }
    }

    /// Give the failover up: a server that already followed its target is a master again.
    pub fn abort_failover(&mut self, why: &str) {
        let Some(f) = self.replicas.failover.take() else { return };
        match &f.target {
            Some((host, port)) => log(&format!("FAILOVER to {host}:{port} aborted: {why}")),
            None => log(&format!("FAILOVER to any replica aborted: {why}")),
        }
        if f.in_progress {
            self.become_master();
        }
        self.end_pause(PausePurpose::Failover);
    }
}
