//! Where the steps endpoint, the session page and the console's run page read a page of a
//! run's steps from, so all three show the same steps: the run's harness (from its provenance)
//! and its transcript, through the transcripts handle. It names no handler and no page.

use super::problem::ApiError;
use super::AppState;
use runledger_domain::harness::Harness;
use runledger_domain::Run;
use runledger_runs::steps::{self, Cursor, Page};

/// The harness whose output the run's transcript holds, as its latest execution's provenance
/// names it; a run without one (recorded before provenance was) reads as a command agent's.
pub(crate) fn harness_of(run: &Run) -> Harness {
    match run.provenance.as_ref().map(|(_, p)| p.harness.as_str()) {
        Some("claude") => Harness::Claude,
        Some("codex") => Harness::Codex,
        Some("gemini") => Harness::Gemini,
        Some("demo") => Harness::Demo,
        _ => Harness::Command,
    }
}

/// A page of `run`'s steps from `cursor`.
pub(crate) fn read(
    state: &AppState,
    run: &Run,
    cursor: Cursor,
    limit: usize,
) -> Result<Page, ApiError> {
    let live = !run.state.is_terminal();
    steps::page(harness_of(run), cursor, limit, live, |offset, max| {
        state.transcripts.read(run.id, offset, usize::MAX, max)
    })
    .map_err(|e| ApiError::internal(&e))
}
