//! `POST /api/v1/agent/runs/{run_id}/rerun` (runledger only): a new run with the original's
//! prompt, configuration, attachments and environment, pinned by default to the commits the
//! original's first execution recorded (`runs::actor::rerun`). Its body (`RerunRequest`) is
//! parsed here; the original must be visible to the key (its team, or any run for an admin
//! key), else it is answered as missing.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;

use super::access::{may_use_environment, run_id};
use super::error_responses::{
    Forbidden, InternalError, NotFound, PayloadTooLarge, Unauthorized, Unavailable,
};
use super::problem::{ApiError, Problem};
use super::validate::parse_json;
use super::wire::RunAgentResponse;
use super::{AppState, Principal};
use runledger_domain::Creator;

/// Request body of a rerun (optional: none, `null` or `{}` is a pinned rerun).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RerunRequest {
    /// `true` (the default): check the repositories out at the commits the original's first
    /// execution recorded; `false`: at their refs as they are now.
    pub pinned: Option<bool>,
}

/// Rerun a run (runledger's own endpoint): a new run with the same prompt, configuration,
/// attachments and environment, recorded as a rerun of it (`rerun_of`). Pinned by default.
#[utoipa::path(
    post,
    path = "/api/v1/agent/runs/{run_id}/rerun",
    tag = "runs",
    operation_id = "rerunRun",
    params(
        ("run_id" = String, Path, description = "The original run's id (a ULID); any other value is answered 404."),
    ),
    request_body(content = Option<RerunRequest>, content_type = "application/json",
                 description = "Optional: `{\"pinned\": false}` reruns at the refs as they are now."),
    responses(
        (status = 200, description = "The rerun was created (`QUEUED`)", body = RunAgentResponse),
        (status = 400, description = "The body is not `{\"pinned\": true|false}` (`invalid_request`)",
         body = Problem, content_type = "application/problem+json"),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, description = "A pinned rerun of a run whose first execution recorded no \
                                      commits (it never started, or ran before provenance was \
                                      recorded); the detail says why (`conflict`)",
         body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 429, description = "The team's or the environment's queue is full",
         body = Problem, content_type = "application/problem+json"),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn rerun(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let pinned = pinned(&body)?;
    let original = state
        .runs
        .get(id)?
        .filter(|run| run.team == key.team || key.admin)
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    if original.team == key.team {
        may_use_environment(&state, &key, original.config.environment_id.as_deref())?;
    }
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    let creator = Creator {
        kind: key.kind.creator_kind(),
        uid: key.id.clone(),
        display_name: key.name.clone(),
    };
    let outcome = state
        .runs
        .rerun(&original, pinned, creator, origin)
        .await?
        .map_err(|refusal| ApiError::conflict(refusal.to_string()))?;
    Ok(HttpResponse::Ok().json(RunAgentResponse {
        run_id: outcome.run.id.to_string(),
        task_id: outcome.run.id.to_string(),
        state: outcome.run.state.as_str(),
        at_capacity: outcome.at_capacity,
    }))
}

/// Whether the rerun is pinned: `true` unless the body says `{"pinned": false}`.
fn pinned(body: &[u8]) -> Result<bool, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(true);
    }
    let request: Option<RerunRequest> = parse_json(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of a rerun is none or {{\"pinned\": true|false}}: {}",
            e.detail
        ))
    })?;
    Ok(request.and_then(|r| r.pinned).unwrap_or(true))
}
