//! The message operations of the Oz document (`sendAgentMessage`, `listAgentMessages`,
//! `readAgentMessage`, `markAgentMessageDelivered`): a message from one run to others, each
//! recipient's copy an event in its log that reaches its agent as a follow-up does. The sender
//! and every recipient must be runs the key may see (its team's; an admin key's, any team's);
//! another team's run is answered like one that does not exist, naming the field.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};

use crate::error_responses::{
    BadRequest, Conflict, InternalError, NotFound, PayloadTooLarge, Unauthorized, Unavailable,
};
use crate::problem::{ApiError, Problem};
use crate::validate;
use crate::wire::{MessageContent, MessageHeader, SendMessageRequest, SendMessageResponse};
use crate::{AppState, Principal};
use runledger_domain::{Rejection, Run, RunId};
use runledger_runs::api_keys::Key;
use runledger_runs::failure::Cause;

/// Run `id`, named in `field`, if `key` may see it: its team's, or any run for an admin key.
pub(crate) fn seen(state: &AppState, key: &Key, field: &str, id: RunId) -> Result<Run, ApiError> {
    state
        .runs
        .get(id)?
        .filter(|run| key.admin || run.team == key.team)
        .ok_or_else(|| ApiError::not_found(format!("{field}: no run with id {id}")))
}

/// The run a message id belongs to, if the key may see it; an unknown message, or one of a
/// run the key may not see, is 404.
fn message_run(state: &AppState, key: &Key, message_id: &str) -> Result<RunId, ApiError> {
    let unknown = || ApiError::not_found(format!("no message with id {message_id:?}"));
    let run = state.messages.recipient(message_id)?.ok_or_else(unknown)?;
    seen(state, key, "messageId", run).map_err(|_| unknown())?;
    Ok(run)
}

/// Send a message to one or more runs: each recipient gets its own copy (its own id, delivery
/// and read state), recorded in its log, and reaches its agent as a follow-up does if the run is
/// queued or in progress. 422 when a recipient has ended.
#[utoipa::path(
    post,
    path = "/api/v1/agent/messages",
    tag = "orchestration",
    operation_id = "sendAgentMessage",
    request_body = SendMessageRequest,
    responses(
        (status = 200, description = "Sent: one message id per recipient, in the order of `to`",
         body = SendMessageResponse,
         links(
             ("ReadAgentMessage" = (operation_id = "readAgentMessage",
                                    parameters(("messageId" = "$response.body#/message_ids/0")))),
             ("MarkAgentMessageDelivered" = (operation_id = "markAgentMessageDelivered",
                                             parameters(("messageId" = "$response.body#/message_ids/0")))),
         )),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 422, description = "A recipient has ended (`invalid_request`); nothing was sent \
                                      to it or after it",
         body = Problem, content_type = "application/problem+json"),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn send(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let message = validate::send_message(&body)?;
    seen(&state, &key, "sender_run_id", message.sender)?;
    // Every recipient is checked before anything is written, so a refused send leaves no trace
    // in the common case (a run that ends meanwhile stops the send there).
    for (i, &to) in message.to.iter().enumerate() {
        let run = seen(&state, &key, &format!("to[{i}]"), to)?;
        if run.state.is_terminal() {
            return Err(ended(&format!("to[{i}]"), &run));
        }
    }
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    let sent = state
        .messages
        .send(
            message.sender,
            &message.to,
            &message.subject,
            &message.body,
            &origin,
        )
        .await
        .map_err(|e| match e.cause() {
            Cause::Rejected(r @ Rejection::AlreadyTerminal(_)) => {
                ApiError::client_error(StatusCode::UNPROCESSABLE_ENTITY, format!("a recipient {r}"))
            }
            _ => ApiError::from(e),
        })?;
    Ok(HttpResponse::Ok().json(SendMessageResponse { message_ids: sent }))
}

fn ended(field: &str, run: &Run) -> ApiError {
    ApiError::client_error(
        StatusCode::UNPROCESSABLE_ENTITY,
        format!(
            "{field}: run {} is {} and takes no more messages",
            run.id,
            run.state.as_str()
        ),
    )
}

/// A run's inbox: the headers of the messages it received, oldest first, with when each was
/// delivered to its agent and read.
#[utoipa::path(
    get,
    path = "/api/v1/agent/messages/{runId}",
    tag = "orchestration",
    operation_id = "listAgentMessages",
    params(
        ("runId" = String, Path, description = "The recipient run's id."),
        ("unread" = Option<bool>, Query, description = "Only messages not read yet."),
        ("since" = Option<String>, Query, format = DateTime, description = "Only messages sent at or after this RFC 3339 time."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Most messages to return; 50 when absent."),
    ),
    responses(
        (status = 200, description = "The inbox's message headers, oldest first", body = Vec<MessageHeader>),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn list(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let run = validate::named_run("runId", &path)?;
    let query = validate::inbox_query(req.query_string())?;
    seen(&state, &key, "runId", run)?;
    let headers: Vec<MessageHeader> = state
        .messages
        .inbox(run)?
        .iter()
        .filter(|m| !query.unread || m.read_at.is_none())
        .filter(|m| query.since.is_none_or(|since| m.sent_at >= since))
        .take(query.limit)
        .map(MessageHeader::from)
        .collect();
    Ok(HttpResponse::Ok().json(headers))
}

/// Read a message: its body, and `read_at` set (the first read counts).
#[utoipa::path(
    post,
    path = "/api/v1/agent/messages/{messageId}/read",
    tag = "orchestration",
    operation_id = "readAgentMessage",
    params(("messageId" = String, Path, description = "The message's id.")),
    responses(
        (status = 200, description = "The message with its body", body = MessageContent),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn read(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let run = message_run(&state, &key, &path)?;
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    let message = state
        .messages
        .read(run, &path, origin)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no message with id {:?}", path.as_str())))?;
    Ok(HttpResponse::Ok().json(MessageContent::from(message)))
}

/// Mark a message delivered: sets `delivered_at` unless it is set already (idempotent).
#[utoipa::path(
    post,
    path = "/api/v1/agent/messages/{messageId}/delivered",
    tag = "orchestration",
    operation_id = "markAgentMessageDelivered",
    params(("messageId" = String, Path, description = "The message's id.")),
    responses(
        (status = 204, description = "Delivered"),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn delivered(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let run = message_run(&state, &key, &path)?;
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    state
        .messages
        .mark_delivered(run, &path, origin)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no message with id {:?}", path.as_str())))?;
    Ok(HttpResponse::NoContent().finish())
}
