//! The replication stream: what a master sends its replicas after the snapshot of a full
//! resync. Redis feeds replicas the same commands it appends to the AOF (one propagation
//! unit at a time, MULTI/EXEC-wrapped), with its own SELECT state and no `#TS:` lines.

use super::feed::AofFeed;
use crate::command::Argv;

/// The bytes propagated since the server last took them, and the replication offset.
#[derive(Debug)]
pub struct ReplicationFeed {
    feed: AofFeed,
    pending: Vec<u8>,
    /// Bytes fed since the stream started (Redis's master_repl_offset).
    offset: u64,
}

impl ReplicationFeed {
    /// A stream whose first command is preceded by a SELECT.
    pub fn new() -> ReplicationFeed {
        ReplicationFeed { feed: AofFeed::new(false), pending: Vec::new(), offset: 0 }
    }

    /// A stream that goes on from `offset` (a replica's, fed on to its own replicas).
    pub fn starting_at(offset: u64) -> ReplicationFeed {
        ReplicationFeed { offset, ..ReplicationFeed::new() }
    }

    /// A replica joins after a snapshot: its first command must say its database.
    pub fn restart_select(&mut self) {
        self.feed.reset();
    }

    /// Append one propagation unit.
    pub fn unit(&mut self, ops: &[(usize, Argv)]) {
        let before = self.pending.len();
        self.feed.unit(&mut self.pending, ops, 0);
        self.offset += (self.pending.len() - before) as u64;
    }

    /// A PING, which says no database (Redis feeds it with no SELECT).
    pub fn ping(&mut self) {
        const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
        self.pending.extend_from_slice(PING);
        self.offset += PING.len() as u64;
    }

    /// REPLCONF GETACK *: asks every replica for its offset (WAIT).
    pub fn getack(&mut self) {
        const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
        self.pending.extend_from_slice(GETACK);
        self.offset += GETACK.len() as u64;
    }

    /// The bytes fed since the last call.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The database the stream last selected.
    pub fn selected(&self) -> Option<usize> {
        self.feed.selected()
    }
}

/// The database a master's stream has selected where the snapshot it sent at `rdb` ends
/// (its `repl-stream-db` field, read from the file's start); 0 without one.
pub fn snapshot_stream_db(rdb: &std::path::Path) -> usize {
    use std::io::Read;
    let mut head = Vec::new();
    let Ok(file) = std::fs::File::open(rdb) else { return 0 };
    if file.take(64 * 1024).read_to_end(&mut head).is_err() {
        return 0;
    }
    crate::format::rdb::repl_stream_db(&head)
}

impl Default for ReplicationFeed {
    fn default() -> Self {
        ReplicationFeed::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joining_replica_gets_a_select_first() {
        let mut r = ReplicationFeed::new();
        let set: Argv = vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()];
        r.unit(&[(0, set.clone())]);
        let first = r.take();
        assert!(first.starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"));
        r.unit(&[(0, set.clone())]);
        assert!(r.take().starts_with(b"*3\r\n$3\r\nSET"));
        r.restart_select();
        r.unit(&[(0, set)]);
        assert!(r.take().starts_with(b"*2\r\n$6\r\nSELECT"));
        assert_eq!(r.offset() as usize, 2 * first.len() + 27);
    }
}
