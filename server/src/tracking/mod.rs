//! Client-side caching (CLIENT TRACKING), as Redis's tracking.c: the keys each tracking
//! client read (the default mode), the prefixes clients in BCAST mode follow and the keys
//! written under them since the last round of the event loop. The messages themselves are
//! written by `send` (the clients are the server's).

use std::collections::{BTreeMap, BTreeSet};

use indexmap::IndexMap;

mod send;

/// A client's tracking mode (CLIENT TRACKING ON and its options).
#[derive(Debug, Clone, Default)]
pub struct ClientTracking {
    /// The client the invalidations go to (0: this one).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING was given for the next command (or transaction).
    pub caching: bool,
    /// The redirect client went away.
    pub broken_redirect: bool,
    /// BCAST prefixes ("" when none was given).
    pub prefixes: BTreeSet<Vec<u8>>,
}

impl ClientTracking {
    /// Whether the keys the next read command fetches are remembered (OPTIN: only after
    /// CACHING yes; OPTOUT: unless CACHING no).
    fn remembers(&self) -> bool {
        let skipped = (self.optin && !self.caching) || (self.optout && self.caching);
        !self.bcast && !skipped
    }
}

/// One BCAST prefix: its clients, and the keys written under it since the last broadcast
/// with the client that wrote each last (0: the server), for NOLOOP.
#[derive(Debug, Default)]
struct Prefix {
    clients: BTreeSet<u64>,
    keys: BTreeMap<Vec<u8>, u64>,
}

/// What an invalidation carries: one key, or a protocol fragment made already (the keys
/// of a broadcast, the null of a flush).
pub enum Payload<'a> {
    Key(&'a [u8]),
    Proto(&'a [u8]),
}

#[derive(Debug, Default)]
pub struct Tracking {
    /// Key name (every database) → the clients that read it; indexed, so the table's limit
    /// picks a random key in O(1).
    keys: IndexMap<Vec<u8>, BTreeSet<u64>>,
    /// tracking-table-max-keys (0: no limit), followed from the configuration.
    pub max_keys: usize,
    /// Client ids over every key: INFO's tracking_total_items.
    items: u64,
    prefixes: BTreeMap<Vec<u8>, Prefix>,
    /// Clients with tracking on: INFO's tracking_clients.
    clients: usize,
    /// Invalidations for a running client (by id), written after its reply: a key, or
    /// None for a flush.
    pending: Vec<(u64, Option<Vec<u8>>)>,
    /// Rounds the table stayed over tracking-table-max-keys (more effort each).
    over_limit_rounds: u32,
    /// The keys a running script declared, when its caller tracks: what a read command
    /// of the script remembers (Redis remembers the caller's command's keys).
    script_keys: Option<Vec<Vec<u8>>>,
}

/// The reasons CLIENT TRACKING ON refuses its options, with Redis's texts.
pub fn check_on(current: Option<&ClientTracking>, new: &ClientTracking, prefixes: &[Vec<u8>]) -> Result<(), String> {
    if !new.bcast && !prefixes.is_empty() {
        return Err("ERR PREFIX option requires BCAST mode to be enabled".into());
    }
    if let Some(cur) = current {
        if cur.bcast != new.bcast {
            return Err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and \
                        then re-enabling it with a different mode."
                .into());
        }
    }
    if new.bcast && (new.optin || new.optout) {
        return Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
    }
    if new.optin && new.optout {
        return Err("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
    }
    if let Some(cur) = current {
        if (new.optin && cur.optout) || (new.optout && cur.optin) {
            return Err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and \
                        then re-enabling it with a different mode."
                .into());
        }
    }
    if new.bcast {
        let overlaps = |a: &[u8], b: &[u8]| a[..a.len().min(b.len())] == b[..a.len().min(b.len())];
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(old) = current.and_then(|c| c.prefixes.iter().find(|old| overlaps(old, p))) {
                return Err(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not \
                     overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(old)
                ));
            }
            if let Some(other) = prefixes[i + 1..].iter().find(|q| overlaps(p, q)) {
                return Err(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must \
                     not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(other)
                ));
            }
        }
    }
    Ok(())
}

impl Tracking {
    /// CLIENT TRACKING ON for client `id` (options checked): the new mode, which keeps the
    /// prefixes it follows already.
    pub fn enable(
        &mut self,
        id: u64,
        current: Option<ClientTracking>,
        mut new: ClientTracking,
        prefixes: Vec<Vec<u8>>,
    ) -> ClientTracking {
        if current.is_none() {
            self.clients += 1;
        }
        new.prefixes = current.map(|c| c.prefixes).unwrap_or_default();
        if new.bcast {
            let wanted = if prefixes.is_empty() { vec![Vec::new()] } else { prefixes };
            for p in wanted {
                self.prefixes.entry(p.clone()).or_default().clients.insert(id);
                new.prefixes.insert(p);
            }
        }
        new
    }

    /// CLIENT TRACKING OFF (or the client went away).
    pub fn disable(&mut self, id: u64, t: &ClientTracking) {
        for p in &t.prefixes {
            if let Some(state) = self.prefixes.get_mut(p) {
                state.clients.remove(&id);
                if state.clients.is_empty() {
                    self.prefixes.remove(p);
                }
            }
        }
        self.clients = self.clients.saturating_sub(1);
    }

    pub fn is_active(&self) -> bool {
        self.clients > 0
    }

    /// Whether written keys matter: clients track, or keys read before are remembered.
    pub fn wants_writes(&self) -> bool {
        self.clients > 0 || !self.keys.is_empty()
    }

    /// Remember that client `id` read `keys` (after a read-only command).
    pub fn remember(&mut self, id: u64, t: &ClientTracking, keys: impl IntoIterator<Item = Vec<u8>>) {
        if !t.remembers() {
            return;
        }
        for k in keys {
            if self.keys.entry(k).or_default().insert(id) {
                self.items += 1;
            }
        }
    }

    /// A script starts (its declared keys) or ends.
    pub fn script_started(&mut self, caller_tracks: bool, keys: &[Vec<u8>]) {
        self.script_keys = caller_tracks.then(|| keys.to_vec());
    }

    pub fn script_ended(&mut self) {
        self.script_keys = None;
    }

    /// `key` was written by `writer` (0: the server): note it for the BCAST prefixes it
    /// falls under, and take the clients that read it (the key is forgotten).
    fn written(&mut self, key: &[u8], writer: u64, bcast: bool) -> Option<BTreeSet<u64>> {
        if bcast {
            for (p, state) in self.prefixes.iter_mut() {
                if key.starts_with(p) {
                    state.keys.insert(key.to_vec(), writer);
                }
            }
        }
        let readers = self.keys.swap_remove(key)?;
        self.items -= readers.len() as u64;
        Some(readers)
    }

    /// After FLUSHALL / FLUSHDB: nothing is remembered any more.
    fn forget_all(&mut self) {
        self.keys.clear();
        self.items = 0;
    }

    /// Whether invalidations wait for a running client's reply.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The client is gone or stopped tracking: what waited for it goes.
    pub fn drop_pending(&mut self, id: u64) {
        self.pending.retain(|(who, _)| *who != id);
    }

    /// INFO's tracking_total_keys, tracking_total_items, tracking_total_prefixes.
    pub fn totals(&self) -> (usize, u64, usize) {
        (self.keys.len(), self.items, self.prefixes.len())
    }

    pub fn clients(&self) -> usize {
        self.clients
    }
}

/// The RESP array of a broadcast's keys, leaving out those `skip` wrote last (NOLOOP);
/// None when nothing is left.
fn broadcast_proto(keys: &BTreeMap<Vec<u8>, u64>, skip: Option<u64>) -> Option<Vec<u8>> {
    let kept: Vec<&Vec<u8>> = keys.iter().filter(|(_, w)| skip.is_none_or(|s| **w != s)).map(|(k, _)| k).collect();
    if kept.is_empty() && skip.is_some() {
        return None;
    }
    let mut out = format!("*{}\r\n", kept.len()).into_bytes();
    for k in kept {
        out.extend_from_slice(format!("${}\r\n", k.len()).as_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(b"\r\n");
    }
    Some(out)
}
