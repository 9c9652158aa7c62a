//! What the `aof` target runs on one input besides the loader (`engine_check::run_aof`):
//! the AOF command reader (`ferrokv::format::aof`) and aoftool's verify and salvage over
//! the same bytes, with the invariants they promise. tools/tests/aof_fuzz_seeds.rs replays
//! fuzz/regressions/aof/ through [`run`].

use ferrokv::format::aof::{has_rdb_preamble, CommandReader};
use ferrokv_tools::aof::check::check_file;
use ferrokv_tools::aof::fix::salvage;

pub fn run(data: &[u8]) {
    // The reader alone, from the start (an RDB preamble is then a framing error).
    let mut last_end = 0;
    for cmd in CommandReader::new(data) {
        let Ok(cmd) = cmd else { break };
        assert!(cmd.offset >= last_end && cmd.end > cmd.offset && cmd.end <= data.len());
        assert!(!cmd.argv.is_empty());
        let again = CommandReader::command_at(data, cmd.offset);
        assert_eq!(again, Some((cmd.argv.clone(), cmd.end)), "command_at disagrees at {}", cmd.offset);
        let partial = CommandReader::partial_at(data, cmd.offset);
        assert_eq!(partial, Some((cmd.argv.len() as u64, cmd.argv.clone())));
        last_end = cmd.end;
    }
    // verify's per-file checks (the RDB part through the deep verifier).
    let (_, problem) = check_file("fuzz.aof", None, data, true);
    // Salvage: nothing lost on a valid file; what it keeps verifies.
    let Ok((keep, lost)) = salvage(data) else {
        assert!(has_rdb_preamble(data), "only an RDB part is not salvageable");
        return;
    };
    if problem.is_none() {
        assert!(lost.is_empty(), "salvage drops from a valid file: {lost:?}");
    }
    let mut kept = Vec::new();
    let mut prev = 0;
    for &(a, b) in &keep {
        assert!(a >= prev && b <= data.len() && a < b, "ranges out of order: {keep:?}");
        kept.extend_from_slice(&data[a..b]);
        prev = b;
    }
    for l in &lost {
        assert!(l.start < l.end && l.end <= data.len());
    }
    let (_, after) = check_file("fuzz.aof", None, &kept, true);
    assert!(after.is_none(), "salvaged bytes do not verify: {}", after.map(|p| p.to_string()).unwrap_or_default());
}
