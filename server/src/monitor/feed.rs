//! MONITOR itself and the feed of each command to the monitors.

use super::line;
use crate::client::Client;
use crate::server::Server;

impl Server {
    /// MONITOR: `c` sees every command from now on (nothing answers a client already in
    /// this mode or a replica; a transaction or script may not ask).
    pub fn monitor(&mut self, c: &mut Client) -> ferrokv::Reply {
        if c.in_exec || c.deny_blocking {
            return ferrokv::Reply::err("ERR MONITOR isn't allowed for DENY BLOCKING client");
        }
        if c.monitor || c.replica {
            c.raw_reply = true;
            return ferrokv::Reply::ok();
        }
        c.monitor = true;
        self.monitors.add(c.id);
        ferrokv::Reply::ok()
    }

    /// Show `argv`, run by `c`, to every monitor.
    pub fn feed_monitors(&mut self, c: &mut Client, argv: &[Vec<u8>]) {
        if self.monitors.is_empty() || self.is_loading() {
            return;
        }
        let unix_us = self.wall.unix_us(std::time::Instant::now());
        let peer = c.addr.as_ref().map(|a| a.to_string()).unwrap_or_default();
        let who = (!self.engine.effects().from_script).then_some(peer.as_str());
        let text = line(unix_us, c.session.db, who, argv, &crate::slowlog::redacted(argv));
        let Server { monitors, clients, woken, .. } = self;
        for &id in &monitors.ids {
            let target = if id == c.id {
                &mut *c
            } else {
                match clients.get_mut(&id) {
                    Some(t) => {
                        woken.insert(id);
                        t
                    }
                    None => continue,
                }
            };
            if !target.close_asap {
                target.out.extend_from_slice(&text);
            }
        }
    }
}
