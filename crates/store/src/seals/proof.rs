//! A run's inclusion proof: its chain head, the latest seal that covers it with the Merkle
//! audit path of its leaf, and the count of its events after that seal; built from the store,
//! written as JSON (what `GET …/proof` answers and `runledger verify --proof` reads) and checked
//! offline against the instance's public key. It does no I/O beyond the store's reads.

use serde::{Deserialize, Serialize};

use runledger_domain::RunId;

use super::merkle;
use super::record::{ChainId, Leaf, Seal};
use crate::chain::Head;
use crate::{Error, Store};

/// A seal as a proof carries it: every field, in hex, and its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProofSeal {
    pub number: u64,
    /// Milliseconds since the Unix epoch (exactly what was signed).
    pub at_ms: u64,
    pub prev: String,
    pub root: String,
    pub leaves: u64,
    pub public_key: String,
    pub new_key: bool,
    pub signature: String,
    pub hash: String,
}

/// A run's proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proof {
    pub run_id: String,
    /// The run's last event now and its link.
    pub head_seq: u64,
    pub head_link: String,
    /// The latest seal covering the run; `null` before its first.
    pub seal: Option<ProofSeal>,
    /// The run's leaf in that seal: its index, and the run's last event and link then.
    pub leaf_index: Option<u64>,
    pub leaf_seq: Option<u64>,
    pub leaf_link: Option<String>,
    /// The Merkle audit path of the leaf, from the leaf up.
    pub path: Vec<String>,
    /// Events of the run after the seal (chained, not yet sealed).
    pub unsealed_events: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("the proof has no seal: the run's events are not sealed yet")]
    Unsealed,
    #[error("the proof's {0} is not what runledger writes")]
    Malformed(&'static str),
    #[error("the seal is signed by another key than the one given")]
    OtherKey,
    #[error("the seal's signature does not verify")]
    Signature,
    #[error("the seal's hash is not the hash of its fields")]
    Hash,
    #[error("the Merkle path does not lead from the run's leaf to the seal's root")]
    Path,
    #[error("the run's head at the sealed event differs from the sealed leaf")]
    Head,
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn unhex<const N: usize>(text: &str, what: &'static str) -> Result<[u8; N], ProofError> {
    if text.len() != 2 * N || !text.is_ascii() {
        return Err(ProofError::Malformed(what));
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
            .map_err(|_| ProofError::Malformed(what))?;
    }
    Ok(out)
}

/// Reads a public key given as 64 hex digits or base64 of its 32 bytes.
pub fn parse_public_key(text: &str) -> Option<[u8; 32]> {
    use base64::Engine;
    let text = text.trim();
    if let Ok(key) = unhex::<32>(text, "key") {
        return Some(key);
    }
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?
        .try_into()
        .ok()
}

impl ProofSeal {
    pub fn of(seal: &Seal) -> ProofSeal {
        ProofSeal {
            number: seal.number,
            at_ms: seal.at.0,
            prev: hex(&seal.prev),
            root: hex(&seal.root),
            leaves: seal.leaves,
            public_key: hex(&seal.public_key),
            new_key: seal.new_key,
            signature: hex(&seal.signature),
            hash: hex(&seal.hash()),
        }
    }

    pub fn seal(&self) -> Result<Seal, ProofError> {
        Ok(Seal {
            number: self.number,
            at: runledger_domain::Timestamp(self.at_ms),
            prev: unhex(&self.prev, "seal prev")?,
            root: unhex(&self.root, "seal root")?,
            leaves: self.leaves,
            public_key: unhex(&self.public_key, "seal public_key")?,
            new_key: self.new_key,
            signature: unhex(&self.signature, "seal signature")?,
        })
    }
}

impl Proof {
    /// Checks the proof against the instance's public key: the seal's signature and hash, and
    /// the path from the run's leaf to the seal's root. Returns the seal it proved.
    pub fn check(&self, public_key: &[u8; 32]) -> Result<Seal, ProofError> {
        let proof_seal = self.seal.as_ref().ok_or(ProofError::Unsealed)?;
        let seal = proof_seal.seal()?;
        if &seal.public_key != public_key {
            return Err(ProofError::OtherKey);
        }
        if !seal.signature_holds(Some(public_key)) {
            return Err(ProofError::Signature);
        }
        if hex(&seal.hash()) != proof_seal.hash {
            return Err(ProofError::Hash);
        }
        let run_id: RunId = self
            .run_id
            .parse()
            .map_err(|_| ProofError::Malformed("run_id"))?;
        let (Some(index), Some(seq), Some(link)) =
            (self.leaf_index, self.leaf_seq, self.leaf_link.as_ref())
        else {
            return Err(ProofError::Malformed("leaf"));
        };
        let leaf = Leaf {
            chain: ChainId::Run(run_id),
            head: Head {
                seq,
                link: unhex(link, "leaf_link")?,
            },
        };
        let path = self
            .path
            .iter()
            .map(|p| unhex::<32>(p, "path"))
            .collect::<Result<Vec<_>, _>>()?;
        let root = merkle::root_from_path(
            index,
            seal.leaves,
            merkle::leaf_hash(&leaf.to_bytes()),
            &path,
        );
        if root != Some(seal.root) {
            return Err(ProofError::Path);
        }
        if self.head_seq == seq && self.head_link != *link {
            return Err(ProofError::Head);
        }
        Ok(seal)
    }
}

impl Store {
    /// A run's proof; `None` for a run without events.
    pub fn proof(&self, run_id: RunId) -> Result<Option<Proof>, Error> {
        let Some(head) = self.run_head(run_id)? else {
            return Ok(None);
        };
        let mut proof = Proof {
            run_id: run_id.to_string(),
            head_seq: head.seq,
            head_link: hex(&head.link),
            seal: None,
            leaf_index: None,
            leaf_seq: None,
            leaf_link: None,
            path: Vec::new(),
            unsealed_events: head.seq + 1,
        };
        let Some(sealed) = self.sealed(run_id)? else {
            return Ok(Some(proof));
        };
        let Some(seal) = self.seal_numbered(sealed.seal)? else {
            return Ok(Some(proof));
        };
        let leaves = self.seal_leaves_of(sealed.seal)?;
        let hashes: Vec<_> = leaves
            .iter()
            .map(|l| merkle::leaf_hash(&l.to_bytes()))
            .collect();
        let index = sealed.index as usize;
        let Some(leaf) = leaves.get(index) else {
            return Ok(Some(proof));
        };
        proof.seal = Some(ProofSeal::of(&seal));
        proof.leaf_index = Some(sealed.index);
        proof.leaf_seq = Some(leaf.head.seq);
        proof.leaf_link = Some(hex(&leaf.head.link));
        proof.path = merkle::audit_path(index, &hashes)
            .iter()
            .map(|p| hex(p))
            .collect();
        proof.unsealed_events = head.seq.saturating_sub(leaf.head.seq);
        Ok(Some(proof))
    }
}
