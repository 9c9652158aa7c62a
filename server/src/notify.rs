//! Keyspace notifications' `notify-keyspace-events` flags (Redis's letters). The events
//! are delivered by pubsub/deliver.rs.

use ferrokv::command::notify::*;

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
