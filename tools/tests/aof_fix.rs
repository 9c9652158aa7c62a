//! aoftool fix on AOFs written by a real redis-server 7.0: truncated tails at many offsets
//! (verify names the offset; the fixed directory loads in real Redis with every whole
//! command), and a corrupt middle region (--salvage keeps everything outside it and
//! reports exactly the commands lost).

#[path = "aof_common/mod.rs"]
mod aof_common;

use std::path::Path;

use aof_common::*;
use ferrokv_testkit::{Server, TempDir};
use ferrokv_tools::aof::check::verify;
use ferrokv_tools::aof::fix::{self, Options, Outcome};
use ferrokv_tools::aof::Kind;
use serde_json::Value;

/// A plain multi-part AOF whose incr file holds `RPUSH l i` and `SET k<i> v<i>` in turn.
fn written(n: usize) -> (TempDir, std::path::PathBuf, String) {
    let s = aof_server(&["--aof-use-rdb-preamble", "no"]);
    let mut cmds = Vec::new();
    for i in 0..n {
        cmds.push(args(&["RPUSH", "l", &i.to_string()]));
        cmds.push(args(&["SET", &format!("k{i}"), &format!("v{i}")]));
    }
    send(&s, &cmds);
    let (dir, aof) = stop(s);
    let incr = incr_files(&aof)[0].clone();
    (dir, aof, incr)
}

/// (offset, end, argv) of every command of the incr file, from the untouched AOF.
fn layout(aof: &Path, incr: &str) -> Vec<(usize, usize, Argv)> {
    let lines = dump_jsonl(aof);
    let cmds: Vec<&Value> = lines.iter().filter(|l| l["file"] == incr).collect();
    let size = std::fs::metadata(aof.join(incr)).unwrap().len() as usize;
    (0..cmds.len())
        .map(|i| {
            let start = cmds[i]["offset"].as_u64().unwrap() as usize;
            let end = cmds.get(i + 1).map_or(size, |c| c["offset"].as_u64().unwrap() as usize);
            (start, end, argv_of(cmds[i]))
        })
        .collect()
}

fn fix_yes(path: &Path, salvage: bool) -> Vec<fix::FileFix> {
    let opts = Options { salvage, yes: true };
    match fix::run(path, &opts, &mut |_| panic!("--yes does not ask")).expect("fix runs") {
        Outcome::Fixed(f) => f,
        other => panic!("not fixed: {other:?}"),
    }
}

/// Start real Redis on `dir` (refusing truncated AOFs) and read the state back.
fn load_in_redis(dir: TempDir) -> (Vec<String>, Vec<String>) {
    let s = Server::start_in(dir, &["--appendonly", "yes", "--aof-load-truncated", "no"]);
    let list: Vec<String> = s.cli(&["LRANGE", "l", "0", "-1"]).lines().map(str::to_string).collect();
    let mut keys: Vec<String> = s.cli(&["KEYS", "k*"]).lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
    keys.sort();
    (list, keys)
}

/// What Redis should hold after replaying `cmds`.
fn expected(cmds: &[&(usize, usize, Argv)]) -> (Vec<String>, Vec<String>) {
    let mut list = Vec::new();
    let mut keys = Vec::new();
    for (_, _, a) in cmds {
        let arg = String::from_utf8(a[1].clone()).unwrap();
        match &a[0][..] {
            b"RPUSH" => list.push(String::from_utf8(a[2].clone()).unwrap()),
            b"SET" => keys.push(arg),
            _ => {}
        }
    }
    keys.sort();
    (list, keys)
}

#[test]
fn truncated_tails_are_named_and_fixed_to_load_in_redis() {
    let (_d, aof, incr) = written(60);
    let cmds = layout(&aof, &incr);
    let size = cmds.last().unwrap().1;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut cuts: Vec<usize> = (0..12)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            1 + (x >> 33) as usize % (size - 1)
        })
        .collect();
    // One byte short of the end, and inside the first command.
    cuts.extend([size - 1, 3]);
    for cut in cuts {
        let dir = copy_tree(aof.parent().unwrap(), "aof-cut");
        let aof_dir = dir.path().join("appendonlydir");
        let file = aof_dir.join(&incr);
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.set_len(cut as u64).unwrap();
        drop(f);
        let whole: Vec<_> = cmds.iter().filter(|c| c.1 <= cut).collect();
        // --strict: the cut tail is the problem (Redis loads the rest; a warning otherwise).
        let strict = ferrokv_tools::aof::check::Options { strict: true, ..Default::default() };
        let r = verify(&aof_dir, strict).unwrap();
        if cmds.iter().any(|c| c.1 == cut) {
            assert!(r.problem.is_none(), "cut at a boundary {cut}");
            continue;
        }
        let p = r.problem.unwrap_or_else(|| panic!("cut at {cut} accepted"));
        let cut_cmd = whole.len();
        assert_eq!(p.kind, Kind::Truncated, "{p}");
        assert_eq!(p.offset, Some(cmds[cut_cmd].0), "cut at {cut}: {p}");
        assert_eq!(p.command, Some(cut_cmd as u64 + 1), "{p}");
        assert!(p.to_string().starts_with(&format!("file {incr} offset {} (command #", cmds[cut_cmd].0)), "{p}");
        let fixes = fix_yes(&aof_dir, false);
        assert_eq!(fixes.len(), 1);
        assert_eq!(fixes[0].new_size as usize, cmds[cut_cmd].0);
        assert!(fixes[0].backup.as_ref().is_some_and(|b| std::fs::metadata(b).unwrap().len() == cut as u64));
        assert!(verify(&aof_dir, Default::default()).unwrap().problem.is_none());
        // The backup is not an AOF file name, so Redis and verify ignore it.
        assert_eq!(load_in_redis(dir), expected(&whole), "cut at {cut}");
    }
}

#[test]
fn a_corrupt_middle_region_is_salvaged_and_reported() {
    let (_d, aof, incr) = written(40);
    let cmds = layout(&aof, &incr);
    let dir = copy_tree(aof.parent().unwrap(), "aof-salvage");
    let aof_dir = dir.path().join("appendonlydir");
    let file = aof_dir.join(&incr);
    let mut data = std::fs::read(&file).unwrap();
    // From the middle of command 30 to the middle of command 45.
    let (first, last) = (30, 45);
    let from = (cmds[first].0 + cmds[first].1) / 2;
    let to = (cmds[last].0 + cmds[last].1) / 2;
    for b in &mut data[from..to] {
        *b = b'?';
    }
    std::fs::write(&file, &data).unwrap();
    let p = verify(&aof_dir, Default::default()).unwrap().problem.expect("corrupt");
    assert_eq!(p.kind, Kind::Framing, "{p}");
    assert_eq!(p.command, Some(first as u64 + 1), "{p}");

    // Without --salvage, fix does not cut a file in the middle.
    let opts = Options { salvage: false, yes: true };
    assert!(matches!(fix::run(&aof_dir, &opts, &mut |_| true).unwrap(), Outcome::CannotFix(_)));

    let fixes = fix_yes(&aof_dir, true);
    assert_eq!(fixes.len(), 1);
    let lost = &fixes[0].lost;
    assert_eq!(lost.len(), 1, "{lost:?}");
    // Exactly the damaged commands' bytes.
    assert_eq!((lost[0].start, lost[0].end), (cmds[first].0, cmds[last].1));
    // The command whose head survived is named in the report with what is readable of it.
    assert_eq!(lost[0].commands[0].offset, cmds[first].0);
    assert_eq!(lost[0].commands[0].argv[0], cmds[first].2[0]);
    assert!(lost[0].commands.iter().all(|c| c.offset >= cmds[first].0 && c.offset < cmds[last].1));
    let text = fix::text(&fixes);
    assert!(text.contains(&format!("lost [{}, {})", cmds[first].0, cmds[last].1)), "{text}");

    let kept: Vec<_> = cmds.iter().enumerate().filter(|(i, _)| *i < first || *i > last).map(|(_, c)| c).collect();
    let got = commands_of(&dump_jsonl(&aof_dir), &incr);
    let want: Vec<Argv> = kept.iter().filter(|c| c.2[0] != b"SELECT").map(|c| c.2.clone()).collect();
    assert_eq!(got, want, "everything outside the region is kept");
    assert!(verify(&aof_dir, Default::default()).unwrap().problem.is_none());
    assert_eq!(load_in_redis(dir), expected(&kept));
}

#[test]
fn salvage_drops_damaged_transactions_and_bad_commands() {
    let (_d, aof, incr) = written(5);
    let dir = copy_tree(&aof, "aof-salvage-multi");
    let file = dir.path().join(&incr);
    let mut data = std::fs::read(&file).unwrap();
    let before = data.len();
    data.extend_from_slice(
        b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1",
    );
    data.extend_from_slice(
        b"\r\n*1\r\n$4\r\nEXEC\r\n*2\r\n$4\r\nNOPE\r\n$1\r\nx\r\n*3\r\n$3\r\nSET\r\n$2\r\nok\r\n$1\r\n1\r\n",
    );
    data.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1\r\n1\r\n");
    std::fs::write(&file, &data).unwrap();
    let fixes = fix_yes(dir.path(), true);
    let lost = &fixes[0].lost;
    let whys: Vec<&str> = lost.iter().map(|l| l.why.as_str()).collect();
    assert_eq!(lost.len(), 2, "{whys:?}");
    // The MULTI block whose SET b is cut (read as Redis reads it, it swallows the EXEC),
    // and the unknown command right after it: one region.
    assert_eq!(lost[0].start, before, "{whys:?}");
    assert!(whys[0].contains("damaged"), "{whys:?}");
    assert!(whys[1].contains("without EXEC"), "{whys:?}");
    let got = commands_of(&dump_jsonl(dir.path()), &incr);
    assert_eq!(got.last().unwrap(), &args(&["SET", "ok", "1"]));
    assert!(!got.iter().any(|c| c[0] == b"NOPE"), "{got:?}");
    assert!(verify(dir.path(), Default::default()).unwrap().problem.is_none());
}
