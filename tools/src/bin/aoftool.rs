//! aoftool: verify, fix and dump Redis AOFs (a file, a manifest, or a multi-part directory).

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use ferrokv::command::catalog::ServerVersion;
use ferrokv_tools::aof::{capture, check, dump, fix};
use ferrokv_tools::exit;
use ferrokv_tools::generate;
use ferrokv_tools::net;
use ferrokv_tools::out::{Out, ToolError};

const AFTER_HELP: &str = r#"Examples:
  aoftool verify appendonlydir                 manifest, framing, MULTI/EXEC, base, commands
  aoftool verify appendonly.aof --redis-version 7.4 --strict
  aoftool fix appendonlydir --yes              cut an incomplete tail (originals kept as .bak)
  aoftool fix appendonly.aof --salvage --yes   drop corrupt regions anywhere, report the losses
  aoftool dump appendonlydir --format jsonl    one command per line with file, offset, db
  aoftool capture redis://10.0.0.5:6379 backup/appendonlydir --duration 3600
  aoftool completions zsh > ~/.zfunc/_aoftool

Exit codes:
  0  success (verify: the AOF is valid)
  1  the AOF has a problem (or fix cannot repair it, or the prompt was declined)
  2  usage error, unreadable input, or an output error

aoftool --generate man|bash|zsh|fish prints the man page or a completion script.
Manual: docs/cli.md"#;

#[derive(Parser)]
#[command(name = "aoftool", version, about = "Verify, fix and dump Redis AOF files and multi-part AOF directories", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Text,
    Jsonl,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check framing, MULTI/EXEC balance, the manifest, the RDB base and every command's name
    /// and arity; exit 0 when valid, 1 with the first problem.
    Verify {
        /// An AOF file, a manifest, or an AOF directory.
        path: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The server version whose commands the AOF may hold (6.2, 7.0, 7.2, 7.4,
        /// valkey-7.2, valkey-8.0); default: the one its base names, else any.
        #[arg(long, value_parser = ferrokv_tools::parse_server_version)]
        redis_version: Option<ServerVersion>,
        /// A command that version does not have is a problem, not a warning.
        #[arg(long)]
        strict: bool,
        /// How many databases the server that loads the AOF has (its `databases`): a base
        /// selecting one past them is one it refuses.
        #[arg(long, default_value_t = ferrokv_tools::verify::DEFAULT_DATABASES)]
        databases: u64,
    },
    /// Cut an incomplete tail of the last file (as redis-check-aof --fix), or with
    /// --salvage drop every corrupt region; the originals are kept as .bak files.
    Fix {
        path: PathBuf,
        /// Do not ask before writing.
        #[arg(long)]
        yes: bool,
        /// Drop corrupt regions anywhere, resynchronising at the next valid command.
        #[arg(long)]
        salvage: bool,
        /// Where to write the report of what was dropped (default: beside the AOF).
        #[arg(long)]
        report: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One command per line with its file, offset, database and timestamp.
    Dump {
        path: PathBuf,
        #[arg(long, value_enum, default_value = "text")]
        format: FormatArg,
    },
    /// Follow a live Redis (or ferrokv) as its replica and keep its data as a multi-part
    /// AOF directory Redis loads: the full sync's snapshot as the base, the stream as the
    /// incr file (with #TS: lines); a dropped link continues with PSYNC, a full resync
    /// starts a new base. Stops after --duration, or when interrupted.
    Capture {
        /// The server: host:port or redis://[user:password@]host:port (rediss:// for TLS).
        source: String,
        #[command(flatten)]
        tls: net::TlsArgs,
        /// The AOF directory to write (Redis's appenddirname; created when missing).
        dir: PathBuf,
        /// The files' prefix (Redis's appendfilename).
        #[arg(long, default_value = "appendonly.aof")]
        name: String,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<u64>,
        /// Print where the capture stands as JSON at the end.
        #[arg(long)]
        json: bool,
    },
    /// Print a completion script for a shell.
    Completions {
        #[arg(value_parser = ["bash", "zsh", "fish"])]
        shell: String,
    },
}

fn confirm(fixes: &[fix::FileFix]) -> bool {
    eprint!("{}Continue? [y/N]: ", fix::text(fixes));
    let mut answer = String::new();
    if io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes")
}

/// Where the fix report goes unless --report says: beside the file, or in the AOF directory.
fn default_report(path: &std::path::Path) -> PathBuf {
    if path.is_dir() {
        path.join("aoftool-fix-report.txt")
    } else {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        path.with_file_name(format!("{name}.fix-report.txt"))
    }
}

fn run(cli: Cli) -> Result<u8, ToolError> {
    let mut stdout = io::stdout().lock();
    match cli.cmd {
        Cmd::Verify { path, json, redis_version, strict, databases } => {
            let opts = check::Options { version: redis_version, strict, writer: false, databases: Some(databases) };
            let r = check::verify(&path, opts)?;
            let text = if json { format!("{}\n", check::json(&r)) } else { check::text(&r) };
            stdout.write_all(text.as_bytes())?;
            Ok(if r.problem.is_some() { exit::INVALID } else { exit::OK })
        }
        Cmd::Fix { path, yes, salvage, report, json } => {
            let opts = fix::Options { salvage, yes };
            match fix::run(&path, &opts, &mut confirm)? {
                fix::Outcome::NothingToFix => {
                    writeln!(stdout, "nothing to fix: {}", path.display())?;
                    Ok(exit::OK)
                }
                fix::Outcome::CannotFix(p) => {
                    writeln!(stdout, "{p}")?;
                    let hint = if salvage { "" } else { " (--salvage drops corrupt regions anywhere)" };
                    writeln!(stdout, "cannot fix this: not an incomplete tail of the last file{hint}")?;
                    Ok(exit::INVALID)
                }
                fix::Outcome::Declined(_) => {
                    writeln!(stdout, "aborted: nothing written")?;
                    Ok(exit::INVALID)
                }
                fix::Outcome::Fixed(fixes) => {
                    let text = fix::text(&fixes);
                    let report = report.unwrap_or_else(|| default_report(&path));
                    std::fs::write(&report, &text)
                        .map_err(|e| ToolError::Usage(format!("cannot write {}: {e}", report.display())))?;
                    if json {
                        writeln!(stdout, "{}", serde_json::json!({"fixed": fix::json(&fixes), "report": report}))?;
                    } else {
                        writeln!(stdout, "{text}report: {}", report.display())?;
                    }
                    Ok(exit::OK)
                }
            }
        }
        Cmd::Dump { path, format } => {
            let format = match format {
                FormatArg::Text => dump::Format::Text,
                FormatArg::Jsonl => dump::Format::Jsonl,
            };
            let mut out = Out::new(&mut stdout);
            let problem = dump::run(&path, format, &mut out);
            out.finish()?;
            match problem? {
                None => Ok(exit::OK),
                Some(p) => {
                    eprintln!("aoftool: {p}");
                    Ok(exit::INVALID)
                }
            }
        }
        Cmd::Capture { source, dir, name, duration, json, tls } => {
            let (addr, access) = net::parse_url(&source, &tls).map_err(ToolError::Usage)?;
            let opts =
                capture::Options { addr, access, dir, name, duration: duration.map(std::time::Duration::from_secs) };
            let sum = capture::capture(&opts, |line| eprintln!("aoftool capture: {line}"))?;
            if json {
                let j = serde_json::json!({
                    "replid": sum.replid, "offset": sum.offset, "full_syncs": sum.full_syncs,
                    "partial_syncs": sum.partial_syncs, "commands": sum.commands,
                });
                writeln!(stdout, "{j}")?;
            } else {
                writeln!(
                    stdout,
                    "captured {} commands up to offset {} of {} ({} full, {} partial syncs)",
                    sum.commands, sum.offset, sum.replid, sum.full_syncs, sum.partial_syncs
                )?;
            }
            Ok(exit::OK)
        }
        Cmd::Completions { shell } => {
            generate::write(Cli::command(), &shell, &mut stdout)?;
            Ok(exit::OK)
        }
    }
}

fn main() -> ExitCode {
    if let Some(code) = generate::from_args::<Cli>(&std::env::args_os().collect::<Vec<_>>()) {
        return ExitCode::from(code);
    }
    match run(Cli::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(ToolError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(exit::OK),
        Err(ToolError::Io(e)) => {
            eprintln!("aoftool: {e}");
            ExitCode::from(exit::ERROR)
        }
        Err(ToolError::Usage(m)) => {
            eprintln!("aoftool: {m}");
            ExitCode::from(exit::ERROR)
        }
        Err(ToolError::Data(e)) => {
            eprintln!("aoftool: {e}");
            ExitCode::from(exit::INVALID)
        }
    }
}
