//! `GET /api/v1/agent/runs/{run_id}/changes` (runledger's own, beyond the Oz API): what the
//! run's executions changed in the workspace, from the run's base. JSON by default: each
//! execution's summary (each counts from the run's base, so the last is the run's total) and
//! the total; `?format=patch` or `Accept: text/x-diff`: the run's patch, one unified diff in
//! git's format, streamed from the content store as a download. The same visibility as the run:
//! another team's run is answered 404. Reads go through `runledger_runs::actor::Changes`.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::access::{run_id, visible};
use super::error_responses::{BadRequest, InternalError, NotFound, Unauthorized};
use super::problem::ApiError;
use super::{AppState, Principal};
use runledger_format::events::{ChangesData, ChangesTotalsData};

/// A run's changes: each execution's, and the run's total (the latest execution's).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunChanges {
    pub run_id: String,
    /// Files, lines added and lines removed from the run's base to its latest execution's end.
    pub total: ChangesTotalsData,
    /// Each execution that recorded changes, oldest first; each counts from the run's base.
    pub executions: Vec<ChangesData>,
    /// Where the run's patch is downloaded (absent when no diff was recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_url: Option<String>,
}

/// Which form the caller asked for.
fn wants_patch(req: &HttpRequest) -> Result<bool, ApiError> {
    let mut format = None;
    for pair in req.query_string().split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("format", "patch")) => format = Some(true),
            Some(("format", "json")) => format = Some(false),
            Some(("format", other)) => {
                return Err(ApiError::bad_request(format!(
                    "format: {other:?} is not a format of changes (json or patch)"
                )))
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "{pair:?} is not a parameter of changes (format)"
                )))
            }
        }
    }
    if let Some(patch) = format {
        return Ok(patch);
    }
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    Ok(accept.split(',').any(|m| {
        m.split(';')
            .next()
            .is_some_and(|m| m.trim() == "text/x-diff")
    }))
}

/// What the run's executions changed in its workspace (runledger's own endpoint).
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/changes",
    tag = "runs",
    operation_id = "getRunChanges",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
        ("format" = Option<String>, Query, description = "`json` (the default) or `patch`: the run's patch as one unified diff (also chosen by `Accept: text/x-diff`)."),
    ),
    responses(
        (status = 200, description = "The run's changes (JSON), or its patch (`text/x-diff`; empty when nothing changed)", body = RunChanges),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn changes(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    visible(&state, &key, id)?;
    let patch = wants_patch(&req)?;
    let handle = state.changes.clone();
    if patch {
        let opened = web::block(move || handle.patch(id))
            .await
            .map_err(|e| ApiError::internal(&e))??;
        let name = format!("run-{id}.patch");
        let disposition = format!("attachment; filename=\"{name}\"");
        let Some(patch) = opened else {
            return Ok(HttpResponse::Ok()
                .insert_header((header::CONTENT_TYPE, "text/x-diff; charset=utf-8"))
                .insert_header((header::CONTENT_DISPOSITION, disposition))
                .body(""));
        };
        let named = actix_files::NamedFile::from_file(patch.file, &name)
            .map_err(|e| ApiError::internal(&e))?
            .set_content_type("text/x-diff".parse().map_err(|e| ApiError::internal(&e))?)
            .use_etag(true)
            .use_last_modified(false);
        let mut response = named.into_response(&req);
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&disposition) {
            headers.insert(header::CONTENT_DISPOSITION, value);
        }
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(
            header::HeaderName::from_static("x-runledger-patch-cut"),
            HeaderValue::from_static(if patch.cut { "true" } else { "false" }),
        );
        return Ok(response);
    }
    let recorded = web::block(move || handle.summary(id))
        .await
        .map_err(|e| ApiError::internal(&e))??;
    let total = recorded.last().map(|(_, c)| c.totals()).unwrap_or_default();
    let has_diff = recorded.last().is_some_and(|(_, c)| c.diff.is_some());
    let body = RunChanges {
        run_id: id.to_string(),
        total: total.into(),
        executions: recorded
            .iter()
            .map(|(execution, c)| ChangesData::from(*execution, c))
            .collect(),
        patch_url: has_diff.then(|| {
            format!(
                "{}/api/v1/agent/runs/{id}/changes?format=patch",
                state.public_url.trim_end_matches('/')
            )
        }),
    };
    Ok(HttpResponse::Ok().json(body))
}
