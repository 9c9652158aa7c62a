//! Redis's DEBUG DIGEST: a SHA-1 based digest of a dataset that ignores the order of keys,
//! set members, hash fields and zset members, but not of list elements or stream entries.
//!
//! Per key, starting from 20 zero bytes: mix the key, mix the type code (big-endian u32),
//! then the value (strings and list elements mixed in order; set members xored; each hash
//! field and each zset member digested on its own and xored in; stream entry IDs as
//! `ms.seq`, fields and values mixed in order), then xor `!!expire!!` when the key has a
//! TTL. Per database that has keys, the database number is mixed into the result before
//! the SHA-1 of each key digest is xored in. "mix" is `d = sha1(d xor sha1(data))`, "xor" is
//! `d ^= sha1(data)`.

use crate::command::catalog::ServerVersion;
use crate::format::double::Doubles;
use crate::format::logical::Logical;
use crate::keyspace::Keyspace;

pub type Digest = [u8; 20];

fn sha1(data: &[u8]) -> Digest {
    sha1_smol::Sha1::from(data).digest().bytes()
}

fn xor_in(d: &mut Digest, data: &[u8]) {
    for (a, b) in d.iter_mut().zip(sha1(data)) {
        *a ^= b;
    }
}

fn mix_in(d: &mut Digest, data: &[u8]) {
    xor_in(d, data);
    *d = sha1(d);
}

/// Redis's type codes, as the digest mixes them.
fn type_code(v: &Logical) -> u32 {
    match v {
        Logical::String(_) => 0,
        Logical::List(_) => 1,
        Logical::Set(_) => 2,
        Logical::Zset(_) => 3,
        Logical::Hash(_) => 4,
        Logical::Module(_) => 5,
        Logical::Stream(_) => 6,
    }
}

/// The digest of one key with its value.
pub fn key_digest(key: &[u8], v: &Logical, has_expire: bool, doubles: Doubles) -> Digest {
    let mut d = [0u8; 20];
    mix_in(&mut d, key);
    object_digest(&mut d, v, has_expire, doubles);
    d
}

/// DEBUG DIGEST-VALUE: the value's digest alone.
pub fn value_digest(v: &Logical, has_expire: bool, doubles: Doubles) -> Digest {
    let mut d = [0u8; 20];
    object_digest(&mut d, v, has_expire, doubles);
    d
}

/// Mix a value (and its TTL flag) into `d`.
fn object_digest(d: &mut Digest, v: &Logical, has_expire: bool, doubles: Doubles) {
    let d = &mut *d;
    mix_in(d, &type_code(v).to_be_bytes());
    match v {
        Logical::String(s) => mix_in(d, s),
        Logical::List(items) => items.iter().for_each(|e| mix_in(d, e)),
        Logical::Set(members) => members.iter().for_each(|m| xor_in(d, m)),
        Logical::Zset(items) => {
            for (m, score) in items {
                let mut e = [0u8; 20];
                mix_in(&mut e, m);
                mix_in(&mut e, doubles.digest(*score).as_bytes());
                xor_in(d, &e);
            }
        }
        Logical::Hash(fields) => {
            for f in fields {
                let mut e = [0u8; 20];
                mix_in(&mut e, &f.field);
                mix_in(&mut e, &f.value);
                // Redis 7.4: that a field has a TTL counts, not when.
                if f.expire_ms.is_some() {
                    xor_in(&mut e, b"!!hexpire!!");
                }
                xor_in(d, &e);
            }
        }
        Logical::Stream(s) => {
            for (id, fields) in &s.entries {
                mix_in(d, format!("{}.{}", id.ms, id.seq).as_bytes());
                for (f, v) in fields {
                    mix_in(d, f);
                    mix_in(d, v);
                }
            }
        }
        // Redis asks the module; a module value's digest is the module's own business.
        Logical::Module(m) => mix_in(d, &m.payload),
    }
    if has_expire {
        xor_in(d, b"!!expire!!");
    }
}

/// Builds a dataset digest from keys given database by database (in any key order, but
/// all keys of one database together, as an RDB file has them).
#[derive(Debug, Default, Clone)]
pub struct DatasetDigest {
    acc: Digest,
    db: Option<u64>,
    doubles: Doubles,
}

impl DatasetDigest {
    /// A digest as `version`'s DEBUG DIGEST computes it (the default is Redis 7.0's).
    pub fn of(version: ServerVersion) -> DatasetDigest {
        DatasetDigest { doubles: version.doubles(), ..DatasetDigest::default() }
    }

    pub fn add(&mut self, db: u64, key: &[u8], v: &Logical, has_expire: bool) {
        if self.db != Some(db) {
            mix_in(&mut self.acc, &(db as u32).to_be_bytes());
            self.db = Some(db);
        }
        xor_in(&mut self.acc, &key_digest(key, v, has_expire, self.doubles));
    }

    pub fn finish(&self) -> Digest {
        self.acc
    }

    /// 40 lower-case hex digits, as DEBUG DIGEST replies.
    pub fn hex(&self) -> String {
        hex(&self.acc)
    }
}

pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// DEBUG DIGEST of a whole keyspace, as `version` computes it.
pub fn dataset_digest(ks: &Keyspace, version: ServerVersion) -> Digest {
    let mut dd = DatasetDigest::of(version);
    for (i, db) in ks.dbs.iter().enumerate() {
        for (s, expire) in db.iter() {
            dd.add(i as u64, &s.key, &s.value.to_logical(), expire.is_some());
        }
    }
    dd.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_dataset_is_all_zeros() {
        assert_eq!(hex(&dataset_digest(&Keyspace::new(16), ServerVersion::Redis70)), "0".repeat(40));
    }
}
