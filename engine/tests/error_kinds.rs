//! Decoding errors carry a kind a caller can match (truncated, malformed, bad checksum,
//! unsupported version) instead of reading the message.

use ferrokv::format::rdb::{RdbError, RdbReader};
use ferrokv::format::ErrorKind;

fn fixture() -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb/redis-7.0/all-types.rdb");
    std::fs::read(p).expect("the all-types fixture")
}

/// The first error reading `data` to its end.
fn first_error(data: &[u8]) -> RdbError {
    match RdbReader::new(data) {
        Err(e) => e,
        Ok(reader) => reader.filter_map(Result::err).next().expect("an error"),
    }
}

#[test]
fn each_kind_of_damage_has_its_kind() {
    let good = fixture();
    assert!(RdbReader::new(&good).expect("valid").all(|r| r.is_ok()));

    for cut in [good.len() / 3, good.len() / 2, good.len() - 9, 5] {
        let e = first_error(&good[..cut]);
        assert_eq!(e.kind, ErrorKind::Truncated, "cut at {cut}: {e}");
    }

    let mut bad_crc = good.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0x55;
    let e = first_error(&bad_crc);
    assert_eq!(e.kind, ErrorKind::Checksum, "{e}");

    let mut bad_magic = good.clone();
    bad_magic[..5].copy_from_slice(b"RODIS");
    assert_eq!(first_error(&bad_magic).kind, ErrorKind::Malformed);

    let mut future = good.clone();
    future[5..9].copy_from_slice(b"0099");
    assert_eq!(first_error(&future).kind, ErrorKind::Unsupported);
}

/// Through the engine: a cut dump file is a PersistError whose RDB error says Truncated.
#[test]
fn a_cut_dump_file_fails_to_load_as_truncated() {
    let dir = ferrokv_testkit::TempDir::new("error-kinds");
    let good = fixture();
    std::fs::write(dir.path().join("dump.rdb"), &good[..good.len() / 2]).expect("write");
    let cfg = ferrokv::Config { dir: dir.path().to_path_buf(), ..ferrokv::Config::default() };
    match ferrokv::Engine::open(cfg, ferrokv::keyspace::Clock::System) {
        Err(ferrokv::persist::PersistError::Rdb { source, .. }) => {
            assert_eq!(source.kind, ErrorKind::Truncated, "{source}")
        }
        Err(other) => panic!("not an RDB error: {other}"),
        Ok(_) => panic!("a cut dump file loaded"),
    }
}
