//! `POST /api/v1/agent/runs/{id}/fork`: a new run that starts where execution K of another run
//! ended (its workspace, agent home and CLI session, from the snapshot the execution left) and
//! whose agent continues that session with a new message. The body becomes a checked
//! `(after_execution, message)`; the original must be the key's team's (or the key an
//! admin's), execution K must have
//! ended and its snapshot must exist. The fork is the forking key's run, in the original's
//! team and environment, with its prompt, configuration (credentials sealed again for the new
//! creator) and attachments, and records `Derivation::Fork`.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;

use super::access::{may_use_environment, run_id};
use super::error_responses::{
    BadRequest, Forbidden, InternalError, NotFound, PayloadTooLarge, Unauthorized, Unavailable,
};
use super::problem::{ApiError, Problem};
use super::validate::{check_len, parse_json, MAX_FOLLOWUP_BYTES};
use super::wire::RunAgentResponse;
use super::{AppState, Principal};
use runledger_domain::{Creator, Derivation, Run, RunAdmitted, RunCreated, RunDerivation};

/// Request body of a fork.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// The execution of the original run whose end the fork starts from; 1 is the first.
    #[schema(value_type = u32, minimum = 1)]
    pub after_execution: Option<u64>,
    /// What the fork's agent is told, continuing its session: not blank, at most 64 KiB.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 65536)]
    pub message: Option<String>,
}

/// The fork's execution and message, checked.
fn parse(body: &[u8]) -> Result<(u32, String), ApiError> {
    let request: ForkRequest = parse_json(body)?;
    let after = request
        .after_execution
        .ok_or_else(|| ApiError::bad_request("after_execution is required"))?;
    let after = u32::try_from(after)
        .ok()
        .filter(|k| *k >= 1)
        .ok_or_else(|| {
            ApiError::bad_request("after_execution must be an execution number, 1 or more")
        })?;
    let message = request.message.unwrap_or_default();
    if message.trim().is_empty() {
        return Err(ApiError::bad_request(
            "message is required and must not be empty",
        ));
    }
    check_len("message", &message, MAX_FOLLOWUP_BYTES)?;
    Ok((after, message))
}

/// Whether execution `after` of `run` has ended: 422 when the run never had it, 409 while it
/// runs.
fn ended(run: &Run, after: u32) -> Result<(), ApiError> {
    if after > run.executions {
        return Err(ApiError::client_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "run {} has no execution {after}: it has had {}",
                run.id, run.executions
            ),
        ));
    }
    if after == run.executions && run.execution_started_at.is_some() {
        return Err(ApiError::conflict(format!(
            "execution {after} of run {} has not ended yet; fork after it once it has",
            run.id
        )));
    }
    Ok(())
}

/// Fork a run after one of its executions. runledger's extension: the new run starts from the
/// workspace, agent home and CLI session execution `after_execution` left, and its agent
/// continues the session with `message` (a preset resumes its CLI session; a `command` agent
/// gets it as `RUNLEDGER_FOLLOWUP`). `GET` of the new run shows `forked_from`.
#[utoipa::path(
    post,
    path = "/api/v1/agent/runs/{run_id}/fork",
    tag = "runs",
    operation_id = "forkRun",
    params(
        ("run_id" = String, Path, description = "The original run's id."),
    ),
    request_body = ForkRequest,
    responses(
        (status = 200, description = "The fork is created and queued", body = RunAgentResponse),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, description = "Execution `after_execution` has not ended, or its \
                                      snapshot was not kept (the environment keeps none, it was \
                                      over `snapshot_max_mb`, or its setup never completed)",
         body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 422, description = "The run never had execution `after_execution`",
         body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The team's or the environment's queue is full",
         body = Problem, content_type = "application/problem+json"),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn fork(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    let (after, message) = parse(&body)?;
    // The run's team, or an admin key (as for its proof); another team's run is a 404.
    let original = state
        .runs
        .get(id)?
        .filter(|run| run.team == key.team || key.admin)
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    if !key.admin {
        may_use_environment(&state, &key, original.config.environment_id.as_deref())?;
    }
    ended(&original, after)?;
    if !state.runs.snapshot_kept(&original, after) {
        return Err(ApiError::conflict(format!(
            "no snapshot of execution {after} of run {id} was kept: its environment keeps none \
             (snapshots = false), it was over snapshot_max_mb, or the execution's setup never \
             completed (its transcript says which)"
        )));
    }
    // The original's credentials, opened and sealed again for the fork's creator.
    let mut opened = original.clone();
    state
        .runs
        .credentials()
        .restore(&mut opened)
        .map_err(|e| ApiError::internal(&e))?;
    let created = RunCreated {
        title: original.title.clone(),
        prompt: original.prompt.clone(),
        config: opened.config,
        creator: Creator {
            kind: key.kind.creator_kind(),
            uid: key.id.clone(),
            display_name: key.name.clone(),
        },
        source: original.source,
        metadata: original.metadata.clone(),
    };
    let admitted = state
        .runs
        .credentials()
        .seal(RunAdmitted {
            created,
            team: original.team.clone(),
            sealed: None,
        })
        .map_err(|e| ApiError::internal(&e))?;
    let derivation = RunDerivation {
        from: id.to_string(),
        kind: Derivation::Fork {
            after_execution: after,
            message,
        },
    };
    let outcome = state
        .runs
        .create_derived(admitted, original.attachments.clone(), derivation, origin)
        .await?;
    Ok(HttpResponse::Ok().json(RunAgentResponse {
        run_id: outcome.run.id.to_string(),
        task_id: outcome.run.id.to_string(),
        state: outcome.run.state.as_str(),
        at_capacity: outcome.at_capacity,
    }))
}
