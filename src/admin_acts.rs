//! The server's own entries in the admin audit log: what it records when it starts serving a
//! store and when it stops cleanly, naming runledger's version and the configuration it ran
//! with (a SHA-256 of the configuration file's bytes). Start-up (`startup`) decides when; this
//! module only says what the records hold.

use sha2::{Digest, Sha256};

use runledger_config::Config;
use runledger_domain::AdminEvent;
use runledger_format::time::hex;

/// The version and configuration a server runs with, as its start and stop records name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub version: String,
    /// SHA-256 of the configuration file's bytes, lowercase hex. Without a file, the
    /// configuration is the built-in defaults, which an empty file also gives: the digest of no
    /// bytes.
    pub config_sha256: String,
    /// The configuration file, absolute; `None` without one.
    pub config_file: Option<String>,
}

impl Identity {
    /// The identity of a server that loaded `config`; the file is read again for its bytes.
    pub fn of(config: &Config) -> std::io::Result<Identity> {
        let bytes = match &config.file {
            Some(path) => std::fs::read(path)?,
            None => Vec::new(),
        };
        Ok(Identity {
            version: env!("CARGO_PKG_VERSION").to_string(),
            config_sha256: hex(&Sha256::digest(&bytes)),
            config_file: config.file.as_ref().map(|p| p.display().to_string()),
        })
    }

    pub fn started(&self) -> AdminEvent {
        AdminEvent::ServerStarted {
            version: self.version.clone(),
            config_sha256: self.config_sha256.clone(),
            config_file: self.config_file.clone(),
        }
    }

    /// The record of a clean stop asked for by `signal`.
    pub fn stopped(&self, signal: &str) -> AdminEvent {
        AdminEvent::ServerStopped {
            version: self.version.clone(),
            config_sha256: self.config_sha256.clone(),
            signal: signal.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_of_the_file_or_of_no_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runledger.toml");
        let text = "[server]\nbind = \"127.0.0.1:0\"\n";
        std::fs::write(&path, text).expect("write");
        let overrides = runledger_config::Overrides {
            data_dir: Some(dir.path().join("data")),
            ..Default::default()
        };
        let config = Config::load(Some(&path), &overrides).expect("config");
        let identity = Identity::of(&config).expect("identity");
        assert_eq!(
            identity.config_sha256,
            hex(&Sha256::digest(text.as_bytes()))
        );
        assert!(identity
            .config_file
            .as_deref()
            .is_some_and(|f| f.ends_with("runledger.toml")));
        let defaults = Config::load(None, &overrides).expect("config");
        assert_eq!(
            Identity::of(&defaults).expect("identity").config_sha256,
            // SHA-256 of the empty string.
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
