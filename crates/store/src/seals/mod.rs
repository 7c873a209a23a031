//! Seals over the chains' heads: `record.rs` a seal's and a leaf's bytes and signature,
//! `merkle.rs` the RFC 6962 tree, `trees.rs` making and keeping seals in the store (and the
//! instance's signing key), `proof.rs` a run's inclusion proof and its offline check,
//! `verify.rs` checking every chain and seal of a store or an export.

mod merkle;
mod proof;
mod record;
mod trees;
mod verify;

pub use merkle::{audit_path, leaf_hash, node_hash, root, root_from_path};
pub use proof::parse_public_key;
pub use proof::{Proof, ProofError, ProofSeal};
pub use record::{check_name, ChainId, Error, Leaf, Seal};
pub use trees::{Sealed, PUBLIC_KEY_FILE};
pub use verify::{Checker, Failure, Report};
