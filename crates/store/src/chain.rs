//! Each run's hash chain: the link rule, the links of stored records, and the heads of the
//! runs written since the last seal, which `append` keeps so that the next record of a run
//! gets its `prev` without a read. It decides nothing about seals (`seals/`), and it must stay
//! cheap: it runs on every durable create (docs/decisions/0033-hash-chains-and-seals.md).
//!
//! The rule: `link(n) = SHA-256(link(n-1) ‖ body(n))`, `link(-1)` = 32 zero bytes, where
//! `body(n)` is the record's chain body (`codec::chain_body`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use sha2::{Digest, Sha256};

use runledger_domain::RunId;

use crate::codec::{self, RunRecord};
use crate::layout::{event_key, EVENTS, SEALS_CLEAN};
use crate::{Envelope, Error, Store};

/// A link of a chain (SHA-256).
pub type Link = [u8; 32];

/// The link before a chain's first record.
pub const GENESIS: Link = [0; 32];

pub use crate::heads::Head;

/// The link after `prev` of a record whose chain body is `body`.
pub fn link(prev: &Link, body: &[u8]) -> Link {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    hasher.update(body);
    hasher.finalize().into()
}

/// The link of a stored record's parts after `prev`; a version 1 body gets the origin's `None`
/// byte (see `codec`).
pub fn record_link(prev: &Link, record: &RunRecord<'_>) -> Link {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    hasher.update(record.body);
    if record.body_lacks_origin() {
        hasher.update([0u8]);
    }
    hasher.finalize().into()
}

/// The link after `prev` of an envelope (for an export's reader, which has no record bytes).
pub fn envelope_link(prev: &Link, envelope: &Envelope) -> Result<Link, codec::Error> {
    Ok(link(prev, &codec::chain_body(envelope)?))
}

impl Store {
    /// The link each envelope of a run's append follows, and the run's head after them. The
    /// envelopes of one call belong to one run and follow each other (the run actor's
    /// decisions); the run's actor is its only writer, so no lock is held across the write.
    pub(crate) fn chain_prev(&self, first: &Envelope) -> Result<Link, Error> {
        if first.seq == 0 {
            return Ok(GENESIS);
        }
        let cached = self
            .inner
            .heads
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&first.run_id)
            .copied();
        match cached {
            Some(head) if head.seq + 1 == first.seq => Ok(head.link),
            _ => Ok(self.run_head(first.run_id)?.map_or(GENESIS, |h| h.link)),
        }
    }

    /// Records a run's new head for the next seal, and (once per process) removes the marker
    /// that says every write is sealed, before the first record it does not cover is written.
    pub(crate) fn note_head(&self, run_id: RunId, head: Head) {
        self.inner
            .heads
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run_id, head);
    }

    pub(crate) fn mark_unsealed(&self) -> Result<(), Error> {
        if !self
            .inner
            .heads
            .unsealed_marked
            .swap(true, Ordering::AcqRel)
        {
            self.inner
                .meta
                .remove(SEALS_CLEAN)
                .inspect_err(|e| self.failed(e))?;
        }
        Ok(())
    }

    /// A run's chain head as stored: from its last record alone when that is version 2
    /// (`SHA-256(prev ‖ body)`), else by folding the whole chain (a run written before chains;
    /// once, as the head is then kept). `None` for a run without records.
    pub fn run_head(&self, run_id: RunId) -> Result<Option<Head>, Error> {
        let start = event_key(run_id, 0);
        let end = event_key(run_id, u64::MAX);
        let Some(last) = self.inner.events.range(start..=end).next_back() else {
            return Ok(None);
        };
        let (key, value) = last?;
        let seq = seq_of(&key)?;
        let record = codec::run_record(&value).map_err(|source| Error::Corrupt {
            run_id: run_id.to_string(),
            seq,
            source,
        })?;
        if let Some(prev) = record.prev {
            return Ok(Some(Head {
                seq,
                link: record_link(&prev, &record),
            }));
        }
        self.fold_chain(run_id)
    }

    /// A run's head by folding every record's link from the start: the stored `prev` of a
    /// version 2 record is not trusted here.
    pub fn fold_chain(&self, run_id: RunId) -> Result<Option<Head>, Error> {
        let start = event_key(run_id, 0);
        let end = event_key(run_id, u64::MAX);
        let mut head: Option<Head> = None;
        for item in self.inner.events.range(start..=end) {
            let (key, value) = item?;
            let seq = seq_of(&key)?;
            let record = codec::run_record(&value).map_err(|source| Error::Corrupt {
                run_id: run_id.to_string(),
                seq,
                source,
            })?;
            let prev = head.map_or(GENESIS, |h| h.link);
            head = Some(Head {
                seq,
                link: record_link(&prev, &record),
            });
        }
        Ok(head)
    }

    /// The heads of the runs written since the last seal, taken (the next writes start a new
    /// set). The seal puts back what it could not record.
    pub(crate) fn take_written(&self) -> HashMap<RunId, Head> {
        std::mem::take(
            &mut *self
                .inner
                .heads
                .written
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// Puts heads taken by a seal that failed back, unless a newer head was written since.
    pub(crate) fn restore_written(&self, heads: HashMap<RunId, Head>) {
        let mut written = self
            .inner
            .heads
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for (run_id, head) in heads {
            written.entry(run_id).or_insert(head);
        }
    }

    /// Whether a run was written since the last seal (its head is in the next one's leaves).
    pub fn written_since_seal(&self) -> usize {
        self.inner
            .heads
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

fn seq_of(key: &[u8]) -> Result<u64, Error> {
    crate::layout::split_event_key(key)
        .map(|(_, seq)| seq)
        .ok_or_else(|| Error::CorruptRecord {
            tree: EVENTS,
            detail: format!("key of {} bytes", key.len()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(link: &Link) -> String {
        link.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_link_is_sha256_of_the_previous_link_and_the_body() {
        // Computed independently: sha256(32 zero bytes ‖ "abc"), then a two-link chain.
        assert_eq!(
            hex(&link(&GENESIS, b"abc")),
            "365aa7d8f7f9402c4b9434502b4cc89ddb09fe50d7cd95b493b834c62d5a5370"
        );
        let first = link(&GENESIS, b"a");
        assert_eq!(
            hex(&link(&first, b"b")),
            "abccbe9b24d2bbd3aa1360d605147a841dd051130131c6929d6004e1ae4796e8"
        );
    }

    #[test]
    fn append_chains_each_record_and_a_seal_covers_the_heads() {
        use runledger_domain::{Event, Timestamp};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), &crate::Options::default()).expect("open");
        let run_id = RunId::new(Timestamp(1_700_000_000_000), 7);
        let events = vec![
            Event::Started { execution: 1 },
            Event::Succeeded { execution: 1 },
        ];
        let envelopes = crate::envelopes(run_id, 0, Timestamp(1_700_000_000_000), events, None);
        // One record per call, as the actor appends a decision at a time.
        store.append(&envelopes[..1]).expect("append");
        store.append(&envelopes[1..]).expect("append");
        // The rule, folded by hand over the envelopes' chain bodies.
        let mut expected = GENESIS;
        for e in &envelopes {
            expected = link(&expected, &codec::chain_body(e).expect("encodes"));
        }
        let head = store.run_head(run_id).expect("read").expect("a head");
        assert_eq!(
            head,
            Head {
                seq: 1,
                link: expected
            }
        );
        assert_eq!(store.fold_chain(run_id).expect("fold"), Some(head));
        let seal = store
            .seal(Timestamp(1_700_000_001_000), &[], true)
            .expect("seal")
            .expect("something was written");
        assert_eq!(seal.leaves, 1);
        assert!(seal.signature_holds(None));
        // Nothing written since: no seal.
        let none = store
            .seal(Timestamp(1_700_000_002_000), &[], true)
            .expect("seal");
        assert_eq!(none, None);
        let report = store.verify().expect("read").expect("verifies");
        assert_eq!((report.runs, report.events, report.seals), (1, 2, 1));
        assert_eq!(report.unsealed_events, 0);
    }
}
