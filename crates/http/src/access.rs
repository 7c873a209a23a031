//! What a request may reach of runs and environments, checked in one place for every handler:
//! a run id from a path (a malformed id is answered like an unknown one), a run only if the
//! key's team may see it (another team's run is answered like one that does not exist), an
//! environment only if it is open to the key's team. Beside them, the JSON a visible run is
//! answered with (`run_json`, with this server's links), which the API, the session page and
//! the console share, and a page of the team's runs (`list_json`), which the list endpoint and
//! the console's runs page share. This module names no handler.

use actix_web::web;

use super::problem::ApiError;
use super::validate;
use super::wire::{Links, PageInfo};
use super::AppState;
use runledger_base::clock::now;
use runledger_domain::{Run, RunId};
use runledger_runs::api_keys::Key;

/// Unknown and malformed run ids are both "no such run".
pub(super) fn run_id(raw: &str) -> Result<RunId, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found(format!("no run with id {raw:?}")))
}

/// The links in a run's JSON as this server renders them now (a session link's expiry counts
/// from now).
pub(super) fn links(state: &AppState) -> Links<'_> {
    Links {
        public_url: &state.public_url,
        secret: &state.session_secret,
        now: now(),
        ttl_secs: state.config.session_link_ttl_secs,
    }
}

/// The JSON of `run` as a get answers it (from the render cache).
pub(super) fn run_json(state: &AppState, run: &Run) -> Result<web::Bytes, ApiError> {
    let rendered = state
        .rendered
        .run(run, &links(state))
        .map_err(|e| ApiError::internal(&e))?;
    super::provenance::with_provenance(rendered, run).map_err(|e| ApiError::internal(&e))
}

/// Run `id` if the key's team may see it. Another team's run is answered exactly as a run
/// that does not exist, so a key learns nothing of other teams' runs, not even that they exist.
pub(super) fn visible(state: &AppState, key: &Key, id: RunId) -> Result<Run, ApiError> {
    state
        .runs
        .get(id)?
        .filter(|run| run.team == key.team)
        .ok_or_else(|| ApiError::not_found("no run with this id"))
}

/// Refuses (403, naming it) an environment limited to teams other than the key's. The caller
/// named the environment (or it is the default), so the answer tells them nothing new beyond
/// that it is not theirs; the list of environments shows each key only its team's.
pub(super) fn may_use_environment(
    state: &AppState,
    key: &Key,
    id: Option<&str>,
) -> Result<(), ApiError> {
    let environment = match id {
        Some(id) => state.config.environment(id),
        None => state.config.environments.first(),
    };
    match environment {
        Some(env) if !env.open_to(&key.team) => Err(ApiError::forbidden(format!(
            "environment {:?} is limited to the teams {}; this key belongs to team {:?}",
            env.id,
            env.teams.join(", "),
            key.team
        ))),
        _ => Ok(()),
    }
}

/// One page of the runs of `key`'s team that the list query `raw` asks for: the bytes
/// `ListRunsResponse` serialises to, from the runs' cached JSON (the list's answer, and what the
/// console's runs page shows).
pub(super) async fn list_json(state: &AppState, key: &Key, raw: &str) -> Result<Vec<u8>, ApiError> {
    let mut query = validate::list_query(raw)?;
    query.team = key.team.clone();
    let page = state.runs.list(&query).await?;
    let page_info = PageInfo {
        has_next_page: page.next_cursor.is_some(),
        next_cursor: page.next_cursor.map(|c| c.encode()),
    };
    state
        .rendered
        .page(&page.runs, &page_info, &links(state))
        .map_err(|e| ApiError::internal(&e))
}
