//! The instance secrets in the `meta` tree: their names, their creation on first use, rotation,
//! and restore from a backup. It never hands a secret to anyone but the caller, and a restore
//! never replaces one.

use crate::layout::META;
use crate::{Error, Store};

/// The instance secret that makes `RUNLEDGER_INSTANCE`, the marker of this data directory's
/// agent processes.
pub const INSTANCE_ID: &str = "instance_id";
/// The instance secret that signs session-link tokens.
pub const SESSION_SECRET: &str = "session_secret";
/// The instance secret that seals runs' MCP credentials (`crate::credentials`).
pub const CREDENTIAL_KEY: &str = "credential_key";

/// Every instance secret, in the order a backup lists them. The `meta` tree holds other
/// records too (the commit number), so backups name secrets explicitly instead of walking it.
pub const INSTANCE_SECRETS: [&str; 3] = [INSTANCE_ID, SESSION_SECRET, CREDENTIAL_KEY];

impl Store {
    /// Replaces an instance secret with a fresh random one (not yet durable: `sync` after).
    /// For the session-link secret, every link signed with the old one stops working.
    pub fn rotate_secret(&self, name: &str) -> Result<[u8; 32], Error> {
        use rand::RngCore;
        let mut fresh = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut fresh);
        self.inner.meta.insert(name, &fresh[..])?;
        Ok(fresh)
    }

    /// A secret of this instance, created on first use (e.g. for session-link tokens).
    pub fn instance_secret(&self, name: &str) -> Result<[u8; 32], Error> {
        use rand::RngCore;
        let mut fresh = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut fresh);
        let stored =
            match self
                .inner
                .meta
                .compare_and_swap(name, None as Option<&[u8]>, Some(&fresh[..]))?
            {
                Ok(()) => fresh.to_vec(),
                Err(existing) => existing.current.map(|v| v.to_vec()).unwrap_or_default(),
            };
        stored.try_into().map_err(|_| Error::CorruptRecord {
            tree: META,
            detail: format!("secret {name} has the wrong length"),
        })
    }

    /// An instance secret if it exists; unlike `instance_secret`, never creates one (for
    /// `export`, which must not write to the store it reads).
    pub fn existing_secret(&self, name: &str) -> Result<Option<[u8; 32]>, Error> {
        self.inner
            .meta
            .get(name)?
            .map(|v| {
                v.as_ref().try_into().map_err(|_| Error::CorruptRecord {
                    tree: META,
                    detail: format!("secret {name} has the wrong length"),
                })
            })
            .transpose()
    }

    /// Stores an instance secret taken from a backup. Returns false, storing nothing, if the
    /// secret already exists: a restore never replaces one.
    pub fn restore_secret(&self, name: &str, value: &[u8; 32]) -> Result<bool, Error> {
        Ok(self
            .inner
            .meta
            .compare_and_swap(name, None as Option<&[u8]>, Some(&value[..]))?
            .is_ok())
    }
}
