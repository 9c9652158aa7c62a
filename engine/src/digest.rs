//! DEBUG DIGEST: Redis's SHA1-based digest of a whole dataset, so two servers (or a server
//! and this engine) can be compared with one call.
//!
//! The scheme (debug.c): per key, a 20-byte digest starts at zero and is "mixed" with the
//! key, the type (u32 big-endian), then the value: ordered parts (strings, list elements)
//! are mixed in (d = SHA1(d ^ SHA1(x))), unordered parts (set members; hash field/value
//! and zset member/score pairs, each digested on its own) are xored in (d ^= SHA1(x)),
//! and a TTL xors in SHA1("!!expire!!"). The dataset digest mixes each non-empty
//! database's number (u32 big-endian) and xors in SHA1 of every key's digest.

use crate::command::fmt_double;
use crate::keyspace::Keyspace;
use crate::value::Value;

pub type Digest = [u8; 20];

/// `d ^= SHA1(data)`.
pub fn xor_digest(d: &mut Digest, data: &[u8]) {
    let h = sha1(data);
    for (a, b) in d.iter_mut().zip(h) {
        *a ^= b;
    }
}

/// `d = SHA1(d ^ SHA1(data))`.
pub fn mix_digest(d: &mut Digest, data: &[u8]) {
    xor_digest(d, data);
    *d = sha1(d);
}

/// Redis's type numbers (OBJ_STRING ...).
fn type_code(v: &Value) -> u32 {
    match v {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::Zset(_) => 3,
        Value::Hash(_) => 4,
    }
}

/// One key's digest (xorObjectDigest after mixing the key).
pub fn key_digest(key: &[u8], v: &Value, has_ttl: bool) -> Digest {
    let mut d = [0u8; 20];
    mix_digest(&mut d, key);
    mix_digest(&mut d, &type_code(v).to_be_bytes());
    match v {
        Value::Str(s) => mix_digest(&mut d, &s.as_bytes()),
        Value::List(l) => {
            for e in l.iter() {
                mix_digest(&mut d, e);
            }
        }
        Value::Set(s) => {
            for m in s.members() {
                xor_digest(&mut d, &m);
            }
        }
        Value::Zset(z) => {
            for (m, score) in z.iter() {
                let mut e = [0u8; 20];
                mix_digest(&mut e, m);
                mix_digest(&mut e, fmt_double(score).as_bytes());
                xor_digest(&mut d, &e);
            }
        }
        Value::Hash(h) => {
            for (f, val) in h.iter() {
                let mut e = [0u8; 20];
                mix_digest(&mut e, f);
                mix_digest(&mut e, val);
                xor_digest(&mut d, &e);
            }
        }
    }
    if has_ttl {
        xor_digest(&mut d, b"!!expire!!");
    }
    d
}

/// The dataset digest (computeDatasetDigest); all zeros for an empty keyspace.
pub fn dataset_digest(ks: &Keyspace) -> Digest {
    let mut out = [0u8; 20];
    for (i, db) in ks.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        mix_digest(&mut out, &(i as u32).to_be_bytes());
        for s in db.slots() {
            let d = key_digest(&s.key, &s.value, s.expire_ms().is_some());
            xor_digest(&mut out, &d);
        }
    }
    out
}

/// The digest as DEBUG DIGEST prints it: 40 lowercase hex digits.
pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-1 (FIPS 180-4).
pub fn sha1(data: &[u8]) -> Digest {
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let bit_len = (data.len() as u64).wrapping_mul(8);
    let mut tail = Vec::with_capacity(128);
    let full = data.len() / 64 * 64;
    tail.extend_from_slice(&data[full..]);
    tail.push(0x80);
    while tail.len() % 64 != 56 {
        tail.push(0);
    }
    tail.extend_from_slice(&bit_len.to_be_bytes());
    for block in data[..full].chunks_exact(64).chain(tail.chunks_exact(64)) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_test_vectors() {
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(hex(&sha1(b"abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
        let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        assert_eq!(hex(&sha1(long)), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
        assert_eq!(hex(&sha1(&[b'a'; 1_000_000])), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    }

    #[test]
    fn empty_dataset_is_zero() {
        assert_eq!(hex(&dataset_digest(&Keyspace::new(16))), "0".repeat(40));
    }
}
