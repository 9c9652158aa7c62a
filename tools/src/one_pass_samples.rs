//! Test samples: keys real Redis wrote with values read in one pass (listpacks, intsets,
//! hashtable sets and hashes, skiplist zsets; Redis 7.0's fixtures, and the shared
//! corpus's 7.4.1 files when present), one of each type and size.

use std::ops::Range;
use std::path::Path;

use ferrokv::format::rdb::{RdbReader, Record, ValueType};

pub struct Sample {
    pub vtype: ValueType,
    /// A file of this one key: the source's header, the key's record, EOF, no checksum.
    pub file: Vec<u8>,
    /// Where the value's body is in `file`.
    pub body: Range<usize>,
}

/// The samples, and whether the Redis 7.4 files (listpack sets) were among the sources.
pub fn samples() -> (Vec<Sample>, bool) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    from_dir(&root.join("fixtures/rdb/redis-7.0"), &mut out);
    let corpus = root.join("../shared/corpus/redis-7.4.1");
    let with_corpus = corpus.is_dir();
    if with_corpus {
        from_dir(&corpus, &mut out);
    } else {
        eprintln!("skipping the Redis 7.4 files (listpack sets): {} is absent", corpus.display());
    }
    (out, with_corpus)
}

fn from_dir(dir: &Path, out: &mut Vec<Sample>) {
    for entry in std::fs::read_dir(dir).expect("fixtures directory") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "rdb") {
            continue;
        }
        let data = std::fs::read(&path).expect("fixture");
        for rec in RdbReader::new(&data).expect("header") {
            let Record::Key(k) = rec.expect("valid fixture") else { continue };
            let (vtype, len) = (k.value.vtype, k.value.body.len());
            let like = out.iter().any(|s| s.vtype == vtype && s.body.len() / 64 == len / 64);
            if len > 4096 || like || k.value.visit_items(|_| true).is_none() {
                continue;
            }
            let mut file = data[..9].to_vec();
            let start = file.len() + k.value.body.offset() - k.offset;
            file.extend_from_slice(&data[k.offset..k.end]);
            file.push(0xFF);
            file.extend_from_slice(&[0; 8]);
            out.push(Sample { vtype, file, body: start..start + len });
        }
    }
}
