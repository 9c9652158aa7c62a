//! Subscribing, unsubscribing and publishing: the index kept in step with each client's
//! subscriptions, messages written into the listeners' output buffers.

use super::{write_push, Part};
use crate::client::Client;
use crate::notify::{KEYEVENT, KEYSPACE};
use crate::server::Server;

fn notice(c: &mut Client, kind: &[u8], name: Option<&[u8]>) {
    let count = c.subs.count() as i64;
    let name = name.map_or(Part::Null, Part::Bulk);
    write_push(&mut c.out, c.resp3, &[Part::Bulk(kind), name, Part::Int(count)]);
}

/// Shard notices count the shard channels only.
fn shard_notice(c: &mut Client, kind: &[u8], name: Option<&[u8]>) {
    let count = c.subs.shard.len() as i64;
    let name = name.map_or(Part::Null, Part::Bulk);
    write_push(&mut c.out, c.resp3, &[Part::Bulk(kind), name, Part::Int(count)]);
}

impl Server {
    pub fn subscribe_channel(&mut self, c: &mut Client, channel: &[u8]) {
        if c.subs.add_channel(channel) {
            self.pubsub.channels.entry(channel.to_vec()).or_default().push(c.id);
        }
        notice(c, b"subscribe", Some(channel));
    }

    /// Remove one channel subscription; with `notify`, reply as UNSUBSCRIBE does.
    pub fn unsubscribe_channel(&mut self, c: &mut Client, channel: &[u8], notify: bool) -> bool {
        let was = c.subs.remove_channel(channel);
        if was {
            if let Some(ids) = self.pubsub.channels.get_mut(channel) {
                ids.retain(|&i| i != c.id);
                if ids.is_empty() {
                    self.pubsub.channels.remove(channel);
                }
            }
        }
        if notify {
            notice(c, b"unsubscribe", Some(channel));
        }
        was
    }

    pub fn subscribe_pattern(&mut self, c: &mut Client, pattern: &[u8]) {
        if !c.subs.patterns.iter().any(|p| p.as_slice() == pattern) {
            c.subs.patterns.push(pattern.to_vec());
            match self.pubsub.patterns.iter_mut().find(|(p, _)| p.as_slice() == pattern) {
                Some((_, ids)) => ids.push(c.id),
                None => self.pubsub.patterns.push((pattern.to_vec(), vec![c.id])),
            }
        }
        notice(c, b"psubscribe", Some(pattern));
    }

    pub fn unsubscribe_pattern(&mut self, c: &mut Client, pattern: &[u8], notify: bool) -> bool {
        let before = c.subs.patterns.len();
        c.subs.patterns.retain(|p| p.as_slice() != pattern);
        let was = c.subs.patterns.len() != before;
        if was {
            if let Some(i) = self.pubsub.patterns.iter().position(|(p, _)| p.as_slice() == pattern) {
                self.pubsub.patterns[i].1.retain(|&id| id != c.id);
                if self.pubsub.patterns[i].1.is_empty() {
                    self.pubsub.patterns.remove(i);
                }
            }
        }
        if notify {
            notice(c, b"punsubscribe", Some(pattern));
        }
        was
    }

    /// UNSUBSCRIBE with no channel: every channel, or one notice with a null name.
    pub fn unsubscribe_all_channels(&mut self, c: &mut Client, notify: bool) {
        let all = c.subs.channels.clone();
        for ch in &all {
            self.unsubscribe_channel(c, ch, notify);
        }
        if notify && all.is_empty() {
            notice(c, b"unsubscribe", None);
        }
    }

    pub fn unsubscribe_all_patterns(&mut self, c: &mut Client, notify: bool) {
        let all = c.subs.patterns.clone();
        for p in &all {
            self.unsubscribe_pattern(c, p, notify);
        }
        if notify && all.is_empty() {
            notice(c, b"punsubscribe", None);
        }
    }

    /// Deliver `msg` on `channel` to its subscribers and the matching patterns'; the
    /// number of receivers. `current` is the running client (not in `self.clients`).
    pub fn publish(&mut self, mut current: Option<&mut Client>, channel: &[u8], msg: &[u8]) -> usize {
        let mut receivers = 0;
        let Server { pubsub, clients, woken, cfg, .. } = self;
        let direct = pubsub.channels.get(channel).map(|ids| (None, ids));
        let by_pattern = pubsub
            .patterns
            .iter()
            .filter(|(p, _)| ferrokv::glob::matches(p, channel))
            .map(|(p, ids)| (Some(p.as_slice()), ids));
        for (pattern, ids) in direct.into_iter().chain(by_pattern) {
            for &id in ids {
                let target = match current.as_deref_mut().filter(|c| c.id == id) {
                    Some(c) => c,
                    None => match clients.get_mut(&id) {
                        Some(c) => {
                            woken.insert(id);
                            c
                        }
                        None => continue,
                    },
                };
                receivers += 1;
                if target.close_asap {
                    continue;
                }
                let resp3 = target.resp3;
                match pattern {
                    None => write_push(
                        target.push_out(),
                        resp3,
                        &[Part::Bulk(b"message"), Part::Bulk(channel), Part::Bulk(msg)],
                    ),
                    Some(p) => write_push(
                        target.push_out(),
                        resp3,
                        &[Part::Bulk(b"pmessage"), Part::Bulk(p), Part::Bulk(channel), Part::Bulk(msg)],
                    ),
                }
                crate::obuf::enforce(&cfg.obuf_limits, target);
            }
        }
        receivers
    }

    /// A client goes away: drop its subscriptions.
    pub fn pubsub_forget(&mut self, c: &mut Client) {
        if c.subs.active() {
            self.unsubscribe_all_channels(c, false);
            self.unsubscribe_all_patterns(c, false);
            self.unsubscribe_all_shard(c, false);
        }
    }

    pub fn subscribe_shard(&mut self, c: &mut Client, channel: &[u8]) {
        if !c.subs.shard.iter().any(|x| x.as_slice() == channel) {
            c.subs.shard.push(channel.to_vec());
            self.pubsub.shard_channels.entry(channel.to_vec()).or_default().push(c.id);
        }
        shard_notice(c, b"ssubscribe", Some(channel));
    }

    pub fn unsubscribe_shard(&mut self, c: &mut Client, channel: &[u8], notify: bool) {
        let before = c.subs.shard.len();
        c.subs.shard.retain(|x| x.as_slice() != channel);
        if c.subs.shard.len() != before {
            if let Some(ids) = self.pubsub.shard_channels.get_mut(channel) {
                ids.retain(|&i| i != c.id);
                if ids.is_empty() {
                    self.pubsub.shard_channels.remove(channel);
                }
            }
        }
        if notify {
            shard_notice(c, b"sunsubscribe", Some(channel));
        }
    }

    pub fn unsubscribe_all_shard(&mut self, c: &mut Client, notify: bool) {
        let all = c.subs.shard.clone();
        for ch in &all {
            self.unsubscribe_shard(c, ch, notify);
        }
        if notify && all.is_empty() {
            shard_notice(c, b"sunsubscribe", None);
        }
    }

    /// SPUBLISH: the shard channel's subscribers only.
    pub fn publish_shard(&mut self, mut current: Option<&mut Client>, channel: &[u8], msg: &[u8]) -> usize {
        let Server { pubsub, clients, woken, cfg, .. } = self;
        let Some(ids) = pubsub.shard_channels.get(channel) else { return 0 };
        for &id in ids {
            let target = match current.as_deref_mut().filter(|c| c.id == id) {
                Some(c) => c,
                None => match clients.get_mut(&id) {
                    Some(c) => {
                        woken.insert(id);
                        c
                    }
                    None => continue,
                },
            };
            if !target.close_asap {
                let parts = [Part::Bulk(b"smessage"), Part::Bulk(channel), Part::Bulk(msg)];
                let resp3 = target.resp3;
                write_push(target.push_out(), resp3, &parts);
                crate::obuf::enforce(&cfg.obuf_limits, target);
            }
        }
        ids.len()
    }
}

/// Keyspace notifications: the events the engine records, published as
/// `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>` messages.
impl Server {
    /// Publish the events the engine recorded since the last call. `current` is the
    /// running client, if any (it may be a subscriber itself).
    pub fn deliver_events(&mut self, mut current: Option<&mut Client>) {
        if self.engine.effects().events.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.engine.effects_mut().events);
        let flags = self.cfg.notify_keyspace_events;
        for ev in events {
            if flags & ev.class == 0 {
                continue;
            }
            if flags & KEYSPACE != 0 {
                let mut ch = format!("__keyspace@{}__:", ev.db).into_bytes();
                ch.extend_from_slice(&ev.key);
                self.publish(current.as_deref_mut(), &ch, ev.name.as_bytes());
            }
            if flags & KEYEVENT != 0 {
                let ch = format!("__keyevent@{}__:{}", ev.db, ev.name).into_bytes();
                self.publish(current.as_deref_mut(), &ch, &ev.key);
            }
        }
    }

    /// Whether the engine should record events (after the flags change).
    pub fn sync_event_tracking(&mut self) {
        self.engine.effects_mut().track_events = self.cfg.notify_keyspace_events != 0;
        if !self.engine.effects().track_events {
            self.engine.effects_mut().events.clear();
        }
    }
}
