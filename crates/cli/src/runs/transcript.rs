//! Following a run's transcript: its event stream, resumed after the last entry when the
//! connection drops, or its JSON pages polled from a server without the stream; lines typed on
//! a terminal sent as follow-ups; and `runs logs` without `-f`, the pages as they are now. It
//! reads and prints; it never changes a run but by a follow-up the user typed.

use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource as _};
use futures_util::StreamExt as _;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::remote::{Error, Remote, Transcript};

use super::api::{run_path, terminal};
use super::printer::Printer;
use super::wait::{Link, MAX_RECONNECTS, POLL};

/// Transcript entries asked for per JSON page.
const PAGE_ENTRIES: u32 = 1000;

/// Lines typed on stdin, read on a thread of their own (stdin has no async reader that works
/// on every kind of file), until end of input.
pub(super) fn read_followups() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if !line.trim().is_empty() && tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line typed, or never when there is no reader or it has ended.
async fn next_followup(followups: &mut Option<mpsc::UnboundedReceiver<String>>) -> String {
    if let Some(rx) = followups {
        if let Some(line) = rx.recv().await {
            return line;
        }
        *followups = None;
    }
    std::future::pending().await
}

async fn send_followup(remote: &Remote, id: &str, message: &str, out: &Printer) {
    let sent = remote
        .post(
            &format!("{}/followups", run_path(id)),
            &json!({ "message": message }),
        )
        .await;
    match sent {
        Ok(reply) => out.note(&format!(
            "follow-up sent; the run is {}",
            reply["state"].as_str().unwrap_or("?")
        )),
        Err(e) => out.note(&format!("the follow-up was not sent: {e}")),
    }
}

/// Prints a run's transcript from the start until the run is terminal and its output drained;
/// returns the terminal state. Reads the transcript's event stream, resuming after the last
/// entry printed when the connection drops; from a server that answers the transcript with
/// JSON pages only, it polls the pages instead.
pub(super) async fn follow_transcript(
    remote: &Remote,
    id: &str,
    mut followups: Option<mpsc::UnboundedReceiver<String>>,
    mut link: Option<&mut Link>,
) -> anyhow::Result<String> {
    let mut out = Printer::new();
    let mut last_id: Option<String> = None;
    let mut retry = Duration::from_secs(2);
    let mut failures = 0;
    loop {
        let answer = remote.transcript(id, 0, last_id.as_deref()).await;
        let response = match answer {
            Ok(Transcript::Events(response)) => response,
            Ok(Transcript::Page(first)) => {
                return poll_transcript(remote, id, first, &mut out, followups, link).await
            }
            Err(e) if e.is_transient() && failures < MAX_RECONNECTS => {
                failures += 1;
                tokio::time::sleep(retry).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut events = bounded_lines(response).eventsource();
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                line = next_followup(&mut followups) => {
                    send_followup(remote, id, &line, &out).await;
                    continue;
                }
            };
            let event = match event {
                Some(Ok(event)) => event,
                Some(Err(EventStreamError::Transport(e)))
                    if e.kind() == std::io::ErrorKind::InvalidData =>
                {
                    return Err(Error::Protocol(e.to_string()).into())
                }
                Some(Err(EventStreamError::Utf8(_) | EventStreamError::Parser(_))) => {
                    return Err(Error::Protocol(
                        "the transcript stream is not a valid event stream".into(),
                    )
                    .into())
                }
                // A dropped connection or a read timeout: resume after the last entry.
                Some(Err(EventStreamError::Transport(_))) | None => break,
            };
            if let Some(r) = event.retry {
                retry = r.min(Duration::from_secs(30));
            }
            match event.event.as_str() {
                "entry" => {
                    failures = 0;
                    let entry: Value = serde_json::from_str(&event.data).map_err(|_| {
                        Error::Protocol(format!(
                            "a transcript entry of the stream is not JSON: {:?}",
                            event.data.chars().take(80).collect::<String>()
                        ))
                    })?;
                    if let Some(link) = link.as_deref_mut() {
                        link.show(remote, id).await;
                    }
                    out.entry(&entry)?;
                    if !event.id.is_empty() {
                        last_id = Some(event.id);
                    }
                }
                "end" => {
                    let end: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                    return Ok(end["state"].as_str().unwrap_or("").to_string());
                }
                "error" => {
                    let e: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                    return Err(Error::Refused {
                        status: 500,
                        detail: e["detail"].as_str().unwrap_or(&event.data).to_string(),
                    }
                    .into());
                }
                // Events a later server may add.
                _ => {}
            }
        }
        failures += 1;
        if failures > MAX_RECONNECTS {
            return Err(Error::Unreachable {
                url: remote.url(&format!("{}/transcript", run_path(id)), &[]),
                reason: format!("the stream dropped {MAX_RECONNECTS} times in a row"),
            }
            .into());
        }
        tokio::time::sleep(retry).await;
    }
}

/// The longest line of an event stream read: an entry holds at most 16 KiB of text plus a
/// secret's length, which JSON escaping can make six times longer. A longer line is not
/// runledger's, and the parser would buffer it whole.
const MAX_EVENT_LINE: usize = 1024 * 1024;

/// The stream's bytes, failing with `InvalidData` once a line exceeds `MAX_EVENT_LINE`.
pub(super) fn bounded_lines(
    response: reqwest::Response,
) -> impl futures_util::Stream<Item = std::io::Result<impl AsRef<[u8]>>> {
    let mut line = 0usize;
    response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        line = match chunk.iter().rposition(|b| *b == b'\n') {
            Some(end) => chunk.len() - end - 1,
            None => line + chunk.len(),
        };
        if line > MAX_EVENT_LINE {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the transcript stream sent a line longer than {} KiB",
                    MAX_EVENT_LINE / 1024
                ),
            ));
        }
        Ok(chunk)
    })
}

/// Follows a transcript by polling its JSON pages (a server without the transcript stream).
/// The run is over when a page of a terminal run reaches the end of the file and one more
/// page, asked after it, is empty: output written before the run became terminal is then in.
async fn poll_transcript(
    remote: &Remote,
    id: &str,
    mut page: Value,
    out: &mut Printer,
    mut followups: Option<mpsc::UnboundedReceiver<String>>,
    mut link: Option<&mut Link>,
) -> anyhow::Result<String> {
    let mut offset;
    let mut ended_once = false;
    loop {
        let entries = page["entries"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if let (Some(link), false) = (link.as_deref_mut(), entries.is_empty()) {
            link.show(remote, id).await;
        }
        for entry in entries {
            out.entry(entry)?;
        }
        offset = next_offset(&page)?;
        let has_more = page["has_more"].as_bool().unwrap_or(false);
        let state = page["state"].as_str().unwrap_or("");
        if !has_more || entries.is_empty() {
            if terminal(state) && entries.is_empty() {
                if ended_once {
                    return Ok(state.to_string());
                }
                ended_once = true;
            } else {
                ended_once = false;
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    line = next_followup(&mut followups) => {
                        send_followup(remote, id, &line, out).await;
                    }
                }
            }
        }
        page = transcript_page(remote, id, offset).await?;
    }
}

async fn transcript_page(remote: &Remote, id: &str, offset: u64) -> Result<Value, Error> {
    remote
        .get(
            &format!("{}/transcript", run_path(id)),
            &[
                ("offset", offset.to_string()),
                ("limit", PAGE_ENTRIES.to_string()),
            ],
        )
        .await
}

fn next_offset(page: &Value) -> Result<u64, Error> {
    page["next_offset"]
        .as_u64()
        .ok_or_else(|| Error::Protocol("a transcript page without next_offset".into()))
}

/// `runs logs` without `-f`: the transcript as it is now, page after page.
pub(super) async fn print_transcript(remote: &Remote, id: &str) -> anyhow::Result<()> {
    let mut out = Printer::new();
    let mut offset = 0;
    loop {
        let page = transcript_page(remote, id, offset).await?;
        let entries = page["entries"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        for entry in entries {
            out.entry(entry)?;
        }
        let next = next_offset(&page)?;
        // An empty page with more bytes after it is an entry being written: the end for now.
        if !page["has_more"].as_bool().unwrap_or(false) || entries.is_empty() || next <= offset {
            return Ok(());
        }
        offset = next;
    }
}
