//! The TLS context of `tls-port`, built with rustls from the `tls-*` parameters. Failures are
//! the lines Redis logs for them; the caller logs them and refuses the configuration.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig as TlsConfig, SignatureScheme,
};

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
        let provider = Arc::new(rustls::crypto::ring::default_provider());
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
        let versions = protocols(&self.protocols)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots =
            self.ca_roots().map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .build()
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure TLS protocols: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)));
        let (cert_file, key_file) = if self.client_cert_file.is_empty() {
            (&self.cert_file, &self.key_file)
        } else {
            (&self.client_cert_file, &self.client_key_file)
        };
        if cert_file.is_empty() {
            return Ok(Arc::new(builder.with_no_client_auth()));
        }
        let certs = read_certs(cert_file)?;
        let key = read_key(key_file)?;
        let config = builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
        Ok(Arc::new(config))
    }

    /// The CAs client certificates are checked against: tls-ca-cert-file, and every PEM file
    /// of tls-ca-cert-dir (OpenSSL's hashed names or any other).
    fn ca_roots(&self) -> Result<RootCertStore, String> {
        let mut roots = RootCertStore::empty();
        let mut add = |path: &Path, strict: bool| -> Result<(), String> {
            let certs = match CertificateDer::pem_file_iter(path).and_then(|it| it.collect::<Result<Vec<_>, _>>()) {
                Ok(c) => c,
                Err(e) if strict => return Err(format!("{}: {e}", path.display())),
                Err(_) => return Ok(()),
            };
            for c in certs {
                roots.add(c).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Ok(())
        };
        if !self.ca_cert_file.is_empty() {
            add(Path::new(&self.ca_cert_file), true)?;
        }
        if !self.ca_cert_dir.is_empty() {
            let dir = std::fs::read_dir(&self.ca_cert_dir).map_err(|e| format!("{}: {e}", self.ca_cert_dir))?;
            for entry in dir.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_file()) {
                    add(&entry.path(), false)?;
                }
            }
        }
        if roots.is_empty() {
            return Err("no CA certificate found".into());
        }
        Ok(roots)
    }
}

/// The certificate chain of a PEM file (at least one certificate).
fn read_certs(file: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(file)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("Failed to load certificate: {file}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("Failed to load certificate: {file}: no certificate in the file"));
    }
    Ok(certs)
}

/// A PEM private key (PKCS#8, PKCS#1 or SEC1, not encrypted).
fn read_key(key_file: &str) -> Result<PrivateKeyDer<'static>, String> {
    let fail = |why: &dyn std::fmt::Display| format!("Failed to load private key: {key_file}: {why}");
    let pem = std::fs::read(key_file).map_err(|e| fail(&e))?;
    if pem.windows(9).any(|w| w == b"ENCRYPTED") {
        // rustls reads plain PKCS#8/PKCS#1/SEC1 keys only.
        return Err(fail(&"encrypted keys (tls-key-file-pass) are not supported: decrypt it with `openssl pkey`"));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| fail(&e))
}

/// The server name a replica checks nothing against: the master's address.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("{host}: {e}"))
}

/// WebPKI's check of a server's chain, without its name: OpenSSL, as Redis sets it up, checks
/// that the master's certificate chains to the CA but not which host it names.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `tls-protocols` ("" is TLSv1.2 and TLSv1.3, as Redis's default).
fn protocols(text: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
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

/// The names whose change rebuilds the context (Redis's applyTlsCfg).
pub fn is_context_param(name: &str) -> bool {
    name.starts_with("tls-") && name != "tls-port"
}
