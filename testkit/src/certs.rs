//! Certificates for TLS tests, made by openssl: a CA, a server certificate for 127.0.0.1 and
//! localhost, and a client certificate.

use std::process::Command;

use crate::TempDir;

pub struct Certs {
    dir: TempDir,
}

impl Certs {
    pub fn make() -> Certs {
        let dir = TempDir::new("tls-certs");
        let script = r#"set -e
openssl req -x509 -new -nodes -sha256 -days 3650 -subj '/O=ferrokv test/CN=CA' -newkey rsa:2048 -keyout ca.key -out ca.crt
mk() {
  openssl req -new -nodes -sha256 -subj "/O=ferrokv test/CN=$1" -newkey rsa:2048 -keyout $1.key -out $1.csr
  printf "$2" > $1.ext
  openssl x509 -req -sha256 -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -in $1.csr -out $1.crt -extfile $1.ext
}
mk server "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
mk client "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"
"#;
        let out = Command::new("bash")
            .args(["-c", script])
            .current_dir(dir.path())
            .output()
            .expect("openssl is installed (make deps)");
        assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
        Certs { dir }
    }

    /// A file of the set: ca.crt, server.crt, server.key, client.crt, client.key.
    pub fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// A server's TLS arguments on `tls_port` (clients must present a certificate, as
    /// Redis's default tls-auth-clients asks).
    pub fn server_args(&self, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.file("server.crt"),
            "--tls-key-file".into(),
            self.file("server.key"),
            "--tls-ca-cert-file".into(),
            self.file("ca.crt"),
        ]
    }
}
