//! Shell completions and man pages, generated from a tool's own clap definition so they
//! never drift from it: `TOOL --generate man|bash|zsh|fish` prints one (ripgrep's way), and
//! `TOOL --generate all DIR` writes every man page (one per subcommand too) into `DIR/man1`
//! and the three completion scripts into `DIR/completions` (`make build` does, into
//! `target/doc-gen`).

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;

use clap::{Command, CommandFactory};
use clap_complete::Shell;

/// What `--generate` writes.
pub const KINDS: &[&str] = &["man", "bash", "zsh", "fish"];

/// Write `kind` (one of [`KINDS`]) for `cmd` to `out`.
pub fn write(cmd: Command, kind: &str, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = documented(cmd);
    let name = cmd.get_name().to_string();
    let shell = match kind {
        "man" => return clap_mangen::Man::new(cmd).render(out),
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--generate: unknown kind '{other}' (one of {})", KINDS.join(", ")),
            ))
        }
    };
    // Generated in memory: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    out.write_all(&script)
}

/// The command as its pages show it: `help` is an option, not a subcommand with a page.
fn documented(cmd: Command) -> Command {
    cmd.disable_help_subcommand(true)
}

/// Every man page of `cmd` (its subcommands' too) into `dir/man1`, and its bash, zsh and
/// fish completions into `dir/completions`.
pub fn write_all(cmd: Command, dir: &Path) -> io::Result<()> {
    let cmd = documented(cmd);
    let man = dir.join("man1");
    let completions = dir.join("completions");
    std::fs::create_dir_all(&man)?;
    std::fs::create_dir_all(&completions)?;
    clap_mangen::generate_to(cmd.clone(), &man)?;
    let name = cmd.get_name().to_string();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd.clone(), &name, &completions)?;
    }
    Ok(())
}

/// `TOOL --generate KIND` as the whole command line: the page or script on stdout and the
/// exit code; None for any other command line (parsed by clap as usual).
pub fn from_args<C: CommandFactory>(args: &[OsString]) -> Option<u8> {
    if args.get(1).is_none_or(|a| a != "--generate") {
        return None;
    }
    let cmd = C::command();
    let name = cmd.get_name().to_string();
    let kind = args.get(2).and_then(|k| k.to_str());
    let result = match (kind, args.len()) {
        (Some("all"), 4) => write_all(cmd, Path::new(&args[3])),
        (Some(kind), 3) if kind != "all" => {
            let mut stdout = io::stdout().lock();
            write(cmd, kind, &mut stdout).and_then(|()| stdout.flush())
        }
        _ => {
            eprintln!("{name}: usage: {name} --generate {{{}}} | --generate all DIR", KINDS.join("|"));
            return Some(crate::exit::ERROR);
        }
    };
    match result {
        Ok(()) => Some(crate::exit::OK),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Some(crate::exit::OK),
        Err(e) => {
            eprintln!("{name}: {e}");
            Some(crate::exit::ERROR)
        }
    }
}
