//! Handlers of the schedule endpoints (`/api/v1/agent/schedules`, issue #21): create, list,
//! retrieve, update, delete, pause and resume, each scoped to the key's team (another team's
//! schedule is answered 404, like a run). The handlers validate and seal; `Schedules` records
//! and fires.

use actix_web::{web, HttpResponse};

use super::access::may_use_environment;
use super::error_responses::{
    BadRequest, Forbidden, InternalError, NotFound, PayloadTooLarge, Unauthorized, Unavailable,
};
use super::problem::ApiError;
use super::wire::{
    format_time, AgentConfigOut, CloudEnvironmentConfig, CreateScheduledAgentRequest, CreatorOut,
    DeleteScheduledAgentResponse, ListScheduledAgentsResponse, ScheduledAgentHistoryItem,
    ScheduledAgentItem, ScheduledRun, ScopeOut, UpdateScheduledAgentRequest,
};
use super::{validate, AppState, Principal};
use runledger_domain::{
    AgentConfig, Creator, Schedule, ScheduleCommand, ScheduleId, ScheduleSpec, Sealed,
};
use runledger_runs::api_keys::Key;
use runledger_runs::schedules::View;

/// Unknown and malformed schedule ids are both "no such schedule".
fn schedule_id(raw: &str) -> Result<ScheduleId, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found(format!("no schedule with id {raw:?}")))
}

/// The schedule, if it exists and belongs to the key's team.
fn visible(state: &AppState, key: &Key, id: ScheduleId) -> Result<View, ApiError> {
    state
        .schedules
        .get(id)
        .filter(|v| v.schedule.team == key.team)
        .ok_or_else(|| ApiError::not_found("no schedule with this id"))
}

fn creator(key: &Key) -> Creator {
    Creator {
        kind: key.kind.creator_kind(),
        uid: key.id.clone(),
        display_name: key.name.clone(),
    }
}

/// Seals `config`'s credentials for the runs of a schedule of `team` made as `runs_as`, the
/// way a run's are sealed: the stored config holds `***`.
fn seal(
    state: &AppState,
    mut config: AgentConfig,
    team: &str,
    runs_as: &Creator,
) -> Result<(AgentConfig, Option<Sealed>), ApiError> {
    let sealed = state
        .runs
        .credentials()
        .seal_config(&mut config, team, &runs_as.uid)
        .map_err(|e| ApiError::internal(&e))?;
    Ok((config, sealed))
}

/// A schedule as the API shows it; `recent` adds the states of its latest runs.
fn item<'a>(
    state: &'a AppState,
    schedule: &'a Schedule,
    next_run: Option<runledger_domain::Timestamp>,
    recent: &'a [(runledger_domain::Firing, runledger_domain::Run)],
) -> ScheduledAgentItem<'a> {
    let environment = schedule
        .spec
        .config
        .environment_id
        .as_deref()
        .and_then(|id| state.config.environment(id))
        .map(CloudEnvironmentConfig::of);
    ScheduledAgentItem {
        id: schedule.id.to_string(),
        name: &schedule.spec.name,
        cron_schedule: &schedule.spec.cron,
        time_zone: &schedule.spec.time_zone,
        enabled: schedule.enabled,
        prompt: &schedule.spec.prompt,
        last_spawn_error: schedule.last_error.as_deref(),
        agent_config: AgentConfigOut::from(&schedule.spec.config),
        environment,
        created_at: format_time(schedule.created_at),
        updated_at: format_time(schedule.updated_at),
        created_by: CreatorOut::from(&schedule.created_by),
        updated_by: CreatorOut::from(&schedule.updated_by),
        history: ScheduledAgentHistoryItem {
            last_ran: schedule.firings.last().map(|f| format_time(f.at)),
            next_run: next_run.map(format_time),
            recent_runs: recent
                .iter()
                .map(|(firing, run)| ScheduledRun {
                    run_id: run.id.to_string(),
                    scheduled_for: format_time(firing.due),
                    state: run.state.as_str(),
                })
                .collect(),
        },
        scope: ScopeOut {
            kind: "Team",
            uid: &schedule.team,
        },
        metadata: &schedule.spec.metadata,
    }
}

/// Runs the command `by` (the key's id) makes on the key's team's schedule `raw`.
async fn change(
    state: &AppState,
    key: &Key,
    raw: &str,
    command: impl FnOnce(String) -> ScheduleCommand,
) -> Result<View, ApiError> {
    let id = schedule_id(raw)?;
    visible(state, key, id)?;
    Ok(state
        .schedules
        .execute_client(id, command(key.id.clone()))
        .await?)
}

fn answer(state: &AppState, view: &View, status: actix_web::http::StatusCode) -> HttpResponse {
    let recent = state.schedules.recent_runs(&view.schedule);
    HttpResponse::build(status).json(item(state, &view.schedule, view.next_run, &recent))
}

/// Create a schedule. It fires from its next due time; each firing creates an ordinary run
/// (source `SCHEDULED_AGENT`) as the key that created the schedule, in its team.
#[utoipa::path(
    post,
    path = "/api/v1/agent/schedules",
    tag = "schedules",
    operation_id = "createScheduledAgent",
    request_body = CreateScheduledAgentRequest,
    responses(
        (status = 201, description = "The schedule is durable", body = ScheduledAgentItem),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 413, response = PayloadTooLarge),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn create(
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let input = validate::schedule(&body, &state.config, true, state.schedules.seconds())?;
    let config = input.config.unwrap_or_default();
    may_use_environment(&state, &key, config.environment_id.as_deref())?;
    let by = creator(&key);
    let (config, sealed) = seal(&state, config, &key.team, &by)?;
    let spec = ScheduleSpec {
        name: input.name,
        cron: input.cron,
        time_zone: input.time_zone,
        prompt: input.prompt,
        config,
        sealed,
        metadata: input.metadata.unwrap_or_default(),
    };
    let view = state
        .schedules
        .create(spec, input.enabled, key.team.clone(), by)
        .await?;
    Ok(answer(&state, &view, actix_web::http::StatusCode::CREATED))
}

/// List the schedules of the key's team, sorted by name.
#[utoipa::path(
    get,
    path = "/api/v1/agent/schedules",
    tag = "schedules",
    operation_id = "listScheduledAgents",
    responses(
        (status = 200, description = "Every schedule of the key's team", body = ListScheduledAgentsResponse),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn list(
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let views = state.schedules.list(&key.team);
    let schedules = views
        .iter()
        .map(|v| item(&state, &v.schedule, v.next_run, &[]))
        .collect();
    Ok(HttpResponse::Ok().json(ListScheduledAgentsResponse { schedules }))
}

/// One schedule, with its next due time and its latest runs and their states.
#[utoipa::path(
    get,
    path = "/api/v1/agent/schedules/{schedule_id}",
    tag = "schedules",
    operation_id = "getScheduledAgent",
    params(("schedule_id" = String, Path, description = "The schedule's id (a ULID); any other value is answered 404.")),
    responses(
        (status = 200, description = "The schedule", body = ScheduledAgentItem),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn get(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let view = visible(&state, &key, schedule_id(&path)?)?;
    Ok(answer(&state, &view, actix_web::http::StatusCode::OK))
}

/// Replace a schedule's name, expression, prompt and whether it is enabled; an absent
/// `agent_config` or `metadata` keeps the schedule's own. Its next due time is computed anew.
#[utoipa::path(
    put,
    path = "/api/v1/agent/schedules/{schedule_id}",
    tag = "schedules",
    operation_id = "updateScheduledAgent",
    params(("schedule_id" = String, Path, description = "The schedule's id (a ULID); any other value is answered 404.")),
    request_body = UpdateScheduledAgentRequest,
    responses(
        (status = 200, description = "The schedule as updated", body = ScheduledAgentItem),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 413, response = PayloadTooLarge),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn update(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = schedule_id(&path)?;
    let current = visible(&state, &key, id)?.schedule;
    let input = validate::schedule(&body, &state.config, false, state.schedules.seconds())?;
    let (config, sealed) = match input.config {
        Some(config) => {
            may_use_environment(&state, &key, config.environment_id.as_deref())?;
            seal(&state, config, &current.team, &current.created_by)?
        }
        None => (current.spec.config.clone(), current.spec.sealed.clone()),
    };
    let spec = ScheduleSpec {
        name: input.name,
        cron: input.cron,
        time_zone: input.time_zone,
        prompt: input.prompt,
        config,
        sealed,
        metadata: input
            .metadata
            .unwrap_or_else(|| current.spec.metadata.clone()),
    };
    let command = ScheduleCommand::Update {
        spec,
        enabled: input.enabled,
        by: creator(&key),
    };
    let view = state.schedules.execute_client(id, command).await?;
    Ok(answer(&state, &view, actix_web::http::StatusCode::OK))
}

/// Delete a schedule: it fires no more; the runs it made stay.
#[utoipa::path(
    delete,
    path = "/api/v1/agent/schedules/{schedule_id}",
    tag = "schedules",
    operation_id = "deleteScheduledAgent",
    params(("schedule_id" = String, Path, description = "The schedule's id (a ULID); any other value is answered 404.")),
    responses(
        (status = 200, description = "The schedule is deleted", body = DeleteScheduledAgentResponse),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn delete(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    change(&state, &key, &path, |by| ScheduleCommand::Delete { by }).await?;
    Ok(HttpResponse::Ok().json(DeleteScheduledAgentResponse { success: true }))
}

/// Pause a schedule: it does not fire until resumed. Pausing a paused schedule changes nothing.
#[utoipa::path(
    post,
    path = "/api/v1/agent/schedules/{schedule_id}/pause",
    tag = "schedules",
    operation_id = "pauseScheduledAgent",
    params(("schedule_id" = String, Path, description = "The schedule's id (a ULID); any other value is answered 404.")),
    responses(
        (status = 200, description = "The schedule, paused", body = ScheduledAgentItem),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn pause(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let view = change(&state, &key, &path, |by| ScheduleCommand::Pause { by }).await?;
    Ok(answer(&state, &view, actix_web::http::StatusCode::OK))
}

/// Resume a paused schedule: it fires from its next due time, never for what it missed while
/// paused. Resuming an enabled schedule changes nothing.
#[utoipa::path(
    post,
    path = "/api/v1/agent/schedules/{schedule_id}/resume",
    tag = "schedules",
    operation_id = "resumeScheduledAgent",
    params(("schedule_id" = String, Path, description = "The schedule's id (a ULID); any other value is answered 404.")),
    responses(
        (status = 200, description = "The schedule, enabled", body = ScheduledAgentItem),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn resume(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let view = change(&state, &key, &path, |by| ScheduleCommand::Resume { by }).await?;
    Ok(answer(&state, &view, actix_web::http::StatusCode::OK))
}
