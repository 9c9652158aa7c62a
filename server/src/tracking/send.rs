//! The invalidation messages, written into the clients' output: a push (`>2 invalidate
//! [keys]`) in RESP3, or a `__redis__:invalidate` message to a RESP2 redirect client that
//! is subscribed to something; `tracking-redir-broken` when the redirect client is gone.

use std::collections::HashSet;

use ferrokv::command::flags;

use super::{broadcast_proto, ClientTracking, Payload};
use crate::client::Client;
use crate::cmd::Found;
use crate::server::{ClientMap, Server};

/// The client `id`: the running one, or one of the others (then woken to write).
fn pick<'a>(
    clients: &'a mut ClientMap,
    woken: &mut HashSet<u64>,
    current: Option<&'a mut Client>,
    id: u64,
) -> Option<&'a mut Client> {
    match current {
        Some(c) if c.id == id => Some(c),
        _ => {
            let c = clients.get_mut(&id)?;
            woken.insert(id);
            Some(c.as_mut())
        }
    }
}

/// A RESP null as client `c` speaks it (what a flush invalidates: everything).
fn null_of(c: &Client) -> &'static [u8] {
    if c.resp3 {
        b"_\r\n"
    } else {
        b"$-1\r\n"
    }
}

impl Server {
    /// After a read-only command of `c` (or of a script it runs): remember the keys it read.
    pub(crate) fn tracking_remember(&mut self, c: &Client, found: Found, argv: &[Vec<u8>]) {
        let Some(t) = &c.tracking else { return };
        let f = found.flags_for(argv);
        let scripted_ro = matches!(found.name, "eval_ro" | "evalsha_ro" | "fcall_ro");
        if f & flags::READONLY == 0 || f & flags::PUBSUB != 0 || scripted_ro {
            return;
        }
        let keys: Vec<Vec<u8>> = match &self.tracking.script_keys {
            Some(declared) if self.engine.effects().from_script => declared.clone(),
            _ => found.key_positions(argv).into_iter().filter_map(|i| argv.get(i).cloned()).collect(),
        };
        self.tracking.remember(c.id, t, keys);
    }

    /// Keys the last commands wrote (`flushes`: the ranges of `modified` a FLUSHALL or
    /// FLUSHDB emptied, invalidated as one null). `current` runs the command: its own
    /// invalidations wait for its reply.
    pub(crate) fn tracking_written<K: AsRef<[u8]>>(
        &mut self,
        mut current: Option<&mut Client>,
        modified: &[(usize, K)],
        flushes: &[std::ops::Range<usize>],
    ) {
        let mut i = 0;
        let mut flushes = flushes.iter().peekable();
        loop {
            while let Some(r) = flushes.next_if(|r| r.start <= i) {
                self.tracking_flushed(current.as_deref_mut());
                i = i.max(r.end);
            }
            let Some((_, key)) = modified.get(i) else { break };
            self.tracking_invalidate(current.as_deref_mut(), key.as_ref(), true);
            i += 1;
        }
        for _ in flushes {
            self.tracking_flushed(current.as_deref_mut());
        }
    }

    /// Redis's trackingInvalidateKey: the readers of `key` get its invalidation (and the
    /// BCAST prefixes note it when `bcast`).
    /// A command is running (`bcast`: a write, not the table's limit): the current client's
    /// own invalidations wait for its reply; otherwise they go now.
    pub(crate) fn tracking_invalidate(&mut self, mut current: Option<&mut Client>, key: &[u8], bcast: bool) {
        let writer = current.as_ref().map_or(0, |c| c.id);
        let Some(readers) = self.tracking.written(key, writer, bcast) else { return };
        for id in readers {
            let is_current = current.as_ref().is_some_and(|c| c.id == id);
            let mode = if is_current {
                current.as_ref().and_then(|c| c.tracking.as_ref())
            } else {
                self.clients.get(&id).and_then(|c| c.tracking.as_ref())
            };
            let Some(mode) = mode else { continue };
            if mode.bcast || (mode.noloop && is_current) {
                continue;
            }
            if is_current && bcast {
                self.tracking.pending.push((id, Some(key.to_vec())));
            } else {
                self.tracking_send(current.as_deref_mut(), id, Payload::Key(key));
            }
        }
    }

    /// FLUSHALL / FLUSHDB (or a dataset replaced): every tracking client is told that
    /// everything is invalid, with a null.
    pub(crate) fn tracking_flushed(&mut self, mut current: Option<&mut Client>) {
        if self.tracking.is_active() {
            if let Some(c) = current.as_ref().filter(|c| c.tracking.is_some()) {
                self.tracking.pending.push((c.id, None));
            }
            let ids: Vec<u64> = self.clients.values().filter(|c| c.tracking.is_some()).map(|c| c.id).collect();
            for id in ids {
                if current.as_ref().is_some_and(|c| c.id == id) {
                    continue;
                }
                let null = self.clients.get(&id).map_or(&b"$-1\r\n"[..], |c| null_of(c));
                self.tracking_send(current.as_deref_mut(), id, Payload::Proto(null));
            }
        }
        self.tracking.forget_all();
    }

    /// After the reply to `c`'s command (top level): the invalidations it caused itself, and
    /// the end of a CACHING yes/no (which covers one command or one transaction).
    pub(crate) fn tracking_after_command(&mut self, c: &mut Client, name: &str) {
        self.tracking_send_pending(c);
        if c.multi.is_none() && name != "client" {
            if let Some(t) = c.tracking.as_mut() {
                t.caching = false;
            }
        }
    }

    /// The invalidations `c` caused itself, now.
    pub(crate) fn tracking_send_pending(&mut self, c: &mut Client) {
        let id = c.id;
        if self.tracking.pending.is_empty() {
            return;
        }
        let (mine, others) = std::mem::take(&mut self.tracking.pending).into_iter().partition(|(who, _)| *who == id);
        self.tracking.pending = others;
        for (_, key) in mine {
            match key {
                Some(k) => self.tracking_send(Some(c), id, Payload::Key(&k)),
                None => {
                    let null = null_of(c);
                    self.tracking_send(Some(c), id, Payload::Proto(null));
                }
            }
        }
    }

    /// Before the event loop sleeps: each BCAST prefix's written keys to its clients.
    pub(crate) fn tracking_broadcast(&mut self) {
        if !self.tracking.is_active() || self.tracking.prefixes.values().all(|p| p.keys.is_empty()) {
            return;
        }
        let prefixes: Vec<Vec<u8>> = self.tracking.prefixes.keys().cloned().collect();
        for p in prefixes {
            let Some(state) = self.tracking.prefixes.get_mut(&p) else { continue };
            let keys = std::mem::take(&mut state.keys);
            if keys.is_empty() {
                continue;
            }
            let clients: Vec<u64> = state.clients.iter().copied().collect();
            let everyone = broadcast_proto(&keys, None).unwrap_or_default();
            for id in clients {
                let noloop = self.clients.get(&id).and_then(|c| c.tracking.as_ref()).is_some_and(|t| t.noloop);
                if noloop {
                    if let Some(own) = broadcast_proto(&keys, Some(id)) {
                        self.tracking_send(None, id, Payload::Proto(&own));
                    }
                } else {
                    self.tracking_send(None, id, Payload::Proto(&everyone));
                }
            }
        }
    }

    /// tracking-table-max-keys: over it, keys are forgotten (their readers invalidated),
    /// with more effort each round the table stays over.
    pub(crate) fn tracking_limit(&mut self, mut current: Option<&mut Client>) {
        let max = self.tracking.max_keys;
        if max == 0 || self.tracking.keys.len() <= max {
            self.tracking.over_limit_rounds = 0;
            return;
        }
        let mut effort = 100 * (self.tracking.over_limit_rounds + 1);
        while effort > 0 {
            effort -= 1;
            let n = self.tracking.keys.len();
            if n == 0 {
                break;
            }
            let at = fastrand::usize(0..n);
            let Some((key, _)) = self.tracking.keys.get_index(at).map(|(k, v)| (k.clone(), v.len())) else { break };
            self.tracking_invalidate(current.as_deref_mut(), &key, false);
            if self.tracking.keys.len() <= max {
                self.tracking.over_limit_rounds = 0;
                return;
            }
        }
        self.tracking.over_limit_rounds += 1;
    }

    /// CLIENT TRACKING OFF, RESET, or the client going away.
    pub(crate) fn tracking_off(&mut self, c: &mut Client) {
        self.tracking.drop_pending(c.id);
        if let Some(t) = c.tracking.take() {
            self.tracking.disable(c.id, &t);
            self.sync_modified_tracking();
        }
    }

    /// CLIENT TRACKING ON for `c`, options checked.
    pub(crate) fn tracking_on(&mut self, c: &mut Client, new: ClientTracking, prefixes: Vec<Vec<u8>>) {
        let current = c.tracking.take();
        c.tracking = Some(self.tracking.enable(c.id, current, new, prefixes));
        self.sync_modified_tracking();
    }

    /// Redis's sendTrackingMessage: `payload` to tracking client `id`, or to the client it
    /// redirects to.
    fn tracking_send(&mut self, current: Option<&mut Client>, id: u64, payload: Payload<'_>) {
        let Server { clients, woken, cfg, .. } = self;
        let mut current = current;
        let Some(target) = pick(clients, woken, current.as_deref_mut(), id) else { return };
        let Some(redirect) = target.tracking.as_ref().map(|t| t.redirect) else { return };
        let dest_id = if redirect != 0 {
            let exists = current.as_ref().is_some_and(|c| c.id == redirect) || clients.contains_key(&redirect);
            if !exists {
                let Some(target) = pick(clients, woken, current.as_deref_mut(), id) else { return };
                if let Some(t) = target.tracking.as_mut() {
                    t.broken_redirect = true;
                }
                if target.resp3 {
                    let msg = format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{redirect}\r\n");
                    target.out.extend_from_slice(msg.as_bytes());
                }
                return;
            }
            redirect
        } else {
            id
        };
        let Some(dest) = pick(clients, woken, current, dest_id) else { return };
        if dest.close_asap {
            return;
        }
        if dest.resp3 {
            dest.out.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
        } else if redirect != 0 && dest.subs.active() {
            dest.out.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
        } else {
            // RESP2 with no redirect: there is no way to push on this connection.
            return;
        }
        match payload {
            Payload::Key(k) => {
                dest.out.extend_from_slice(format!("*1\r\n${}\r\n", k.len()).as_bytes());
                dest.out.extend_from_slice(k);
                dest.out.extend_from_slice(b"\r\n");
            }
            Payload::Proto(p) => dest.out.extend_from_slice(p),
        }
        crate::obuf::enforce(&cfg.obuf_limits, dest);
    }
}
