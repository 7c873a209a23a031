//! The byte format of one stored event: schema version, checksum and postcard-encoded envelope.
//!
//! Layout of a record (the value under key `(run_id, seq)` in the `events` tree):
//!
//! ```text
//! [0]      schema version: 2 (written now) or 1 (read only)
//! [1..5]   CRC-32 (IEEE) of bytes [5..], little endian
//! [5..]    version 2: postcard(Envelope { run_id, seq, at, event, origin })
//!          version 1: postcard(LegacyEnvelope { run_id, seq, at, event })
//! ```
//!
//! A version 1 record reads as an envelope without an origin, byte for byte as it was written.
//!
//! The envelope repeats the run id and sequence of the key so that a record copied out of
//! place (or a key/value mix-up after corruption) is detected, not silently folded into the
//! wrong run. Decoding verifies the version and the checksum before trusting a single byte.
//!
//! A schedule's events (the `schedule_events` tree, under `(schedule_id, seq)`) are records of
//! the same layout around a `ScheduleEnvelope`.

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use runledger_domain::{Event, Origin, RunId, ScheduleEvent, ScheduleId, Timestamp};

/// The schema version of schedule records and of the run records written before origins.
/// Readers accept exactly the versions they know.
pub const SCHEMA_VERSION: u8 = 1;

/// The schema version of the run records this build writes: the envelope with its origin.
pub const RUN_SCHEMA_VERSION: u8 = 2;

const HEADER_LEN: usize = 5;

/// An event with its place in the log and the time it was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    pub run_id: RunId,
    pub seq: u64,
    pub at: Timestamp,
    pub event: Event,
    /// Who and what caused the event; `None` for events recorded before origins were.
    pub origin: Option<Origin>,
}

/// A run record's envelope as schema version 1 wrote it: no origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyEnvelope {
    pub run_id: RunId,
    pub seq: u64,
    pub at: Timestamp,
    pub event: Event,
}

impl From<LegacyEnvelope> for Envelope {
    fn from(e: LegacyEnvelope) -> Envelope {
        Envelope {
            run_id: e.run_id,
            seq: e.seq,
            at: e.at,
            event: e.event,
            origin: None,
        }
    }
}

/// A schedule's event with its place in the schedule's log and the time it was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleEnvelope {
    pub schedule_id: ScheduleId,
    pub seq: u64,
    pub at: Timestamp,
    pub event: ScheduleEvent,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("record is {0} bytes, shorter than its header")]
    Truncated(usize),
    #[error("record has schema version {0}, which this build does not read")]
    UnknownVersion(u8),
    #[error("record checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("record body does not decode: {0}")]
    Body(String),
    #[error("record could not be encoded: {0}")]
    Encode(String),
}

/// Encodes a schema version 1 envelope (a `ScheduleEnvelope`, or a `LegacyEnvelope`) into a
/// record.
pub fn encode<T: Serialize>(envelope: &T) -> Result<Vec<u8>, Error> {
    encode_as(SCHEMA_VERSION, envelope)
}

/// Decodes a schema version 1 record, verifying its version and checksum.
pub fn decode<T: DeserializeOwned>(record: &[u8]) -> Result<T, Error> {
    let body = body(record, SCHEMA_VERSION)?;
    postcard::from_bytes(body).map_err(|e| Error::Body(e.to_string()))
}

/// Encodes a run's envelope into a record of the current version.
pub fn encode_run(envelope: &Envelope) -> Result<Vec<u8>, Error> {
    encode_as(RUN_SCHEMA_VERSION, envelope)
}

/// Decodes a run record of either version, verifying its version and checksum.
pub fn decode_run(record: &[u8]) -> Result<Envelope, Error> {
    match record.first() {
        Some(&SCHEMA_VERSION) => decode::<LegacyEnvelope>(record).map(Envelope::from),
        _ => {
            let body = body(record, RUN_SCHEMA_VERSION)?;
            postcard::from_bytes(body).map_err(|e| Error::Body(e.to_string()))
        }
    }
}

fn encode_as<T: Serialize>(version: u8, envelope: &T) -> Result<Vec<u8>, Error> {
    let mut out = postcard::to_extend(envelope, vec![version, 0, 0, 0, 0])
        .map_err(|e| Error::Encode(e.to_string()))?;
    let crc = crc32fast::hash(&out[HEADER_LEN..]);
    out[1..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The body of a record of schema `version`, once its header is checked.
fn body(record: &[u8], version: u8) -> Result<&[u8], Error> {
    if record.len() < HEADER_LEN {
        return Err(Error::Truncated(record.len()));
    }
    if record[0] != version {
        return Err(Error::UnknownVersion(record[0]));
    }
    let stored = u32::from_le_bytes([record[1], record[2], record[3], record[4]]);
    let computed = crc32fast::hash(&record[HEADER_LEN..]);
    if stored != computed {
        return Err(Error::Checksum { stored, computed });
    }
    Ok(&record[HEADER_LEN..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::FollowupMode;

    fn sample() -> Envelope {
        Envelope {
            run_id: RunId(7),
            seq: 3,
            at: Timestamp(1_700_000_000_000),
            event: Event::FollowupReceived {
                message: "hello".into(),
                mode: FollowupMode::Plan,
                by: "key".into(),
            },
            origin: Some(Origin::system("a test")),
        }
    }

    #[test]
    fn round_trips() {
        let bytes = encode_run(&sample()).expect("encodes");
        assert_eq!(bytes[0], RUN_SCHEMA_VERSION);
        assert_eq!(decode_run(&bytes), Ok(sample()));
    }

    #[test]
    fn a_version_1_record_reads_without_an_origin() {
        let mut old = sample();
        old.origin = None;
        let legacy = LegacyEnvelope {
            run_id: old.run_id,
            seq: old.seq,
            at: old.at,
            event: old.event.clone(),
        };
        let bytes = encode(&legacy).expect("encodes");
        assert_eq!(bytes[0], SCHEMA_VERSION);
        assert_eq!(decode_run(&bytes), Ok(old));
    }

    #[test]
    fn detects_a_flipped_byte_anywhere() {
        let bytes = encode_run(&sample()).expect("encodes");
        for i in 1..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(decode_run(&bad).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn refuses_unknown_versions_and_short_records() {
        let mut bytes = encode_run(&sample()).expect("encodes");
        bytes[0] = 9;
        assert_eq!(decode_run(&bytes), Err(Error::UnknownVersion(9)));
        assert_eq!(decode_run(&[2, 2]), Err(Error::Truncated(2)));
    }
}
