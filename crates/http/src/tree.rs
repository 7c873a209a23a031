//! Trees of runs at the edge: the create of a run another run spawns (`parent_run_id`), the
//! `ancestor_run_id` list filter's check that the ancestor is the caller's to name, and the
//! cascade of a cancel to the run's unfinished descendants. The answers are the document's
//! error model: an unknown or invisible parent is a `400` naming `parent_run_id` (another
//! team's run is answered exactly as one that does not exist), a limit of the tree a `422`
//! naming the limit. A create without a parent never comes here.

use actix_web::http::StatusCode;

use super::problem::ApiError;
use super::AppState;
use runledger_domain::{Attachment, Origin, Run, RunAdmitted, RunId};
use runledger_runs::actor::{ChildError, Outcome};
use runledger_runs::api_keys::Key;

/// Creates the run `admitted` as a child of run `parent` (under `id` when an idempotent
/// create chose it), within the limits of the environment it runs in.
pub(super) async fn create_child(
    state: &AppState,
    id: Option<RunId>,
    parent: RunId,
    admitted: RunAdmitted,
    attachments: Vec<Attachment>,
    origin: Origin,
) -> Result<Outcome, ApiError> {
    let limits = state
        .config
        .tree_limits(admitted.created.config.environment_id.as_deref());
    state
        .runs
        .create_child(id, parent, limits, admitted, attachments, origin)
        .await
        .map_err(|e| match e {
            ChildError::NoParent(_) => ApiError::bad_request(e.to_string()),
            ChildError::ParentCancelled(_) | ChildError::Limit(_) => {
                ApiError::client_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
            }
            ChildError::Failed(e) => e.into(),
        })
}

/// Refuses (`400`, naming the field) an `ancestor_run_id` list filter that names no run of
/// the key's team; the document asks that the referenced run exist and be accessible.
pub(super) fn check_ancestor(state: &AppState, key: &Key, raw_query: &str) -> Result<(), ApiError> {
    // Most lists name no ancestor: they pay one substring search, not a second parse.
    if !raw_query.contains("ancestor_run_id") {
        return Ok(());
    }
    let Some(raw) = form_urlencoded::parse(raw_query.as_bytes())
        .filter(|(k, _)| k == "ancestor_run_id")
        .map(|(_, v)| v.into_owned())
        .last()
    else {
        return Ok(());
    };
    let visible = raw
        .parse::<RunId>()
        .ok()
        .map(|id| state.runs.get(id))
        .transpose()?
        .flatten()
        .is_some_and(|run| run.team == key.team);
    if visible {
        return Ok(());
    }
    let shown: String = raw.chars().take(64).collect();
    Err(ApiError::bad_request(format!(
        "ancestor_run_id: no run with id {shown:?}"
    )))
}

/// Cancels the unfinished descendants of `run`, just cancelled by `key` with `origin`.
pub(super) async fn cascade(
    state: &AppState,
    run: &Run,
    key: &Key,
    origin: &Origin,
) -> Result<Vec<RunId>, ApiError> {
    Ok(state.runs.cancel_descendants(run, &key.id, origin).await?)
}

/// A run's parent (if visible to `key`, as it always is: a child is of its parent's team) and
/// up to `limit` of its children, most recently updated first: the console's run page.
pub(crate) async fn family(
    state: &AppState,
    key: &Key,
    run: &Run,
    limit: usize,
) -> Result<(Option<Run>, Vec<Run>), ApiError> {
    let parent = match &run.parent {
        Some(p) => p
            .parent
            .parse::<RunId>()
            .ok()
            .map(|id| state.runs.get(id))
            .transpose()?
            .flatten()
            .filter(|parent| parent.team == key.team),
        None => None,
    };
    let children = state.runs.children(run, limit).await?;
    Ok((parent, children))
}
