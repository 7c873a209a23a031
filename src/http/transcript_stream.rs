//! The SSE form of `GET /agent/runs/{id}/transcript` (`Accept: text/event-stream`): the entries
//! written so far, then each new one as the agent writes it, until the run is terminal and its
//! output drained.
//!
//! Each entry is one message: `id` is its byte offset in the transcript, `event` is `entry`,
//! `data` the same JSON as an entry of the JSON page. A client that reconnects with
//! `Last-Event-ID: n` resumes with the entry after the one at `n`; without it, `?offset=n`
//! starts at a byte offset, as the page does. Once the run is terminal and no execution is
//! writing its transcript any more, an `end` message names the state and the response ends; a
//! follow-up that resumes the run is followed by reconnecting with the last id.
//!
//! Nothing is held per client beyond one read of new entries: the writer only bumps a counter
//! (`exec::transcript_feed`) and each stream reads the file itself when it gets round to it,
//! so a slow client never holds up the agent, and many writes between two reads are one batch.

use std::collections::VecDeque;
use std::convert::Infallible;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};

use super::problem::ApiError;
use super::stream::{closed, end_message, sse_response, HEARTBEAT};
use super::wire::{format_time, TranscriptEntry};
use super::AppState;
use crate::actor::feed::Subscription;
use crate::actor::Runs;
use crate::domain::RunId;
use crate::exec::transcript_feed::Following;

/// The most entries read from the file at once, and the bytes of file one read takes: a client
/// that connects to a long transcript is sent it batch by batch, each read once the previous one
/// has been taken by the connection.
const BATCH_ENTRIES: usize = 1024;
const BATCH_BYTES: u64 = 256 * 1024;

struct Tail {
    runs: Runs,
    id: RunId,
    /// Notices of the transcript's growth and of its writers closing.
    output: Following,
    /// Notices of the run's events: a run with no writer can still end (a cancel while queued).
    events: Subscription,
    /// The byte offset of the next read.
    next: u64,
    /// A resumed stream's `Last-Event-ID`: the entry at that offset was sent already.
    skip: Option<u64>,
    pending: VecDeque<Bytes>,
    heartbeat: tokio::time::Interval,
    closing: tokio::sync::watch::Receiver<bool>,
    closing_seen: bool,
    done: bool,
}

/// What one read found.
enum Read {
    /// The offset moved on (entries, or a damaged line skipped).
    Progress,
    /// Nothing new in the file.
    Nothing,
}

fn read_batch(t: &mut Tail) -> std::io::Result<Read> {
    let slice = t
        .runs
        .transcripts()
        .read(t.id, t.next, BATCH_ENTRIES, BATCH_BYTES)?;
    if slice.next_offset <= t.next {
        return Ok(Read::Nothing);
    }
    crate::memory::note_activity();
    t.next = slice.next_offset;
    for (offset, e) in &slice.entries {
        if t.skip.take() == Some(*offset) {
            continue;
        }
        let entry = TranscriptEntry {
            offset: *offset,
            at: format_time(e.at),
            execution: e.execution,
            stream: &e.stream,
            text: &e.text,
            continued: e.continued,
        };
        let data = serde_json::to_string(&entry).map_err(std::io::Error::other)?;
        t.pending.push_back(Bytes::from(format!(
            "id: {offset}\nevent: entry\ndata: {data}\n\n"
        )));
    }
    // Only the first entry read can be the one a resumed client saw last.
    t.skip = None;
    Ok(Read::Progress)
}

impl Drop for Tail {
    /// A stream that ends frees its connection's buffers after its last batch: that, too, is
    /// activity to collect after.
    fn drop(&mut self) {
        crate::memory::note_activity();
    }
}

/// Where a stream starts: after `Last-Event-ID`'s entry, else at `?offset=`, else at 0.
fn start(req: &HttpRequest) -> Result<(u64, Option<u64>), ApiError> {
    match req.headers().get("last-event-id") {
        Some(v) => {
            let seen = v
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|&o| o <= i64::MAX as u64)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "Last-Event-ID must be the id of an entry of this stream (its offset)",
                    )
                })?;
            Ok((seen, Some(seen)))
        }
        None => Ok((
            super::validate::transcript_query(req.query_string())?.0,
            None,
        )),
    }
}

pub async fn follow(
    req: &HttpRequest,
    id: RunId,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (next, skip) = start(req)?;
    let runs = state.runs.clone();
    // Subscribe before the first read, so no write or event can fall between the two.
    let output = runs.transcripts().follow(id);
    let events = runs.follow(id);
    if runs.get(id)?.is_none() {
        return Err(ApiError::not_found("no run with this id"));
    }
    let mut pending = VecDeque::new();
    pending.push_back(Bytes::from_static(b"retry: 2000\n\n"));
    let tail = Tail {
        runs,
        id,
        output,
        events,
        next,
        skip,
        pending,
        heartbeat: tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT),
        closing: state.closing.subscribe(),
        closing_seen: false,
        done: false,
    };
    let stream = futures_util::stream::unfold(tail, |mut t| async move {
        loop {
            if let Some(chunk) = t.pending.pop_front() {
                return Some((Ok::<_, Infallible>(chunk), t));
            }
            if t.done {
                return None;
            }
            // Taken before the read: if the run was terminal with nothing writing its output,
            // a read that finds nothing new has drained it.
            let finished = if t.output.writing() {
                None
            } else {
                match t.runs.get(t.id) {
                    Ok(run) => run.map(|r| r.state).filter(|s| s.is_terminal()),
                    Err(e) => {
                        tracing::error!(run_id = %t.id, error = %e, "cannot read the run's state");
                        t.pending.push_back(Bytes::from_static(
                            b"event: error\ndata: {\"detail\":\"the run's state cannot be read\"}\n\n",
                        ));
                        t.done = true;
                        continue;
                    }
                }
            };
            match read_batch(&mut t) {
                Ok(Read::Progress) => continue,
                Ok(Read::Nothing) => {}
                Err(e) => {
                    tracing::error!(run_id = %t.id, error = %e, "cannot follow the run's transcript");
                    t.pending.push_back(Bytes::from_static(
                        b"event: error\ndata: {\"detail\":\"the transcript of this run cannot be read\"}\n\n",
                    ));
                    t.done = true;
                    continue;
                }
            }
            if let Some(state) = finished {
                t.pending.push_back(end_message(state));
                t.done = true;
                continue;
            }
            if t.closing_seen {
                t.pending
                    .push_back(Bytes::from_static(b": the service is shutting down\n\n"));
                t.done = true;
                continue;
            }
            tokio::select! {
                () = t.output.changed() => {}
                () = t.events.changed() => {}
                () = closed(&mut t.closing) => t.closing_seen = true,
                _ = t.heartbeat.tick() => {
                    return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), t));
                }
            }
        }
    });
    Ok(sse_response(stream))
}
