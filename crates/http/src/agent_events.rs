//! The event-polling operations of the Oz document: `pollAgentEvents` (the lifecycle events
//! and received messages of watched runs, after a sequence number that only grows across the
//! instance) and `reportAgentEvent` (a lifecycle event a run's agent or worker reports
//! itself, checked against the run's state machine). Every run named must be one the key may
//! see, as for messages (`messages::seen`).

use actix_web::{web, HttpRequest, HttpResponse};

use crate::error_responses::{
    BadRequest, Conflict, InternalError, NotFound, NotSupported, Unauthorized, Unavailable,
};
use crate::messages::seen;
use crate::problem::ApiError;
use crate::validate;
use crate::wire::{AgentEventItem, ReportEventRequest, ReportEventResponse};
use crate::{AppState, Principal};
use runledger_domain::Command;

/// Poll the events of some runs: their starts and ends, what their agents reported and the
/// messages they received (`new_message`, the message id in `ref_id`), in the order of one
/// sequence that only grows across the instance. Pass the last `sequence` seen as `since`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/events",
    tag = "orchestration",
    operation_id = "pollAgentEvents",
    params(
        ("run_ids" = Vec<String>, Query, explode = true, description = "The runs to watch (at most 100); repeat the parameter for each."),
        ("since" = Option<i64>, Query, minimum = 0, description = "Only events with a greater sequence; 0 when absent."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 500, description = "Most events to return; 100 when absent."),
    ),
    responses(
        (status = 200, description = "The events, in sequence order", body = Vec<AgentEventItem>),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn poll(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let query = validate::poll_query(req.query_string())?;
    for &run in &query.runs {
        seen(&state, &key, "run_ids", run)?;
    }
    let events: Vec<AgentEventItem> = state
        .agent_events
        .poll(&query.runs, query.since, query.limit)?
        .into_iter()
        .map(AgentEventItem::from)
        .collect();
    Ok(HttpResponse::Ok().json(events))
}

/// Report a lifecycle event of a run, for agents and workers that report their own state:
/// `run_in_progress` confirms the execution in progress, `run_succeeded`, `run_failed` and
/// `run_errored` end it (its processes are stopped), `run_cancelled` cancels the run. A report
/// the run's state contradicts is 409; `run_blocked` is 422 (a run here is never `BLOCKED`).
#[utoipa::path(
    post,
    path = "/api/v1/agent/events/{runId}",
    tag = "orchestration",
    operation_id = "reportAgentEvent",
    params(("runId" = String, Path, description = "The run's id.")),
    request_body = ReportEventRequest,
    responses(
        (status = 200, description = "Recorded", body = ReportEventResponse),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 422, response = NotSupported),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn report(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let run = validate::named_run("runId", &path)?;
    let report = validate::report_event(&body)?;
    seen(&state, &key, "runId", run)?;
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    let command = Command::ReportLifecycle {
        report: report.report,
        execution_id: report.execution_id,
        ref_id: report.ref_id,
        by: key.id.clone(),
    };
    let sequence = state.agent_events.report(run, command, origin).await?;
    Ok(HttpResponse::Ok().json(ReportEventResponse { sequence }))
}
