//! The run log: appending events (each position written once), reading a run's log or the
//! whole log back with every record verified, and the range scan of the runs created since a
//! moment. It must not acknowledge anything: appends become durable at the next `sync`.

use runledger_domain::{Event, Origin, Run, RunId, Timestamp};

use crate::chain::{self, Head};
use crate::layout::{event_key, split_event_key, EVENTS};
use crate::{codec, Envelope, Error, Store, Writer};

impl Store {
    /// Appends envelopes to the log. Each `(run_id, seq)` may be written once only; a second
    /// write of the same position is a bug in the caller and is refused loudly.
    pub fn append(&self, envelopes: &[Envelope]) -> Result<(), Error> {
        let started = std::time::Instant::now();
        self.append_inner(envelopes)?;
        runledger_base::metrics::METRICS
            .append
            .observe(started.elapsed());
        Ok(())
    }

    fn append_inner(&self, envelopes: &[Envelope]) -> Result<(), Error> {
        // Once a write or sync has failed, nothing more reaches the log: a later request must
        // not leave events behind that its client is told failed.
        self.inner.health.admit(Writer::Internal)?;
        if envelopes.is_empty() {
            return Ok(());
        }
        self.mark_unsealed()?;
        // Each record stores the link it follows (`chain`); consecutive envelopes of one run
        // chain on from each other without asking the store again.
        let mut head: Option<(RunId, Head)> = None;
        for envelope in envelopes {
            let prev = match head {
                Some((run_id, h)) if run_id == envelope.run_id && h.seq + 1 == envelope.seq => {
                    h.link
                }
                _ => self.chain_prev(envelope)?,
            };
            let record = codec::encode_run(envelope, &prev).map_err(|source| Error::Encode {
                run_id: envelope.run_id,
                seq: envelope.seq,
                source,
            })?;
            let link = chain::link(&prev, &record[codec::RUN_BODY_OFFSET..]);
            let key = event_key(envelope.run_id, envelope.seq);
            let swapped = self
                .inner
                .events
                .compare_and_swap(key, None as Option<&[u8]>, Some(record))
                .inspect_err(|e| self.failed(e))?;
            if swapped.is_err() {
                return Err(Error::Conflict {
                    run_id: envelope.run_id,
                    seq: envelope.seq,
                });
            }
            let new_head = Head {
                seq: envelope.seq,
                link,
            };
            self.note_head(envelope.run_id, new_head);
            head = Some((envelope.run_id, new_head));
        }
        // Messages by id and the instance's event sequence (`agent_index.rs`).
        self.index_agent_events(envelopes)
    }

    /// The log of one run from sequence `from` on, read one record at a time as the iterator
    /// is advanced: what reads a long history (the events API, its stream, `runledger
    /// events`) holds is what it keeps of the iterator's output, never the whole log. Every
    /// record is verified.
    pub fn run_events(
        &self,
        run_id: RunId,
        from: u64,
    ) -> impl Iterator<Item = Result<Envelope, Error>> + Send + 'static {
        let start = event_key(run_id, from);
        let end = event_key(run_id, u64::MAX);
        self.inner.events.range(start..=end).map(|item| {
            let (key, value) = item?;
            decode_checked(&key, &value)
        })
    }

    /// The state of one run, folded from its log one event at a time (`None` if it has no
    /// events), so activating a run with a long history does not hold the history.
    pub fn load_run(&self, run_id: RunId) -> Result<Option<Run>, Error> {
        let mut run = None;
        for e in self.run_events(run_id, 0) {
            let e = e?;
            run = runledger_domain::evolve(run, run_id, &e.event, e.at);
        }
        Ok(run)
    }

    /// Every record of the log in key order; a damaged record yields an error and the scan
    /// goes on with the next one.
    pub fn scan(&self) -> impl Iterator<Item = Result<Envelope, Error>> + '_ {
        self.inner.events.iter().map(|item| {
            let (key, value) = item?;
            decode_checked(&key, &value)
        })
    }

    /// Number of records in the log (walks the tree; for tools, not hot paths).
    pub fn event_count(&self) -> usize {
        self.inner.events.len()
    }

    /// The runs created at or after `at`, in id order: a range scan of the log from the
    /// smallest id a run created at `at` can have.
    pub fn runs_created_since(&self, at: Timestamp) -> Result<Vec<RunId>, Error> {
        let mut runs: Vec<RunId> = Vec::new();
        let from = RunId::lower_bound(at).to_bytes();
        for key in self.inner.events.range(from..).keys() {
            let key = key?;
            let (run_id, _) = split_event_key(&key).ok_or_else(|| Error::CorruptRecord {
                tree: EVENTS,
                detail: format!("key of {} bytes", key.len()),
            })?;
            if runs.last() != Some(&run_id) {
                runs.push(run_id);
            }
        }
        Ok(runs)
    }
}

/// Decodes a record and checks that it sits under the key it names.
fn decode_checked(key: &[u8], value: &[u8]) -> Result<Envelope, Error> {
    let (run_id, seq) = split_event_key(key).ok_or_else(|| Error::CorruptRecord {
        tree: EVENTS,
        detail: format!("key of {} bytes", key.len()),
    })?;
    let envelope = codec::decode_run(value).map_err(|source| Error::Corrupt {
        run_id: run_id.to_string(),
        seq,
        source,
    })?;
    if envelope.run_id != run_id || envelope.seq != seq {
        return Err(Error::Corrupt {
            run_id: run_id.to_string(),
            seq,
            source: codec::Error::Body(format!(
                "record names run {} sequence {}",
                envelope.run_id, envelope.seq
            )),
        });
    }
    Ok(envelope)
}

/// The envelopes of a decision's events, each with the origin of the command that caused it.
pub fn envelopes(
    run_id: RunId,
    first_seq: u64,
    at: Timestamp,
    events: Vec<Event>,
    origin: Option<&Origin>,
) -> Vec<Envelope> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Envelope {
            run_id,
            seq: first_seq + i as u64,
            at,
            event,
            origin: origin.cloned(),
        })
        .collect()
}
