//! Keyspace notifications: the `notify-keyspace-events` flags (Redis's letters), and the
//! delivery of the events the engine records as `__keyspace@<db>__:<key>` and
//! `__keyevent@<db>__:<event>` messages.

use ferrokv::command::notify::*;

use crate::client::Client;
use crate::server::Server;

pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const MODULE: u32 = 1 << 13;
/// `A`: every class but key-miss and new.
pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Parse the flag letters; None for an unknown one.
pub fn parse_flags(s: &str) -> Option<u32> {
    let mut f = 0;
    for ch in s.chars() {
        f |= match ch {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(f)
}

/// The canonical letters, as CONFIG GET prints them.
pub fn flags_to_string(f: u32) -> String {
    let mut s = String::new();
    if f & ALL == ALL {
        s.push('A');
    } else {
        for (bit, ch) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if f & bit != 0 {
                s.push(ch);
            }
        }
    }
    for (bit, ch) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if f & bit != 0 {
            s.push(ch);
        }
    }
    s
}

pub const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

impl Server {
    /// Publish the events the engine recorded since the last call. `current` is the
    /// running client, if any (it may be a subscriber itself).
    pub fn deliver_events(&mut self, mut current: Option<&mut Client>) {
        if self.engine.fx.events.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.engine.fx.events);
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
        self.engine.fx.track_events = self.cfg.notify_keyspace_events != 0;
        if !self.engine.fx.track_events {
            self.engine.fx.events.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_round_trip_as_redis_prints_them() {
        assert_eq!(flags_to_string(parse_flags("KEA").unwrap()), "AKE");
        assert_eq!(flags_to_string(parse_flags("Ex").unwrap()), "xE");
        assert_eq!(flags_to_string(parse_flags("g$lshzxetd").unwrap()), "A");
        assert_eq!(flags_to_string(parse_flags("nKm").unwrap()), "nKm");
        assert_eq!(flags_to_string(parse_flags("").unwrap()), "");
        assert!(parse_flags("Q").is_none());
    }
}
