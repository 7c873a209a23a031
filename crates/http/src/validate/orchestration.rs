//! The bodies and queries of the orchestration operations (`/agent/messages…`,
//! `/agent/events…`) into domain values: run ids parsed, lengths and counts checked, each
//! refusal naming its field. Who may see the runs named is the handlers' to check.

use super::limits::{limit, parse_json, MAX_FIELD_BYTES};
use crate::problem::ApiError;
use crate::wire::{parse_time, ReportEventRequest, SendMessageRequest};
use runledger_domain::messages::{LifecycleReport, MAX_BODY, MAX_SUBJECT};
use runledger_domain::{RunId, Timestamp};

/// The most recipients of one message, and the most runs one poll watches.
pub const MAX_RUNS_NAMED: usize = 100;
/// The default and largest page of an inbox.
pub const DEFAULT_INBOX_LIMIT: usize = 50;
pub const MAX_INBOX_LIMIT: usize = 100;
/// The default and largest page of a poll.
pub const DEFAULT_POLL_LIMIT: usize = 100;
pub const MAX_POLL_LIMIT: usize = 500;

/// A message to send, checked.
#[derive(Debug)]
pub struct Message {
    pub sender: RunId,
    pub to: Vec<RunId>,
    pub subject: String,
    pub body: String,
}

/// A run id named in a field: a malformed one is answered like an unknown run (404), naming
/// the field.
pub fn named_run(field: &str, raw: &str) -> Result<RunId, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found(format!("{field}: no run with id {raw:?}")))
}

/// Text of at most `max` characters (the document's `maxLength`) and no NUL.
fn text(field: &str, value: String, max: usize) -> Result<String, ApiError> {
    if value.chars().count() > max {
        return Err(ApiError::bad_request(format!(
            "{field} is longer than {max} characters"
        )));
    }
    if value.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "{field} must not contain NUL characters"
        )));
    }
    Ok(value)
}

/// The body of `POST /agent/messages`.
pub fn send_message(body: &[u8]) -> Result<Message, ApiError> {
    let request: SendMessageRequest = parse_json(body)?;
    if request.to.is_empty() {
        return Err(ApiError::bad_request("to must name at least one run"));
    }
    if request.to.len() > MAX_RUNS_NAMED {
        return Err(ApiError::bad_request(format!(
            "to names more than {MAX_RUNS_NAMED} runs"
        )));
    }
    let to = request
        .to
        .iter()
        .enumerate()
        .map(|(i, raw)| named_run(&format!("to[{i}]"), raw))
        .collect::<Result<_, _>>()?;
    Ok(Message {
        sender: named_run("sender_run_id", &request.sender_run_id)?,
        to,
        subject: text("subject", request.subject, MAX_SUBJECT)?,
        body: text("body", request.body, MAX_BODY)?,
    })
}

/// The query of `GET /agent/messages/{runId}`: only unread ones, only those sent at or after
/// `since`, and the most to answer.
#[derive(Debug, PartialEq, Eq)]
pub struct InboxQuery {
    pub unread: bool,
    pub since: Option<Timestamp>,
    pub limit: usize,
}

pub fn inbox_query(raw: &str) -> Result<InboxQuery, ApiError> {
    let mut query = InboxQuery {
        unread: false,
        since: None,
        limit: DEFAULT_INBOX_LIMIT,
    };
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        match key.as_ref() {
            "unread" => {
                query.unread = match value.as_ref() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(ApiError::bad_request("unread must be true or false")),
                }
            }
            "since" => {
                let nanos = parse_time(&value).filter(|n| *n >= 0).ok_or_else(|| {
                    ApiError::bad_request("since must be an RFC 3339 time after 1970")
                })?;
                // Rounded up: a message sent within the millisecond before `since` is not after it.
                let ms = (nanos + 999_999) / 1_000_000;
                query.since = Some(Timestamp(u64::try_from(ms).unwrap_or(u64::MAX)));
            }
            "limit" => query.limit = limit(&value, MAX_INBOX_LIMIT)?,
            _ => {}
        }
    }
    Ok(query)
}

/// The query of `GET /agent/events`: the runs watched (`run_ids`, repeated), the sequence to
/// answer after (`since`, default 0) and the most to answer.
#[derive(Debug, PartialEq, Eq)]
pub struct PollQuery {
    pub runs: Vec<RunId>,
    pub since: u64,
    pub limit: usize,
}

pub fn poll_query(raw: &str) -> Result<PollQuery, ApiError> {
    let mut query = PollQuery {
        runs: Vec::new(),
        since: 0,
        limit: DEFAULT_POLL_LIMIT,
    };
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        match key.as_ref() {
            "run_ids" => {
                if query.runs.len() == MAX_RUNS_NAMED {
                    return Err(ApiError::bad_request(format!(
                        "run_ids names more than {MAX_RUNS_NAMED} runs"
                    )));
                }
                let run = named_run("run_ids", &value)?;
                if !query.runs.contains(&run) {
                    query.runs.push(run);
                }
            }
            "since" => {
                query.since = value
                    .parse::<u64>()
                    .ok()
                    .filter(|s| i64::try_from(*s).is_ok())
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            "since must be an integer from 0: the sequence of the last event seen",
                        )
                    })?
            }
            "limit" => query.limit = limit(&value, MAX_POLL_LIMIT)?,
            _ => {}
        }
    }
    if query.runs.is_empty() {
        return Err(ApiError::bad_request(
            "run_ids is required: the runs to watch",
        ));
    }
    Ok(query)
}

/// A reported lifecycle event, checked: what was reported and the client's ids.
#[derive(Debug, PartialEq, Eq)]
pub struct Report {
    pub report: LifecycleReport,
    pub execution_id: Option<String>,
    pub ref_id: Option<String>,
}

/// The body of `POST /agent/events/{runId}`. `run_blocked` is refused (422): a run here is
/// never `BLOCKED`.
pub fn report_event(body: &[u8]) -> Result<Report, ApiError> {
    let request: ReportEventRequest = parse_json(body)?;
    let report = match LifecycleReport::parse(&request.event_type) {
        Some(report) => report,
        None if request.event_type == "run_blocked" => {
            return Err(ApiError::not_supported(
                "run_blocked: a run here is never BLOCKED (there are no approvals to wait for)",
            ))
        }
        None => {
            return Err(ApiError::bad_request(
                "event_type must be one of run_in_progress, run_succeeded, run_failed, \
                 run_errored, run_blocked, run_cancelled",
            ))
        }
    };
    let id = |field: &str, value: Option<String>| match value {
        Some(v) if v.len() > MAX_FIELD_BYTES || v.contains('\0') => Err(ApiError::bad_request(
            format!("{field} must be at most {MAX_FIELD_BYTES} bytes, without NUL"),
        )),
        other => Ok(other),
    };
    Ok(Report {
        report,
        execution_id: id("execution_id", request.execution_id)?,
        ref_id: id("ref_id", request.ref_id)?,
    })
}
