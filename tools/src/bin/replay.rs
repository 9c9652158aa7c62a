//! replay: rebuild a dataset from an AOF (or RDB + AOF) and check it (docs/cli.md).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ferrokv_tools::against::against;
use ferrokv_tools::diff::human;
use ferrokv_tools::exit;
use ferrokv_tools::generate;
use ferrokv_tools::out::ToolError;
use ferrokv_tools::replay::{Input, Options, Replay};

// Replaying builds a whole dataset of small allocations; mimalloc serves them faster
// than glibc's malloc (docs/benchmarks.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const AFTER_HELP: &str = r#"Examples:
  replay appendonlydir                         the dataset the log describes, summarised
  replay appendonlydir --against dump.rdb      does the log end where the snapshot is?
  replay appendonly.aof --check-expiry         commands on keys whose TTL had passed
  replay appendonlydir --check-expiry --until 1700000000 --strict
  replay appendonlydir --until 2026-11-27T08:00:00Z --against dump.rdb   the state at that time

Exit codes:
  0  replayed; no violation (and the snapshot is the same, with --against)
  1  expiry violations, pending keys with --strict, or a snapshot that differs
  2  usage error, an unreadable or invalid input, or an output error

replay --generate man|bash|zsh|fish prints the man page or a completion script.
Manual: docs/cli.md"#;

#[derive(Parser)]
#[command(name = "replay", version, about = "Rebuild the state an AOF describes and check expirations and snapshots", after_help = AFTER_HELP)]
struct Cli {
    /// AOF file, manifest or multi-part directory (or an RDB file).
    path: PathBuf,
    /// An RDB loaded before the AOF.
    #[arg(long, value_name = "RDB")]
    rdb: Option<PathBuf>,
    /// Compare the final state with this snapshot (RDB, AOF file or directory, or jsonl); exit 1 when it differs.
    #[arg(long, value_name = "SNAPSHOT")]
    against: Option<PathBuf>,
    /// Report commands on keys (and hash fields) whose TTL had passed and that the log did not delete first.
    #[arg(long)]
    check_expiry: bool,
    /// Stop at this time: unix seconds, RFC 3339, or milliseconds ending in `ms`. The replay
    /// ends at the first #TS: annotation after it; TTLs passed by then but never deleted are
    /// listed as pending.
    #[arg(long, value_name = "TIME", value_parser = ferrokv_tools::parse_until)]
    until: Option<i64>,
    /// The #TS: annotations are when a replica received the commands (its own AOF), not when
    /// the master ran them: the expiry check takes its time from expirations only. Set by
    /// itself for a directory `aoftool capture` wrote.
    #[arg(long)]
    stamps_received: bool,
    /// Pending keys are an error (exit 1).
    #[arg(long)]
    strict: bool,
}

fn run(cli: Cli) -> Result<u8, ToolError> {
    let input = Input { aof: cli.path.clone(), rdb: cli.rdb.clone() };
    let opts = Options {
        check_expiry: cli.check_expiry,
        until: cli.until,
        stamps_received: cli.stamps_received,
        ..Options::default()
    };
    let replay = Replay::run(&input, &opts)?;
    let mut stdout = io::stdout().lock();
    stdout.write_all(replay.report_text().as_bytes())?;
    let mut code = exit::OK;
    if !replay.violations.is_empty() || (cli.strict && !replay.pending.is_empty()) {
        code = exit::INVALID;
    }
    if let Some(snapshot) = &cli.against {
        let name = format!("replayed {}", cli.path.display());
        let report = against(&replay, &name, snapshot)?;
        stdout.write_all(&human(&report))?;
        if !report.same() {
            code = exit::INVALID;
        }
    }
    stdout.flush()?;
    Ok(code)
}

fn main() -> ExitCode {
    if let Some(code) = generate::from_args::<Cli>(&std::env::args_os().collect::<Vec<_>>()) {
        return ExitCode::from(code);
    }
    match run(Cli::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(ToolError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(exit::OK),
        Err(e) => {
            let msg = match e {
                ToolError::Io(e) => e.to_string(),
                ToolError::Usage(m) => m,
                ToolError::Data(d) => d.to_string(),
            };
            eprintln!("replay: {msg}");
            ExitCode::from(exit::ERROR)
        }
    }
}
