//! The SSE form of `GET /agent/runs/{id}/events` (`Accept: text/event-stream`): the run's
//! history, then each new event as it becomes durable, until the run is terminal.
//!
//! Each event is one SSE message: `id` is its sequence number, `event` its type, `data` the same
//! JSON as in the history. A client that reconnects with `Last-Event-ID: n` resumes at `n + 1`,
//! so nothing is missed or repeated. Once every event of a terminal run is sent, an `end`
//! message names the state and the response ends, so `curl -N` returns. With `keep_open=true`
//! the stream stays open instead, because a follow-up can resume a finished run.
//! The actor only signals that the run changed (`notify`), and the stream reads the log itself,
//! in the loop every SSE stream shares (`sse`: batches, heartbeat, shutdown). When the service
//! shuts down, the events recorded up to then include the interruption of the run's execution.

use std::collections::VecDeque;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};

use super::problem::ApiError;
use super::sse::{self, end_message, Source, STATE_UNREADABLE};
use super::AppState;
use runledger_base::notify::Follower;
use runledger_domain::RunId;
use runledger_runs::actor::RunHandle;

const HISTORY_UNREADABLE: Bytes = Bytes::from_static(
    b"event: error\ndata: {\"detail\":\"the stored history of this run cannot be read\"}\n\n",
);
/// The most events read from the log at once, and the bytes of messages after which a batch
/// ends early: a client that connects to a long history is sent it batch by batch, each read
/// once the previous one has been taken by the connection.
const BATCH_EVENTS: usize = 256;
const BATCH_BYTES: usize = 256 * 1024;

/// Whether the client asked for the event stream: `Accept` names `text/event-stream` with a
/// quality above 0 and at least that of JSON (`application/json`, or the most specific range
/// that covers it: `application/*`, `*/*`). `text/event-stream;q=0, application/json` is JSON.
pub fn wants_stream(req: &HttpRequest) -> bool {
    let accept: Vec<&str> = req
        .headers()
        .get_all(actix_web::http::header::ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .collect();
    prefers_stream(&accept.join(","))
}

fn prefers_stream(accept: &str) -> bool {
    // (media range, quality), the quality 1 unless a valid `q` says otherwise.
    let ranges: Vec<(String, f32)> = accept
        .split(',')
        .filter_map(|item| {
            let mut parts = item.split(';');
            let range = parts.next()?.trim().to_ascii_lowercase();
            if range.is_empty() {
                return None;
            }
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, v)| {
                    v.trim()
                        .parse::<f32>()
                        .ok()
                        .filter(|q| (0.0..=1.0).contains(q))
                })?;
            Some((range, q))
        })
        .collect();
    let quality = |specific: &[&str]| {
        specific
            .iter()
            .find_map(|r| ranges.iter().find(|(range, _)| range == r).map(|(_, q)| *q))
    };
    let Some(stream) = quality(&["text/event-stream"]) else {
        return false;
    };
    let json = quality(&["application/json", "application/*", "*/*"]).unwrap_or(0.0);
    stream > 0.0 && stream >= json
}

/// A run's events as an SSE source.
struct Events {
    runs: RunHandle,
    id: RunId,
    subscription: Follower<RunId>,
    /// The sequence number of the next event to send.
    next: u64,
    /// `keep_open=true`: follow the run across resumptions instead of ending once it is terminal.
    keep_open: bool,
}

impl Events {
    /// Reads the next batch of durable events into `out`; returns how many.
    fn read_batch(
        &mut self,
        out: &mut VecDeque<Bytes>,
    ) -> Result<usize, runledger_runs::actor::Error> {
        let Some(events) = self.runs.durable_events(self.id, self.next)? else {
            return Ok(0);
        };
        runledger_base::memory::note_activity();
        let (mut sent, mut bytes) = (0, 0);
        for e in events {
            let e = e?;
            self.next = e.seq + 1;
            let message = Bytes::from(format!(
                "id: {}\nevent: {}\ndata: {}\n\n",
                e.seq,
                e.event.kind(),
                super::wire::event_json(&e)
            ));
            bytes += message.len();
            out.push_back(message);
            sent += 1;
            if sent == BATCH_EVENTS || bytes >= BATCH_BYTES {
                break;
            }
        }
        Ok(sent)
    }

    /// The `end` message when the run is terminal and its every event has been sent.
    fn ended(&self) -> Result<Option<Bytes>, runledger_runs::actor::Error> {
        let Some(run) = self.runs.get(self.id)? else {
            return Ok(None);
        };
        Ok((run.state.is_terminal() && run.next_seq <= self.next).then(|| end_message(run.state)))
    }
}

impl Source for Events {
    async fn read(&mut self, out: &mut VecDeque<Bytes>) -> Result<bool, Bytes> {
        self.read_batch(out).map(|sent| sent > 0).map_err(|e| {
            // A damaged record (or a failing disk): say so in the stream and end it; the log
            // names the record.
            tracing::error!(run_id = %self.id, error = %e, "cannot follow the run's events");
            HISTORY_UNREADABLE
        })
    }

    fn end(&mut self) -> Result<Option<Bytes>, Bytes> {
        if self.keep_open {
            return Ok(None);
        }
        self.ended().map_err(|e| {
            tracing::error!(run_id = %self.id, error = %e, "cannot read the run's state");
            STATE_UNREADABLE
        })
    }

    async fn changed(&mut self) {
        self.subscription.changed().await;
    }
}

/// `keep_open` of the events stream's query: `true` or `false` (the default).
pub(super) fn keep_open(query: &str) -> Result<bool, ApiError> {
    let mut keep = false;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key == "keep_open" {
            keep = match value.as_ref() {
                "true" => true,
                "false" => false,
                _ => return Err(ApiError::bad_request("keep_open must be true or false")),
            };
        }
    }
    Ok(keep)
}

pub async fn follow(
    req: &HttpRequest,
    id: RunId,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let next = match req.headers().get("last-event-id") {
        None => 0,
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|seen| seen.saturating_add(1))
            .ok_or_else(|| {
                ApiError::bad_request("Last-Event-ID must be the id of an event of this stream")
            })?,
    };
    let keep_open = keep_open(req.query_string())?;
    let runs = state.runs.clone();
    // Subscribe before the first read, so no event can fall between the two.
    let subscription = runs.follow(id);
    if runs.get(id)?.is_none() {
        return Err(ApiError::not_found("no run with this id"));
    }
    let events = Events {
        runs,
        id,
        subscription,
        next,
        keep_open,
    };
    Ok(sse::respond(events, state.closing.subscribe()))
}

#[cfg(test)]
mod tests {
    use super::prefers_stream;

    #[test]
    fn accept_qualities_choose_between_the_stream_and_json() {
        for (accept, stream) in [
            ("text/event-stream", true),
            ("Text/Event-Stream; charset=utf-8", true),
            ("application/json", false),
            ("", false),
            ("*/*", false),
            ("text/event-stream;q=0, application/json", false),
            ("text/event-stream; q=0", false),
            ("text/event-stream;q=0.5, application/json", false),
            ("text/event-stream;q=0.5, application/json;q=0.4", true),
            ("application/json;q=0.9, text/event-stream", true),
            ("text/event-stream, */*", true),
            ("text/event-stream;q=0.2, */*;q=0.8", false),
            (
                "text/event-stream;q=0.2, application/json;q=0.1, */*;q=0.8",
                true,
            ),
            ("text/event-stream;q=nonsense", false),
        ] {
            assert_eq!(prefers_stream(accept), stream, "{accept:?}");
        }
    }
}
