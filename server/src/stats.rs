//! Counters INFO reports beyond the engine's: connections, commands, errors, eviction.

use std::collections::HashMap;

/// Counters INFO reports, beyond the engine's.
#[derive(Debug, Default, Clone)]
pub struct ServerStats {
    pub connections_received: u64,
    pub rejected_connections: u64,
    pub commands_processed: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Bytes read from our master and written to our replicas (counted apart, as Redis).
    pub net_repl_input_bytes: u64,
    pub net_repl_output_bytes: u64,
    /// The active expire cycle: its running average of expired among sampled keys (%),
    /// cycles that ran out of time, and the time it took.
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached_count: u64,
    pub expire_cycle_us: u64,
    /// Rates sampled every 100 ms (INFO's instantaneous_*).
    pub instantaneous: Instantaneous,
    pub error_replies: u64,
    /// Reply buffers the timer shrank and grew (INFO reply_buffer_shrinks / _expands).
    pub reply_buffer_shrinks: u64,
    pub reply_buffer_expands: u64,
    /// Per command: calls, microseconds, rejected calls, failed calls.
    pub commands: CommandStats,
    /// Error replies per error code (INFO errorstats).
    pub errors: HashMap<String, u64>,
    /// Keys evicted for maxmemory, and the milliseconds memory was over it (INFO stats).
    pub evicted_keys: u64,
    /// EVAL's scripts evicted past 500 (Redis 7.4, INFO evicted_scripts).
    pub evicted_scripts: u64,
    pub total_eviction_exceeded_ms: u64,
    /// Replicas' synchronizations: full, partial accepted, partial refused.
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// Errors our master's stream (or the AOF) was answered with.
    pub unexpected_error_replies: u64,
    /// Turns of the event loop, the microseconds they worked (not waiting in poll), and
    /// the microseconds of the commands run (INFO eventloop_*, Redis 7.2).
    pub eventloop_cycles: u64,
    pub eventloop_us: u64,
    pub eventloop_cmd_us: u64,
    /// ACL refusals by reason, whether or not the ACL log grouped them (Redis 7.2's
    /// acl_access_denied_auth / _cmd / _key / _channel).
    pub acl_denied: [u64; 4],
    /// Clients closed for their query buffer's limit (Redis 7.4).
    pub query_buffer_limit_disconnections: u64,
    /// The error table reached [`ERROR_CODES_MAX`] codes and stopped counting (until
    /// CONFIG RESETSTAT).
    pub errors_disabled: bool,
}

/// How many error codes INFO errorstats keeps: a script can make one per call
/// (redis.error_reply), so past this the table stops growing, as Redis 7.4's does.
pub const ERROR_CODES_MAX: usize = 128;

/// What Redis samples for its instantaneous metrics, in this order.
#[derive(Debug, Clone, Copy)]
pub enum Metric {
    Commands,
    NetInput,
    NetOutput,
    NetReplInput,
    NetReplOutput,
    EventloopCycles,
}

const SAMPLES: usize = 16;

/// A rate as Redis tracks it: every sample the growth per second since the previous one,
/// the rate the average of the last 16 samples.
#[derive(Debug, Clone, Copy, Default)]
struct Track {
    last_ms: u64,
    last_value: u64,
    samples: [u64; SAMPLES],
    idx: usize,
}

/// Redis's instantaneous metrics.
#[derive(Debug, Clone, Default)]
pub struct Instantaneous {
    tracks: [Track; 6],
    /// A loop turn's microseconds, averaged over the turns of each sample.
    turn_us: Track,
    turns_seen: u64,
}

impl Instantaneous {
    /// Record `values` (cumulative counters, in [`Metric`] order) and the event loop's
    /// cumulative working microseconds at `now_ms`.
    pub fn sample(&mut self, now_ms: u64, values: [u64; 6], loop_us: u64) {
        let turns = values[Metric::EventloopCycles as usize];
        for (t, v) in self.tracks.iter_mut().zip(values) {
            let dt = now_ms.saturating_sub(t.last_ms);
            t.samples[t.idx] = (v.saturating_sub(t.last_value) * 1000).checked_div(dt).unwrap_or(0);
            t.idx = (t.idx + 1) % SAMPLES;
            t.last_ms = now_ms;
            t.last_value = v;
        }
        let t = &mut self.turn_us;
        t.samples[t.idx] =
            loop_us.saturating_sub(t.last_value).checked_div(turns.saturating_sub(self.turns_seen)).unwrap_or(0);
        t.idx = (t.idx + 1) % SAMPLES;
        t.last_ms = now_ms;
        t.last_value = loop_us;
        self.turns_seen = turns;
    }

    /// The rate of `m` per second.
    pub fn get(&self, m: Metric) -> u64 {
        self.tracks[m as usize].samples.iter().sum::<u64>() / SAMPLES as u64
    }

    /// A loop turn's average microseconds (INFO instantaneous_eventloop_duration_usec).
    pub fn turn_us(&self) -> u64 {
        self.turn_us.samples.iter().sum::<u64>() / SAMPLES as u64
    }

    /// When the last sample was taken (0: never).
    pub fn last_ms(&self) -> u64 {
        self.tracks[0].last_ms
    }
}

impl ServerStats {
    /// The counters the instantaneous metrics follow, in [`Metric`] order.
    pub fn rate_counters(&self) -> [u64; 6] {
        [
            self.commands_processed,
            self.net_input_bytes,
            self.net_output_bytes,
            self.net_repl_input_bytes,
            self.net_repl_output_bytes,
            self.eventloop_cycles,
        ]
    }

    /// After an active expire cycle: Redis's running average of the share of sampled keys
    /// found expired, and whether the cycle ran out of time.
    pub fn expire_cycle(&mut self, sampled: usize, expired: usize, out_of_time: bool, took_us: u64) {
        let current = if sampled > 0 { expired as f64 / sampled as f64 } else { 0.0 };
        self.expired_stale_perc = current * 0.05 + self.expired_stale_perc * 0.95;
        self.expired_time_cap_reached_count += u64::from(out_of_time);
        self.expire_cycle_us += took_us;
    }

    /// Count an error reply under its code, as Redis does: the text up to its first
    /// space (looked for in the first 32 bytes), else ERR.
    pub fn count_error(&mut self, text: &str) {
        if self.errors_disabled {
            return;
        }
        let head = &text.as_bytes()[..text.len().min(32)];
        let code = match head.iter().position(|&b| b == b' ') {
            Some(sp) => &text[..sp],
            None => "ERR",
        };
        if let Some(n) = self.errors.get_mut(code) {
            *n += 1;
            return;
        }
        if self.errors.len() >= ERROR_CODES_MAX {
            let mut codes: Vec<&String> = self.errors.keys().collect();
            codes.sort();
            let list = codes.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
            crate::log::warn(
                "Errorstats stopped adding new errors because the number of errors reached the limit, may be \
                 misuse of lua error_reply, please check INFO ERRORSTATS, this can be re-enabled via CONFIG RESETSTAT.",
            );
            crate::log::warn(&format!("Current errors code list: {list}"));
            self.errors.clear();
            self.errors.insert("ERRORSTATS_DISABLED".into(), 1);
            self.errors_disabled = true;
            return;
        }
        self.errors.insert(code.to_string(), 1);
    }
}

/// Whose counters a call goes to: the command, or a container's subcommand
/// (`client|id`), as Redis counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatKey {
    pub name: &'static str,
    pub sub: Option<&'static str>,
}

impl StatKey {
    /// A command with no subcommand.
    pub fn command(name: &'static str) -> StatKey {
        StatKey { name, sub: None }
    }

    /// As INFO commandstats names it.
    pub fn full_name(&self) -> String {
        match self.sub {
            Some(s) => format!("{}|{}", self.name, s.to_ascii_lowercase()),
            None => self.name.to_string(),
        }
    }
}

/// Per-command counters, updated on every command: keyed by the addresses of the command's
/// static names (integers to hash, not the text). The same name at two addresses is merged
/// when listed.
#[derive(Debug, Default, Clone)]
pub struct CommandStats(HashMap<(usize, usize), (StatKey, CommandStat), foldhash::fast::FixedState>);

impl CommandStats {
    pub fn entry(&mut self, key: StatKey) -> CommandStatEntry<'_> {
        CommandStatEntry(self, key)
    }

    /// Every command's counters, by name.
    pub fn iter(&self) -> impl Iterator<Item = (String, CommandStat)> {
        let mut by_name = std::collections::BTreeMap::<String, CommandStat>::new();
        for (key, st) in self.0.values() {
            let t = by_name.entry(key.full_name()).or_default();
            t.calls += st.calls;
            t.usec += st.usec;
            t.rejected += st.rejected;
            t.failed += st.failed;
        }
        by_name.into_iter()
    }
}

/// A command's counters, created on first use (as a map entry).
pub struct CommandStatEntry<'a>(&'a mut CommandStats, StatKey);

impl<'a> CommandStatEntry<'a> {
    pub fn or_default(self) -> &'a mut CommandStat {
        let key = self.1;
        let at = (key.name.as_ptr() as usize, key.sub.map_or(0, |s| s.as_ptr() as usize));
        &mut self.0 .0.entry(at).or_insert((key, CommandStat::default())).1
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}
