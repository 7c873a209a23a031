//! The schedules' logs: every schedule's events under `schedule_id ‖ seq` in the
//! `schedule_events` tree, records of the run log's codec around a `ScheduleEnvelope`. Written
//! like the run log (one `compare_and_swap` per position, never written twice) and made
//! durable by the same group-commit `sync`.

use super::codec::{self, ScheduleEnvelope};
use super::layout::{event_key, split_event_key, SCHEDULE_EVENTS};
use super::{Error, Store, Writer};
use runledger_domain::ScheduleId;

impl Store {
    /// Appends a schedule's envelopes. Each `(schedule_id, seq)` may be written once only.
    pub fn append_schedule(&self, envelopes: &[ScheduleEnvelope]) -> Result<(), Error> {
        self.inner.health.admit(Writer::Internal)?;
        for envelope in envelopes {
            let record = codec::encode(envelope).map_err(|source| Error::Encode {
                run_id: envelope.schedule_id,
                seq: envelope.seq,
                source,
            })?;
            let key = event_key(envelope.schedule_id, envelope.seq);
            let swapped = self
                .inner
                .schedules
                .compare_and_swap(key, None as Option<&[u8]>, Some(record))
                .inspect_err(|e| self.failed(e))?;
            if swapped.is_err() {
                return Err(Error::ScheduleConflict {
                    schedule_id: envelope.schedule_id,
                    seq: envelope.seq,
                });
            }
        }
        Ok(())
    }

    /// The log of one schedule from sequence `from` on; every record is verified.
    pub fn schedule_events(
        &self,
        id: ScheduleId,
        from: u64,
    ) -> impl Iterator<Item = Result<ScheduleEnvelope, Error>> + Send + 'static {
        let start = event_key(id, from);
        let end = event_key(id, u64::MAX);
        self.inner.schedules.range(start..=end).map(|item| {
            let (key, value) = item?;
            decode_checked(&key, &value)
        })
    }

    /// Every schedule's log in key order (each schedule's events together, oldest first); a
    /// damaged record yields an error and the scan goes on with the next one.
    pub fn scan_schedules(&self) -> impl Iterator<Item = Result<ScheduleEnvelope, Error>> + '_ {
        self.inner.schedules.iter().map(|item| {
            let (key, value) = item?;
            decode_checked(&key, &value)
        })
    }

    /// Number of records in the schedules' logs (walks the tree; for tools).
    pub fn schedule_event_count(&self) -> usize {
        self.inner.schedules.len()
    }
}

/// Decodes a schedule record and checks that it sits under the key it names.
fn decode_checked(key: &[u8], value: &[u8]) -> Result<ScheduleEnvelope, Error> {
    let (id, seq) = split_event_key(key).ok_or_else(|| Error::CorruptRecord {
        tree: SCHEDULE_EVENTS,
        detail: format!("key of {} bytes", key.len()),
    })?;
    let envelope: ScheduleEnvelope =
        codec::decode(value).map_err(|source| Error::ScheduleCorrupt {
            schedule_id: id.to_string(),
            seq,
            source,
        })?;
    if envelope.schedule_id != id || envelope.seq != seq {
        return Err(Error::ScheduleCorrupt {
            schedule_id: id.to_string(),
            seq,
            source: codec::Error::Body(format!(
                "record names schedule {} sequence {}",
                envelope.schedule_id, envelope.seq
            )),
        });
    }
    Ok(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{RunId, ScheduleEvent, Timestamp};

    fn envelope(id: u128, seq: u64) -> ScheduleEnvelope {
        ScheduleEnvelope {
            schedule_id: RunId(id),
            seq,
            at: Timestamp(seq),
            event: ScheduleEvent::Paused { by: "k".into() },
        }
    }

    #[test]
    fn a_schedule_log_is_written_once_per_position_and_read_back_verified() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), &super::super::Options::default()).expect("open");
        store
            .append_schedule(&[envelope(1, 0), envelope(1, 1), envelope(2, 0)])
            .expect("append");
        assert!(matches!(
            store.append_schedule(&[envelope(1, 1)]),
            Err(Error::ScheduleConflict { seq: 1, .. })
        ));
        let one: Vec<_> = store
            .schedule_events(RunId(1), 1)
            .collect::<Result<_, _>>()
            .expect("read");
        assert_eq!(one, [envelope(1, 1)]);
        assert_eq!(store.scan_schedules().count(), 3);
        // A record moved under another key is detected, not folded into the wrong schedule.
        let moved = codec::encode(&envelope(2, 0)).expect("encode");
        store
            .inner
            .schedules
            .insert(event_key(RunId(3), 0), moved)
            .expect("insert");
        assert!(matches!(
            store.schedule_events(RunId(3), 0).next(),
            Some(Err(Error::ScheduleCorrupt { .. }))
        ));
        assert_eq!(store.schedule_event_count(), 4);
        // Run events and schedule events never meet.
        assert_eq!(store.event_count(), 0);
    }
}
