//! `GET /api/v1/admin/export` (admin keys only): the store's export from a running server, the
//! same JSON lines `runledger export` writes of a stopped store without `--with-keys`. Written
//! on a blocking thread as the store is read, through a small bounded channel, so the server
//! holds a few chunks of it at a time however large the store, and a client that reads slowly
//! only slows its own export. Key records and instance secrets are never offered over HTTP:
//! `with_keys` is refused, naming the command that writes them.

use std::io::Write;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};

use crate::error_responses::{BadRequest, Forbidden, InternalError, Unauthorized};
use crate::problem::ApiError;
use crate::{AppState, Principal};

/// Bytes gathered before a chunk is handed to the connection.
pub(crate) const CHUNK: usize = 64 * 1024;
/// Chunks waiting for the connection at most: what one export holds besides the content
/// chunk being written (`format::export::CONTENT_CHUNK`).
pub(crate) const CHUNKS_AHEAD: usize = 8;

/// What the export thread hands the connection.
pub(crate) type Chunk = Result<Bytes, std::io::Error>;

/// A `Write` that hands full chunks to the connection, waiting while it is behind; fails once
/// the client has gone, which ends the export.
pub(crate) struct ToConnection {
    pub(crate) buffer: Vec<u8>,
    pub(crate) tx: tokio::sync::mpsc::Sender<Chunk>,
}

impl ToConnection {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(CHUNK),
        ));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client gone"))
    }
}

impl Write for ToConnection {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// The store's export as JSON lines (docs/api.md, "Export"): every run event with the contents
/// it names before it, then every schedule event. Never key records or instance secrets.
#[utoipa::path(
    get,
    path = "/api/v1/admin/export",
    tag = "admin",
    operation_id = "exportStore",
    responses(
        (status = 200, description = "The export, one JSON record a line", content_type = "application/x-ndjson", body = String),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn export(
    req: HttpRequest,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    if !key.admin {
        return Err(ApiError::forbidden("only admin keys may export the store"));
    }
    if let Some((name, _)) = form_urlencoded::parse(req.query_string().as_bytes()).next() {
        return Err(if name == "with_keys" || name == "with-keys" {
            ApiError::bad_request(
                "with_keys is not offered over HTTP: key records and instance secrets never \
                 leave the server that way; run `runledger export --with-keys` on the stopped \
                 store's host",
            )
        } else {
            ApiError::bad_request(format!("unknown parameter {name:?}: the export takes none"))
        });
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(CHUNKS_AHEAD);
    let audit = state.audit.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = ToConnection {
            buffer: Vec::with_capacity(CHUNK),
            tx: tx.clone(),
        };
        let written = audit.export(&mut out, &mut |why| {
            tracing::error!("export over HTTP: {why}");
        });
        let ended = written.and_then(|written| {
            out.flush()?;
            Ok(written)
        });
        match ended {
            Ok(written) if written.damaged == 0 => {
                tracing::info!(
                    events = written.events,
                    contents = written.contents,
                    schedule_events = written.schedule_events,
                    "exported the store over HTTP"
                );
            }
            // A damaged store's export is incomplete: the response is cut off with an error
            // instead of ending cleanly, so no client takes it for a whole backup.
            Ok(written) => {
                let why = format!("{} damaged records could not be exported", written.damaged);
                tracing::error!("export over HTTP: {why}");
                let _ = tx.blocking_send(Err(std::io::Error::other(why)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => {
                tracing::error!(error = %e, "export over HTTP failed");
                let _ = tx.blocking_send(Err(e));
            }
        }
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    Ok(HttpResponse::Ok()
        .content_type("application/x-ndjson")
        .insert_header(("cache-control", "no-store"))
        .streaming(body))
}
