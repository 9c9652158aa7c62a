//! aof-rewrite: BGREWRITEAOF offline (docs/cli.md).

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ferrokv::command::catalog::ServerVersion;
use ferrokv_tools::generate;
use ferrokv_tools::out::ToolError;
use ferrokv_tools::replay::Input;
use ferrokv_tools::rewrite::{self, layout_for, BaseKind, Layout};
use ferrokv_tools::{exit, now_ms};

// Replaying builds a whole dataset of small allocations; mimalloc serves them faster
// than glibc's malloc (docs/benchmarks.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const AFTER_HELP: &str = r#"Examples:
  aof-rewrite appendonlydir compacted          a multi-part directory with an RDB base
  aof-rewrite appendonly.aof compacted.aof --base resp
  aof-rewrite appendonlydir out --redis-version 6.2   a base Redis 6.2 can load
  aof-rewrite appendonlydir out --now 1700000000000   keys expired by then left out
  aof-rewrite captured state.rdb --until 2026-11-27T08:00:00Z   the dataset as it was then

Exit codes:
  0  the output was written (and fsynced)
  2  usage error, an unreadable or invalid input, --until on a log without #TS:
     annotations, an input with scripts logged verbatim
     (EVAL/EVALSHA, written by Redis before 7.0: their writes cannot be rebuilt here, so
     nothing is written), or an output error

aof-rewrite --generate man|bash|zsh|fish prints the man page or a completion script.
Manual: docs/cli.md"#;

#[derive(Parser)]
#[command(name = "aof-rewrite", version, about = "Compact an AOF offline, as BGREWRITEAOF would", after_help = AFTER_HELP)]
struct Cli {
    /// AOF file, manifest or multi-part directory (or an RDB file).
    input: PathBuf,
    /// Output: a multi-part AOF directory, or one file when the name ends in .aof or .rdb.
    output: PathBuf,
    /// An RDB loaded before the AOF.
    #[arg(long, value_name = "RDB")]
    rdb: Option<PathBuf>,
    /// The base's form.
    #[arg(long, value_enum, default_value = "rdb")]
    base: BaseKind,
    /// Keys expired at this time (unix ms) are left out (default: now, or --until).
    #[arg(long, value_name = "MS")]
    now: Option<i64>,
    /// The dataset as it was at this time: unix seconds, RFC 3339, or milliseconds ending
    /// in `ms`. The log is read up to its first #TS: annotation after it (it needs them:
    /// aof-timestamp-enabled, or a directory `aoftool capture` wrote); the files are left
    /// as they are.
    #[arg(long, value_name = "TIME", value_parser = ferrokv_tools::parse_until)]
    until: Option<i64>,
    /// Write one file whatever OUT's name.
    #[arg(long, conflicts_with = "dir")]
    single_file: bool,
    /// Write a multi-part directory whatever OUT's name.
    #[arg(long)]
    dir: bool,
    /// The server version the output is for (6.2, 7.0, 7.2, 7.4, valkey-7.2, valkey-8.0):
    /// the RDB version of the base. Default: the input's writer's (its RDB part's
    /// version, 6.2 for a single-file AOF without one, else 7.0).
    #[arg(long, value_name = "V", value_parser = ferrokv_tools::parse_server_version)]
    redis_version: Option<ServerVersion>,
}

fn main() -> ExitCode {
    if let Some(code) = generate::from_args::<Cli>(&std::env::args_os().collect::<Vec<_>>()) {
        return ExitCode::from(code);
    }
    let cli = Cli::parse();
    let layout = if cli.single_file {
        Layout::File
    } else if cli.dir {
        Layout::Dir
    } else {
        layout_for(&cli.output)
    };
    let input = Input { aof: cli.input, rdb: cli.rdb };
    let now = cli.now.or(cli.until).unwrap_or_else(now_ms);
    let result = rewrite::run(&input, &cli.output, cli.base, layout, now, cli.redis_version, cli.until)
        .and_then(|w| rewrite::summary(&w, io::stdout().lock()).map_err(ToolError::Io));
    match result {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => {
            let msg = match e {
                ToolError::Io(e) => e.to_string(),
                ToolError::Usage(m) => m,
                ToolError::Data(d) => d.to_string(),
            };
            eprintln!("aof-rewrite: {msg}");
            ExitCode::from(exit::ERROR)
        }
    }
}
