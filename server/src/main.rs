//! `ferrokv-server [config-file] [--name value ...]`

use ferrokv_server::{Server, ServerConfig};

// The allocator (mimalloc, counted for `used_memory` and `maxmemory`) is declared by the
// library: server/src/alloc.rs.

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
