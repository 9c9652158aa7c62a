//! rdbtool: inspect, verify and dump Redis/Valkey RDB files.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use ferrokv::format::rdb::LogicalType;
use ferrokv::Source;
use ferrokv_tools::dump::{self, Expired, Filter, Format, RespOptions, Restore};
use ferrokv_tools::generate;
use ferrokv_tools::out::{Out, ToolError};
use ferrokv_tools::verify::{walk_with, Depth};
use ferrokv_tools::{exit, now_ms, report};

const AFTER_HELP: &str = r#"Examples:
  rdbtool verify dump.rdb                      every record, every blob, the CRC
  rdbtool dump dump.rdb --db 0 --key 'user:*'  jsonl, one key per line
  rdbtool dump dump.rdb --format resp | redis-cli --pipe
  rdbtool diff a.rdb b.rdb                     same data whatever the encodings?
  rdbtool convert dump.rdb old.rdb --to rdb:redis-6.2
  rdbtool info dump.rdb --json
  rdbtool restore dump.rdb --to redis://10.0.0.5:7000   into a cluster, by slot
  rdbtool memory dump.rdb --top 20 --separator : --depth 2
  rdbtool completions bash > /etc/bash_completion.d/rdbtool

Exit codes:
  0  success (verify: the file is valid; diff: the datasets are the same)
  1  the input is invalid or corrupt (diff: the datasets differ)
  2  usage error, unreadable input, or an output error (diff, convert: also a corrupt input)
  3  convert --strict: the conversion would lose data; nothing written
  4  restore: some keys were refused by the target (the summary counts them by error)

rdbtool --generate man|bash|zsh|fish prints the man page or a completion script.
Manual: docs/cli.md"#;

#[derive(Parser)]
#[command(name = "rdbtool", version, about = "Inspect, verify and dump Redis and Valkey RDB files", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Jsonl,
    Json,
    Resp,
}

#[derive(Clone, Copy, ValueEnum)]
enum ExpiredArg {
    Skip,
    Keep,
}

#[derive(Clone, Copy, ValueEnum)]
enum RestoreArg {
    /// Commands only; keys they cannot carry whole are named on stderr.
    Never,
    /// RESTORE for the keys commands cannot rebuild exactly (a -0 score, consumer groups).
    Auto,
    /// RESTORE for every key.
    Always,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write every key (or the selected ones) as jsonl, json or RESP commands.
    Dump {
        /// RDB file, or - for standard input.
        file: PathBuf,
        #[arg(long, value_enum, default_value = "jsonl")]
        format: FormatArg,
        /// Only this database.
        #[arg(long)]
        db: Option<u64>,
        /// Only keys matching this Redis glob pattern.
        #[arg(long)]
        key: Option<String>,
        /// Only these types (string, list, set, zset, hash, stream, module); repeat or comma-separate.
        #[arg(long = "type", value_delimiter = ',')]
        types: Vec<String>,
        /// Keys (and hash fields) whose expiry is at or before --now: keep them or leave them out.
        #[arg(long, value_enum, default_value = "keep")]
        expired: ExpiredArg,
        /// The time, in unix ms, that --expired compares with (default: now).
        #[arg(long)]
        now: Option<i64>,
        /// With --format resp: when a key is written as RESTORE ... ABSTTL REPLACE.
        #[arg(long, value_enum, default_value = "auto")]
        resp_restore: RestoreArg,
        /// With --format resp: the server version loading the output (its RESTORE payloads;
        /// field TTLs only for 7.4). Default: the file's.
        #[arg(long, value_name = "V", value_parser = ferrokv_tools::parse_server_version)]
        redis_version: Option<ferrokv::command::catalog::ServerVersion>,
    },
    /// Check every record, every internal encoding and the checksum; summarise the file.
    Verify {
        file: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The time, in unix ms, used to count already-expired keys (default: now).
        #[arg(long)]
        now: Option<i64>,
        /// How many databases the server that loads the file has (its `databases`): a file
        /// selecting one past them is one it refuses.
        #[arg(long, default_value_t = ferrokv_tools::verify::DEFAULT_DATABASES)]
        databases: u64,
    },
    /// Re-encode an RDB (or a jsonl dump) for a target version, or as jsonl/json/resp/aof.
    Convert(ferrokv_tools::convert::ConvertArgs),
    /// Compare two datasets by value, whatever their encodings; exit 0 same, 1 different, 2 error.
    Diff(ferrokv_tools::diff::DiffArgs),
    /// What each key would cost the server that loads the file, and where it adds up.
    Memory(ferrokv_tools::memory::MemoryArgs),
    /// One RDB per Redis Cluster shard, each key where its hash slot goes.
    Split(ferrokv_tools::split::SplitArgs),
    /// Write the keys into a running Redis or Valkey, standalone or a cluster (RESTORE, pipelined).
    Restore(ferrokv_tools::restore::RestoreArgs),
    /// Header, aux fields and key counts, without decoding values.
    Info {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Print a completion script for a shell.
    Completions {
        #[arg(value_parser = ["bash", "zsh", "fish"])]
        shell: String,
    },
}

fn open(file: &std::path::Path) -> Result<Source, ToolError> {
    Source::open(file).map_err(|e| ToolError::Usage(format!("cannot read {}: {e}", file.display())))
}

fn run(cli: Cli) -> Result<u8, (String, ToolError)> {
    match cli.cmd {
        Cmd::Dump { file, format, db, key, types, expired, now, resp_restore, redis_version } => {
            let name = file.display().to_string();
            let src = open(&file).map_err(|e| (name.clone(), e))?;
            let mut lt = Vec::new();
            for t in &types {
                match LogicalType::from_name(t) {
                    Some(x) => lt.push(x),
                    None => return Err((name, ToolError::Usage(format!("unknown type '{t}'")))),
                }
            }
            let filter = Filter {
                db,
                key: key.map(String::into_bytes),
                types: lt,
                expired: match expired {
                    ExpiredArg::Skip => Expired::Skip,
                    ExpiredArg::Keep => Expired::Keep,
                },
                now_ms: now.unwrap_or_else(now_ms),
            };
            let format = match format {
                FormatArg::Jsonl => Format::Jsonl,
                FormatArg::Json => Format::Json,
                FormatArg::Resp => Format::Resp(RespOptions {
                    restore: match resp_restore {
                        RestoreArg::Never => Restore::Never,
                        RestoreArg::Auto => Restore::Auto,
                        RestoreArg::Always => Restore::Always,
                    },
                    target: redis_version.map(ferrokv::config::rdb_target_of),
                }),
            };
            let stdout = io::stdout();
            let mut lock = stdout.lock();
            let mut out = Out::new(&mut lock);
            let pipeline = ferrokv_tools::pipeline::Pipeline::default();
            match dump::run_with(&src, format, &filter, &mut out, &pipeline, &|off| src.release_before(off)) {
                Ok(_) => Ok(exit::OK),
                Err(e) => {
                    // Whatever was decoded before the error still reaches the output.
                    let _ = out.finish();
                    Err((name, e))
                }
            }
        }
        Cmd::Verify { file, json, now, databases } => {
            let name = file.display().to_string();
            let src = open(&file).map_err(|e| (name.clone(), e))?;
            let pipeline = ferrokv_tools::pipeline::Pipeline::default();
            let now = now.unwrap_or_else(now_ms);
            let result = walk_with(&src, Depth::Deep, now, databases, &pipeline, &|o| src.release_before(o));
            let mut stdout = io::stdout().lock();
            match result {
                Ok(r) => {
                    let text = if json {
                        format!("{}\n", report::json(&r, &name, None))
                    } else {
                        format!("OK: {name}\n{}", report::text(&r, true))
                    };
                    stdout.write_all(text.as_bytes()).map_err(|e| (name, e.into()))?;
                    Ok(exit::OK)
                }
                Err((r, e)) => {
                    if json {
                        let text = format!("{}\n", report::json(&r, &name, Some(&e)));
                        stdout.write_all(text.as_bytes()).map_err(|e| (name.clone(), e.into()))?;
                    }
                    Err((name, ToolError::Data(e)))
                }
            }
        }
        Cmd::Convert(args) => {
            let name = args.input.display().to_string();
            ferrokv_tools::convert::run_cli(args).map_err(|e| match e {
                // A corrupt input is an error for convert (exit 2), as for diff.
                ToolError::Data(d) => (name.clone(), ToolError::Usage(format!("{name}: {d}"))),
                other => (name, other),
            })
        }
        Cmd::Diff(args) => {
            let name = format!("{} {}", args.a.display(), args.b.display());
            // diff's contract: 1 means "different", so every error exits 2.
            ferrokv_tools::diff::run_cli(args).map_err(|e| match e {
                ToolError::Data(d) => (name, ToolError::Usage(d.to_string())),
                other => (name, other),
            })
        }
        Cmd::Split(args) => {
            let name = args.file.display().to_string();
            let src = open(&args.file).map_err(|e| (name.clone(), e))?;
            ferrokv_tools::split::run_cli(&args, &src, &mut io::stdout().lock()).map_err(|e| (name, e))?;
            Ok(exit::OK)
        }
        Cmd::Restore(args) => ferrokv_tools::restore::run_cli(&args, &mut io::stdout().lock()),
        Cmd::Memory(args) => {
            let name = args.file.display().to_string();
            let src = open(&args.file).map_err(|e| (name.clone(), e))?;
            ferrokv_tools::memory::run_cli(&args, &src, &name, &mut io::stdout().lock()).map_err(|e| (name, e))?;
            Ok(exit::OK)
        }
        Cmd::Info { file, json } => {
            let name = file.display().to_string();
            let src = open(&file).map_err(|e| (name.clone(), e))?;
            let r =
                walk_with(&src, Depth::Records, now_ms(), u64::MAX, &Default::default(), &|o| src.release_before(o))
                    .map_err(|(_, e)| (name.clone(), ToolError::Data(e)))?;
            let text = if json { format!("{}\n", report::json(&r, &name, None)) } else { report::text(&r, false) };
            io::stdout().lock().write_all(text.as_bytes()).map_err(|e| (name, e.into()))?;
            Ok(exit::OK)
        }
        Cmd::Completions { shell } => {
            generate::write(Cli::command(), &shell, &mut io::stdout().lock()).map_err(|e| (shell, e.into()))?;
            Ok(exit::OK)
        }
    }
}

fn main() -> ExitCode {
    if let Some(code) = generate::from_args::<Cli>(&std::env::args_os().collect::<Vec<_>>()) {
        return ExitCode::from(code);
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err((file, err)) => match err {
            ToolError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(exit::OK),
            ToolError::Io(e) => {
                eprintln!("rdbtool: {file}: {e}");
                ExitCode::from(exit::ERROR)
            }
            ToolError::Usage(m) => {
                eprintln!("rdbtool: {m}");
                ExitCode::from(exit::ERROR)
            }
            ToolError::Data(e) => {
                eprintln!("rdbtool: {file}: {e}");
                ExitCode::from(exit::INVALID)
            }
        },
    }
}
