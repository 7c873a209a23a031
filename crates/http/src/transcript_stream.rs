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
//! (`notify`) and each stream reads the file itself when the loop every SSE stream shares
//! (`sse`) asks, so a slow client never holds up the agent, and many writes between two reads
//! are one batch.

use std::collections::VecDeque;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};

use super::problem::ApiError;
use super::sse::{self, end_message, Source, STATE_UNREADABLE};
use super::wire::{format_time, TranscriptEntry};
use super::AppState;
use runledger_base::notify::Follower;
use runledger_domain::RunId;
use runledger_runs::actor::{RunHandle, TranscriptReader};
use runledger_runs::transcript::Entry;

/// The bytes of file one read takes: a client that connects to a long transcript is sent it
/// batch by batch, each read once the previous one has been taken by the connection.
const BATCH_BYTES: u64 = 256 * 1024;

/// While an execution is writing the transcript, a follower reads at most `LIVE_BATCH_BYTES`
/// (at least one whole entry) per `PACE`: 320 KiB/s, thousands of lines a second, until the
/// writer closes; then it catches up in full batches. The agent's output comes first: a
/// hundred followers of an agent that writes as fast as it can would otherwise read, splice
/// and send its bytes a hundred times over while the agent waits for the CPU (a 50 MB burst
/// ran 30 % slower with 256 KiB every 100 ms; `benches/transcript_sse.sh`), and nobody reads
/// faster than that anyway. Writes between two reads are one wake-up.
const PACE: std::time::Duration = std::time::Duration::from_millis(200);
const LIVE_BATCH_BYTES: u64 = 64 * 1024;

const TRANSCRIPT_UNREADABLE: Bytes = Bytes::from_static(
    b"event: error\ndata: {\"detail\":\"the transcript of this run cannot be read\"}\n\n",
);

/// A run's transcript as an SSE source.
struct Tail {
    runs: RunHandle,
    transcripts: TranscriptReader,
    id: RunId,
    /// Notices of the transcript's growth and of its writers closing.
    output: Follower<RunId>,
    /// Notices of the run's events: a run with no writer can still end (a cancel while queued).
    events: Follower<RunId>,
    /// The byte offset of the next read.
    next: u64,
    /// A resumed stream's `Last-Event-ID`: the entry at that offset was sent already.
    skip: Option<u64>,
    /// When the last read that found something began (see `PACE`).
    last_read: Option<tokio::time::Instant>,
    /// The run's terminal state, taken before the last read while nothing was writing its
    /// transcript: that read, finding nothing new, drained it.
    finished: Option<runledger_domain::RunState>,
}

/// What one read found.
enum Read {
    /// The offset moved on (entries, or a damaged line skipped).
    Progress,
    /// Nothing new in the file.
    Nothing,
}

fn read_batch(t: &mut Tail, out: &mut VecDeque<Bytes>, max_bytes: u64) -> std::io::Result<Read> {
    let slice = t.transcripts.read_raw(t.id, t.next, max_bytes)?;
    if slice.next_offset <= t.next {
        return Ok(Read::Nothing);
    }
    runledger_base::memory::note_activity();
    t.next = slice.next_offset;
    let mut batch = Vec::with_capacity(slice.bytes.len() + slice.lines.len() * 96);
    for (offset, range) in slice.lines {
        if t.skip.take() == Some(offset) {
            continue;
        }
        // A line that is not an entry (damage a crash left) is skipped, as the pages do.
        message(&mut batch, offset, &slice.bytes[range]);
    }
    // Only the first entry read can be the one a resumed client saw last.
    t.skip = None;
    if !batch.is_empty() {
        out.push_back(Bytes::from(batch));
    }
    Ok(Read::Progress)
}

/// Appends the SSE message of the stored entry `line` at `offset` to `out`: its `data` is
/// exactly what serde writes for the page's `TranscriptEntry`. Lines are spliced rather than
/// parsed and written again: every follower reads every line, and for a large transcript the
/// JSON round trip cost a follower several times what the agent's own writing costs. A line
/// that is not in the form the writer produces is parsed instead; one that does not parse as
/// an entry writes nothing.
fn message(out: &mut Vec<u8>, offset: u64, line: &[u8]) {
    use std::io::Write as _;
    let start = out.len();
    let _ = write!(out, "id: {offset}\nevent: entry\ndata: ");
    if !splice(out, offset, line) && !reencode(out, offset, line) {
        out.truncate(start);
        return;
    }
    out.extend_from_slice(b"\n\n");
}

/// The fast path of `message`: `{"at":<millis>,"execution":…}` as `Writer` writes it (fields in
/// `Entry`'s order, `continued` only when true) becomes `{"offset":…,"at":"<time>",
/// "execution":…,"continued":…}`. The rest of the line is taken as written: serde escapes the
/// text the same way for both. Refused (nothing written) unless the line is UTF-8 without
/// control bytes, as serde's output always is, so damaged bytes never reach a client.
fn splice(out: &mut Vec<u8>, offset: u64, line: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(b"{\"at\":") else {
        return false;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let Some(millis) = std::str::from_utf8(&rest[..digits])
        .ok()
        .and_then(|d| d.parse::<u64>().ok())
    else {
        return false;
    };
    let Some(body) = rest[digits..].strip_prefix(b",") else {
        return false;
    };
    if !body.starts_with(b"\"execution\":")
        || !body.ends_with(b"}")
        || body.iter().any(|&b| b < 0x20)
        || std::str::from_utf8(body).is_err()
    {
        return false;
    }
    let _ = std::io::Write::write_fmt(
        out,
        format_args!(
            "{{\"offset\":{offset},\"at\":\"{}\",",
            format_time(runledger_domain::Timestamp(millis))
        ),
    );
    if body.ends_with(b",\"continued\":true}") {
        out.extend_from_slice(body);
    } else {
        out.extend_from_slice(&body[..body.len() - 1]);
        out.extend_from_slice(b",\"continued\":false}");
    }
    true
}

/// The slow path of `message`: the line parsed as an `Entry` and the page's object written.
fn reencode(out: &mut Vec<u8>, offset: u64, line: &[u8]) -> bool {
    let Ok(e) = serde_json::from_slice::<Entry>(line) else {
        return false;
    };
    serde_json::to_writer(out, &TranscriptEntry::of(offset, &e)).is_ok()
}

impl Source for Tail {
    async fn read(&mut self, out: &mut VecDeque<Bytes>) -> Result<bool, Bytes> {
        // Taken before the read: if the run was terminal with nothing writing its output, a
        // read that finds nothing new has drained it.
        let live = self.output.writing();
        self.finished = if live {
            if let Some(last) = self.last_read {
                tokio::time::sleep_until(last + PACE).await;
            }
            None
        } else {
            match self.runs.get(self.id) {
                Ok(run) => run.map(|r| r.state).filter(|s| s.is_terminal()),
                Err(e) => {
                    tracing::error!(run_id = %self.id, error = %e, "cannot read the run's state");
                    return Err(STATE_UNREADABLE);
                }
            }
        };
        let began = tokio::time::Instant::now();
        let budget = if live { LIVE_BATCH_BYTES } else { BATCH_BYTES };
        match read_batch(self, out, budget) {
            Ok(Read::Progress) => {
                self.last_read = Some(began);
                Ok(true)
            }
            Ok(Read::Nothing) => Ok(false),
            Err(e) => {
                tracing::error!(run_id = %self.id, error = %e, "cannot follow the run's transcript");
                Err(TRANSCRIPT_UNREADABLE)
            }
        }
    }

    fn end(&mut self) -> Result<Option<Bytes>, Bytes> {
        Ok(self.finished.map(end_message))
    }

    async fn changed(&mut self) {
        tokio::select! {
            () = self.output.changed() => {}
            () = self.events.changed() => {}
        }
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
    let transcripts = state.transcripts.clone();
    // Subscribe before the first read, so no write or event can fall between the two.
    let output = transcripts.follow(id);
    let events = runs.follow(id);
    if runs.get(id)?.is_none() {
        return Err(ApiError::not_found("no run with this id"));
    }
    let tail = Tail {
        runs,
        transcripts,
        id,
        output,
        events,
        next,
        skip,
        last_read: None,
        finished: None,
    };
    Ok(sse::respond(tail, state.closing.subscribe()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use runledger_domain::Timestamp;

    /// What the page writes for the entry at `offset`.
    fn page_json(offset: u64, e: &Entry) -> String {
        serde_json::to_string(&TranscriptEntry::of(offset, e)).expect("json")
    }

    fn sse(offset: u64, line: &[u8]) -> String {
        let mut out = Vec::new();
        message(&mut out, offset, line);
        String::from_utf8(out).expect("utf-8")
    }

    proptest! {
        /// The spliced message carries exactly the page's object, for any text the writer
        /// stores (quotes, backslashes, control characters, every width of character).
        #[test]
        fn a_spliced_entry_is_the_pages_object(
            text in "(\\PC|[\"\\\\\u{0}-\u{1f}\u{7f}é中😀])*",
            at in 0u64..4_102_444_800_000,
            execution in 0u32..1000,
            stream in prop::sample::select(vec!["stdout", "stderr", "system", "followup", "agent"]),
            continued in any::<bool>(),
            offset in 0u64..(1 << 40),
        ) {
            let e = Entry { at: Timestamp(at), execution, stream: stream.into(), text, continued };
            let line = serde_json::to_vec(&e).expect("json");
            let mut fast = Vec::new();
            prop_assert!(splice(&mut fast, offset, &line));
            prop_assert_eq!(String::from_utf8(fast).expect("utf-8"), page_json(offset, &e));
            prop_assert_eq!(
                sse(offset, &line),
                format!("id: {offset}\nevent: entry\ndata: {}\n\n", page_json(offset, &e))
            );
        }
    }

    #[test]
    fn lines_in_another_form_are_parsed_and_damaged_ones_skipped() {
        let e = Entry {
            at: Timestamp(1_764_000_000_123),
            execution: 2,
            stream: "stdout".into(),
            text: "hello".into(),
            continued: false,
        };
        // Fields in another order (not what the writer writes): the slow path, same object.
        let reordered = br#"{"execution":2,"stream":"stdout","text":"hello","at":1764000000123}"#;
        assert_eq!(
            sse(7, reordered),
            format!("id: 7\nevent: entry\ndata: {}\n\n", page_json(7, &e))
        );
        // Damage: cut short, NUL bytes where the text was, not UTF-8, not JSON at all.
        for damaged in [
            &br#"{"at":1764000000123,"execution":2,"stream":"stdout","te"#[..],
            &b"{\"at\":1764000000123,\"execution\":2,\"stream\":\"stdout\",\"text\":\"\0\0\"}"[..],
            &b"{\"at\":1764000000123,\"execution\":2,\"stream\":\"stdout\",\"text\":\"\xff\"}"[..],
            &b"\0\0\0\0"[..],
            &b""[..],
        ] {
            assert_eq!(sse(7, damaged), "", "{damaged:?}");
        }
    }
}
