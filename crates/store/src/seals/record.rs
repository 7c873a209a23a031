//! A seal and its leaves as bytes: the leaf encoding, the seal's canonical bytes (what the
//! instance's Ed25519 key signs), the stored record, the seal's hash (what the next seal
//! chains to) and the signature check. It knows nothing of trees or of when seals are made.
//!
//! Canonical bytes of a seal (all integers big endian):
//!
//! ```text
//! "runledger seal v1\n"   18 bytes, so the signature cannot be taken for another message
//! number                  u64
//! at                      u64, milliseconds since the Unix epoch
//! prev                    32 bytes: the previous seal's hash (zeros for the first)
//! root                    32 bytes: the Merkle root of the leaves (`merkle`)
//! leaves                  u64
//! public_key              32 bytes
//! new_key                 u8: 1 when `public_key` differs from the previous seal's (or first)
//! ```
//!
//! The stored record is `[1] ‖ canonical ‖ signature (64 bytes)`; a seal's hash is SHA-256 of
//! `canonical ‖ signature`.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use runledger_domain::{RunId, Timestamp};

use crate::chain::{Head, Link};

const DOMAIN: &[u8; 18] = b"runledger seal v1\n";
const CANONICAL_LEN: usize = 18 + 8 + 8 + 32 + 32 + 8 + 32 + 1;
const RECORD_VERSION: u8 = 1;

/// What a chain is: a run's, or a named chain beside the runs (e.g. `admin`, the admin log).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChainId {
    Run(RunId),
    Named(String),
}

/// One leaf of a seal: a chain's last sequence number and head when the seal was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub chain: ChainId,
    pub head: Head,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("a seal record of {0} bytes, not {len}", len = CANONICAL_LEN + 65)]
    Length(usize),
    #[error("a seal record of version {0}, which this build does not read")]
    Version(u8),
    #[error("a leaf that does not decode: {0}")]
    Leaf(String),
    #[error("a chain name of {0} bytes; names are 1 to 255 bytes")]
    Name(usize),
}

impl Leaf {
    /// `0x00 ‖ run id (16)` or `0x01 ‖ length ‖ name`, then `seq (u64) ‖ head (32)`. Leaves are
    /// sorted by these bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(57);
        match &self.chain {
            ChainId::Run(run_id) => {
                out.push(0);
                out.extend_from_slice(&run_id.to_bytes());
            }
            ChainId::Named(name) => {
                out.push(1);
                out.push(name.len() as u8);
                out.extend_from_slice(name.as_bytes());
            }
        }
        out.extend_from_slice(&self.head.seq.to_be_bytes());
        out.extend_from_slice(&self.head.link);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Leaf, Error> {
        let bad = || Error::Leaf(format!("{} bytes", bytes.len()));
        let (chain, rest) = match bytes.first() {
            Some(0) => {
                let id: [u8; 16] = bytes
                    .get(1..17)
                    .ok_or_else(bad)?
                    .try_into()
                    .map_err(|_| bad())?;
                (ChainId::Run(RunId::from_bytes(id)), &bytes[17..])
            }
            Some(1) => {
                let len = *bytes.get(1).ok_or_else(bad)? as usize;
                let name = bytes.get(2..2 + len).ok_or_else(bad)?;
                let name = String::from_utf8(name.to_vec()).map_err(|_| bad())?;
                (ChainId::Named(name), &bytes[2 + len..])
            }
            _ => return Err(bad()),
        };
        if rest.len() != 40 {
            return Err(bad());
        }
        let mut link = [0u8; 32];
        link.copy_from_slice(&rest[8..]);
        let seq = u64::from_be_bytes(rest[..8].try_into().map_err(|_| bad())?);
        Ok(Leaf {
            chain,
            head: Head { seq, link },
        })
    }
}

/// Checks a named chain's name (it is written with a one-byte length).
pub fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > 255 {
        return Err(Error::Name(name.len()));
    }
    Ok(())
}

/// A seal: the instance's signed statement of the heads of the chains written since the
/// previous seal, chained to that seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seal {
    pub number: u64,
    pub at: Timestamp,
    pub prev: Link,
    pub root: Link,
    pub leaves: u64,
    pub public_key: [u8; 32],
    pub new_key: bool,
    pub signature: [u8; 64],
}

impl Seal {
    /// Makes and signs a seal.
    #[allow(clippy::too_many_arguments)]
    pub fn sign(
        key: &SigningKey,
        number: u64,
        at: Timestamp,
        prev: Link,
        root: Link,
        leaves: u64,
        new_key: bool,
    ) -> Seal {
        let mut seal = Seal {
            number,
            at,
            prev,
            root,
            leaves,
            public_key: key.verifying_key().to_bytes(),
            new_key,
            signature: [0; 64],
        };
        seal.signature = key.sign(&seal.canonical()).to_bytes();
        seal
    }

    /// The bytes the signature covers (layout in the module's header).
    pub fn canonical(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CANONICAL_LEN);
        out.extend_from_slice(DOMAIN);
        out.extend_from_slice(&self.number.to_be_bytes());
        out.extend_from_slice(&self.at.0.to_be_bytes());
        out.extend_from_slice(&self.prev);
        out.extend_from_slice(&self.root);
        out.extend_from_slice(&self.leaves.to_be_bytes());
        out.extend_from_slice(&self.public_key);
        out.push(u8::from(self.new_key));
        out
    }

    /// The seal's hash, which the next seal's `prev` repeats.
    pub fn hash(&self) -> Link {
        let mut hasher = Sha256::new();
        hasher.update(self.canonical());
        hasher.update(self.signature);
        hasher.finalize().into()
    }

    /// Whether the signature is the embedded public key's over the canonical bytes; with
    /// `trusted`, whether that key is also the one given.
    pub fn signature_holds(&self, trusted: Option<&[u8; 32]>) -> bool {
        if trusted.is_some_and(|t| t != &self.public_key) {
            return false;
        }
        let Ok(key) = VerifyingKey::from_bytes(&self.public_key) else {
            return false;
        };
        key.verify_strict(&self.canonical(), &Signature::from_bytes(&self.signature))
            .is_ok()
    }

    pub fn to_record(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + CANONICAL_LEN + 64);
        out.push(RECORD_VERSION);
        out.extend_from_slice(&self.canonical());
        out.extend_from_slice(&self.signature);
        out
    }

    pub fn from_record(bytes: &[u8]) -> Result<Seal, Error> {
        if bytes.len() != 1 + CANONICAL_LEN + 64 {
            return Err(Error::Length(bytes.len()));
        }
        if bytes[0] != RECORD_VERSION {
            return Err(Error::Version(bytes[0]));
        }
        let c = &bytes[1..];
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&c[at..at + 8]);
            u64::from_be_bytes(b)
        };
        let arr32 = |at: usize| {
            let mut b = [0u8; 32];
            b.copy_from_slice(&c[at..at + 32]);
            b
        };
        let mut signature = [0u8; 64];
        signature.copy_from_slice(&c[CANONICAL_LEN..]);
        Ok(Seal {
            number: u64_at(18),
            at: Timestamp(u64_at(26)),
            prev: arr32(34),
            root: arr32(66),
            leaves: u64_at(98),
            public_key: arr32(106),
            new_key: c[138] != 0,
            signature,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn sample() -> Seal {
        let key = SigningKey::from_bytes(&[7; 32]);
        Seal::sign(
            &key,
            3,
            Timestamp(1_700_000_000_000),
            [1; 32],
            [2; 32],
            5,
            false,
        )
    }

    #[test]
    fn canonical_bytes_are_laid_out_as_documented() {
        let seal = sample();
        let c = seal.canonical();
        assert_eq!(c.len(), CANONICAL_LEN);
        assert_eq!(&c[..18], b"runledger seal v1\n");
        assert_eq!(&c[18..26], &3u64.to_be_bytes());
        assert_eq!(&c[26..34], &1_700_000_000_000u64.to_be_bytes());
        assert_eq!(&c[34..66], &[1; 32]);
        assert_eq!(&c[66..98], &[2; 32]);
        assert_eq!(&c[98..106], &5u64.to_be_bytes());
        assert_eq!(&c[106..138], &seal.public_key);
        assert_eq!(c[138], 0);
    }

    #[test]
    fn the_record_has_golden_bytes_and_round_trips() {
        let record = sample().to_record();
        // Ed25519 signatures are deterministic: a change here is a change of the format.
        assert_eq!(hex(&record), GOLDEN);
        assert_eq!(Seal::from_record(&record), Ok(sample()));
        assert!(sample().signature_holds(None));
    }

    #[test]
    fn a_changed_field_or_another_key_breaks_the_signature() {
        let mut seal = sample();
        seal.leaves = 6;
        assert!(!seal.signature_holds(None));
        let other = SigningKey::from_bytes(&[8; 32]).verifying_key().to_bytes();
        assert!(!sample().signature_holds(Some(&other)));
    }

    #[test]
    fn leaves_round_trip() {
        for chain in [
            ChainId::Run(RunId::from_bytes([9; 16])),
            ChainId::Named("admin".into()),
        ] {
            let leaf = Leaf {
                chain,
                head: Head {
                    seq: 42,
                    link: [3; 32],
                },
            };
            assert_eq!(Leaf::from_bytes(&leaf.to_bytes()), Ok(leaf));
        }
        assert!(Leaf::from_bytes(&[0, 1, 2]).is_err());
    }

    /// Checked independently (Python's `cryptography`: the same key signs the same canonical
    /// bytes into the same 64 bytes).
    const GOLDEN: &str = concat!(
        "0172756e6c6564676572207365616c2076310a00000000000000030000018bcf",
        "e568000101010101010101010101010101010101010101010101010101010101",
        "0101010202020202020202020202020202020202020202020202020202020202",
        "0202020000000000000005ea4a6c63e29c520abef5507b132ec5f9954776aebe",
        "be7b92421eea691446d22c0087546b552957322a22fc0525128a5fd8d6bdb2c5",
        "0f741bb91f0686fb6ea2d290c20758a2b97454bf5eb3cab1ba311eeea67c2c1e",
        "e932978fcd065a2b852b7f0d",
    );
}
