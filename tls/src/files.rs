//! Certificates, keys and CAs from PEM files.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;

/// The certificate chain of a PEM file (at least one certificate).
pub fn read_certs(file: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(file)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("Failed to load certificate: {file}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("Failed to load certificate: {file}: no certificate in the file"));
    }
    Ok(certs)
}

/// A PEM private key (PKCS#8, PKCS#1 or SEC1, not encrypted).
pub fn read_key(key_file: &str) -> Result<PrivateKeyDer<'static>, String> {
    let fail = |why: &dyn std::fmt::Display| format!("Failed to load private key: {key_file}: {why}");
    let pem = std::fs::read(key_file).map_err(|e| fail(&e))?;
    if pem.windows(9).any(|w| w == b"ENCRYPTED") {
        // rustls reads plain PKCS#8/PKCS#1/SEC1 keys only.
        return Err(fail(&"encrypted keys (tls-key-file-pass) are not supported: decrypt it with `openssl pkey`"));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| fail(&e))
}

/// The CAs of a PEM file and of every PEM file of a directory (OpenSSL's hashed names or
/// any other); either may be "".
pub fn ca_roots(ca_file: &str, ca_dir: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if !ca_file.is_empty() {
        add_file(&mut roots, Path::new(ca_file), true)?;
    }
    if !ca_dir.is_empty() {
        add_dir(&mut roots, Path::new(ca_dir))?;
    }
    if roots.is_empty() {
        return Err("no CA certificate found".into());
    }
    Ok(roots)
}

/// The system's CAs, where OpenSSL looks for them: `SSL_CERT_FILE` / `SSL_CERT_DIR`, else the
/// bundle of the usual distributions.
pub fn system_roots() -> Result<RootCertStore, String> {
    let file = std::env::var("SSL_CERT_FILE").unwrap_or_default();
    let dir = std::env::var("SSL_CERT_DIR").unwrap_or_default();
    if !file.is_empty() || !dir.is_empty() {
        return ca_roots(&file, &dir);
    }
    const BUNDLES: [&str; 5] = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem",
        "/etc/ssl/cert.pem",
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    ];
    let mut roots = RootCertStore::empty();
    if let Some(bundle) = BUNDLES.iter().map(Path::new).find(|p| p.is_file()) {
        add_file(&mut roots, bundle, false)?;
    }
    if roots.is_empty() {
        return Err("no CA certificate given and none found in the system's bundle (give one with --cacert)".into());
    }
    Ok(roots)
}

/// A file's certificates; unless `strict`, one that is not PEM or holds none is passed over.
fn add_file(roots: &mut RootCertStore, path: &Path, strict: bool) -> Result<(), String> {
    let certs = match CertificateDer::pem_file_iter(path).and_then(|it| it.collect::<Result<Vec<_>, _>>()) {
        Ok(c) => c,
        Err(e) if strict => return Err(format!("{}: {e}", path.display())),
        Err(_) => return Ok(()),
    };
    for c in certs {
        if let Err(e) = roots.add(c) {
            if strict {
                return Err(format!("{}: {e}", path.display()));
            }
        }
    }
    Ok(())
}

fn add_dir(roots: &mut RootCertStore, dir: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            add_file(roots, &entry.path(), false)?;
        }
    }
    Ok(())
}
