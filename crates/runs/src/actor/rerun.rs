//! Reruns (`POST /agent/runs/{id}/rerun`): a new run with the original's prompt, configuration,
//! sealed credentials, attachments (the same content addresses) and environment, recorded as
//! `Event::Derived` with `Derivation::Rerun`. Pinned, it carries the commits the original's
//! first execution recorded in its `Provenance`, which the executor checks out instead of the
//! refs; a run without them cannot be rerun pinned, and the refusal says why.

use super::error::Error;
use super::run_actor::Outcome;
use super::run_handle::RunHandle;
use runledger_domain::{
    Creator, Derivation, Event, ExecutionProvenance, Origin, RepoPin, Run, RunAdmitted, RunCreated,
    RunDerivation, SourceType,
};

/// Why a rerun cannot be made as asked (answered 409, with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unpinnable(pub String);

impl RunHandle {
    /// Creates a rerun of `original` by `creator`, its first events recorded with `origin`.
    /// `Ok(Err(_))`: a pinned rerun of a run whose first execution recorded no commits.
    pub async fn rerun(
        &self,
        original: &Run,
        pinned: bool,
        creator: Creator,
        origin: Origin,
    ) -> Result<Result<Outcome, Unpinnable>, Error> {
        let pins = if pinned {
            match self.first_provenance(original)? {
                None => {
                    return Ok(Err(Unpinnable(format!(
                        "run {} has no recorded provenance (no execution of it started, or it \
                         ran before provenance was recorded), so there are no commits to pin; \
                         send {{\"pinned\": false}} to rerun it at its refs as they are now",
                        original.id
                    ))))
                }
                Some(provenance) => match pins_of(&provenance) {
                    Ok(pins) => pins,
                    Err(refusal) => return Ok(Err(refusal)),
                },
            }
        } else {
            Vec::new()
        };
        let admitted = RunAdmitted {
            created: RunCreated {
                title: original.title.clone(),
                prompt: original.prompt.clone(),
                config: original.config.clone(),
                creator,
                // A rerun is asked through the API, whatever made the original.
                source: SourceType::Api,
                metadata: original.metadata.clone(),
            },
            team: original.team.clone(),
            sealed: original.sealed.clone(),
        };
        let derived = RunDerivation {
            from: original.id.to_string(),
            kind: Derivation::Rerun { pinned, pins },
        };
        let outcome = self
            .runs
            .create_derived(
                admitted,
                original.attachments.clone(),
                derived,
                Some(origin),
            )
            .await?;
        Ok(Ok(outcome))
    }

    /// The provenance the original's first execution that recorded one recorded, read from
    /// its log (a run holds only its latest execution's).
    fn first_provenance(&self, original: &Run) -> Result<Option<ExecutionProvenance>, Error> {
        for envelope in self.runs.inner.store.run_events(original.id, 0) {
            if let Event::Provenance { provenance, .. } = envelope?.event {
                return Ok(Some(provenance));
            }
        }
        Ok(None)
    }
}

/// The commits to pin: one per repository, each of which must have been told.
fn pins_of(provenance: &ExecutionProvenance) -> Result<Vec<RepoPin>, Unpinnable> {
    provenance
        .repositories
        .iter()
        .map(|r| {
            if r.commit.is_empty() {
                return Err(Unpinnable(format!(
                    "the original's first execution could not tell the commit of {} at {}",
                    r.url, r.path
                )));
            }
            Ok(RepoPin {
                repository: r.url.clone(),
                commit: r.commit.clone(),
            })
        })
        .collect()
}
