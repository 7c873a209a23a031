//! Identifiers and time values of the domain. A run id is a ULID whose timestamp part is the
//! run's creation time, so ordering run ids orders runs by `created_at` — the store and the
//! read index rely on that; a schedule's id is the same kind of ULID.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, UTC. The domain never reads a clock; callers pass it in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub fn millis(self) -> u64 {
        self.0
    }
}

/// A run's identity: a ULID, 16 bytes, rendered in Crockford base32 on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RunId(pub u128);

impl RunId {
    /// A new id for a run created at `at`, with `random` as its 80 random bits.
    pub fn new(at: Timestamp, random: u128) -> RunId {
        let time = u128::from(at.0 & 0xFFFF_FFFF_FFFF) << 80;
        RunId(time | (random & ((1u128 << 80) - 1)))
    }

    /// The creation time encoded in the id.
    pub fn created_at(self) -> Timestamp {
        Timestamp((self.0 >> 80) as u64)
    }

    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }

    pub fn from_bytes(bytes: [u8; 16]) -> RunId {
        RunId(u128::from_be_bytes(bytes))
    }

    /// The smallest id that a run created at `at` can have; used for time-range bounds.
    pub fn lower_bound(at: Timestamp) -> RunId {
        RunId::new(at, 0)
    }
}

/// A schedule's id: a ULID whose time part is its creation time, like a run's.
pub type ScheduleId = RunId;

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Encoded on the stack: every run on the wire renders its id, a list twenty times.
        let mut buf = [0u8; ulid::ULID_LEN];
        f.write_str(ulid::Ulid(self.0).array_to_str(&mut buf))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a run id: expected a 26-character ULID")]
pub struct ParseRunIdError;

impl FromStr for RunId {
    type Err = ParseRunIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 26 {
            return Err(ParseRunIdError);
        }
        ulid::Ulid::from_string(s)
            .map(|u| RunId(u.0))
            .map_err(|_| ParseRunIdError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_encodes_creation_time_and_round_trips() {
        let id = RunId::new(Timestamp(1_763_768_489_123), 0xABCDEF);
        assert_eq!(id.created_at(), Timestamp(1_763_768_489_123));
        let text = id.to_string();
        assert_eq!(text.len(), 26);
        assert_eq!(text.parse::<RunId>(), Ok(id));
        assert_eq!(RunId::from_bytes(id.to_bytes()), id);
    }

    #[test]
    fn ids_order_by_creation_time() {
        let a = RunId::new(Timestamp(1000), u128::MAX);
        let b = RunId::new(Timestamp(1001), 0);
        assert!(a < b);
        assert!(RunId::lower_bound(Timestamp(1001)) <= b);
    }

    #[test]
    fn rejects_malformed_ids() {
        assert!("".parse::<RunId>().is_err());
        assert!("not-a-ulid".parse::<RunId>().is_err());
        assert!("01ARZ3NDEKTSV4RRFFQ69G5FA".parse::<RunId>().is_err());
        assert!("01ARZ3NDEKTSV4RRFFQ69G5FA!".parse::<RunId>().is_err());
    }
}
