//! The live form of `GET /api/v1/audit/events` (`Accept: text/event-stream`): the matching
//! events after a cursor, oldest first, then each new one as the projector indexes it, in the
//! loop every SSE stream shares (`sse.rs`). Each message's `id` is the event's cursor, so a
//! client that reconnects with `Last-Event-ID` resumes right after the last event it got.
//!
//! The index is written behind the log, a batch of runs at a time, so an event can be indexed
//! a moment after a later one of another run. A follower therefore sends only events recorded
//! at least `SETTLE` ago, and its cursor only moves forward: an event is never sent twice, and
//! is missed only if the index takes longer than `SETTLE` to apply it (a page query still
//! finds it). The stream never ends on its own.

use std::collections::VecDeque;
use std::time::Duration;

use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};

use super::wire::AuditEvent;
use crate::problem::ApiError;
use crate::sse::{self, Source};
use crate::validate::AuditRequest;
use crate::AppState;
use runledger_domain::Timestamp;
use runledger_runs::actor::Audit;
use runledger_runs::query::{AuditQuery, Position};

/// How long after an event's time a follower waits before it sends it: the longest the
/// projector is expected to take to index an acknowledged command.
const SETTLE: Duration = Duration::from_millis(1_000);
/// The most events read from the index at once.
const BATCH_EVENTS: usize = 256;

const INDEX_UNREADABLE: Bytes =
    Bytes::from_static(b"event: error\ndata: {\"detail\":\"the audit index cannot be read\"}\n\n");

/// Audit events after a cursor, as an SSE source.
struct Follow {
    audit: Audit,
    query: AuditQuery,
    /// The position of the last event sent (or the start).
    after: Position,
    applied: tokio::sync::watch::Receiver<u64>,
    /// The last read stopped at events too young to send: look again once they settle.
    unsettled: bool,
}

impl Source for Follow {
    async fn read(&mut self, out: &mut VecDeque<Bytes>) -> Result<bool, Bytes> {
        let now = runledger_base::clock::now();
        let settled = Timestamp(now.0.saturating_sub(SETTLE.as_millis() as u64));
        let items = self
            .audit
            .after(&self.query, self.after, settled, BATCH_EVENTS)
            .map_err(|e| {
                tracing::error!(error = %e, "cannot follow the audit index");
                INDEX_UNREADABLE
            })?;
        for item in &items {
            let position = item.position();
            let json = serde_json::to_string(&AuditEvent::from(item)).unwrap_or_default();
            out.push_back(Bytes::from(format!(
                "id: {}\nevent: {}\ndata: {json}\n\n",
                position.encode(),
                item.envelope.event.kind(),
            )));
            self.after = position;
        }
        if items.is_empty() {
            // Whether something is waiting to settle: one more read, unbounded in time.
            let young = self
                .audit
                .after(&self.query, self.after, Timestamp(u64::MAX - 1), 1)
                .map_err(|e| {
                    tracing::error!(error = %e, "cannot follow the audit index");
                    INDEX_UNREADABLE
                })?;
            self.unsettled = !young.is_empty();
        }
        Ok(!items.is_empty())
    }

    fn end(&mut self) -> Result<Option<Bytes>, Bytes> {
        Ok(None)
    }

    async fn changed(&mut self) {
        if self.unsettled {
            tokio::time::sleep(SETTLE / 4).await;
            return;
        }
        // Something new was indexed: wait until it has settled before reading it.
        if self.applied.changed().await.is_err() {
            // The projector is gone (shutdown): nothing more will come; the loop's heartbeat
            // and the service's closing end the stream.
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(SETTLE).await;
    }
}

/// Starts the stream: after `Last-Event-ID` if given, else after the request's `cursor`, else
/// from now.
pub(super) fn follow(
    req: &HttpRequest,
    state: &AppState,
    request: AuditRequest,
) -> Result<HttpResponse, ApiError> {
    let after = match req.headers().get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| Position::decode(v.trim()))
            .ok_or_else(|| {
                ApiError::bad_request("Last-Event-ID must be the id of an event of this stream")
            })?,
        None => request.cursor.unwrap_or_else(|| {
            // Everything recorded before now is history: only what is recorded from now on.
            let now = runledger_base::clock::now();
            Position::first_at(now)
        }),
    };
    // Subscribed before the first read, so no batch can fall between the two.
    let applied = state.audit.watch();
    let source = Follow {
        audit: state.audit.clone(),
        query: request.query,
        after,
        applied,
        unsettled: true,
    };
    Ok(sse::respond(source, state.closing.subscribe()))
}
