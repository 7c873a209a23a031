//! API keys: creation, lookup by secret, listing and revocation.
//!
//! A key's secret (`rl_` + 256 random bits, base64url) is shown once and stored only as its
//! SHA-256. Lookup goes through the hash, and the stored hash is compared in constant time, so
//! neither timing nor the store reveals a usable key. Records are read from sled on every
//! request, which is what makes a revocation effective on the very next request.

use base64::Engine;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Error;
use runledger_domain::{CreatorKind, Timestamp, DEFAULT_TEAM};

const KEYS: &str = "keys";
const KEY_HASHES: &str = "key_hashes";
const TEAMS: &str = "teams";
pub const PREFIX: &str = "rl_";

/// An API key as callers see it: everything but the hash of its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub id: String,
    pub name: String,
    pub kind: KeyKind,
    /// Admin keys may manage other keys through the admin API.
    pub admin: bool,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// The team whose runs the key sees and creates.
    pub team: String,
}

impl From<&KeyRecord> for Key {
    fn from(r: &KeyRecord) -> Key {
        Key {
            id: r.id.clone(),
            name: r.name.clone(),
            kind: r.kind,
            admin: r.admin,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
            team: r.team.clone(),
        }
    }
}

impl From<KeyRecord> for Key {
    fn from(r: KeyRecord) -> Key {
        Key::from(&r)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyKind {
    /// Runs are attributed to the key's user.
    Personal,
    /// Runs are attributed to an agent (a service account).
    Agent,
}

impl KeyKind {
    pub const ALL: [KeyKind; 2] = [KeyKind::Personal, KeyKind::Agent];

    pub fn as_str(self) -> &'static str {
        match self {
            KeyKind::Personal => "personal",
            KeyKind::Agent => "agent",
        }
    }

    pub fn parse(s: &str) -> Option<KeyKind> {
        KeyKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn creator_kind(self) -> CreatorKind {
        match self {
            KeyKind::Personal => CreatorKind::User,
            KeyKind::Agent => CreatorKind::ServiceAccount,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub id: String,
    pub name: String,
    pub kind: KeyKind,
    /// Admin keys may manage other keys through the admin API.
    pub admin: bool,
    pub hash: [u8; 32],
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// The team whose runs the key sees and creates.
    pub team: String,
}

/// A key record as stores from before teams wrote it: `KeyRecord` without `team`. Such a key
/// belongs to the team `default`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct LegacyRecord {
    id: String,
    name: String,
    kind: KeyKind,
    admin: bool,
    hash: [u8; 32],
    created_at: Timestamp,
    revoked_at: Option<Timestamp>,
}

#[derive(Serialize, Deserialize)]
struct TeamRecord {
    name: String,
    created_at: Timestamp,
}

/// The first byte of a record written with its team. A legacy record starts with the length
/// of its id (26, a ULID), so the two cannot be confused.
const RECORD_V2: u8 = 2;

fn encode(record: &KeyRecord) -> Result<Vec<u8>, Error> {
    let bytes = vec![RECORD_V2];
    postcard::to_extend(record, bytes).map_err(corrupt)
}

fn decode(bytes: &[u8]) -> Result<KeyRecord, Error> {
    match bytes.split_first() {
        Some((&RECORD_V2, rest)) => postcard::from_bytes(rest).map_err(corrupt),
        _ => {
            let r: LegacyRecord = postcard::from_bytes(bytes).map_err(corrupt)?;
            Ok(KeyRecord {
                id: r.id,
                name: r.name,
                kind: r.kind,
                admin: r.admin,
                hash: r.hash,
                created_at: r.created_at,
                revoked_at: r.revoked_at,
                team: DEFAULT_TEAM.to_string(),
            })
        }
    }
}

pub(super) struct KeyTrees {
    keys: sled::Tree,
    hashes: sled::Tree,
    /// Teams by name; the value is the team's record. `default` exists without a record.
    teams: sled::Tree,
    /// Live keys already authenticated, by the hash of their secret. Every request
    /// authenticates, and this spares it two sled reads. A revocation removes the key here in
    /// the same call that stores it, and while a server holds the store every revocation goes
    /// through it (the admin API), so a revoked key is refused on its very next request.
    live: std::sync::RwLock<LiveKeys>,
}

/// The cache of live keys, with a count of revocations: a lookup that raced a revocation (it
/// read the key from sled before the revocation was stored) does not fill the cache.
#[derive(Default)]
struct LiveKeys {
    revocations: u64,
    by_hash: std::collections::HashMap<[u8; 32], KeyRecord>,
}

impl KeyTrees {
    pub(super) fn open(db: &sled::Db) -> Result<KeyTrees, Error> {
        Ok(KeyTrees {
            keys: db.open_tree(KEYS)?,
            hashes: db.open_tree(KEY_HASHES)?,
            teams: db.open_tree(TEAMS)?,
            live: Default::default(),
        })
    }
}

pub struct Keys<'a> {
    trees: &'a KeyTrees,
}

fn hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn corrupt(detail: impl ToString) -> Error {
    Error::CorruptRecord {
        tree: KEYS,
        detail: detail.to_string(),
    }
}

impl<'a> Keys<'a> {
    pub(super) fn new(trees: &'a KeyTrees) -> Keys<'a> {
        Keys { trees }
    }

    /// Creates a key and returns its record and its secret (which is not stored).
    /// The caller must `sync` before handing the secret out.
    pub fn create(
        &self,
        name: &str,
        kind: KeyKind,
        admin: bool,
        team: &str,
        now: Timestamp,
    ) -> Result<(KeyRecord, String), Error> {
        let mut secret_bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret_bytes);
        let secret = format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret_bytes)
        );
        let mut id_random = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut id_random);
        let id = ulid::Ulid::from_parts(now.0, u128::from_be_bytes(id_random)).to_string();
        let record = KeyRecord {
            id: id.clone(),
            name: name.to_string(),
            kind,
            admin,
            hash: hash(&secret),
            created_at: now,
            revoked_at: None,
            team: team.to_string(),
        };
        self.put(&record)?;
        self.trees.hashes.insert(record.hash, id.as_bytes())?;
        Ok((record, secret))
    }

    /// Stores a key record taken from a backup, hash included. Returns false, storing
    /// nothing, if a key with the same id or hash exists: a restore never replaces a key.
    pub fn restore(&self, record: &KeyRecord) -> Result<bool, Error> {
        if self.trees.keys.contains_key(record.id.as_bytes())?
            || self.trees.hashes.contains_key(record.hash)?
        {
            return Ok(false);
        }
        self.put(record)?;
        self.trees
            .hashes
            .insert(record.hash, record.id.as_bytes())?;
        Ok(true)
    }

    fn put(&self, record: &KeyRecord) -> Result<(), Error> {
        self.trees
            .keys
            .insert(record.id.as_bytes(), encode(record)?)?;
        Ok(())
    }

    pub fn get(&self, id: &str) -> Result<Option<KeyRecord>, Error> {
        match self.trees.keys.get(id.as_bytes())? {
            None => Ok(None),
            Some(bytes) => decode(&bytes).map(Some),
        }
    }

    /// Every key, oldest first, revoked ones included.
    pub fn list(&self) -> Result<Vec<KeyRecord>, Error> {
        self.trees
            .keys
            .iter()
            .values()
            .map(|v| decode(&v?))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.trees.keys.is_empty()
    }

    /// Revokes a key; revoking twice keeps the first revocation time.
    pub fn revoke(&self, id: &str, now: Timestamp) -> Result<Option<KeyRecord>, Error> {
        let Some(mut record) = self.get(id)? else {
            return Ok(None);
        };
        if record.revoked_at.is_none() {
            record.revoked_at = Some(now);
            self.put(&record)?;
        }
        let mut live = self.trees.live.write().unwrap_or_else(|p| p.into_inner());
        live.revocations += 1;
        live.by_hash.remove(&record.hash);
        Ok(Some(record))
    }

    /// Creates team `name`; false, changing nothing, if it exists. The caller validates the
    /// name (`valid_team_name`) and syncs.
    pub fn create_team(&self, name: &str, now: Timestamp) -> Result<bool, Error> {
        if name == DEFAULT_TEAM {
            return Ok(false);
        }
        let record = postcard::to_allocvec(&TeamRecord {
            name: name.to_string(),
            created_at: now,
        })
        .map_err(corrupt)?;
        let swapped = self.trees.teams.compare_and_swap(
            name.as_bytes(),
            None as Option<&[u8]>,
            Some(record),
        )?;
        Ok(swapped.is_ok())
    }

    /// Whether team `name` exists (`default` always does).
    pub fn team_exists(&self, name: &str) -> Result<bool, Error> {
        Ok(name == DEFAULT_TEAM || self.trees.teams.contains_key(name.as_bytes())?)
    }

    /// Every team, `default` first (its creation time is `None`: it is as old as the store),
    /// then by name.
    pub fn teams(&self) -> Result<Vec<(String, Option<Timestamp>)>, Error> {
        let mut teams = vec![(DEFAULT_TEAM.to_string(), None)];
        for value in self.trees.teams.iter().values() {
            let record: TeamRecord =
                postcard::from_bytes(&value?).map_err(|e| Error::CorruptRecord {
                    tree: TEAMS,
                    detail: e.to_string(),
                })?;
            teams.push((record.name, Some(record.created_at)));
        }
        Ok(teams)
    }

    /// The live key whose secret is `secret`, if any.
    pub fn authenticate(&self, secret: &str) -> Result<Option<KeyRecord>, Error> {
        if !secret.starts_with(PREFIX) {
            return Ok(None);
        }
        let digest = hash(secret);
        let revocations = {
            let live = self.trees.live.read().unwrap_or_else(|p| p.into_inner());
            if let Some(record) = live.by_hash.get(&digest) {
                if bool::from(record.hash.ct_eq(&digest)) {
                    return Ok(Some(record.clone()));
                }
            }
            live.revocations
        };
        let Some(id) = self.trees.hashes.get(digest)? else {
            return Ok(None);
        };
        let id = std::str::from_utf8(&id).map_err(corrupt)?;
        let Some(record) = self.get(id)? else {
            return Ok(None);
        };
        if !bool::from(record.hash.ct_eq(&digest)) || record.revoked_at.is_some() {
            return Ok(None);
        }
        let mut live = self.trees.live.write().unwrap_or_else(|p| p.into_inner());
        if live.revocations == revocations {
            live.by_hash.insert(digest, record.clone());
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_from_before_teams_reads_as_a_key_of_default() {
        let bytes = postcard::to_allocvec(&LegacyRecord {
            id: "01KAKZ0000000000000000000K".into(),
            name: "old".into(),
            kind: KeyKind::Agent,
            admin: true,
            hash: [9; 32],
            created_at: Timestamp(5),
            revoked_at: Some(Timestamp(6)),
        })
        .expect("encodes");
        let record = decode(&bytes).expect("decodes");
        assert_eq!(record.team, DEFAULT_TEAM);
        assert_eq!(record.name, "old");
        assert_eq!(record.revoked_at, Some(Timestamp(6)));
        // Written back, it keeps its team and reads the same.
        let again = decode(&encode(&record).expect("encodes")).expect("decodes");
        assert_eq!(again, record);
        let mut infra = record;
        infra.team = "infra".into();
        assert_eq!(
            decode(&encode(&infra).expect("encodes")).expect("decodes"),
            infra
        );
    }
}
