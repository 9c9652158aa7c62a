//! LATENCY LATEST | HISTORY | RESET | GRAPH | DOCTOR | HISTOGRAM | HELP over crate::latency.

use std::time::{Duration, Instant};

use ferrokv::command::flags;
use ferrokv::Reply;

use super::replies::{sub_arity, unknown_subcommand};
use super::Found;
use crate::client::Client;
use crate::server::Server;

const HELP: &[&str] = &[
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
];

pub fn latency(s: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    let sub = a[1].to_ascii_lowercase();
    let now = s.wall.unix_ms(std::time::Instant::now()) / 1000;
    match sub.as_slice() {
        b"history" if a.len() == 3 => s.latency.history(&a[2]),
        b"graph" if a.len() == 3 => match s.latency.graph(&a[2], now) {
            Some(g) => Reply::Verbatim(g.into_bytes()),
            None => Reply::error(format!("ERR No samples available for event '{}'", String::from_utf8_lossy(&a[2]))),
        },
        b"latest" if a.len() == 2 => s.latency.latest(),
        b"doctor" if a.len() == 2 => Reply::Verbatim(s.latency.doctor().into_bytes()),
        b"reset" if a.len() == 2 => Reply::Int(s.latency.reset(None)),
        b"reset" => Reply::Int(a[2..].iter().map(|e| s.latency.reset(Some(e))).sum()),
        b"histogram" if a.len() == 2 => Reply::Map(
            s.histograms.all().iter().map(|(n, h)| (Reply::Bulk(n.as_bytes().to_vec()), h.reply())).collect(),
        ),
        b"histogram" => {
            // Names the server knows, as Redis looks them up (`client|id` or `client`).
            let names: Vec<String> = a[2..]
                .iter()
                .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase())
                .filter(|n| {
                    let (cmd, sub) = n.split_once('|').map_or((n.as_str(), None), |(c, s)| (c, Some(s)));
                    super::lookup(cmd.as_bytes())
                        .is_some_and(|f| sub.is_none_or(|s| f.subs.iter().any(|x| x.def.name.eq_ignore_ascii_case(s))))
                })
                .collect();
            s.histograms.of(&names)
        }
        b"help" if a.len() == 2 => Reply::help("LATENCY", HELP, crate::version::version()),
        b"history" | b"graph" | b"latest" | b"doctor" | b"help" => sub_arity("latency", &a[1]),
        _ => unknown_subcommand(&a[1], "latency"),
    }
}

impl Server {
    /// A command took `took`: the `command` / `fast-command` event over the threshold, and
    /// its histogram (under the subcommand's full name).
    pub(crate) fn note_latency(&mut self, found: Found, argv: &[Vec<u8>], took: Duration) {
        let ms = took.as_millis() as u64;
        if self.latency.threshold_ms > 0 && ms as i64 >= self.latency.threshold_ms {
            let event = if found.flags_for(argv) & flags::FAST != 0 { "fast-command" } else { "command" };
            let now = self.wall.unix_ms(Instant::now()) / 1000;
            self.latency.add(event, ms, now);
        }
        if self.histograms.enabled {
            let nanos = took.as_nanos() as u64;
            let sub = found.sub(argv).map(|s| s.def.name.as_str());
            self.histograms.record(found.name, sub, nanos);
        }
    }
}
