//! `GET /api/v1/agent/runs/{run_id}/proof` (runledger's own, beyond the Oz API): the run's
//! chain head, the latest seal that covers it with every field, its Merkle audit path and the
//! count of its events after that seal. Saved to a file, the answer is what
//! `runledger verify --proof FILE --pubkey KEY` checks offline. For the run's team, or an
//! admin key.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::access::run_id;
use super::error_responses::{InternalError, NotFound, Unauthorized};
use super::problem::ApiError;
use super::{AppState, Principal};
use runledger_runs::seals::{Proof, ProofSeal};

/// A seal: the instance's Ed25519 signature over the Merkle root of the chains' heads it
/// covers, chained to the seal before it. Hashes and keys are lowercase hex.
#[derive(Debug, Serialize, ToSchema)]
pub struct SealOut {
    /// From 1, one more than the previous seal's.
    pub number: u64,
    /// When it was made, in milliseconds since the Unix epoch (the signed value).
    pub at_ms: u64,
    /// SHA-256 of the previous seal (its canonical bytes and signature); zeros for the first.
    pub prev: String,
    /// The Merkle root (RFC 6962) of the sorted leaves.
    pub root: String,
    /// How many leaves (chains) it covers.
    pub leaves: u64,
    /// The Ed25519 public key that signed it (`runledger audit pubkey`).
    pub public_key: String,
    /// Whether this seal's key differs from the previous seal's (a first start or a restore).
    pub new_key: bool,
    /// Ed25519 signature over the seal's canonical bytes (64 bytes).
    pub signature: String,
    /// SHA-256 of the canonical bytes and the signature: what the next seal's `prev` repeats.
    pub hash: String,
}

/// A run's proof of inclusion in a seal.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProofOut {
    pub run_id: String,
    /// The run's last event now.
    pub head_seq: u64,
    /// The link (SHA-256 chain) of that event.
    pub head_link: String,
    /// The latest seal covering the run; `null` before its first seal.
    pub seal: Option<SealOut>,
    /// The run's leaf in that seal: its index among the sorted leaves,
    pub leaf_index: Option<u64>,
    /// the run's last event when it was sealed,
    pub leaf_seq: Option<u64>,
    /// and that event's link.
    pub leaf_link: Option<String>,
    /// The Merkle audit path of the leaf, sibling hashes from the leaf up.
    pub path: Vec<String>,
    /// Events of the run after that seal: chained, not sealed yet (the next seal covers them).
    pub unsealed_events: u64,
}

impl SealOut {
    fn from(s: ProofSeal) -> SealOut {
        SealOut {
            number: s.number,
            at_ms: s.at_ms,
            prev: s.prev,
            root: s.root,
            leaves: s.leaves,
            public_key: s.public_key,
            new_key: s.new_key,
            signature: s.signature,
            hash: s.hash,
        }
    }
}

impl ProofOut {
    fn from(p: Proof) -> ProofOut {
        ProofOut {
            run_id: p.run_id,
            head_seq: p.head_seq,
            head_link: p.head_link,
            seal: p.seal.map(SealOut::from),
            leaf_index: p.leaf_index,
            leaf_seq: p.leaf_seq,
            leaf_link: p.leaf_link,
            path: p.path,
            unsealed_events: p.unsealed_events,
        }
    }
}

/// A run's chain head, the latest seal covering it and its Merkle path (runledger's own
/// endpoint). For the run's team or an admin key; `runledger verify --proof` checks the answer
/// offline against the instance's public key.
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/proof",
    tag = "runs",
    operation_id = "getRunProof",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's proof", body = ProofOut),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn proof(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    state
        .runs
        .get(id)?
        .filter(|run| run.team == key.team || key.admin)
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    let proof = state
        .proofs
        .of_run(id)
        .await
        .map_err(|e| ApiError::internal(&e))?
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    Ok(HttpResponse::Ok().json(ProofOut::from(proof)))
}
