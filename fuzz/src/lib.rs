//! What every fuzz target runs on one input: the deep verifier and the three dump
//! writers. Errors are expected on most inputs; a panic (or abort, hang, OOM) is the bug.
//! tools/tests/fuzz_seeds.rs replays fuzz/regressions/ through the public entry points.

pub mod aof_reader;

use ferrokv_tools::dump::{self, Expired, Filter, Format};
use ferrokv_tools::out::Out;
use ferrokv_tools::pipeline::Pipeline;
use ferrokv_tools::verify::{walk_with, Depth, DEFAULT_DATABASES};

/// A fixed "now" so a crash reproduces whatever the clock says: 2024-01-01T00:00:00Z.
const NOW_MS: i64 = 1_704_067_200_000;

const FORMATS: [Format; 3] = [Format::Jsonl, Format::Json, Format::RESP];

/// Verify: the report, or the first error (the partial report that comes with an error
/// depends on how far the reader got, which differs between pipelines).
fn verify(data: &[u8], pipeline: &Pipeline) -> String {
    match walk_with(data, Depth::Deep, NOW_MS, DEFAULT_DATABASES, pipeline, &|_| {}) {
        Ok(rep) => format!("{rep:?}"),
        Err((_, e)) => format!("error: {e:?}"),
    }
}

/// Dump: the bytes written (up to the error, if any) and the error.
fn dump(data: &[u8], format: Format, pipeline: &Pipeline) -> (Vec<u8>, Option<String>) {
    let filter = Filter { db: None, key: None, types: vec![], expired: Expired::Keep, now_ms: NOW_MS };
    let mut buf = Vec::new();
    let mut out = Out::new(&mut buf);
    let r = dump::run_with(data, format, &filter, &mut out, pipeline, &|_| {});
    drop(out);
    (buf, r.err().map(|e| format!("{e:?}")))
}

pub fn check(data: &[u8]) {
    // Everything on this thread: fast, and the same per-record code the workers run.
    // Small batch and big-key thresholds, so a few KiB already take the batching and
    // the inline big-key paths.
    let here = Pipeline { workers: 1, batch_bytes: 256, big_key_bytes: 2048 };
    let report = verify(data, &here);
    // Read from a stream in small reads (a replica's socket load), the records and the
    // verdict must be those of the file read whole.
    if let Some(diff) = ferrokv::format::rdb::differs_from_whole(data, 1 + data.len() % 61) {
        panic!("incremental reader: {diff}");
    }
    let dumps: Vec<_> = FORMATS.iter().map(|&f| dump(data, f, &here)).collect();
    // For one input length in 8, verify and one dump format (picked by the length too)
    // again through worker threads, which must give the same report, or the same first
    // error, and write the same bytes. Starting threads costs far more than decoding a
    // few KiB, hence only that share.
    if !data.len().is_multiple_of(8) {
        return;
    }
    let threaded = Pipeline { workers: 2, ..here };
    let got = verify(data, &threaded);
    if got != report {
        panic!("verify: threaded and sequential differ\nthreaded:   {got}\nsequential: {report}");
    }
    let i = (data.len() / 8) % FORMATS.len();
    let got = dump(data, FORMATS[i], &threaded);
    let want = &dumps[i];
    if got != *want {
        let show = |(b, e): &(Vec<u8>, Option<String>)| format!("{e:?} after {:?}", String::from_utf8_lossy(b));
        panic!(
            "dump {:?}: threaded and sequential differ\nthreaded:   {}\nsequential: {}",
            FORMATS[i],
            show(&got),
            show(want)
        );
    }
}

/// The magic `rdb_body` puts in front of its input: the first input byte picks the
/// dialect (odd: Valkey), the rest is the file body after the header.
pub fn with_magic(data: &[u8]) -> Vec<u8> {
    let (magic, body): (&[u8], &[u8]) = match data.split_first() {
        Some((b, rest)) if b & 1 == 1 => (b"VALKEY080", rest),
        Some((_, rest)) => (b"REDIS0012", rest),
        None => (b"REDIS0012", data),
    };
    let mut file = Vec::with_capacity(magic.len() + body.len());
    file.extend_from_slice(magic);
    file.extend_from_slice(body);
    file
}

/// Cut a valid RDB file into small seeds, one per record: the file's magic, the record's
/// bytes, then EOF with a zero (disabled) checksum. libFuzzer runs far faster on a few
/// KiB than on a whole fixture, and every value type and encoding still gets a seed.
/// Stops quietly at the first error (a seed file need not be valid).
pub fn split_records(file: &[u8]) -> Vec<Vec<u8>> {
    use ferrokv::format::rdb::{RdbReader, Record};
    let Ok(mut reader) = RdbReader::new(file) else { return Vec::new() };
    let mut seeds = Vec::new();
    let mut start = reader.position();
    while let Some(Ok(rec)) = reader.next() {
        let end = reader.position();
        if matches!(rec, Record::Eof { .. }) {
            break;
        }
        let mut seed = file[..9].to_vec();
        seed.extend_from_slice(&file[start..end]);
        seed.push(0xFF);
        seed.extend_from_slice(&[0; 8]);
        seeds.push(seed);
        start = end;
    }
    seeds
}

pub mod engine_check;
