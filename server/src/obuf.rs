//! Client output buffer limits (`client-output-buffer-limit`): per client class a hard
//! limit that closes the client at once, and a soft limit that closes it when exceeded
//! for longer than its seconds. Pub/sub clients are the "pubsub" class.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::log::log;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// The limits of the classes Redis 7.0 configures (master has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub normal: Limit,
    pub replica: Limit,
    pub pubsub: Limit,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            normal: Limit { hard: 0, soft: 0, soft_seconds: 0 },
            replica: Limit { hard: 256 << 20, soft: 64 << 20, soft_seconds: 60 },
            pubsub: Limit { hard: 32 << 20, soft: 8 << 20, soft_seconds: 60 },
        }
    }
}

impl Limits {
    /// The limits of `c`'s class.
    pub fn of(&self, c: &Client) -> &Limit {
        if c.replica {
            &self.replica
        } else if c.subs.active() {
            &self.pubsub
        } else {
            &self.normal
        }
    }

    /// As CONFIG GET prints it.
    pub fn to_config(&self) -> String {
        let one = |name: &str, l: &Limit| format!("{name} {} {} {}", l.hard, l.soft, l.soft_seconds);
        format!("{} {} {}", one("normal", &self.normal), one("slave", &self.replica), one("pubsub", &self.pubsub))
    }

    /// CONFIG SET / config file: `class hard soft seconds` groups, all or nothing.
    pub fn set(&mut self, args: &[String]) -> Result<(), String> {
        let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
        if !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut next = *self;
        for g in words.chunks(4) {
            let slot = match g[0].to_ascii_lowercase().as_str() {
                "normal" => &mut next.normal,
                "slave" | "replica" => &mut next.replica,
                "pubsub" => &mut next.pubsub,
                _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
            };
            let bad = || "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string();
            let hard = crate::memory_value::parse_memory(g[1]).filter(|&n| n >= 0).ok_or_else(bad)?;
            let soft = crate::memory_value::parse_memory(g[2]).filter(|&n| n >= 0).ok_or_else(bad)?;
            let secs: i64 = g[3].parse().map_err(|_| bad())?;
            if secs < 0 {
                return Err(bad());
            }
            *slot = Limit { hard: hard as u64, soft: soft as u64, soft_seconds: secs as u64 };
        }
        *self = next;
        Ok(())
    }
}

/// Clients closed for their output buffer limits (INFO client_output_buffer_limit_
/// disconnections): counted here, where every class's limit is checked.
static DISCONNECTIONS: AtomicU64 = AtomicU64::new(0);

pub fn disconnections() -> u64 {
    DISCONNECTIONS.load(Ordering::Relaxed)
}

/// CONFIG RESETSTAT.
pub fn reset_disconnections() {
    DISCONNECTIONS.store(0, Ordering::Relaxed);
}

/// Check `c`'s pending output against its class's limits; over them, the client is
/// flagged to close (with Redis's log line). True when it must close.
pub fn enforce(limits: &Limits, c: &mut Client) -> bool {
    let used = c.pending_out() as u64;
    enforce_used(limits, c, used, 0)
}

/// `enforce` for a client whose pending output is `used` bytes, counted by its owner
/// (a replica's stream waits in the replication buffer), with a hard limit of at least
/// `hard_floor` when one is set.
pub fn enforce_used(limits: &Limits, c: &mut Client, used: u64, hard_floor: u64) -> bool {
    if c.close_asap {
        return true;
    }
    let limit = limits.of(c);
    let hard = limit.hard > 0 && used >= limit.hard.max(hard_floor);
    let mut soft = false;
    if limit.soft > 0 && used >= limit.soft {
        let since = *c.obuf_soft_since.get_or_insert_with(Instant::now);
        soft = since.elapsed() > Duration::from_secs(limit.soft_seconds);
    } else {
        c.obuf_soft_since = None;
    }
    if hard || soft {
        DISCONNECTIONS.fetch_add(1, Ordering::Relaxed);
        // Redis describes the client as it was before the flag.
        log(&format!(
            "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
            c.info_line(Instant::now(), false)
        ));
        c.close_asap = true;
    }
    c.close_asap
}
