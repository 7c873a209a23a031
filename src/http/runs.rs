//! Handlers of the run endpoints.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::problem::ApiError;
use super::wire::{format_time, Links, RunAgentResponse, RunItem};
use super::{validate, AppState, Principal};
use crate::actor::now;
use crate::domain::{Command, Creator, Run, RunId};
use crate::store::IdempotencyRecord;

/// How long an idempotency key is remembered.
const IDEMPOTENCY_TTL_MS: u64 = 24 * 3600 * 1000;

/// Unknown and malformed run ids are both "no such run".
fn run_id(raw: &str) -> Result<RunId, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found(format!("no run with id {raw:?}")))
}

fn links(state: &AppState) -> Links<'_> {
    Links {
        public_url: &state.public_url,
        secret: &state.session_secret,
        now: now(),
    }
}

fn created_response(run: &Run, at_capacity: bool) -> HttpResponse {
    HttpResponse::Ok().json(RunAgentResponse {
        run_id: run.id.to_string(),
        task_id: run.id.to_string(),
        state: run.state.as_str(),
        at_capacity,
    })
}

pub async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let creator = Creator {
        kind: key.kind.creator_kind(),
        uid: key.id.clone(),
        display_name: key.name.clone(),
    };
    let created = validate::create(&body, &state.config, creator)?;
    let idempotency_key = match req.headers().get("idempotency-key") {
        None => None,
        Some(v) => {
            let v = v
                .to_str()
                .ok()
                .filter(|v| !v.is_empty() && v.len() <= 255)
                .ok_or_else(|| {
                    ApiError::bad_request("Idempotency-Key must be 1-255 visible ASCII characters")
                })?;
            Some(v.to_string())
        }
    };
    let Some(idempotency_key) = idempotency_key else {
        let outcome = state.runs.create(created).await?;
        return Ok(created_response(&outcome.run, outcome.at_capacity));
    };

    // Keys are scoped to the API key that used them.
    let scope: [u8; 32] = Sha256::new()
        .chain_update(key.id.as_bytes())
        .chain_update([0])
        .chain_update(idempotency_key.as_bytes())
        .finalize()
        .into();
    // The fingerprint is of the parsed body (object keys sorted), so a retry that formats the
    // same JSON differently is still the same request.
    let canonical = serde_json::from_slice::<serde_json::Value>(&body)
        .map(|v| v.to_string().into_bytes())
        .unwrap_or_else(|_| body.to_vec());
    let fingerprint: [u8; 32] = Sha256::digest(&canonical).into();
    let _guard = state.idempotency_locks[usize::from(scope[0]) % state.idempotency_locks.len()]
        .lock()
        .await;
    let store = state.runs.store();
    let at = now();
    let mut id = None;
    if let Some(seen) = store.idempotency_get(&scope)? {
        if at.0.saturating_sub(seen.at.0) < IDEMPOTENCY_TTL_MS {
            if seen.fingerprint != fingerprint {
                return Err(ApiError::conflict(
                    "this Idempotency-Key was already used with a different request body",
                ));
            }
            if let Some(run) = state.runs.get(seen.run_id)? {
                return Ok(created_response(&run, false));
            }
            // The key was recorded but its run never became durable: create it now, under
            // the id the key already names.
            id = Some(seen.run_id);
        }
    }
    let id = match id {
        Some(id) => id,
        None => {
            let id = state.runs.new_id();
            // Written before the run's events, so the create's sync covers both and a crash
            // can never leave a durable run without its key.
            store.idempotency_put(
                &scope,
                &IdempotencyRecord {
                    run_id: id,
                    fingerprint,
                    at,
                },
            )?;
            id
        }
    };
    let outcome = state.runs.create_with_id(id, created).await?;
    Ok(created_response(&outcome.run, outcome.at_capacity))
}

#[derive(Serialize)]
struct PageInfo {
    has_next_page: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

#[derive(Serialize)]
struct ListRunsResponse<'a> {
    runs: Vec<RunItem<'a>>,
    page_info: PageInfo,
}

pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    _: Principal,
) -> Result<HttpResponse, ApiError> {
    let query = validate::list_query(req.query_string())?;
    let page = state.runs.list(&query)?;
    let links = links(&state);
    let body = ListRunsResponse {
        runs: page.runs.iter().map(|r| RunItem::from(r, &links)).collect(),
        page_info: PageInfo {
            has_next_page: page.next_cursor.is_some(),
            next_cursor: page.next_cursor.map(|c| c.encode()),
        },
    };
    Ok(HttpResponse::Ok().json(body))
}

pub async fn get(
    path: web::Path<String>,
    state: web::Data<AppState>,
    _: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let run = state
        .runs
        .get(id)?
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    Ok(HttpResponse::Ok().json(RunItem::from(&run, &links(&state))))
}

pub async fn followup(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let (message, mode) = validate::followup(&body)?;
    let outcome = state
        .runs
        .execute(
            id,
            Command::Followup {
                message,
                mode,
                by: key.id,
            },
        )
        .await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "run_id": outcome.run.id.to_string(),
        "state": outcome.run.state.as_str(),
    })))
}

pub async fn cancel(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let outcome = state
        .runs
        .execute(id, Command::Cancel { by: key.id })
        .await?;
    Ok(HttpResponse::Ok().json(outcome.run.id.to_string()))
}

pub async fn events(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    _: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    if super::stream::wants_stream(&req) {
        return super::stream::follow(&req, id, state).await;
    }
    let events = state.runs.events(id)?;
    if events.is_empty() {
        return Err(ApiError::not_found("no run with this id"));
    }
    let events: Vec<_> = events.iter().map(super::wire::event_json).collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "run_id": id.to_string(), "events": events })))
}

/// Largest slice of a transcript file one request reads.
const TRANSCRIPT_MAX_BYTES: u64 = 4 * 1024 * 1024;

pub async fn transcript(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    _: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let (offset, limit) = validate::transcript_query(req.query_string())?;
    let run = state
        .runs
        .get(id)?
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    let slice = state
        .runs
        .executor()
        .transcripts()
        .read(id, offset, limit, TRANSCRIPT_MAX_BYTES)
        .map_err(|e| ApiError::internal(&e))?;
    let entries: Vec<_> = slice
        .entries
        .iter()
        .map(|(offset, e)| {
            serde_json::json!({
                "offset": offset,
                "at": format_time(e.at),
                "execution": e.execution,
                "stream": e.stream,
                "text": e.text,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "run_id": id.to_string(),
        "state": run.state.as_str(),
        "entries": entries,
        "next_offset": slice.next_offset,
        // A finished run's transcript does not grow; a trailing cut line (left by a crash) is
        // not "more" to wait for.
        "has_more": slice.more && !(run.state.is_terminal() && slice.entries.is_empty()),
    })))
}

pub async fn environments(
    state: web::Data<AppState>,
    _: Principal,
) -> Result<HttpResponse, ApiError> {
    let last_updated = format_time(state.config.loaded_at);
    let environments: Vec<_> = state
        .config
        .environments
        .iter()
        .map(|e| {
            let mut config = serde_json::json!({ "name": e.name, "setup_commands": e.setup });
            if let Some(d) = &e.description {
                config["description"] = serde_json::json!(d);
            }
            serde_json::json!({
                "uid": e.id,
                "config": config,
                "last_updated": last_updated,
                "setup_failed": false,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "environments": environments })))
}
