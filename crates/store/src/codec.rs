//! The byte format of one stored event: schema version, checksum and postcard-encoded envelope.
//!
//! Layout of a record (the value under key `(run_id, seq)` in the `events` tree):
//!
//! ```text
//! [0]       schema version: 2 (written now) or 1 (read only)
//! [1..5]    CRC-32 (IEEE) of bytes [5..], little endian
//! version 2:
//! [5..37]   prev: the run's chain link before this record (`crate::chain`)
//! [37..]    postcard(Envelope { run_id, seq, at, event, origin })
//! version 1:
//! [5..]     postcard(LegacyEnvelope { run_id, seq, at, event })
//! ```
//!
//! A version 1 record reads as an envelope without an origin, byte for byte as it was written.
//! Either version's *chain body* (what the run's hash chain covers) is the version 2 body of
//! the envelope: a version 1 body followed by the byte `0x00` (postcard's `None` for the
//! origin), so a record's link does not depend on which version stored it.
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

/// The bytes before a record's body: its version and CRC-32.
pub const HEADER_LEN: usize = 5;
/// The stored `prev` link of a version 2 record.
const PREV_LEN: usize = 32;
/// Where a version 2 record's body (its chain body) starts.
pub const RUN_BODY_OFFSET: usize = HEADER_LEN + PREV_LEN;

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

/// Encodes a run's envelope into a record of the current version, after the run's chain link
/// `prev` (the link of the run's previous record, or 32 zero bytes for its first).
pub fn encode_run(envelope: &Envelope, prev: &[u8; 32]) -> Result<Vec<u8>, Error> {
    let mut head = Vec::with_capacity(HEADER_LEN + PREV_LEN + 96);
    head.extend_from_slice(&[RUN_SCHEMA_VERSION, 0, 0, 0, 0]);
    head.extend_from_slice(prev);
    let mut out = postcard::to_extend(envelope, head).map_err(|e| Error::Encode(e.to_string()))?;
    let crc = crc32fast::hash(&out[HEADER_LEN..]);
    out[1..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// A run record's parts once its header and checksum are checked: the stored `prev` link
/// (version 2 only) and the postcard body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunRecord<'a> {
    pub version: u8,
    pub prev: Option<[u8; 32]>,
    pub body: &'a [u8],
}

impl RunRecord<'_> {
    /// Whether the chain body needs the origin's `None` byte appended to the stored body.
    pub fn body_lacks_origin(&self) -> bool {
        self.version == SCHEMA_VERSION
    }
}

/// Splits a run record of either version into its parts, verifying version and checksum.
pub fn run_record(record: &[u8]) -> Result<RunRecord<'_>, Error> {
    match record.first() {
        Some(&SCHEMA_VERSION) => Ok(RunRecord {
            version: SCHEMA_VERSION,
            prev: None,
            body: body(record, SCHEMA_VERSION)?,
        }),
        _ => {
            let rest = body(record, RUN_SCHEMA_VERSION)?;
            if rest.len() < PREV_LEN {
                return Err(Error::Truncated(record.len()));
            }
            let (prev, body) = rest.split_at(PREV_LEN);
            let mut link = [0u8; 32];
            link.copy_from_slice(prev);
            Ok(RunRecord {
                version: RUN_SCHEMA_VERSION,
                prev: Some(link),
                body,
            })
        }
    }
}

/// Decodes a run record of either version, verifying its version and checksum.
pub fn decode_run(record: &[u8]) -> Result<Envelope, Error> {
    let parts = run_record(record)?;
    if parts.version == SCHEMA_VERSION {
        let legacy: LegacyEnvelope =
            postcard::from_bytes(parts.body).map_err(|e| Error::Body(e.to_string()))?;
        return Ok(legacy.into());
    }
    postcard::from_bytes(parts.body).map_err(|e| Error::Body(e.to_string()))
}

/// The chain body of an envelope: what a version 2 record stores after its `prev`, and what
/// an export's reader recomputes links from.
pub fn chain_body(envelope: &Envelope) -> Result<Vec<u8>, Error> {
    postcard::to_stdvec(envelope).map_err(|e| Error::Encode(e.to_string()))
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
        let bytes = encode_run(&sample(), &[7; 32]).expect("encodes");
        assert_eq!(bytes[0], RUN_SCHEMA_VERSION);
        assert_eq!(run_record(&bytes).expect("splits").prev, Some([7; 32]));
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
        assert_eq!(decode_run(&bytes), Ok(old.clone()));
        // Its chain body is the version 2 body of the same envelope.
        let parts = run_record(&bytes).expect("splits");
        assert!(parts.body_lacks_origin());
        let mut body = parts.body.to_vec();
        body.push(0);
        assert_eq!(body, chain_body(&old).expect("encodes"));
    }

    #[test]
    fn detects_a_flipped_byte_anywhere() {
        let bytes = encode_run(&sample(), &[0; 32]).expect("encodes");
        for i in 1..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(decode_run(&bad).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn refuses_unknown_versions_and_short_records() {
        let mut bytes = encode_run(&sample(), &[0; 32]).expect("encodes");
        bytes[0] = 9;
        assert_eq!(decode_run(&bytes), Err(Error::UnknownVersion(9)));
        assert_eq!(decode_run(&[2, 2]), Err(Error::Truncated(2)));
    }
}
