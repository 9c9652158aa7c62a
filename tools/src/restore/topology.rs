//! Where keys go: the target's URL, whether it is a cluster, which master owns each slot
//! (CLUSTER SLOTS, which every version since 3.0 answers), and each master's version
//! (INFO server), which decides the DUMP payloads it is sent.

use ferrokv::command::catalog::ServerVersion;
use ferrokv::format::crc::CLUSTER_SLOTS;

use super::link::{call, connect, Reply};
use crate::net::Access;

/// `host:port`, with brackets around an IPv6 host.
fn join_addr(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The target as discovered.
#[derive(Debug, Clone)]
pub struct Topology {
    pub cluster: bool,
    /// Masters' addresses (a standalone target: the one server).
    pub masters: Vec<String>,
    /// The index in `masters` of each slot's owner (cluster), `None` where no one serves it.
    owner: Vec<Option<usize>>,
    /// The oldest version among the masters.
    pub version: ServerVersion,
    /// Each master's `redis_version` (or `valkey_version`) as it said it.
    pub versions: Vec<String>,
}

impl Topology {
    /// Ask `seeds` (in order, until one answers).
    pub fn discover(seeds: &[String], access: &Access) -> Result<Topology, String> {
        let mut errors = Vec::new();
        for seed in seeds {
            match Self::ask(seed, access) {
                Ok(t) => return Ok(t),
                Err(e) => errors.push(format!("{seed}: {e}")),
            }
        }
        Err(errors.join("; "))
    }

    fn ask(seed: &str, access: &Access) -> Result<Topology, String> {
        let mut r = connect(seed, access).map_err(|e| e.to_string())?;
        let (cluster, version, said) = hello(&mut r)?;
        if !cluster {
            return Ok(Topology {
                cluster: false,
                masters: vec![seed.to_string()],
                owner: Vec::new(),
                version,
                versions: vec![said],
            });
        }
        let host = seed.rsplit_once(':').map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']')).unwrap_or(seed);
        let slots = call(&mut r, &[b"CLUSTER", b"SLOTS"]).map_err(|e| e.to_string())?;
        let Reply::Array(Some(ranges)) = slots else {
            return Err(format!("CLUSTER SLOTS answered '{}'", slots.text()));
        };
        let mut masters: Vec<String> = Vec::new();
        let mut owner = vec![None; CLUSTER_SLOTS as usize];
        for range in ranges {
            let Reply::Array(Some(items)) = range else { return Err("CLUSTER SLOTS: a range is not an array".into()) };
            let (Some(Reply::Int(first)), Some(Reply::Int(last)), Some(Reply::Array(Some(node)))) =
                (items.first(), items.get(1), items.get(2))
            else {
                return Err("CLUSTER SLOTS: a range without its master".into());
            };
            let ip = match node.first() {
                Some(Reply::Bulk(Some(b))) if !b.is_empty() && b.as_slice() != b"?" => {
                    String::from_utf8_lossy(b).into_owned()
                }
                // An empty or unknown endpoint: the address this reply came from.
                _ => host.to_string(),
            };
            let Some(Reply::Int(port)) = node.get(1) else {
                return Err("CLUSTER SLOTS: a master without a port".into());
            };
            let addr = join_addr(&ip, *port);
            let i = match masters.iter().position(|m| *m == addr) {
                Some(i) => i,
                None => {
                    masters.push(addr);
                    masters.len() - 1
                }
            };
            if *first < 0 || *last >= CLUSTER_SLOTS as i64 || first > last {
                return Err(format!("CLUSTER SLOTS: range {first}-{last}"));
            }
            for s in *first..=*last {
                owner[s as usize] = Some(i);
            }
        }
        if masters.is_empty() {
            return Err("the cluster serves no slot".into());
        }
        let mut version = None;
        let mut versions = Vec::new();
        for m in &masters {
            let mut c = connect(m, access).map_err(|e| format!("master {m}: {e}"))?;
            let (_, v, said) = hello(&mut c).map_err(|e| format!("master {m}: {e}"))?;
            version = Some(version.map_or(v, |o: ServerVersion| if rank(v) < rank(o) { v } else { o }));
            versions.push(said);
        }
        let version = version.ok_or("no master answered INFO")?;
        Ok(Topology { cluster: true, masters, owner, version, versions })
    }

    /// The address of the master serving `slot` (of the one server when standalone).
    pub fn node_of(&self, slot: u16) -> Option<&str> {
        if !self.cluster {
            return self.masters.first().map(String::as_str);
        }
        self.owner.get(slot as usize).copied().flatten().map(|i| self.masters[i].as_str())
    }

    /// Each master with the slot ranges it serves, in slot order of their first ranges.
    pub fn layout(&self) -> Vec<(String, Vec<(u16, u16)>)> {
        let mut out: Vec<(String, Vec<(u16, u16)>)> = Vec::new();
        let mut start = 0usize;
        while start < self.owner.len() {
            let owner = self.owner[start];
            let mut end = start;
            while end + 1 < self.owner.len() && self.owner[end + 1] == owner {
                end += 1;
            }
            if let Some(i) = owner {
                let addr = &self.masters[i];
                let range = (start as u16, end as u16);
                match out.iter_mut().find(|(a, _)| a == addr) {
                    Some((_, ranges)) => ranges.push(range),
                    None => out.push((addr.clone(), vec![range])),
                }
            }
            start = end + 1;
        }
        out
    }

    /// A MOVED reply: `slot` is now served by `addr`.
    pub fn moved(&mut self, slot: u16, addr: &str) {
        let i = match self.masters.iter().position(|m| m == addr) {
            Some(i) => i,
            None => {
                self.masters.push(addr.to_string());
                self.masters.len() - 1
            }
        };
        if let Some(o) = self.owner.get_mut(slot as usize) {
            *o = Some(i);
        }
    }
}

/// Whether the server is a cluster node, and its version: from HELLO (which any user may
/// send, where INFO is a dangerous command an ACL may refuse), else from INFO.
fn hello(r: &mut std::io::BufReader<crate::net::Conn>) -> Result<(bool, ServerVersion, String), String> {
    let reply = call(r, &[b"HELLO", b"2"]).map_err(|e| e.to_string())?;
    if let Reply::Array(Some(items)) = &reply {
        let field =
            |name: &str| items.chunks(2).find(|kv| kv[0].text() == name).and_then(|kv| kv.get(1)).map(Reply::text);
        let server = field("server").unwrap_or_default();
        let version = field("version").unwrap_or_default();
        let said = if server == "valkey" { format!("valkey-{version}") } else { version };
        let v = parse_version(&said)?;
        return Ok((field("mode").as_deref() == Some("cluster"), v, said));
    }
    let info = call(r, &[b"INFO"]).map_err(|e| e.to_string())?;
    if let Reply::Error(e) = info {
        return Err(format!("HELLO: {}; INFO: {e}", reply.text()));
    }
    let info = info.text();
    let (v, said) = version_of(&info)?;
    Ok((info_field(&info, "cluster_enabled") == Some("1"), v, said))
}

fn parse_version(said: &str) -> Result<ServerVersion, String> {
    ServerVersion::parse(said).ok_or_else(|| {
        format!("the target says it is {said}; restore writes to Redis 6.2 and later, Valkey 7.2 and later")
    })
}

/// Older versions first.
fn rank(v: ServerVersion) -> u8 {
    match v {
        ServerVersion::Redis62 => 0,
        ServerVersion::Redis70 => 1,
        ServerVersion::Redis72 | ServerVersion::Valkey72 | ServerVersion::Valkey80 => 2,
        ServerVersion::Redis74 => 3,
    }
}

fn info_field<'i>(info: &'i str, name: &str) -> Option<&'i str> {
    info.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':'))).map(str::trim)
}

/// A server's version from its INFO: Valkey says `valkey_version`, Redis `redis_version`.
fn version_of(info: &str) -> Result<(ServerVersion, String), String> {
    let said = match info_field(info, "valkey_version") {
        Some(v) => format!("valkey-{v}"),
        None => info_field(info, "redis_version").ok_or("INFO has no redis_version")?.to_string(),
    };
    Ok((parse_version(&said)?, said))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_info() {
        assert_eq!(version_of("redis_version:7.0.15\r\n").unwrap().0, ServerVersion::Redis70);
        assert_eq!(
            version_of("redis_version:7.2.4\r\nvalkey_version:8.0.1\r\n").unwrap(),
            (ServerVersion::Valkey80, "valkey-8.0.1".to_string())
        );
        assert!(version_of("redis_version:5.0.7\r\n").is_err());
    }
}
