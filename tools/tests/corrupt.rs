//! Bad input: truncations, flipped bytes inside compact encodings, a wrong checksum.
//! Every case must fail with an error naming the offset, and never panic.

mod common;

use common::fixtures_dir;
use ferrokv::format::crc::crc64;
use ferrokv::format::rdb::{RStr, RdbReader, Record, ValueType};
use ferrokv_tools::verify::{walk, Depth};

fn all_types() -> Vec<u8> {
    std::fs::read(fixtures_dir().join("rdb/redis-7.0/all-types.rdb")).expect("fixture")
}

/// Byte range of the first blob-encoded value of type `t`.
fn blob_range(data: &[u8], t: ValueType) -> (usize, usize) {
    for rec in RdbReader::new(data).expect("header") {
        if let Record::Key(k) = rec.expect("valid fixture") {
            if k.value.vtype == t {
                if let RStr::Raw(i) = k.value.string().expect("blob string") {
                    return (i.offset(), i.offset() + i.len());
                }
            }
        }
    }
    panic!("no uncompressed {t:?} in the fixture");
}

fn must_fail(data: &[u8], what: &str) -> ferrokv::format::rdb::RdbError {
    match walk(data, Depth::Deep, 0) {
        Ok(_) => panic!("{what}: accepted"),
        Err((_, e)) => {
            assert!(e.to_string().starts_with(&format!("offset {}", e.offset)), "{what}: {e}");
            e
        }
    }
}

#[test]
fn truncation_at_20_offsets_is_reported_with_the_offset() {
    let data = all_types();
    // A fixed LCG: the same 20 offsets every run, spread over the file.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..20 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let cut = 9 + (x >> 33) as usize % (data.len() - 9);
        let e = must_fail(&data[..cut], &format!("cut at {cut}"));
        assert!(e.offset <= cut, "cut at {cut}: error offset {} past the end", e.offset);
    }
}

fn flip_each_byte(t: ValueType, head: usize) {
    let data = all_types();
    let (start, end) = blob_range(&data, t);
    for pos in start..end {
        let mut bad = data.clone();
        bad[pos] ^= 0xFF;
        let e = must_fail(&bad, &format!("{t:?} byte {pos}"));
        // The bytes Redis's loader checks (a listpack's total size, an intset's encoding and
        // length) are caught where they are; damage past them only by the checksum, as
        // the loader lets it through (a warning when the checksum is zero or recomputed).
        if pos < start + head {
            assert!(
                (start..end).contains(&e.offset) || e.what.contains("LZF"),
                "{t:?} header byte {pos} reported at {}: {e}",
                e.offset
            );
        }
    }
}

#[test]
fn flipped_bytes_inside_a_listpack_are_caught() {
    flip_each_byte(ValueType::HashListpack, 4);
}

#[test]
fn flipped_bytes_inside_an_intset_are_caught() {
    flip_each_byte(ValueType::SetIntset, 8);
}

/// A small RDB 9 with a ziplist hash (Redis 7.0 no longer writes ziplists).
fn ziplist_rdb() -> (Vec<u8>, usize) {
    let entries: [&[u8]; 4] = [b"field1", b"v1", b"field2", b"v2"];
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut tail = 10;
    for e in entries {
        tail = 10 + body.len();
        let mut ent = vec![prev as u8, e.len() as u8];
        ent.extend_from_slice(e);
        prev = ent.len();
        body.extend_from_slice(&ent);
    }
    let mut zl = ((10 + body.len() + 1) as u32).to_le_bytes().to_vec();
    zl.extend_from_slice(&(tail as u32).to_le_bytes());
    zl.extend_from_slice(&4u16.to_le_bytes());
    zl.extend_from_slice(&body);
    zl.push(0xFF);
    let mut f = b"REDIS0009".to_vec();
    f.extend_from_slice(&[0xFE, 0x00, 13, 1, b'h', zl.len() as u8]);
    let at = f.len();
    f.extend_from_slice(&zl);
    f.push(0xFF);
    let crc = crc64(&f);
    f.extend_from_slice(&crc.to_le_bytes());
    (f, at)
}

#[test]
fn flipped_bytes_inside_a_ziplist_are_caught() {
    let (good, at) = ziplist_rdb();
    let rep = walk(&good, Depth::Deep, 0).unwrap_or_else(|(_, e)| panic!("{e}"));
    assert_eq!(rep.elements, 2);
    let zl_len = good.len() - 9 - at;
    for pos in at..at + zl_len {
        let mut bad = good.clone();
        bad[pos] ^= 0xFF;
        let e = must_fail(&bad, &format!("ziplist byte {pos}"));
        // Redis 6.2 (RDB 9) checks a ziplist's total size and tail offset, not its count.
        if pos < at + 8 {
            assert!((at..at + zl_len).contains(&e.offset), "ziplist header byte {pos}: {e}");
        }
    }
}

#[test]
fn wrong_checksum_is_reported() {
    let mut data = all_types();
    let n = data.len();
    data[n - 3] ^= 0x01;
    let e = must_fail(&data, "checksum");
    assert!(e.what.contains("checksum"), "{e}");
    assert_eq!(e.offset, n - 8);
}

#[test]
fn every_single_byte_truncation_of_a_small_file_fails_cleanly() {
    let (good, _) = ziplist_rdb();
    for cut in 0..good.len() {
        must_fail(&good[..cut], &format!("cut at {cut}"));
    }
}

#[test]
fn a_database_past_the_servers_is_refused_as_redis_refuses_it() {
    // Redis exits with "Data file was created with a Redis server configured to handle
    // more than 16 databases" (a real Redis 7.0.15 did, on such a base file).
    let mut data = all_types();
    let at = RdbReader::new(&data)
        .expect("header")
        .find_map(|r| match r.expect("valid fixture") {
            Record::SelectDb { offset, .. } => Some(offset),
            _ => None,
        })
        .expect("a SELECTDB");
    data[at + 1] = 16;
    let n = data.len();
    let crc = crc64(&data[..n - 8]);
    data[n - 8..].copy_from_slice(&crc.to_le_bytes());
    let e = must_fail(&data, "db 16");
    assert_eq!(e.offset, at, "{e}");
    assert!(e.to_string().contains("selects database 16"), "{e}");
    let pipeline = ferrokv_tools::pipeline::Pipeline::default();
    assert!(ferrokv_tools::verify::walk_with(&data, Depth::Deep, 0, 17, &pipeline, &|_| {}).is_ok());
}
