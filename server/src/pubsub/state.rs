//! Who listens to what: the server's channel and pattern index, a client's subscriptions,
//! and the message encoding (RESP2 arrays, RESP3 pushes).

use std::collections::{HashMap, HashSet};

/// The server's side: channel or pattern → subscriber ids, in subscription order.
#[derive(Debug, Default)]
pub struct PubSub {
    pub channels: HashMap<Vec<u8>, Vec<u64>>,
    /// Patterns in the order they were first subscribed (publishing scans them all).
    pub patterns: Vec<(Vec<u8>, Vec<u64>)>,
    /// Sharded channels (SSUBSCRIBE / SPUBLISH): their own namespace, no patterns.
    pub shard_channels: HashMap<Vec<u8>, Vec<u64>>,
}

/// A client's side: what it is subscribed to, in subscription order.
#[derive(Debug, Default)]
pub struct ClientSubs {
    pub channels: Vec<Vec<u8>>,
    channel_set: HashSet<Vec<u8>>,
    pub patterns: Vec<Vec<u8>>,
    pub shard: Vec<Vec<u8>>,
}

impl ClientSubs {
    /// Channels plus patterns (the count subscribe replies carry).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Subscribe to `channel`: false when already subscribed.
    pub fn add_channel(&mut self, channel: &[u8]) -> bool {
        let new = self.channel_set.insert(channel.to_vec());
        if new {
            self.channels.push(channel.to_vec());
        }
        new
    }

    /// Unsubscribe from `channel`: false when not subscribed.
    pub fn remove_channel(&mut self, channel: &[u8]) -> bool {
        let was = self.channel_set.remove(channel);
        if was {
            self.channels.retain(|x| x.as_slice() != channel);
        }
        was
    }

    /// In subscribed mode (RESP2 then allows only a few commands).
    pub fn active(&self) -> bool {
        self.count() > 0 || !self.shard.is_empty()
    }
}

/// One element of a pub/sub message.
pub enum Part<'a> {
    Bulk(&'a [u8]),
    Null,
    Int(i64),
}

/// Write a pub/sub message: an array in RESP2, a push (`>`) in RESP3.
pub fn write_push(out: &mut Vec<u8>, resp3: bool, parts: &[Part<'_>]) {
    out.push(if resp3 { b'>' } else { b'*' });
    out.extend_from_slice(parts.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for p in parts {
        match p {
            Part::Bulk(b) => {
                out.push(b'$');
                out.extend_from_slice(b.len().to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Part::Null => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
            Part::Int(n) => {
                out.push(b':');
                out.extend_from_slice(n.to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}
