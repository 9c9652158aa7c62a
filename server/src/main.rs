//! `ferrokv-server [config-file] [--name value ...] [-]`, as redis-server.

use ferrokv_server::{Server, ServerConfig};

// The allocator (mimalloc, counted for `used_memory` and `maxmemory`) is declared by the
// library: server/src/alloc.rs.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "-v" || a == "--version") {
        println!(
            "ferrokv-server v={} (Redis {} compatible)",
            env!("CARGO_PKG_VERSION"),
            ferrokv_server::version::release()
        );
        return;
    }
    if args.first().is_some_and(|a| a == "-h" || a == "--help") {
        // redis-server prints its usage on stderr and exits 1.
        eprint!("{USAGE}");
        std::process::exit(1);
    }
    ferrokv_server::crash::install();
    let cfg = match ServerConfig::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("\n*** FATAL CONFIG FILE ERROR (ferrokv-server) ***\n{e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = ferrokv_server::log::configure(&cfg.loglevel, &cfg.get("logfile").unwrap_or_default()) {
        eprintln!("\n*** FATAL CONFIG FILE ERROR (ferrokv-server) ***\n{e}");
        std::process::exit(1);
    }
    // The server runs on a thread whose stack does not depend on `ulimit -s`: a script may
    // return a table nested thousands deep, and its conversion recurses as deep (Redis stops
    // at its Lua stack limit, about 8,000 levels, and so do we). Reserved, not committed.
    if cfg.get("disable-thp").as_deref() == Some("yes") {
        // Best effort, as Redis: a kernel without the flag keeps its setting.
        let _ = ferrokv_server::alloc::disable_transparent_huge_pages();
    }
    let main_loop =
        std::thread::Builder::new().name("ferrokv-main".into()).stack_size(MAIN_STACK_BYTES).spawn(move || serve(cfg));
    match main_loop.map(|h| h.join()) {
        Ok(Ok(())) => {}
        Ok(Err(_)) => std::process::exit(1),
        Err(e) => {
            eprintln!("cannot start the main thread: {e}");
            std::process::exit(1);
        }
    }
}

const USAGE: &str = r#"Usage: ferrokv-server [/path/to/redis.conf] [options] [-]
       ferrokv-server - (read the configuration from stdin)
       ferrokv-server -v or --version
       ferrokv-server -h or --help

The configuration file is redis.conf's format; every directive is also an option
(--port 7777). The file is read first, then stdin (with -), then the options.
Without a file the embedded defaults are Redis 7.0's; --redis-version 6.2|7.0|7.2|7.4
picks the version the server stands in for. Manual: docs/server.md

Examples:
       ferrokv-server (the embedded defaults, port 6379, data in the current directory)
       echo 'maxmemory 128mb' | ferrokv-server -
       ferrokv-server /etc/redis/6379.conf
       ferrokv-server --port 7777 --dir /var/lib/ferrokv --appendonly yes
       ferrokv-server --port 7777 --replicaof 127.0.0.1 8888
       ferrokv-server /etc/myredis.conf --loglevel verbose -

Exit codes:
       0  shut down as asked (SHUTDOWN, SIGTERM, SIGINT)
       1  a configuration error, data that cannot be loaded, or a port that cannot be bound
"#;

/// Stack of the thread that serves clients.
const MAIN_STACK_BYTES: usize = 128 << 20;

fn serve(cfg: ServerConfig) {
    let mut server = match Server::new(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    server.log_ready();
    if let Err(e) = server.run() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
