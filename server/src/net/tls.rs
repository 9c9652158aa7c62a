//! The TLS context of `tls-port`, built with rustls from the `tls-*` parameters. Failures are
//! the lines Redis logs for them; the caller logs them and refuses the configuration.

use std::sync::Arc;

use ferrokv_tls::{protocols, read_certs, read_key, ClientSide, Verify};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{ClientConfig, RootCertStore, ServerConfig as TlsConfig};

use crate::config::ServerConfig;

/// `tls-auth-clients`: whether a client must present a certificate the CA signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientAuth {
    No,
    Yes,
    Optional,
}

/// The parameters a TLS context is built from. Two equal settings give the same context,
/// except that the files are read again (Redis reloads them on every CONFIG SET).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    cert_file: String,
    key_file: String,
    key_file_pass: String,
    client_cert_file: String,
    client_key_file: String,
    ca_cert_file: String,
    ca_cert_dir: String,
    protocols: String,
    auth: ClientAuth,
    session_caching: bool,
    session_cache_size: usize,
}

impl TlsSettings {
    pub fn of(cfg: &ServerConfig) -> TlsSettings {
        let get = |name: &str| cfg.get(name).unwrap_or_default();
        TlsSettings {
            cert_file: get("tls-cert-file"),
            key_file: get("tls-key-file"),
            key_file_pass: get("tls-key-file-pass"),
            client_cert_file: get("tls-client-cert-file"),
            client_key_file: get("tls-client-key-file"),
            ca_cert_file: get("tls-ca-cert-file"),
            ca_cert_dir: get("tls-ca-cert-dir"),
            protocols: get("tls-protocols"),
            auth: match get("tls-auth-clients").as_str() {
                "no" => ClientAuth::No,
                "optional" => ClientAuth::Optional,
                _ => ClientAuth::Yes,
            },
            session_caching: get("tls-session-caching") != "no",
            session_cache_size: get("tls-session-cache-size").parse().unwrap_or(20 * 1024),
        }
    }

    /// Build the server side context. Err: the line to log.
    pub fn configure(&self) -> Result<Arc<TlsConfig>, String> {
        if self.cert_file.is_empty() {
            return Err("No tls-cert-file configured!".into());
        }
        if self.key_file.is_empty() {
            return Err("No tls-key-file configured!".into());
        }
        if self.auth != ClientAuth::No && self.ca_cert_file.is_empty() && self.ca_cert_dir.is_empty() {
            return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
        }
        let versions = protocols(&self.protocols)?;
        let certs = read_certs(&self.cert_file)?;
        let key = read_key(&self.key_file)?;
        let provider = ferrokv_tls::provider();
        let builder = TlsConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure TLS protocols: {e}"))?;
        let builder = if self.auth == ClientAuth::No {
            builder.with_no_client_auth()
        } else {
            let roots =
                self.ca_roots().map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if self.auth == ClientAuth::Optional { verifier.allow_unauthenticated() } else { verifier };
            let verifier =
                verifier.build().map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        };
        let mut config = builder
            .with_single_cert(certs, key)
            .map_err(|e| format!("Failed to load private key: {}: {e}", self.key_file))?;
        config.session_storage = if self.session_caching && self.session_cache_size > 0 {
            ServerSessionMemoryCache::new(self.session_cache_size)
        } else {
            Arc::new(NoServerSessionStorage {})
        };
        Ok(Arc::new(config))
    }

    /// The context a replication link connects with (`tls-replication yes`): the master's
    /// certificate checked against the CA as Redis checks it (the chain, not the name: a
    /// master is often reached by address), and our certificate for a master that asks for
    /// one (tls-client-cert-file, else tls-cert-file, as Redis).
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, String> {
        let (cert_file, key_file) = if self.client_cert_file.is_empty() {
            (&self.cert_file, &self.key_file)
        } else {
            (&self.client_cert_file, &self.client_key_file)
        };
        ferrokv_tls::client_config(&ClientSide {
            ca_file: self.ca_cert_file.clone(),
            ca_dir: self.ca_cert_dir.clone(),
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
            protocols: self.protocols.clone(),
            verify: Verify::Chain,
            system_roots: false,
        })
    }

    /// The CAs client certificates are checked against: tls-ca-cert-file, and every PEM file
    /// of tls-ca-cert-dir.
    fn ca_roots(&self) -> Result<RootCertStore, String> {
        ferrokv_tls::ca_roots(&self.ca_cert_file, &self.ca_cert_dir)
    }
}

/// The names whose change rebuilds the context (Redis's applyTlsCfg).
pub fn is_context_param(name: &str) -> bool {
    name.starts_with("tls-") && name != "tls-port"
}
