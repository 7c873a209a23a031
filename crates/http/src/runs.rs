//! Handlers of the run endpoints. Each handler's `#[utoipa::path]` attribute is its entry in
//! the OpenAPI document and lists every status it can answer.

use actix_web::{web, HttpRequest, HttpResponse};

use super::access::{list_json, may_use_environment, run_id, run_json, visible};
use super::error_responses::{
    BadRequest, Conflict, Forbidden, InternalError, NotFound, PayloadTooLarge, Unauthorized,
    Unavailable,
};
use super::problem::{ApiError, Problem};
use super::wire::{
    self, format_time, CancelRequest, CloudEnvironment, CloudEnvironmentConfig, FollowupRequest,
    FollowupResponse, ListEnvironmentsResponse, ListRunsResponse, RunAgentRequest,
    RunAgentResponse, RunEvents, RunItem, TranscriptEntry, TranscriptPage,
};
use super::{validate, AppState, Principal};
use runledger_base::clock::now;
use runledger_domain::{Command, Creator, Run, RunAdmitted};
use runledger_runs::idempotency::{IdempotencyKey, Recall};

fn created_response(run: &Run, at_capacity: bool) -> HttpResponse {
    HttpResponse::Ok().json(RunAgentResponse {
        run_id: run.id.to_string(),
        task_id: run.id.to_string(),
        state: run.state.as_str(),
        at_capacity,
    })
}

/// Create a run. It is answered at once with state `QUEUED` (the agent starts
/// asynchronously), once the run is durable. Either `prompt` or a skill is required.
#[utoipa::path(
    post,
    path = "/api/v1/agent/runs",
    tag = "runs",
    operation_id = "createRun",
    request_body = RunAgentRequest,
    params(
        ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255,
         description = "Makes retries safe: within 24 h, the same key with the same body \
                        answers the first run; with a different body, 409."),
    ),
    responses(
        (status = 200, description = "The run was created (or found, for a repeated \
                                      Idempotency-Key)", body = RunAgentResponse,
         links(
             ("GetRun" = (operation_id = "getRun",
                          parameters(("run_id" = "$response.body#/run_id")))),
             ("SubmitFollowup" = (operation_id = "submitFollowup",
                                  parameters(("run_id" = "$response.body#/run_id")))),
             ("CancelRun" = (operation_id = "cancelRun",
                             parameters(("run_id" = "$response.body#/run_id")))),
             ("ListRunEvents" = (operation_id = "listRunEvents",
                                 parameters(("run_id" = "$response.body#/run_id")))),
             ("GetRunTranscript" = (operation_id = "getRunTranscript",
                                    parameters(("run_id" = "$response.body#/run_id")))),
         )),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 422, description = "`parent_run_id` names a run that was cancelled, or the \
                                      new run would go beyond its environment's `max_depth` \
                                      or its parent's `max_children` (the detail names the limit)",
         body = Problem, content_type = "application/problem+json"),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    let creator = Creator {
        kind: key.kind.creator_kind(),
        uid: key.id.clone(),
        display_name: key.name.clone(),
    };
    let (created, uploads, parent) = validate::create(&body, &state.config, creator)?;
    may_use_environment(&state, &key, created.config.environment_id.as_deref())?;
    let attachments = state.artifacts.store_attachments(uploads).await?;
    // Credentials are sealed before anything is recorded: the log only ever holds `***`.
    let created = state
        .runs
        .credentials()
        .seal(RunAdmitted {
            created,
            team: key.team.clone(),
            sealed: None,
        })
        .map_err(|e| ApiError::internal(&e))?;
    let idempotency_key = match req.headers().get("idempotency-key") {
        None => None,
        Some(v) => Some(
            IdempotencyKey::parse(v.as_bytes())
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
        ),
    };
    let Some(idempotency_key) = idempotency_key else {
        let outcome = match parent {
            None => state.runs.create(created, attachments, origin).await?,
            Some(parent) => {
                super::tree::create_child(&state, None, parent, created, attachments, origin)
                    .await?
            }
        };
        return Ok(created_response(&outcome.run, outcome.at_capacity));
    };

    let request = idempotency_key.request(&key.id, &body);
    let idempotency = state.runs.idempotency();
    let _guard = idempotency.lock(&request).await;
    let at = now();
    let id = match idempotency.recall(&request, at)? {
        Recall::Conflict => {
            return Err(ApiError::conflict(
                "this Idempotency-Key was already used with a different request body",
            ))
        }
        Recall::Same(id) => {
            if let Some(run) = state.runs.get(id)? {
                return Ok(created_response(&run, false));
            }
            // The key was recorded but its run never became durable: create it now, under
            // the id the key already names.
            id
        }
        Recall::New => {
            let id = state.runs.new_id();
            idempotency.record(&request, id, at)?;
            id
        }
    };
    let outcome = match parent {
        None => {
            state
                .runs
                .create_with_id(id, created, attachments, origin)
                .await?
        }
        Some(parent) => {
            super::tree::create_child(&state, Some(id), parent, created, attachments, origin)
                .await?
        }
    };
    Ok(created_response(&outcome.run, outcome.at_capacity))
}

/// List runs: filters, sort and cursor pagination. Paging through with `next_cursor` returns
/// every matching run exactly once while nothing changes.
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs",
    tag = "runs",
    operation_id = "listRuns",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 500,
         description = "Page size, 1-500; 20 when absent."),
        ("cursor" = Option<String>, Query,
         description = "`next_cursor` of the previous page; only valid with the same filters and sort."),
        ("sort_by" = inline(Option<wire::SortBySchema>), Query, description = "`updated_at` when absent."),
        ("sort_order" = inline(Option<wire::SortOrderSchema>), Query, description = "`desc` when absent."),
        ("state" = inline(Option<Vec<wire::StateFilterSchema>>), Query, style = Form, explode,
         description = "Any of these states. `PENDING`, `CLAIMED`, `BLOCKED` and `ERROR` match nothing."),
        ("name" = Option<String>, Query, min_length = 1, description = "Exact `agent_config.name`."),
        ("config_name" = Option<String>, Query, min_length = 1, description = "Alias of `name`."),
        ("model_id" = Option<String>, Query, min_length = 1, description = "Exact `agent_config.model_id`."),
        ("creator" = Option<String>, Query, min_length = 1, description = "Exact `creator.uid` (an API key id)."),
        ("source" = Option<wire::SourceTypeSchema>, Query),
        ("environment_id" = Option<String>, Query, min_length = 1,
         description = "Exact `agent_config.environment_id`."),
        ("created_after" = Option<String>, Query, format = DateTime,
         description = "Exclusive; RFC 3339, UTC when the offset is missing."),
        ("created_before" = Option<String>, Query, format = DateTime, description = "Exclusive."),
        ("updated_after" = Option<String>, Query, format = DateTime, description = "Exclusive."),
        ("skill" = Option<String>, Query, min_length = 1, description = "Exact `agent_config.skill_spec`."),
        ("skill_spec" = Option<String>, Query, min_length = 1, description = "Alias of `skill`."),
        ("q" = Option<String>, Query,
         description = "Case-insensitive substring of the title, prompt or skill spec."),
        ("metadata" = inline(Option<wire::MetadataFilterSchema>), Query, style = DeepObject, explode,
         description = "`metadata[key]=value`: exact matches, ANDed, at most 5 keys."),
        ("schedule_id" = Option<String>, Query, min_length = 1,
         description = "Runs made by this schedule's firings (its id, a ULID; `schedule` on the `RunItem`). A value that is no schedule id of this server matches nothing."),
        ("ancestor_run_id" = Option<String>, Query,
         description = "Runs spawned, at any depth, by this run (a run of the key's team; otherwise 400 naming the field)."),
        ("artifact_type" = inline(Option<wire::ArtifactTypeFilterSchema>), Query,
         description = "Runs holding at least one artifact of this type. `EXTERNAL_REFERENCE` (never reported by runledger's agents) matches nothing; any other value is a 400."),
        ("execution_location" = Option<String>, Query, description = "Ignored."),
    ),
    responses(
        (status = 200, description = "One page of runs", body = ListRunsResponse),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    super::tree::check_ancestor(&state, &key, req.query_string())?;
    Ok(HttpResponse::Ok()
        .insert_header(actix_web::http::header::ContentType::json())
        .body(list_json(&state, &key, req.query_string()).await?))
}

/// One run in full; with `as_of_seq`, the run as it was right after that event of its log
/// (runledger's extension, `docs/api.md`).
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}",
    tag = "runs",
    operation_id = "getRun",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
        ("as_of_seq" = Option<u64>, Query,
         description = "Answer the run as it was right after its event with this `seq` (the same shape; `run_time` counts to that state's `updated_at`). 404 when the run has no such event."),
    ),
    responses(
        (status = 200, description = "The run", body = RunItem),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn get(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let run = visible(&state, &key, id)?;
    if let Some(seq) = super::travel::as_of_seq(req.query_string())? {
        return super::travel::as_of_response(&state, &run, seq);
    }
    Ok(HttpResponse::Ok()
        .insert_header(actix_web::http::header::ContentType::json())
        .body(run_json(&state, &run)?))
}

/// Send a follow-up message. A queued run keeps it for its agent, a running agent gets it at
/// once, and a finished run resumes: back to `QUEUED`, then a new execution continues from the
/// message.
#[utoipa::path(
    post,
    path = "/api/v1/agent/runs/{run_id}/followups",
    tag = "runs",
    operation_id = "submitFollowup",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    request_body = FollowupRequest,
    responses(
        (status = 200, description = "The follow-up is durable", body = FollowupResponse),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn followup(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    let (message, mode) = validate::followup(&body)?;
    // A follow-up may start a new execution: the environment must still be the team's.
    let run = visible(&state, &key, id)?;
    may_use_environment(&state, &key, run.config.environment_id.as_deref())?;
    let outcome = state
        .runs
        .execute(
            id,
            Command::Followup {
                message,
                mode,
                by: key.id,
            },
            origin,
        )
        .await?;
    Ok(HttpResponse::Ok().json(FollowupResponse {
        run_id: outcome.run.id.to_string(),
        state: outcome.run.state.as_str(),
    }))
}

/// Cancel a `QUEUED` or `INPROGRESS` run; the agent's whole process tree is stopped, and so are
/// the run's unfinished descendants (runs it spawned, at any depth), each recorded as caused by
/// this cancel. The body is optional: none (or `{}`) cancels; `{"reason": "…"}` (runledger's
/// extension, at most 1024 bytes) is recorded in the `Cancelled` event's `origin.reason`;
/// `{"cascade": false}` leaves the descendants running.
#[utoipa::path(
    post,
    path = "/api/v1/agent/runs/{run_id}/cancel",
    tag = "runs",
    operation_id = "cancelRun",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    request_body(content = Option<CancelRequest>, content_type = "application/json",
                 description = "Optional: why the run is cancelled."),
    responses(
        (status = 200, description = "The run is cancelled; the body is its id as a JSON string",
         body = String, content_type = "application/json"),
        (status = 400, description = "The run is already in a terminal state, or the body is \
                                      not `{\"reason\": \"…\"}` with a reason of at most 1024 bytes \
                                      (`invalid_request`)",
         body = Problem, content_type = "application/problem+json"),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn cancel(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let asked = validate::cancel(&body)?;
    visible(&state, &key, id)?;
    let mut origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    origin.reason = asked.reason;
    let outcome = state
        .runs
        .execute(id, Command::Cancel { by: key.id.clone() }, origin.clone())
        .await?;
    if asked.cascade {
        super::tree::cascade(&state, &outcome.run, &key, &origin).await?;
    }
    Ok(HttpResponse::Ok().json(outcome.run.id.to_string()))
}

/// One page of the run's event history, oldest first (runledger's own endpoint).
///
/// `after_seq` and `limit` page through it; `next` is present while more events follow. With
/// `Accept: text/event-stream` the answer is instead a Server-Sent Events stream: the history
/// from the start (or after `Last-Event-ID`), then each new event once durable (`id` = sequence
/// number, `event` = type, `data` = the same event object), resumable with `Last-Event-ID` (a
/// non-numeric one is a 400). It ends with an `end` message once the run is terminal, unless
/// `keep_open=true` keeps it open for a follow-up that resumes the run. See `docs/api.md`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/events",
    tag = "runs",
    operation_id = "listRunEvents",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
        ("after_seq" = Option<u64>, Query, maximum = 18446744073709551614_u64,
         description = "Answer the events after this `seq`: a `next` this endpoint returned. From the first event when absent."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 10000,
         description = "Most events to return; 1000 when absent. A page also ends once it holds 1 MiB of JSON."),
        ("keep_open" = Option<bool>, Query,
         description = "With `Accept: text/event-stream`: keep following after the run is terminal (a follow-up may resume it). The stream ends at the terminal state when absent."),
    ),
    responses(
        (status = 200, description = "A page of the run's events", body = RunEvents),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn events(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    visible(&state, &key, id)?;
    if super::stream::wants_stream(&req) {
        return super::stream::follow(&req, id, state).await;
    }
    let (from, limit) = validate::events_query(req.query_string())?;
    // Checked here too, so a bad value is refused whichever form is asked for.
    super::stream::keep_open(req.query_string())?;
    let events = state
        .runs
        .durable_events(id, from)?
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    let body = super::history::page(id, events, limit, super::history::PAGE_BYTES)?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(body))
}

/// Largest slice of a transcript file one request reads.
const TRANSCRIPT_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// One page of the run's transcript: agent output, commands and follow-ups, oldest first. With
/// `Accept: text/event-stream` the answer is instead a Server-Sent Events stream: the entries
/// from `offset` (or after `Last-Event-ID`), then each new one as it is written (`id` = the
/// entry's offset, `event` = `entry`, `data` = the same entry object), and an `end` message
/// with the run's state once the run is terminal and its output drained. See `docs/api.md`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/transcript",
    tag = "runs",
    operation_id = "getRunTranscript",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
        ("offset" = Option<u64>, Query, maximum = 9223372036854775807_u64,
         description = "Byte offset to start at: 0, or a `next_offset`."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 10000,
         description = "Most entries to return; 1000 when absent. A page also stops after 4 MiB."),
    ),
    responses(
        (status = 200, description = "A page of the transcript", body = TranscriptPage),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn transcript(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    if super::stream::wants_stream(&req) {
        visible(&state, &key, id)?;
        return super::transcript_stream::follow(&req, id, state).await;
    }
    let (offset, limit) = validate::transcript_query(req.query_string())?;
    let run = visible(&state, &key, id)?;
    let slice = state
        .transcripts
        .read(id, offset, limit, TRANSCRIPT_MAX_BYTES)
        .map_err(|e| ApiError::internal(&e))?;
    Ok(HttpResponse::Ok().json(TranscriptPage {
        run_id: id.to_string(),
        state: run.state.as_str(),
        entries: slice
            .entries
            .iter()
            .map(|(offset, e)| TranscriptEntry::of(*offset, e))
            .collect(),
        next_offset: slice.next_offset,
        // A finished run's transcript does not grow; a trailing cut line (left by a crash) is
        // not "more" to wait for.
        has_more: slice.more && !(run.state.is_terminal() && slice.entries.is_empty()),
    }))
}

/// The configured environments the key's team may use, the default one first.
#[utoipa::path(
    get,
    path = "/api/v1/agent/environments",
    tag = "runs",
    operation_id = "listEnvironments",
    responses(
        (status = 200, description = "The configured environments", body = ListEnvironmentsResponse),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn environments(
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let last_updated = format_time(state.config.loaded_at);
    Ok(HttpResponse::Ok().json(ListEnvironmentsResponse {
        environments: state
            .config
            .environments
            .iter()
            .filter(|e| e.open_to(&key.team))
            .map(|e| CloudEnvironment {
                uid: &e.id,
                config: CloudEnvironmentConfig::of(e),
                last_updated: last_updated.clone(),
                setup_failed: false,
            })
            .collect(),
    }))
}
