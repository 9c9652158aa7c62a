//! Connections and listening sockets: plain TCP, TLS (rustls) and the unix socket behind one
//! `Conn` a client reads and writes, and the `Listeners` the event loop accepts from and
//! CONFIG SET rebinds.

mod conn;
mod listeners;
mod migrate;
mod peer;
mod tls;

pub use conn::Conn;
pub use ferrokv_tls::server_name;
pub use listeners::Listeners;
pub use migrate::{MigrateSockets, MigrateTarget};
pub use peer::Peer;
pub use tls::TlsSettings;
