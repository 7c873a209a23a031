//! The `Keys` handle: authentication by bearer secret and the management of API keys
//! (create, list, revoke) on a running server. Callers see `Key`, a key without its stored
//! hash; the records, their trees and the secret's hashing stay in the store. Every write is
//! admitted by the store's condition and made durable before it returns, so a key handed out
//! survives a crash and a revocation holds from the next request on. Each write is recorded in
//! the admin audit log (`AdminEvent`) with the caller's `Origin`, made durable by the same sync
//! as the act, so no acknowledged act is missing from the log.

use crate::failure::StorageError;
use runledger_base::clock::now;
use runledger_domain::{AdminEvent, Origin, Timestamp};
use runledger_store::admin_log::{key_created, key_revoked};
use runledger_store::{self as store, Store};

pub use runledger_store::api_keys::{Key, KeyKind};

/// A cheap-to-clone handle on the instance's API keys.
#[derive(Clone)]
pub struct Keys {
    store: Store,
}

impl Keys {
    pub fn new(store: Store) -> Keys {
        Keys { store }
    }

    /// The live key whose secret is `secret` (the bearer token of a request), if any.
    pub fn authenticate(&self, secret: &str) -> Result<Option<Key>, StorageError> {
        Ok(self.store.keys().authenticate(secret)?.map(Key::from))
    }

    /// The key `id`, revoked or not (a console session re-checks its key with it).
    pub fn get(&self, id: &str) -> Result<Option<Key>, StorageError> {
        Ok(self.store.keys().get(id)?.map(Key::from))
    }

    /// Every key, revoked ones included.
    pub fn list(&self) -> Result<Vec<Key>, StorageError> {
        Ok(self.store.keys().list()?.iter().map(Key::from).collect())
    }

    /// Creates a key and returns it with its secret, once it is durable: the secret is shown
    /// only to this caller and is not stored.
    pub async fn create(
        &self,
        name: &str,
        kind: KeyKind,
        admin: bool,
        team: &str,
        origin: Origin,
    ) -> Result<(Key, String), StorageError> {
        self.store.admit(store::Writer::Client)?;
        let at = now();
        let (record, secret) = self.store.keys().create(name, kind, admin, team, at)?;
        self.store.append_admin(at, key_created(&record), origin)?;
        self.store.sync().await?;
        Ok((Key::from(record), secret))
    }

    /// Revokes the key `id` and returns it once the revocation is durable; `None` if there is
    /// no such key. Revoking twice keeps the first `revoked_at`.
    pub async fn revoke(&self, id: &str, origin: Origin) -> Result<Option<Key>, StorageError> {
        self.store.admit(store::Writer::Client)?;
        let at = now();
        let Some(record) = self.store.keys().revoke(id, at)? else {
            return Ok(None);
        };
        self.store
            .append_admin(at, key_revoked(&record, at), origin)?;
        self.store.sync().await?;
        Ok(Some(Key::from(record)))
    }

    /// Whether team `name` exists (`default` always does).
    pub fn team_exists(&self, name: &str) -> Result<bool, StorageError> {
        Ok(self.store.keys().team_exists(name)?)
    }

    /// Every team with its creation time, `default` (as old as the instance: `None`) first.
    pub fn teams(&self) -> Result<Vec<(String, Option<Timestamp>)>, StorageError> {
        Ok(self.store.keys().teams()?)
    }

    /// Creates team `name` (already valid: `valid_team_name`) once it is durable; false if it
    /// existed.
    pub async fn create_team(&self, name: &str, origin: Origin) -> Result<bool, StorageError> {
        self.store.admit(store::Writer::Client)?;
        let at = now();
        let created = self.store.keys().create_team(name, at)?;
        if created {
            let event = AdminEvent::TeamCreated {
                name: name.to_string(),
            };
            self.store.append_admin(at, event, origin)?;
        }
        self.store.sync().await?;
        Ok(created)
    }
}
