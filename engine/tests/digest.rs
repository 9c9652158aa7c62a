//! Our DEBUG DIGEST agrees with real Redis 7.0's on the committed fixtures (each fixture's
//! info.json holds the digest the server reported when it wrote the file).

use std::path::Path;

use ferrokv::digest::DatasetDigest;
use ferrokv::format::rdb::{RdbReader, Record};
use ferrokv::logical::Logical;

fn recorded_digest(info: &Path) -> String {
    let text = std::fs::read_to_string(info).expect("info.json");
    let at = text.find("\"debug_digest\": \"").expect("debug_digest in info.json") + 17;
    text[at..at + 40].to_string()
}

#[test]
fn digest_of_each_fixture_matches_redis() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb/redis-7.0");
    let mut checked = 0;
    for name in ["all-types", "nocompress-nochecksum", "lru", "lfu", "expired"] {
        let bytes = std::fs::read(dir.join(format!("{name}.rdb"))).expect("fixture");
        let mut dd = DatasetDigest::default();
        for rec in RdbReader::new(&bytes).expect("rdb header") {
            if let Record::Key(k) = rec.expect("record") {
                let v = Logical::from_record(&k).expect("value");
                dd.add(k.db, &k.key.to_bytes(), &v, k.expire_ms.is_some());
            }
        }
        assert_eq!(dd.hex(), recorded_digest(&dir.join(format!("{name}.info.json"))), "{name}");
        checked += 1;
    }
    assert_eq!(checked, 5);
}
