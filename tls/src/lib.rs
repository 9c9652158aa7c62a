//! TLS as ferrokv-server and the tools both speak it, with rustls: certificates, keys and CAs
//! read as Redis reads them, `tls-protocols`, the client context a replica or a tool
//! connects with (the peer's chain checked as Redis and hiredis check it: against the CA, not
//! the host name), and a blocking tunnel for the tools' threads.

mod files;
mod tunnel;
mod verify;

use std::sync::Arc;

use rustls::ClientConfig;

pub use files::{ca_roots, read_certs, read_key, system_roots};
pub use rustls;
pub use tunnel::{tunnel, Tunnel, Why};
pub use verify::ChainOnly;

/// How a client checks the server it connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// The certificate chains to a CA of the roots (its names are not checked).
    Chain,
    /// Anything is accepted (redis-cli's `--insecure`).
    Nothing,
}

/// What a client context is built from: empty strings for what is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSide {
    pub ca_file: String,
    pub ca_dir: String,
    /// The certificate (and its key) given to a server that asks for one.
    pub cert_file: String,
    pub key_file: String,
    /// `tls-protocols` ("" for TLSv1.2 and TLSv1.3).
    pub protocols: String,
    pub verify: Verify,
    /// With no CA file or directory: the system's CAs (a tool), or an error (a replica,
    /// as Redis requires tls-ca-cert-file or -dir for tls-replication).
    pub system_roots: bool,
}

impl Default for ClientSide {
    fn default() -> Self {
        ClientSide {
            ca_file: String::new(),
            ca_dir: String::new(),
            cert_file: String::new(),
            key_file: String::new(),
            protocols: String::new(),
            verify: Verify::Chain,
            system_roots: true,
        }
    }
}

/// The ring provider every context here uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client context. Err: what is wrong, in the words Redis logs for it.
pub fn client_config(side: &ClientSide) -> Result<Arc<ClientConfig>, String> {
    let versions = protocols(&side.protocols)?;
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("Failed to configure TLS protocols: {e}"))?
        .dangerous();
    let builder = match side.verify {
        Verify::Nothing => builder.with_custom_certificate_verifier(Arc::new(ChainOnly::anything(provider))),
        Verify::Chain => {
            let roots = if side.ca_file.is_empty() && side.ca_dir.is_empty() && side.system_roots {
                system_roots()
            } else {
                ca_roots(&side.ca_file, &side.ca_dir)
            }
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
            builder.with_custom_certificate_verifier(Arc::new(ChainOnly::new(roots, provider)?))
        }
    };
    if side.cert_file.is_empty() {
        return Ok(Arc::new(builder.with_no_client_auth()));
    }
    let certs = read_certs(&side.cert_file)?;
    let key = read_key(&side.key_file)?;
    let config = builder
        .with_client_auth_cert(certs, key)
        .map_err(|e| format!("Failed to load private key: {}: {e}", side.key_file))?;
    Ok(Arc::new(config))
}

/// `tls-protocols` ("" is TLSv1.2 and TLSv1.3, as Redis's default).
pub fn protocols(text: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    if text.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS12, &rustls::version::TLS13]);
    }
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => out.push(&rustls::version::TLS12),
            "tlsv1.3" => out.push(&rustls::version::TLS13),
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "{word} is specified in tls-protocols but not supported (rustls speaks TLSv1.2 and TLSv1.3)."
                ))
            }
            _ => return Err(
                "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'."
                    .into(),
            ),
        }
    }
    Ok(out)
}

/// The name a client presents (SNI) and nothing is checked against: a host name, or an
/// address (no SNI is sent for one).
pub fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| format!("{host}: {e}"))
}
