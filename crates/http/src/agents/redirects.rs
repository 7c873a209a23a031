//! The redirect checks between a session and its conversation: whether a run's live page
//! should give way to its conversation, or the reverse. They tell nothing of other teams'
//! runs, nor whether a run exists.

use actix_web::{web, HttpResponse};

use crate::error_responses::{InternalError, Unauthorized};
use crate::problem::ApiError;
use crate::wire::{session_id, ConversationRedirect, SessionRedirect};
use crate::{AppState, MaybePrincipal};
use runledger_domain::{Run, RunId};

/// The run a redirect check names (by its id, or by its `session_id`, the same 128 bits as a
/// UUID), if it is one the caller's team may see. An unknown, malformed or other team's id is
/// no run, and so is every id for a caller without a key: the check then answers that no
/// redirect is needed, the document's only answer, and tells nothing of other teams' runs or
/// of whether a run exists.
fn redirect_run(
    state: &AppState,
    key: Option<&runledger_runs::api_keys::Key>,
    raw: &str,
) -> Result<Option<Run>, ApiError> {
    let Some(key) = key else {
        return Ok(None);
    };
    let id = match raw.parse::<RunId>() {
        Ok(id) => id,
        Err(_) => match uuid::Uuid::try_parse(raw) {
            Ok(uuid) => RunId(uuid.as_u128()),
            Err(_) => return Ok(None),
        },
    };
    Ok(state.runs.get(id)?.filter(|run| run.team == key.team))
}

/// Whether a session should give way to its conversation. A session is a run (its page is
/// `/sessions/{run_id}`; its `session_id` is the run id as a UUID): once the run is finished
/// (a terminal state), the answer names its conversation (the run id); while it goes on, for
/// no such run, or without an API key (the current clients send none), `{}`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/sessions/{session_uuid}/redirect",
    tag = "agents",
    operation_id = "getSessionRedirect",
    params(
        ("session_uuid" = String, Path, description = "A run's `session_id`, or its id."),
    ),
    responses(
        (status = 200, description = "`conversation_id` when the run has finished, else empty",
         body = SessionRedirect),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    ),
    security((), ("bearerAuth" = []))
)]
pub async fn session_redirect(
    path: web::Path<String>,
    state: web::Data<AppState>,
    MaybePrincipal(key): MaybePrincipal,
) -> Result<HttpResponse, ApiError> {
    let run = redirect_run(&state, key.as_ref(), &path)?;
    Ok(HttpResponse::Ok().json(SessionRedirect {
        conversation_id: run
            .filter(|r| r.state.is_terminal())
            .map(|r| r.id.to_string()),
    }))
}

/// Whether a conversation should give way to its live session: while its run is not finished
/// the answer names the session (the run's `session_id`, whose page is `/sessions/{run_id}`);
/// once it is, for no such run, or without an API key, `{}`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/conversations/{conversation_id}/redirect",
    tag = "agents",
    operation_id = "getConversationRedirect",
    params(
        ("conversation_id" = String, Path, description = "A run's id."),
    ),
    responses(
        (status = 200, description = "`session_id` while the run goes on, else empty",
         body = ConversationRedirect),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    ),
    security((), ("bearerAuth" = []))
)]
pub async fn conversation_redirect(
    path: web::Path<String>,
    state: web::Data<AppState>,
    MaybePrincipal(key): MaybePrincipal,
) -> Result<HttpResponse, ApiError> {
    let run = match path.parse::<RunId>() {
        Ok(_) => redirect_run(&state, key.as_ref(), &path)?,
        Err(_) => None,
    };
    Ok(HttpResponse::Ok().json(ConversationRedirect {
        session_id: run
            .filter(|r| !r.state.is_terminal())
            .map(|r| session_id(r.id).as_str().to_string()),
    }))
}
