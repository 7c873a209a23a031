//! The one loop of an SSE stream that follows something durable (a run's events, a run's
//! transcript): send what is there in batches, each read once the connection has taken the last;
//! when a read finds nothing new, end if the source says it is over, else wait for a notice, a
//! heartbeat or the service's shutdown. What is read, how it becomes messages and when it is
//! over belong to a `Source`; the loop owns the order of those steps and the messages every
//! stream shares.
//!
//! Nothing is buffered beyond one batch: a source reads from the log or the file when the loop
//! asks, so a slow client never holds up a writer. When the service shuts down, a stream sends
//! what is durable up to then and ends; the client reconnects with `Last-Event-ID`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use actix_web::web::Bytes;
use actix_web::HttpResponse;

const HEARTBEAT: Duration = Duration::from_secs(15);
/// The first message: how long an EventSource waits before it reconnects after a dropped
/// connection.
const RETRY: Bytes = Bytes::from_static(b"retry: 2000\n\n");
/// The heartbeat's comment, which keeps proxies from closing an idle stream.
const KEEP_ALIVE: Bytes = Bytes::from_static(b": keep-alive\n\n");
/// The last message of a stream the service's shutdown ends.
const SHUTTING_DOWN: Bytes = Bytes::from_static(b": the service is shutting down\n\n");
/// The last message of a stream whose run's state cannot be read.
pub(super) const STATE_UNREADABLE: Bytes =
    Bytes::from_static(b"event: error\ndata: {\"detail\":\"the run's state cannot be read\"}\n\n");

/// What one stream follows.
pub(super) trait Source: 'static {
    /// Reads the next batch of what is new, as messages, into `out`. `Ok(true)`: the read moved
    /// on (send it and read again); `Ok(false)`: nothing new. `Err`: the stream's last message
    /// (an `event: error`), the cause logged by the source.
    async fn read(&mut self, out: &mut VecDeque<Bytes>) -> Result<bool, Bytes>;

    /// Asked after a read found nothing new: `Ok(Some(end))`, the stream is over and `end` is its
    /// last message; `Ok(None)`, it goes on. `Err`: as for `read`.
    fn end(&mut self) -> Result<Option<Bytes>, Bytes>;

    /// Returns at the next notice that a read may find something new (or that the stream may
    /// be over).
    async fn changed(&mut self);
}

struct Sse<S> {
    source: S,
    pending: VecDeque<Bytes>,
    heartbeat: tokio::time::Interval,
    /// `AppState::closing`.
    closing: tokio::sync::watch::Receiver<bool>,
    /// The service is shutting down: end once a read finds nothing newer.
    closing_seen: bool,
    done: bool,
}

impl<S> Sse<S> {
    fn finish(&mut self, last: Bytes) {
        self.pending.push_back(last);
        self.done = true;
    }
}

impl<S> Drop for Sse<S> {
    /// A stream that ends frees its connection's buffers after its last batch: that, too, is
    /// activity to collect after.
    fn drop(&mut self) {
        runledger_base::memory::note_activity();
    }
}

/// The response that streams `source` until it is over, the client leaves or the service shuts
/// down (`closing`: `AppState::closing`).
pub(super) fn respond<S: Source>(
    source: S,
    closing: tokio::sync::watch::Receiver<bool>,
) -> HttpResponse {
    let sse = Sse {
        source,
        pending: VecDeque::from([RETRY]),
        heartbeat: tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT),
        closing,
        closing_seen: false,
        done: false,
    };
    let stream = futures_util::stream::unfold(sse, |mut s| async move {
        loop {
            if let Some(chunk) = s.pending.pop_front() {
                return Some((Ok::<_, Infallible>(chunk), s));
            }
            if s.done {
                return None;
            }
            match s.source.read(&mut s.pending).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(last) => {
                    s.finish(last);
                    continue;
                }
            }
            match s.source.end() {
                Ok(None) => {}
                Ok(Some(last)) | Err(last) => {
                    s.finish(last);
                    continue;
                }
            }
            if s.closing_seen {
                s.finish(SHUTTING_DOWN);
                continue;
            }
            tokio::select! {
                () = s.source.changed() => {}
                () = closed(&mut s.closing) => s.closing_seen = true,
                _ = s.heartbeat.tick() => return Some((Ok(KEEP_ALIVE), s)),
            }
        }
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        // Tells nginx not to buffer the stream.
        .insert_header(("x-accel-buffering", "no"))
        .streaming(stream)
}

/// Returns once the service is closing, or its state is gone.
async fn closed(closing: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = closing.wait_for(|closing| *closing).await;
}

/// `event: end` with the terminal state: the last message of a stream that ends on its own.
pub(super) fn end_message(state: runledger_domain::RunState) -> Bytes {
    Bytes::from(format!(
        "event: end\ndata: {{\"state\":\"{}\"}}\n\n",
        state.as_str()
    ))
}
