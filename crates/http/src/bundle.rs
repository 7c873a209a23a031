//! `GET /api/v1/agent/runs/{run_id}/export` (runledger's own, beyond the Oz API): one run's
//! bundle (docs/backup.md, "One run's bundle"), the file `runledger export --run` writes of a
//! stopped store, for `runledger import --run` and `runledger inspect`. For the run's team or
//! an admin key; anyone else gets the 404 of every other run read. Written on a blocking thread
//! as the store is read, through the bounded channel the store's export uses
//! (`audit::ToConnection`), so a 50 MB transcript streams through a few chunks.

use actix_web::{web, HttpResponse};

use super::access::run_id;
use super::audit::{Chunk, ToConnection, CHUNK, CHUNKS_AHEAD};
use super::error_responses::{InternalError, NotFound, Unauthorized};
use super::problem::ApiError;
use super::{AppState, Principal};

/// A run's bundle: its events with their hash chain links and seal proof, its state, its
/// transcript, attachments and artifact files, in one file (runledger's own endpoint).
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/export",
    tag = "runs",
    operation_id = "exportRun",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's bundle", content_type = "application/vnd.runledger.bundle", body = String),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn export_run(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    state
        .runs
        .get(id)?
        .filter(|run| run.team == key.team || key.admin)
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(CHUNKS_AHEAD);
    let bundles = state.bundles.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = ToConnection {
            buffer: Vec::with_capacity(CHUNK),
            tx: tx.clone(),
        };
        let written = bundles.write(id, &mut out).and_then(|written| {
            std::io::Write::flush(&mut out)?;
            Ok(written)
        });
        // A bundle that could not be written whole is cut off with an error instead of
        // ending cleanly, so no client takes it for a whole one.
        let failed = match written {
            Ok(Some(written)) => {
                tracing::info!(run_id = %id, events = written.events, bytes = written.bytes, "exported a run's bundle over HTTP");
                None
            }
            Ok(None) => Some("the run has no events".to_string()),
            Err(runledger_format::bundle::Error::Io(e))
                if e.kind() == std::io::ErrorKind::BrokenPipe =>
            {
                None
            }
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = failed {
            tracing::error!(run_id = %id, "run export over HTTP failed: {why}");
            let _ = tx.blocking_send(Err(std::io::Error::other(why)));
        }
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    Ok(HttpResponse::Ok()
        .content_type("application/vnd.runledger.bundle")
        .insert_header((
            "content-disposition",
            format!("attachment; filename=\"run-{id}.bundle\""),
        ))
        .insert_header(("cache-control", "no-store"))
        .streaming(body))
}
