//! Every tool's front door: `--help` shows examples and the exit codes, and the man pages
//! and completion scripts generated from the same clap definitions cover every subcommand.

use std::path::Path;
use std::process::Command;

const TOOLS: &[(&str, &str, &[&str])] = &[
    ("rdbtool", env!("CARGO_BIN_EXE_rdbtool"), &["dump", "verify", "convert", "diff", "info", "completions"]),
    ("aoftool", env!("CARGO_BIN_EXE_aoftool"), &["verify", "fix", "dump", "completions"]),
    ("aof-rewrite", env!("CARGO_BIN_EXE_aof-rewrite"), &[]),
    ("replay", env!("CARGO_BIN_EXE_replay"), &[]),
];

fn run(bin: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin).args(args).output().expect("run the tool");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_shows_examples_and_exit_codes() {
    for (name, bin, _) in TOOLS {
        let (code, out, _) = run(bin, &["--help"]);
        assert_eq!(code, Some(0), "{name} --help");
        assert!(out.contains("Examples:") && out.contains(&format!("  {name} ")), "{name}: no examples\n{out}");
        assert!(
            out.contains("Exit codes:") && out.contains("  0  ") && out.contains("  2  "),
            "{name}: no exit codes\n{out}"
        );
    }
}

#[test]
fn man_pages_and_completions_cover_every_subcommand() {
    let dir = std::env::temp_dir().join(format!("ferrokv-front-door-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (name, bin, subcommands) in TOOLS {
        let (code, _, err) = run(bin, &["--generate", "all", dir.to_str().expect("utf-8 temp dir")]);
        assert_eq!(code, Some(0), "{name} --generate all: {err}");
        let page = read(&dir.join("man1").join(format!("{name}.1")));
        assert!(
            page.starts_with(".ie") && page.contains(".SH NAME") && page.contains(&format!(".TH {name} 1")),
            "{name}.1"
        );
        assert!(page.contains("Exit codes:"), "{name}.1 has no exit codes");
        let bash = read(&dir.join("completions").join(format!("{name}.bash")));
        let zsh = read(&dir.join("completions").join(format!("_{name}")));
        let fish = read(&dir.join("completions").join(format!("{name}.fish")));
        assert!(zsh.starts_with(&format!("#compdef {name}")), "_{name}");
        for sub in *subcommands {
            assert!(dir.join("man1").join(format!("{name}-{sub}.1")).is_file(), "{name}-{sub}.1");
            assert!(bash.contains(sub) && zsh.contains(sub) && fish.contains(sub), "{name} completions miss {sub}");
        }
        // One kind on stdout is the same text as the file.
        let (code, man, _) = run(bin, &["--generate", "man"]);
        assert_eq!((code, man.as_str()), (Some(0), page.as_str()), "{name} --generate man");
        let (code, _, err) = run(bin, &["--generate", "csh"]);
        assert_eq!(code, Some(2), "{name} --generate csh: {err}");
        assert!(err.contains("unknown kind 'csh'"), "{err}");
    }
    for (name, bin) in [("rdbtool", env!("CARGO_BIN_EXE_rdbtool")), ("aoftool", env!("CARGO_BIN_EXE_aoftool"))] {
        let (code, script, _) = run(bin, &["completions", "fish"]);
        assert_eq!(code, Some(0));
        assert_eq!(script, read(&dir.join("completions").join(format!("{name}.fish"))), "{name} completions fish");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
