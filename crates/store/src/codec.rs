//! The byte format of one stored event: schema version, checksum and postcard-encoded envelope.
//!
//! Layout of a record (the value under key `(run_id, seq)` in the `events` tree):
//!
//! ```text
//! [0]      schema version (currently 1)
//! [1..5]   CRC-32 (IEEE) of bytes [5..], little endian
//! [5..]    postcard(Envelope { run_id, seq, at, event })
//! ```
//!
//! The envelope repeats the run id and sequence of the key so that a record copied out of
//! place (or a key/value mix-up after corruption) is detected, not silently folded into the
//! wrong run. Decoding verifies the version and the checksum before trusting a single byte.
//!
//! A schedule's events (the `schedule_events` tree, under `(schedule_id, seq)`) are records of
//! the same layout around a `ScheduleEnvelope`.

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use runledger_domain::{Event, RunId, ScheduleEvent, ScheduleId, Timestamp};

/// The schema version written by this build. Readers accept exactly the versions they know.
pub const SCHEMA_VERSION: u8 = 1;

const HEADER_LEN: usize = 5;

/// An event with its place in the log and the time it was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    pub run_id: RunId,
    pub seq: u64,
    pub at: Timestamp,
    pub event: Event,
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
    #[error("record has schema version {0}, this build reads version {SCHEMA_VERSION}")]
    UnknownVersion(u8),
    #[error("record checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("record body does not decode: {0}")]
    Body(String),
    #[error("record could not be encoded: {0}")]
    Encode(String),
}

/// Encodes an envelope (a run's `Envelope` or a `ScheduleEnvelope`) into a record.
pub fn encode<T: Serialize>(envelope: &T) -> Result<Vec<u8>, Error> {
    let mut out = postcard::to_extend(envelope, vec![SCHEMA_VERSION, 0, 0, 0, 0])
        .map_err(|e| Error::Encode(e.to_string()))?;
    let crc = crc32fast::hash(&out[HEADER_LEN..]);
    out[1..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Decodes a record, verifying its version and checksum.
pub fn decode<T: DeserializeOwned>(record: &[u8]) -> Result<T, Error> {
    if record.len() < HEADER_LEN {
        return Err(Error::Truncated(record.len()));
    }
    if record[0] != SCHEMA_VERSION {
        return Err(Error::UnknownVersion(record[0]));
    }
    let stored = u32::from_le_bytes([record[1], record[2], record[3], record[4]]);
    let computed = crc32fast::hash(&record[HEADER_LEN..]);
    if stored != computed {
        return Err(Error::Checksum { stored, computed });
    }
    postcard::from_bytes(&record[HEADER_LEN..]).map_err(|e| Error::Body(e.to_string()))
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
        }
    }

    #[test]
    fn round_trips() {
        let bytes = encode(&sample()).expect("encodes");
        assert_eq!(bytes[0], SCHEMA_VERSION);
        assert_eq!(decode::<Envelope>(&bytes), Ok(sample()));
    }

    #[test]
    fn detects_a_flipped_byte_anywhere() {
        let bytes = encode(&sample()).expect("encodes");
        for i in 1..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(
                decode::<Envelope>(&bad).is_err(),
                "flip at {i} went unnoticed"
            );
        }
    }

    #[test]
    fn refuses_unknown_versions_and_short_records() {
        let mut bytes = encode(&sample()).expect("encodes");
        bytes[0] = 9;
        assert_eq!(decode::<Envelope>(&bytes), Err(Error::UnknownVersion(9)));
        assert_eq!(decode::<Envelope>(&[1, 2]), Err(Error::Truncated(2)));
    }
}
