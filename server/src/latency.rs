//! Latency, as Redis measures it: the latency monitor (events over
//! `latency-monitor-threshold`, 160 samples of one per second each, for LATENCY LATEST /
//! HISTORY / RESET / GRAPH / DOCTOR) and the per-command latency histograms
//! (`latency-tracking`, LATENCY HISTOGRAM and INFO latencystats).

use std::collections::{BTreeMap, HashMap, VecDeque};

use ferrokv::Reply;

/// Samples kept per event (Redis's LATENCY_TS_LEN).
const SAMPLES: usize = 160;

#[derive(Debug, Default)]
struct Series {
    /// (unix seconds, milliseconds), oldest first; one per second at most.
    samples: VecDeque<(i64, u64)>,
    max: u64,
}

/// The latency monitor's events.
#[derive(Debug, Default)]
pub struct Monitor {
    events: BTreeMap<String, Series>,
    /// latency-monitor-threshold (ms; 0: off), followed from the configuration.
    pub threshold_ms: i64,
}

impl Monitor {
    /// A sample of `ms` for `event` when it reaches the threshold.
    pub fn note(&mut self, event: &str, ms: u64, now_secs: i64) {
        if self.threshold_ms > 0 && ms as i64 >= self.threshold_ms {
            self.add(event, ms, now_secs);
        }
    }

    /// Redis's latencyAddSample: a second's worst latency is its sample.
    pub fn add(&mut self, event: &str, ms: u64, now_secs: i64) {
        let s = self.events.entry(event.to_string()).or_default();
        s.max = s.max.max(ms);
        if let Some(last) = s.samples.back_mut().filter(|(t, _)| *t == now_secs) {
            last.1 = last.1.max(ms);
            return;
        }
        if s.samples.len() == SAMPLES {
            s.samples.pop_front();
        }
        s.samples.push_back((now_secs, ms));
    }

    /// LATENCY RESET: the events reset (all with None).
    pub fn reset(&mut self, event: Option<&[u8]>) -> i64 {
        match event {
            None => {
                let n = self.events.len();
                self.events.clear();
                n as i64
            }
            Some(e) => {
                let name = String::from_utf8_lossy(e);
                i64::from(self.events.remove(name.as_ref()).is_some())
            }
        }
    }

    /// LATENCY LATEST: each event's name, latest sample's time and latency, and maximum.
    pub fn latest(&self) -> Reply {
        Reply::Array(
            self.events
                .iter()
                .filter_map(|(name, s)| {
                    let (t, ms) = *s.samples.back()?;
                    Some(Reply::Array(vec![
                        Reply::Bulk(name.as_bytes().to_vec()),
                        Reply::Int(t),
                        Reply::Int(ms as i64),
                        Reply::Int(s.max as i64),
                    ]))
                })
                .collect(),
        )
    }

    /// LATENCY HISTORY event: its samples, oldest first.
    pub fn history(&self, event: &[u8]) -> Reply {
        let Some(s) = self.events.get(String::from_utf8_lossy(event).as_ref()) else {
            return Reply::Array(Vec::new());
        };
        Reply::Array(
            s.samples.iter().map(|(t, ms)| Reply::Array(vec![Reply::Int(*t), Reply::Int(*ms as i64)])).collect(),
        )
    }

    /// LATENCY GRAPH event: the samples as a column chart, taller for slower, with how
    /// long ago each was taken under it. None when the event has no samples.
    pub fn graph(&self, event: &[u8], now_secs: i64) -> Option<String> {
        let name = String::from_utf8_lossy(event);
        let s = self.events.get(name.as_ref())?;
        let lo = s.samples.iter().map(|x| x.1).min().unwrap_or(0);
        let hi = s.samples.iter().map(|x| x.1).max().unwrap_or(0);
        let mut out = format!("{name} - high {hi} ms, low {lo} ms (all time high {} ms)\n{}\n", s.max, "-".repeat(80));
        const ROWS: u64 = 4;
        for row in (1..=ROWS).rev() {
            let line: String = s
                .samples
                .iter()
                .map(|(_, ms)| {
                    let level = if hi == lo { ROWS } else { 1 + (ms - lo) * (ROWS - 1) / (hi - lo) };
                    if level >= row {
                        '#'
                    } else {
                        ' '
                    }
                })
                .collect();
            out.push_str(line.trim_end());
            out.push('\n');
        }
        // How long ago, in the largest unit that fits, written downwards.
        let ages: Vec<String> = s.samples.iter().map(|(t, _)| age(now_secs - t)).collect();
        let depth = ages.iter().map(String::len).max().unwrap_or(0);
        for i in 0..depth {
            let line: String = ages.iter().map(|a| a.as_bytes().get(i).map_or(' ', |b| *b as char)).collect();
            out.push_str(line.trim_end());
            out.push('\n');
        }
        Some(out)
    }

    /// LATENCY DOCTOR: a short report in plain words on what the monitor recorded.
    pub fn doctor(&self) -> String {
        let threshold_ms = self.threshold_ms;
        if self.events.is_empty() {
            return if threshold_ms > 0 {
                format!(
                    "No latency event reached the threshold of {threshold_ms} ms since the monitor started or \
                     was last reset.\n"
                )
            } else {
                "The latency monitor is off (latency-monitor-threshold is 0): no event is recorded. Turn it on \
                 with CONFIG SET latency-monitor-threshold <milliseconds>.\n"
                    .into()
            };
        }
        let mut out = String::from("Latency events recorded (worst first):\n\n");
        let mut by_max: Vec<(&String, &Series)> = self.events.iter().collect();
        by_max.sort_by_key(|b| std::cmp::Reverse(b.1.max));
        for (i, (name, s)) in by_max.iter().enumerate() {
            let n = s.samples.len() as u64;
            let avg = s.samples.iter().map(|x| x.1).sum::<u64>().checked_div(n).unwrap_or(0);
            out.push_str(&format!(
                "{}. {name}: {n} samples over the threshold, average {avg} ms, worst {} ms.\n",
                i + 1,
                s.max
            ));
            if let Some(hint) = hint(name) {
                out.push_str(&format!("   {hint}\n"));
            }
        }
        out
    }
}

/// What an operator can look at for an event.
fn hint(event: &str) -> Option<&'static str> {
    Some(match event {
        "command" => "Slow commands: SLOWLOG GET shows which; O(N) commands on big values are the usual cause.",
        "fast-command" => "O(1) commands were slow: the machine itself may be overloaded or swapping.",
        "expire-cycle" => "Many keys expiring at once: spread the TTLs, or lower active-expire-effort.",
        "eviction-cycle" | "eviction-del" => "Evicting big values is slow: consider lazyfree-lazy-eviction.",
        e if e.starts_with("aof-") => "The disk is slow for the AOF: see appendfsync and the disk's load.",
        _ => return None,
    })
}

fn age(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// One command's latencies in powers of two of nanoseconds from 1024 up: bucket `k`
/// counts the calls that took at most 1024·2^k ns.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: [u64; 48],
    calls: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram { buckets: [0; 48], calls: 0 }
    }
}

impl Histogram {
    pub fn record(&mut self, nanos: u64) {
        let k = (nanos.max(1).div_ceil(1024)).next_power_of_two().trailing_zeros() as usize;
        self.buckets[k.min(self.buckets.len() - 1)] += 1;
        self.calls += 1;
    }

    /// The upper bound of bucket `k` in microseconds, as Redis prints it.
    fn bound_usec(k: usize) -> u64 {
        (1024u64 << k) / 1000
    }

    /// LATENCY HISTOGRAM's entry: `calls`, and the cumulative count at each bucket bound
    /// where it grows.
    pub fn reply(&self) -> Reply {
        let mut cdf = Vec::new();
        let mut cumulative = 0;
        for (k, n) in self.buckets.iter().enumerate() {
            if *n > 0 {
                cumulative += n;
                cdf.push((Reply::Int(Self::bound_usec(k) as i64), Reply::Int(cumulative as i64)));
            }
        }
        Reply::Map(vec![
            (Reply::Bulk(b"calls".to_vec()), Reply::Int(self.calls as i64)),
            (Reply::Bulk(b"histogram_usec".to_vec()), Reply::Map(cdf)),
        ])
    }

    /// The latency (µs) under which `pct` percent of the calls fall.
    pub fn percentile(&self, pct: f64) -> f64 {
        let wanted = ((pct / 100.0) * self.calls as f64).ceil().max(1.0) as u64;
        let mut cumulative = 0;
        for (k, n) in self.buckets.iter().enumerate() {
            cumulative += n;
            if cumulative >= wanted {
                return (1024u64 << k) as f64 / 1000.0;
            }
        }
        0.0
    }
}

/// Histograms by command, keyed by the addresses of its static name and subcommand name (no
/// text built per command); listed by the full name (`client|id` for a subcommand).
#[derive(Debug, Default)]
pub struct Histograms {
    by_command: HashMap<(usize, usize), (String, Histogram), foldhash::fast::FixedState>,
    /// latency-tracking, followed from the configuration.
    pub enabled: bool,
}

impl Histograms {
    pub fn record(&mut self, name: &'static str, sub: Option<&'static str>, nanos: u64) {
        let key = (name.as_ptr() as usize, sub.map_or(0, |s| s.as_ptr() as usize));
        let entry = self.by_command.entry(key).or_insert_with(|| {
            let full = match sub {
                Some(s) => format!("{name}|{}", s.to_ascii_lowercase()),
                None => name.to_string(),
            };
            (full, Histogram::default())
        });
        entry.1.record(nanos);
    }

    pub fn clear(&mut self) {
        self.by_command.clear();
    }

    /// Every command's histogram by full name (one name at two addresses merged).
    pub fn all(&self) -> BTreeMap<String, Histogram> {
        let mut out: BTreeMap<String, Histogram> = BTreeMap::new();
        for (name, h) in self.by_command.values() {
            let t = out.entry(name.clone()).or_default();
            for (a, b) in t.buckets.iter_mut().zip(h.buckets.iter()) {
                *a += b;
            }
            t.calls += h.calls;
        }
        out
    }

    /// LATENCY HISTOGRAM cmd...: the named commands' (a container's: its subcommands').
    pub fn of(&self, names: &[String]) -> Reply {
        let all = self.all();
        let mut out = Vec::new();
        for name in names {
            for (full, h) in &all {
                let hit = full == name || full.strip_prefix(name.as_str()).is_some_and(|r| r.starts_with('|'));
                if hit {
                    out.push((Reply::Bulk(full.as_bytes().to_vec()), h.reply()));
                }
            }
        }
        Reply::Map(out)
    }
}
