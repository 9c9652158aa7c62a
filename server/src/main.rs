//! `ferrokv-server [config-file] [--name value ...]`

use ferrokv_server::{Server, ServerConfig};

// Replies and values are many small allocations; mimalloc serves them faster than glibc's
// malloc (bench/server.sh, docs/benchmarks.md), as jemalloc does for Redis.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "-v" || a == "--version") {
        println!(
            "ferrokv-server v={} (Redis {} compatible)",
            env!("CARGO_PKG_VERSION"),
            ferrokv_server::cmd::connection::REDIS_VERSION
        );
        return;
    }
    let cfg = match ServerConfig::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("\n*** FATAL CONFIG FILE ERROR (ferrokv-server) ***\n{e}");
            std::process::exit(1);
        }
    };
    let mut server = match Server::new(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    ferrokv_server::server::log(&format!(
        "Ready to accept connections tcp (port {})",
        server.local_port().unwrap_or_default()
    ));
    if let Err(e) = server.run() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
