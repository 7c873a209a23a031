//! The reads of one run beside the run itself: its conversation (by run id or conversation
//! id), from the latest `CONVERSATION_MAX_BYTES` of its transcript and the follow-ups of its
//! history, and its handoff attachments. They read through the `TranscriptReader` and the
//! `RunHandle`, scoped to the key's team; building the conversation is `conversation`'s.

use actix_web::{web, HttpResponse};

use super::conversation::{conversation, followups, CONVERSATION_MAX_BYTES};
use crate::access::{run_id, visible};
use crate::error_responses::{InternalError, NotFound, Unauthorized};
use crate::problem::ApiError;
use crate::wire::{ConversationResponse, HandoffAttachments};
use crate::{AppState, Principal};
use runledger_domain::{RunId, Timestamp};

/// The conversation of run `id`, if the key's team may see it.
fn conversation_of(
    state: &AppState,
    key: &runledger_runs::api_keys::Key,
    id: RunId,
) -> Result<HttpResponse, ApiError> {
    let run = visible(state, key, id)?;
    let slice = state
        .transcripts
        .tail(id, CONVERSATION_MAX_BYTES)
        .map_err(|e| ApiError::internal(&e))?;
    let start = slice.entries.first().map_or(0, |(offset, _)| *offset);
    // Follow-ups from when the output shown begins (all of them for a whole transcript).
    let since = match slice.entries.first() {
        Some((_, e)) if start > 0 => e.at,
        _ => Timestamp(0),
    };
    let events = state
        .runs
        .durable_events(id, 0)?
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    let asked = followups(events, since)?;
    Ok(HttpResponse::Ok().json(conversation(&run, &slice.entries, start, &asked)))
}

/// A run's conversation: its prompt, follow-ups and the agent's output from the latest 1 MiB of
/// its transcript, one step per execution (docs/api.md). The full transcript is
/// `GET /agent/runs/{run_id}/transcript`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/conversation",
    tag = "agents",
    operation_id = "getRunConversation",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's conversation", body = ConversationResponse),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn run_conversation(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    conversation_of(&state, &key, id)
}

/// A conversation by its id, which is its run's id: the same answer as the run's conversation.
#[utoipa::path(
    get,
    path = "/api/v1/agent/conversations/{conversation_id}",
    tag = "agents",
    operation_id = "getConversation",
    params(
        ("conversation_id" = String, Path, description = "A run's id; any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's conversation", body = ConversationResponse),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn get_conversation(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    conversation_of(&state, &key, id)
}

/// A run's handoff snapshot files: always none, since runledger's executions upload no
/// snapshots (the files attached at create are the run's `attachments`, not a handoff).
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/handoff/attachments",
    tag = "agents",
    operation_id = "listHandoffAttachments",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's handoff snapshots: an empty list", body = HandoffAttachments),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn handoff_attachments(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    visible(&state, &key, id)?;
    Ok(HttpResponse::Ok().json(HandoffAttachments {
        attachments: Vec::new(),
    }))
}
