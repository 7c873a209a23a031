//! Making seals and keeping them: the `seals` tree (by number), each seal's leaves
//! (`seal_leaves`), the index run → latest seal covering it (`sealed_runs`, written at seal
//! time, off the create path), the instance's Ed25519 signing key (an instance secret that
//! backups never carry), and the walk that finds, after a crash or an upgrade, the runs no
//! seal covers yet. Sealing is the caller's to schedule; this module never runs on its own.

use std::collections::HashMap;

use ed25519_dalek::SigningKey;

use runledger_domain::{RunId, Timestamp};

use super::merkle;
use super::record::{check_name, ChainId, Leaf, Seal};
use crate::chain::{record_link, Head, Link, GENESIS};
use crate::layout::{
    split_event_key, EVENTS, IMPORTED_UNVERIFIED, SEALED_RUNS, SEALS, SEALS_CLEAN, SEAL_KEY,
    SEAL_LEAVES,
};
use crate::{codec, Error, Store};

/// The file beside the store that holds the seal public key in hex, written at every start, so
/// that `runledger audit pubkey` can answer while a server holds the store.
pub const PUBLIC_KEY_FILE: &str = "seal-public-key";

/// Where a run's latest seal covers it: the seal, the leaf's index in it and the run's
/// sequence number then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sealed {
    pub seal: u64,
    pub index: u64,
    pub seq: u64,
}

fn corrupt(tree: &'static str, detail: impl std::fmt::Display) -> Error {
    Error::CorruptRecord {
        tree,
        detail: detail.to_string(),
    }
}

fn leaf_key(seal: u64, index: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&seal.to_be_bytes());
    key[8..].copy_from_slice(&index.to_be_bytes());
    key
}

impl Store {
    /// The instance's seal signing key, made on first use. It lives with the instance
    /// secrets but is not one of `INSTANCE_SECRETS`, so no backup carries it: a restored
    /// instance makes a new key, and its first seal says so (`Seal::new_key`).
    pub fn seal_key(&self) -> Result<SigningKey, Error> {
        Ok(SigningKey::from_bytes(&self.instance_secret(SEAL_KEY)?))
    }

    /// Makes the seal key if there is none and writes its public half, in hex, to
    /// `PUBLIC_KEY_FILE` in the data directory (replaced whole).
    pub fn publish_public_key(&self) -> Result<[u8; 32], Error> {
        let key = self.seal_key()?.verifying_key().to_bytes();
        let path = self.inner.dir.join(PUBLIC_KEY_FILE);
        let temp = self.inner.dir.join(format!("{PUBLIC_KEY_FILE}.partial"));
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        std::fs::write(&temp, format!("{}\n", super::proof::hex(&key))).map_err(io)?;
        std::fs::rename(&temp, &path).map_err(io)?;
        Ok(key)
    }

    /// The public half of the seal key, if the instance has one (never creates it).
    pub fn seal_public_key(&self) -> Result<Option<[u8; 32]>, Error> {
        Ok(self
            .existing_secret(SEAL_KEY)?
            .map(|seed| SigningKey::from_bytes(&seed).verifying_key().to_bytes()))
    }

    /// Seals the heads of the runs written since the last seal, with the heads of the named
    /// chains `extra` (e.g. the admin log's), at `at`. `None` when nothing was written. Not yet
    /// durable: `sync` after. With `clean`, also records that every write is sealed (a
    /// graceful shutdown's final seal), so the next start need not look for an unsealed tail.
    pub fn seal(
        &self,
        at: Timestamp,
        extra: &[(String, Head)],
        clean: bool,
    ) -> Result<Option<Seal>, Error> {
        let written = self.take_written();
        let result = self.seal_heads(at, &written, extra, clean);
        if result.is_err() {
            self.restore_written(written);
        }
        result
    }

    /// The leaves the next seal would have from the runs (the named chains' are the caller's).
    pub fn seal_leaves(&self) -> Vec<Leaf> {
        let written = self
            .inner
            .heads
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        written
            .iter()
            .map(|(run_id, head)| Leaf {
                chain: ChainId::Run(*run_id),
                head: *head,
            })
            .collect()
    }

    fn seal_heads(
        &self,
        at: Timestamp,
        written: &HashMap<RunId, Head>,
        extra: &[(String, Head)],
        clean: bool,
    ) -> Result<Option<Seal>, Error> {
        if written.is_empty() && extra.is_empty() {
            if clean {
                self.inner.meta.insert(SEALS_CLEAN, &[])?;
            }
            return Ok(None);
        }
        let mut leaves: Vec<(Vec<u8>, Leaf)> = Vec::with_capacity(written.len() + extra.len());
        for (run_id, head) in written {
            let leaf = Leaf {
                chain: ChainId::Run(*run_id),
                head: *head,
            };
            leaves.push((leaf.to_bytes(), leaf));
        }
        for (name, head) in extra {
            check_name(name).map_err(|e| corrupt(SEAL_LEAVES, e))?;
            let leaf = Leaf {
                chain: ChainId::Named(name.clone()),
                head: *head,
            };
            leaves.push((leaf.to_bytes(), leaf));
        }
        leaves.sort_by(|a, b| a.0.cmp(&b.0));
        let hashes: Vec<Link> = leaves.iter().map(|(b, _)| merkle::leaf_hash(b)).collect();
        let root = merkle::root(&hashes);
        let previous = self.last_seal()?;
        let key = self.seal_key()?;
        let public_key = key.verifying_key().to_bytes();
        let seal = Seal::sign(
            &key,
            previous.as_ref().map_or(1, |p| p.number + 1),
            at,
            previous.as_ref().map_or(GENESIS, Seal::hash),
            root,
            leaves.len() as u64,
            previous.as_ref().is_none_or(|p| p.public_key != public_key),
        );
        let leaves: Vec<Leaf> = leaves.into_iter().map(|(_, leaf)| leaf).collect();
        self.write_seal(&seal, &leaves)?;
        if clean {
            self.inner.meta.insert(SEALS_CLEAN, &[])?;
        }
        Ok(Some(seal))
    }

    /// Writes a seal with its leaves, and the index of the runs it covers; the seal itself
    /// last, so that a seal on disk has all its leaves.
    fn write_seal(&self, seal: &Seal, leaves: &[Leaf]) -> Result<(), Error> {
        let trees = &self.inner.seals;
        for (index, leaf) in leaves.iter().enumerate() {
            trees
                .leaves
                .insert(leaf_key(seal.number, index as u64), leaf.to_bytes())?;
            if let ChainId::Run(run_id) = leaf.chain {
                let mut value = [0u8; 24];
                value[..8].copy_from_slice(&seal.number.to_be_bytes());
                value[8..16].copy_from_slice(&(index as u64).to_be_bytes());
                value[16..].copy_from_slice(&leaf.head.seq.to_be_bytes());
                trees.sealed_runs.insert(run_id.to_bytes(), &value[..])?;
            }
        }
        trees
            .seals
            .insert(seal.number.to_be_bytes(), seal.to_record())?;
        Ok(())
    }

    /// Keeps a seal of a backup, checked by the caller (`seals::Checker`) against the events
    /// restored: the restored store's proofs and exports then carry the seals of the instance
    /// that made them, and this instance's own seals chain on after them (`new_key`).
    pub fn restore_seal(&self, seal: &Seal, leaves: &[Leaf]) -> Result<(), Error> {
        self.write_seal(seal, leaves)
    }

    /// The latest seal, if any.
    pub fn last_seal(&self) -> Result<Option<Seal>, Error> {
        match self.inner.seals.seals.last()? {
            None => Ok(None),
            Some((_, value)) => Ok(Some(
                Seal::from_record(&value).map_err(|e| corrupt(SEALS, e))?,
            )),
        }
    }

    /// Every seal, in order; a record that does not decode is an error.
    pub fn seals(&self) -> impl Iterator<Item = Result<Seal, Error>> + '_ {
        self.inner.seals.seals.iter().map(|item| {
            let (_, value) = item?;
            Seal::from_record(&value).map_err(|e| corrupt(SEALS, e))
        })
    }

    /// A seal's leaves, in order.
    pub fn seal_leaves_of(&self, seal: u64) -> Result<Vec<Leaf>, Error> {
        let start = leaf_key(seal, 0);
        let end = leaf_key(seal, u64::MAX);
        self.inner
            .seals
            .leaves
            .range(start..=end)
            .map(|item| {
                let (_, value) = item?;
                Leaf::from_bytes(&value).map_err(|e| corrupt(SEAL_LEAVES, e))
            })
            .collect()
    }

    /// A seal by number.
    pub fn seal_numbered(&self, number: u64) -> Result<Option<Seal>, Error> {
        self.inner
            .seals
            .seals
            .get(number.to_be_bytes())?
            .map(|value| Seal::from_record(&value).map_err(|e| corrupt(SEALS, e)))
            .transpose()
    }

    /// The latest seal covering a run, if any.
    pub fn sealed(&self, run_id: RunId) -> Result<Option<Sealed>, Error> {
        let Some(value) = self.inner.seals.sealed_runs.get(run_id.to_bytes())? else {
            return Ok(None);
        };
        let bad = || corrupt(SEALED_RUNS, format!("a record of {} bytes", value.len()));
        let part = |at: usize| -> Result<u64, Error> {
            let bytes: [u8; 8] = value
                .get(at..at + 8)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?;
            Ok(u64::from_be_bytes(bytes))
        };
        Ok(Some(Sealed {
            seal: part(0)?,
            index: part(8)?,
            seq: part(16)?,
        }))
    }

    /// After a crash, an upgrade or an offline writer, the runs whose last record no seal
    /// covers, put among the next seal's leaves. A walk of the whole log, done only when the
    /// store does not say every write is sealed (the marker a clean final seal leaves, removed
    /// by the first write after). Returns how many runs it found.
    pub fn find_unsealed(&self) -> Result<usize, Error> {
        if self.inner.meta.contains_key(SEALS_CLEAN)? {
            return Ok(0);
        }
        let mut found = 0;
        let mut current: Option<(RunId, Head)> = None;
        let mut finish = |run: Option<(RunId, Head)>, store: &Store| -> Result<(), Error> {
            if let Some((run_id, head)) = run {
                let covered = store.sealed(run_id)?.is_some_and(|s| s.seq == head.seq);
                if !covered {
                    store.note_head(run_id, head);
                    found += 1;
                }
            }
            Ok(())
        };
        for item in self.inner.events.iter() {
            let (key, value) = item?;
            let (run_id, seq) = split_event_key(&key)
                .ok_or_else(|| corrupt(EVENTS, format!("key of {} bytes", key.len())))?;
            let record = codec::run_record(&value).map_err(|source| Error::Corrupt {
                run_id: run_id.to_string(),
                seq,
                source,
            })?;
            let prev = match (current, record.prev) {
                (_, Some(stored)) => stored,
                (Some((id, head)), None) if id == run_id => head.link,
                _ => GENESIS,
            };
            if current.is_some_and(|(id, _)| id != run_id) {
                finish(current.take(), self)?;
            }
            current = Some((
                run_id,
                Head {
                    seq,
                    link: record_link(&prev, &record),
                },
            ));
        }
        finish(current, self)?;
        Ok(found)
    }

    /// Records that an import took an export which did not verify (`--unverified`), with a
    /// note; `runledger verify` reports it from then on.
    pub fn mark_imported_unverified(&self, note: &str) -> Result<(), Error> {
        self.inner
            .meta
            .insert(IMPORTED_UNVERIFIED, note.as_bytes())?;
        Ok(())
    }

    /// The note of an unverified import, if the store had one.
    pub fn imported_unverified(&self) -> Result<Option<String>, Error> {
        Ok(self
            .inner
            .meta
            .get(IMPORTED_UNVERIFIED)?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }
}
