//! TLS for the HTTP listener: turns the certificate chain and private key files named in the
//! configuration (PEM) into a rustls server configuration with the `ring` provider. (The command
//! line's client, `cli::remote`, trusts that same file through reqwest.)
//!
//! This module alone knows rustls. It reads the two files once, at start-up, and checks
//! everything that would otherwise only fail at the first handshake: that each file holds what
//! it should, that the key is of a supported kind, and that it belongs to the certificate. Its
//! errors say which of the two files is at fault, so that `server.rs` can name the field and
//! line. It knows nothing of the config file's syntax or of HTTP.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::ServerConfig;

/// What is wrong, and with which file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The certificate file is at fault.
    #[error("{0}")]
    Cert(String),
    /// The private key file is at fault (including a key that belongs to another certificate).
    #[error("{0}")]
    Key(String),
}

/// Loads `cert` (the chain, leaf first) and `key` into a server configuration.
pub fn load(cert: &Path, key: &Path) -> Result<ServerConfig, Error> {
    let chain = read_chain(cert)?;
    let key_der = read_key(key)?;
    // An explicit provider, not the process-wide default: nothing then depends on which
    // providers other crates happen to enable.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let signing_key = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| {
            Error::Key(format!(
            "{}: unsupported private key ({e}); RSA, ECDSA (P-256, P-384) and Ed25519 keys work",
            key.display()
        ))
        })?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        // ring's keys always know their public half; "unknown" cannot happen with them.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            return Err(Error::Key(format!(
                "the private key in {} does not belong to the certificate in {} (the first \
                 certificate of the file must be the server's own)",
                key.display(),
                cert.display()
            )))
        }
        Err(e) => {
            return Err(Error::Cert(format!(
                "{}: the first certificate cannot be used: {e}",
                cert.display()
            )))
        }
    }
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        // Only reachable with a provider that supports no protocol version; ring has both.
        .map_err(|e| Error::Cert(format!("no usable TLS protocol version: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    Ok(config)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let bytes = read(path).map_err(Error::Cert)?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Cert(format!("{} is not valid PEM: {e}", path.display())))?;
    if chain.is_empty() {
        return Err(Error::Cert(format!(
            "{} holds no certificate (expected PEM blocks \"-----BEGIN CERTIFICATE-----\", the \
             server's certificate first)",
            path.display()
        )));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    let bytes = read(path).map_err(Error::Key)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => Error::Key(format!(
            "{} holds no private key (expected a PEM block \"-----BEGIN PRIVATE KEY-----\", \
             \"BEGIN RSA PRIVATE KEY\" or \"BEGIN EC PRIVATE KEY\")",
            path.display()
        )),
        e => Error::Key(format!("{} is not valid PEM: {e}", path.display())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Files {
        dir: tempfile::TempDir,
    }

    impl Files {
        fn new() -> Files {
            Files {
                dir: tempfile::tempdir().expect("tempdir"),
            }
        }

        /// A self-signed certificate for localhost: `(cert.pem, key.pem)`.
        fn pair(&self, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
            let generated =
                rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("rcgen");
            let cert = self.write(&format!("{name}.crt"), &generated.cert.pem());
            let key = self.write(&format!("{name}.key"), &generated.key_pair.serialize_pem());
            (cert, key)
        }

        fn write(&self, name: &str, text: &str) -> std::path::PathBuf {
            let path = self.dir.path().join(name);
            std::fs::write(&path, text).expect("write");
            path
        }
    }

    fn message(result: Result<ServerConfig, Error>) -> Error {
        result.expect_err("refused")
    }

    #[test]
    fn a_matching_pair_loads() {
        let files = Files::new();
        let (cert, key) = files.pair("a");
        load(&cert, &key).expect("loads");
        // One file with both works too: each reader takes its own PEM blocks.
        let both = files.write(
            "both.pem",
            &format!(
                "{}{}",
                std::fs::read_to_string(&cert).expect("read"),
                std::fs::read_to_string(&key).expect("read")
            ),
        );
        load(&both, &both).expect("loads");
    }

    #[test]
    fn each_failure_names_the_file_at_fault() {
        let files = Files::new();
        let (cert, key) = files.pair("a");
        let (_, other_key) = files.pair("b");
        let missing = files.dir.path().join("missing.pem");
        let garbage = files.write("garbage.pem", "not pem at all\n");
        let truncated = files.write("truncated.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n");

        let e = message(load(&missing, &key));
        assert!(
            matches!(&e, Error::Cert(m) if m.contains("cannot read") && m.contains("missing.pem")),
            "{e:?}"
        );
        let e = message(load(&cert, &missing));
        assert!(
            matches!(&e, Error::Key(m) if m.contains("cannot read")),
            "{e:?}"
        );
        let e = message(load(&key, &key));
        assert!(
            matches!(&e, Error::Cert(m) if m.contains("holds no certificate")),
            "{e:?}"
        );
        let e = message(load(&garbage, &key));
        assert!(
            matches!(&e, Error::Cert(m) if m.contains("holds no certificate")),
            "{e:?}"
        );
        let e = message(load(&truncated, &key));
        assert!(
            matches!(&e, Error::Cert(m) if m.contains("not valid PEM")),
            "{e:?}"
        );
        let e = message(load(&cert, &cert));
        assert!(
            matches!(&e, Error::Key(m) if m.contains("holds no private key")),
            "{e:?}"
        );
        let e = message(load(&cert, &other_key));
        assert!(
            matches!(&e, Error::Key(m) if m.contains("does not belong to the certificate")),
            "{e:?}"
        );
    }
}
