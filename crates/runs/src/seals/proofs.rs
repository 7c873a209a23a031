//! `Proofs`: the narrow handle `GET /api/v1/agent/runs/{id}/proof` reads a run's proof
//! through (its chain head, the latest seal covering it and the Merkle path), off the async
//! threads. It makes no seal and writes nothing.

use runledger_domain::RunId;
use runledger_store::seals::Proof;
use runledger_store::Store;

/// A cheap-to-clone handle on the store's chains and seals, for reading proofs.
#[derive(Clone)]
pub struct Proofs {
    store: Store,
}

impl Proofs {
    pub fn new(store: Store) -> Proofs {
        Proofs { store }
    }

    /// Run `id`'s proof; `None` for a run without events.
    pub async fn of_run(&self, id: RunId) -> Result<Option<Proof>, runledger_store::Error> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || store.proof(id)).await {
            Ok(result) => result,
            Err(e) => Err(runledger_store::Error::CorruptRecord {
                tree: "seals",
                detail: format!("the proof's reader failed: {e}"),
            }),
        }
    }
}
