//! The admin audit log: the `admin_log` tree of administrative acts (`AdminEvent`), each with
//! its `Origin`, under its big-endian sequence number, in the codec's framing (version byte,
//! CRC-32, postcard `AdminRecord`). The records form a hash chain: the link of record n is
//! SHA-256(link of n-1 ‖ the record's body, the postcard bytes after the header), the link
//! before the first is 32 zero bytes, and each record stores its predecessor's link (`prev`).
//! An edited record (even with its CRC made good) breaks the chain at its successor;
//! `verify_admin_chain` names it. The head (last sequence and link) is what a seal covers.
//!
//! Appends are serialised by one lock, which also keeps the head, so two acts never take the
//! same sequence number or chain onto the same link. Like the run log, an append is not
//! durable until the next `sync`, which its caller awaits before acknowledging the act. This
//! module must not decide what is an administrative act: its callers do.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use runledger_domain::{AdminEvent, Origin, Timestamp};

use crate::admin_tree::AdminLog;
use crate::api_keys::KeyRecord;
use crate::layout::ADMIN_LOG;
use crate::{codec, Error, Store, Writer};

/// The link before the first record.
pub const GENESIS: [u8; 32] = [0; 32];

/// One stored record of the admin log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminRecord {
    pub seq: u64,
    pub at: Timestamp,
    pub event: AdminEvent,
    /// Who did it, through which channel, from which request.
    pub origin: Origin,
    /// The link of the record before (`GENESIS` for the first).
    pub prev: [u8; 32],
}

/// A record as read back, with its own link (what the next record's `prev` must be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminEntry {
    pub record: AdminRecord,
    pub link: [u8; 32],
}

/// What `verify_admin_chain` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainCheck {
    /// Every record decodes and follows its predecessor; `head` is the last `(seq, link)`.
    Intact {
        records: u64,
        head: Option<(u64, [u8; 32])>,
    },
    /// Record `seq` is the first that does not verify, for `reason`.
    Broken { seq: u64, reason: String },
}

/// The link of a record whose body (postcard bytes after the header) is `body`.
pub fn link(prev: &[u8; 32], body: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    hasher.update(body);
    hasher.finalize().into()
}

/// A record's stored bytes and its link.
pub fn encode(record: &AdminRecord) -> Result<(Vec<u8>, [u8; 32]), Error> {
    let bytes = codec::encode(record).map_err(|e| corrupt(record.seq, e))?;
    let link = link(&record.prev, &bytes[codec::HEADER_LEN..]);
    Ok((bytes, link))
}

/// A stored record read back with its link, its framing checked.
pub fn decode(bytes: &[u8]) -> Result<AdminEntry, codec::Error> {
    let record: AdminRecord = codec::decode(bytes)?;
    let link = link(&record.prev, &bytes[codec::HEADER_LEN..]);
    Ok(AdminEntry { record, link })
}

fn corrupt(seq: u64, detail: impl std::fmt::Display) -> Error {
    Error::CorruptRecord {
        tree: ADMIN_LOG,
        detail: format!("record {seq}: {detail}"),
    }
}

/// The last record's `(seq, link)`, read from the tree.
fn read_head(log: &AdminLog) -> Result<Option<(u64, [u8; 32])>, Error> {
    let Some((key, value)) = log.tree.last()? else {
        return Ok(None);
    };
    let seq = seq_of(&key)?;
    let entry = decode(&value).map_err(|e| corrupt(seq, e))?;
    Ok(Some((seq, entry.link)))
}

fn seq_of(key: &[u8]) -> Result<u64, Error> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| corrupt(0, format!("a key of {} bytes", key.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

impl Store {
    /// Appends an administrative act done now by `origin`, chained onto the last record, and
    /// returns it. Not durable until the next `sync`, which the caller awaits before it
    /// acknowledges the act.
    pub fn append_admin(
        &self,
        at: Timestamp,
        event: AdminEvent,
        origin: Origin,
    ) -> Result<AdminEntry, Error> {
        self.inner.health.admit(Writer::Internal)?;
        let log = &self.inner.admin;
        let mut head = log.head.lock().unwrap_or_else(|p| p.into_inner());
        let (seq, prev) = match *head {
            Some(next) => next,
            None => match read_head(log)? {
                Some((last, link)) => (last + 1, link),
                None => (0, GENESIS),
            },
        };
        let record = AdminRecord {
            seq,
            at,
            event,
            origin,
            prev,
        };
        let (bytes, link) = encode(&record)?;
        let swapped = log
            .tree
            .compare_and_swap(seq.to_be_bytes(), None as Option<&[u8]>, Some(bytes))
            .inspect_err(|e| self.failed(e))?;
        if swapped.is_err() {
            // Another process wrote the tree (it cannot while this one holds sled's lock):
            // forget the head so the next append reads it again.
            *head = None;
            return Err(corrupt(seq, "written twice"));
        }
        *head = Some((seq + 1, link));
        Ok(AdminEntry { record, link })
    }

    /// The admin log's last `(seq, link)`, `None` while it is empty: what a seal covers.
    pub fn admin_head(&self) -> Result<Option<(u64, [u8; 32])>, Error> {
        read_head(&self.inner.admin)
    }

    /// The records from sequence `before - 1` down to 0 (all of them when `before` is
    /// `None`), newest first, each checked and with its link, read as the iterator advances.
    pub fn admin_records_rev(
        &self,
        before: Option<u64>,
    ) -> impl Iterator<Item = Result<AdminEntry, Error>> + Send + 'static {
        let range = match before {
            Some(before) => self.inner.admin.tree.range(..before.to_be_bytes()),
            None => self.inner.admin.tree.iter(),
        };
        range.rev().map(read_entry)
    }

    /// Every record, oldest first, each checked and with its link.
    pub fn admin_records(
        &self,
    ) -> impl Iterator<Item = Result<AdminEntry, Error>> + Send + 'static {
        self.inner.admin.tree.iter().map(read_entry)
    }

    /// Walks the whole admin log and names the first record that does not verify: one whose
    /// bytes fail their checksum or do not decode, whose sequence is not its key's or not the
    /// next, or whose content no longer matches the link its successor recorded (an edit that
    /// made its CRC good again).
    pub fn verify_admin_chain(&self) -> Result<ChainCheck, Error> {
        let mut expected_prev = GENESIS;
        let mut last: Option<(u64, [u8; 32])> = None;
        let mut records = 0u64;
        for item in self.inner.admin.tree.iter() {
            let (key, value) = item?;
            let seq = seq_of(&key)?;
            let broken = |reason: String| Ok(ChainCheck::Broken { seq, reason });
            let entry = match decode(&value) {
                Ok(entry) => entry,
                Err(e) => return broken(format!("the record does not read: {e}")),
            };
            if entry.record.seq != seq {
                return broken(format!("the record says it is {}", entry.record.seq));
            }
            if seq != records {
                return broken(format!("record {records} is missing before it"));
            }
            if entry.record.prev != expected_prev {
                // Record `seq - 1` decodes, but its bytes are not those this record chained
                // onto: it was changed after this one was written (or this one's `prev` was).
                let edited = seq.saturating_sub(1);
                return Ok(ChainCheck::Broken {
                    seq: edited,
                    reason: format!(
                        "its content does not match the link record {seq} recorded for it \
                         (record {edited} was changed, or the link in record {seq})"
                    ),
                });
            }
            expected_prev = entry.link;
            last = Some((seq, entry.link));
            records += 1;
        }
        Ok(ChainCheck::Intact {
            records,
            head: last,
        })
    }

    /// Stores a record taken from a backup under its own sequence number, where none is. The
    /// caller (`runledger import`) has verified the chain and that the tree was empty.
    pub fn restore_admin(&self, record: &AdminRecord) -> Result<[u8; 32], Error> {
        let (bytes, link) = encode(record)?;
        let log = &self.inner.admin;
        let swapped = log.tree.compare_and_swap(
            record.seq.to_be_bytes(),
            None as Option<&[u8]>,
            Some(bytes),
        )?;
        if swapped.is_err() {
            return Err(corrupt(record.seq, "restored over an existing record"));
        }
        *log.head.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(link)
    }

    /// Whether the admin log holds no record.
    pub fn admin_log_is_empty(&self) -> bool {
        self.inner.admin.tree.is_empty()
    }

    /// Overwrites the raw bytes of record `seq` (for tests that play an attacker with write
    /// access to the data directory).
    #[doc(hidden)]
    pub fn overwrite_admin_record(&self, seq: u64, bytes: &[u8]) -> Result<(), Error> {
        self.inner.admin.tree.insert(seq.to_be_bytes(), bytes)?;
        *self
            .inner
            .admin
            .head
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }

    /// The raw bytes of record `seq`, as stored.
    #[doc(hidden)]
    pub fn admin_record_bytes(&self, seq: u64) -> Result<Option<Vec<u8>>, Error> {
        Ok(self
            .inner
            .admin
            .tree
            .get(seq.to_be_bytes())?
            .map(|v| v.to_vec()))
    }
}

/// The admin log's record of the creation of `record`.
pub fn key_created(record: &KeyRecord) -> AdminEvent {
    AdminEvent::KeyCreated {
        key_id: record.id.clone(),
        name: record.name.clone(),
        kind: record.kind.as_str().to_string(),
        team: record.team.clone(),
        admin: record.admin,
    }
}

/// The admin log's record of a revocation at `at` that left `record`: `already` when the key
/// had been revoked before (its `revoked_at` is older).
pub fn key_revoked(record: &KeyRecord, at: Timestamp) -> AdminEvent {
    AdminEvent::KeyRevoked {
        key_id: record.id.clone(),
        name: record.name.clone(),
        team: record.team.clone(),
        already: record.revoked_at.is_some_and(|revoked| revoked != at),
    }
}

fn read_entry(item: Result<(sled::IVec, sled::IVec), sled::Error>) -> Result<AdminEntry, Error> {
    let (key, value) = item?;
    let seq = seq_of(&key)?;
    decode(&value).map_err(|e| corrupt(seq, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::Channel;

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), &crate::Options::default()).expect("open");
        (dir, store)
    }

    fn team(name: &str) -> AdminEvent {
        AdminEvent::TeamCreated { name: name.into() }
    }

    fn cli() -> Origin {
        Origin {
            channel: Channel::Cli,
            ..Origin::default()
        }
    }

    #[test]
    fn appends_chain_each_record_onto_the_last() {
        let (_dir, store) = open();
        assert_eq!(store.admin_head().expect("head"), None);
        let a = store
            .append_admin(Timestamp(1), team("a"), cli())
            .expect("append");
        let b = store
            .append_admin(Timestamp(2), team("b"), Origin::system("test"))
            .expect("append");
        assert_eq!(a.record.prev, GENESIS);
        assert_eq!(b.record.prev, a.link);
        assert_eq!((a.record.seq, b.record.seq), (0, 1));
        assert_eq!(store.admin_head().expect("head"), Some((1, b.link)));
        assert_eq!(
            store.verify_admin_chain().expect("verify"),
            ChainCheck::Intact {
                records: 2,
                head: Some((1, b.link))
            }
        );
        let newest: Vec<_> = store
            .admin_records_rev(None)
            .map(|e| e.expect("reads").record.seq)
            .collect();
        assert_eq!(newest, [1, 0]);
        let before_1: Vec<_> = store
            .admin_records_rev(Some(1))
            .map(|e| e.expect("reads").record.seq)
            .collect();
        assert_eq!(before_1, [0]);
    }

    #[test]
    fn the_sequence_goes_on_after_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = {
            let store = Store::open(dir.path(), &crate::Options::default()).expect("open");
            let entry = store
                .append_admin(Timestamp(1), team("a"), cli())
                .expect("append");
            store.sync_blocking().expect("sync");
            entry
        };
        let store = Store::open(dir.path(), &crate::Options::default()).expect("reopen");
        let next = store
            .append_admin(Timestamp(2), team("b"), cli())
            .expect("append");
        assert_eq!(next.record.seq, 1);
        assert_eq!(next.record.prev, first.link);
    }

    #[test]
    fn an_edit_with_its_checksum_made_good_is_named() {
        let (_dir, store) = open();
        for name in ["a", "b", "c"] {
            store
                .append_admin(Timestamp(1), team(name), cli())
                .expect("append");
        }
        let mut forged: AdminRecord = codec::decode(
            &store
                .admin_record_bytes(1)
                .expect("read")
                .expect("record 1"),
        )
        .expect("decodes");
        forged.event = team("evil");
        let bytes = codec::encode(&forged).expect("encodes");
        store.overwrite_admin_record(1, &bytes).expect("overwrite");
        match store.verify_admin_chain().expect("verify") {
            ChainCheck::Broken { seq, .. } => assert_eq!(seq, 1),
            other => panic!("the edit went unnoticed: {other:?}"),
        }
        // A flipped byte without a good checksum is named too.
        let mut bytes = store
            .admin_record_bytes(0)
            .expect("read")
            .expect("record 0");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        store.overwrite_admin_record(0, &bytes).expect("overwrite");
        match store.verify_admin_chain().expect("verify") {
            ChainCheck::Broken { seq, .. } => assert_eq!(seq, 0),
            other => panic!("the damage went unnoticed: {other:?}"),
        }
    }
}
