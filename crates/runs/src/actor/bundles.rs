//! `Bundles`: the one read the HTTP edge's run export needs (`GET /api/v1/agent/runs/{id}/
//! export`): write a run's bundle (`runledger_format::bundle`) from the store and the run's
//! transcript, blocking, for a blocking thread. It holds the store only and shows no way to
//! command a run; who may export which run is the caller's to decide.

use runledger_domain::RunId;
use runledger_format::bundle::{write_bundle, Error, Written};
use runledger_store::Store;

/// A cheap-to-clone handle that writes one run's bundle.
#[derive(Clone)]
pub struct Bundles {
    store: Store,
}

impl Bundles {
    pub(super) fn new(store: Store) -> Bundles {
        Bundles { store }
    }

    /// Writes run `id`'s bundle to `out`; `None` when the store has no such run. The run may
    /// be going on: the bundle holds it as far as its chain head when the export began.
    pub fn write(&self, id: RunId, out: &mut dyn std::io::Write) -> Result<Option<Written>, Error> {
        // Where `runledger_exec::transcript::Transcripts` keeps a run's transcript.
        let transcript = self
            .store
            .data_dir()
            .join("transcripts")
            .join(format!("{id}.jsonl"));
        write_bundle(&self.store, id, &transcript, out)
    }
}
