//! JSON wire types of the v1 API (OpenAPI `RunAgentRequest`, `RunItem`, …) and their mapping
//! to and from the domain. Field names and enums follow the OpenAPI document; optional fields
//! are omitted rather than sent as null, because the official clients validate strictly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::domain::{AgentConfig, CreatorKind, McpServer, Run, RunId, StatusMessage, Timestamp};

/// RFC 3339, UTC, millisecond precision: `2026-11-21T23:41:29.123Z`. Written by hand (days to
/// civil date, after Howard Hinnant's algorithm): list responses format three times per run.
pub fn format_time(t: Timestamp) -> String {
    let ms = t.0;
    let days = (ms / 86_400_000) as i64;
    let of_day = ms % 86_400_000;
    let (hour, minute, second, milli) = (
        of_day / 3_600_000,
        of_day / 60_000 % 60,
        of_day / 1000 % 60,
        of_day % 1000,
    );
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// The exact inverse of `format_time`: only its own output is accepted (one spelling per
/// instant), so a value read back renders to the same bytes. For backups, which must restore
/// every event's time to the millisecond.
pub fn parse_exact_time(s: &str) -> Option<Timestamp> {
    fn number(digits: &str, len: std::ops::RangeInclusive<usize>) -> Option<i128> {
        if !len.contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
    let (date, time) = s.strip_suffix('Z')?.split_once('T')?;
    let (year, rest) = date.split_once('-')?;
    let (month, day) = rest.split_once('-')?;
    let (hms, milli) = time.split_once('.')?;
    let mut hms = hms.split(':');
    let (hour, minute, second) = (hms.next()?, hms.next()?, hms.next()?);
    if hms.next().is_some() {
        return None;
    }
    // Years beyond four digits do occur: `format_time` renders any u64 of milliseconds.
    let (year, month, day) = (
        number(year, 4..=12)?,
        number(month, 2..=2)?,
        number(day, 2..=2)?,
    );
    // Days from the civil date (Howard Hinnant's `days_from_civil`, the inverse of the
    // algorithm in `format_time`).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = days * 86_400_000
        + number(hour, 2..=2)? * 3_600_000
        + number(minute, 2..=2)? * 60_000
        + number(second, 2..=2)? * 1000
        + number(milli, 3..=3)?;
    let t = Timestamp(u64::try_from(ms).ok()?);
    // Out-of-range fields (month 13, February 30, 24:00) map to some other instant; only
    // the canonical spelling survives this check.
    (format_time(t) == s).then_some(t)
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// Parses an RFC 3339 time (a missing offset is read as UTC) into nanoseconds since the epoch.
pub fn parse_time(s: &str) -> Option<i128> {
    if let Ok(dt) = OffsetDateTime::parse(s, &Rfc3339) {
        return Some(dt.unix_timestamp_nanos());
    }
    let with_zone = format!("{s}Z");
    OffsetDateTime::parse(&with_zone, &Rfc3339)
        .ok()
        .map(|dt| dt.unix_timestamp_nanos())
}

/// ISO 8601 duration, e.g. `PT2M30.5S`.
pub fn format_duration(ms: u64) -> String {
    let hours = ms / 3_600_000;
    let minutes = (ms / 60_000) % 60;
    let seconds = (ms % 60_000) / 1000;
    let millis = ms % 1000;
    let mut out = String::from("PT");
    if hours > 0 {
        out.push_str(&format!("{hours}H"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}M"));
    }
    if millis > 0 {
        out.push_str(&format!("{seconds}.{millis:03}S"));
    } else if seconds > 0 || (hours == 0 && minutes == 0) {
        out.push_str(&format!("{seconds}S"));
    }
    out
}

/// A session id in UUID form, derived from the run id (one session per run).
pub fn session_id(id: RunId) -> String {
    let h = format!("{:032x}", id.0);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The capability token of a run's session page.
pub fn session_token(secret: &[u8; 32], id: RunId) -> String {
    let mut h = Sha256::new();
    h.update(secret);
    h.update(b"session-link");
    h.update(id.to_bytes());
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---- requests ----

#[derive(Debug, Deserialize)]
pub struct McpServerIn {
    pub warp_id: Option<String>,
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub url: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
    pub headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
pub struct AgentConfigIn {
    pub name: Option<String>,
    pub model_id: Option<String>,
    pub base_prompt: Option<String>,
    pub environment_id: Option<String>,
    pub skill_spec: Option<String>,
    pub mcp_servers: Option<BTreeMap<String, McpServerIn>>,
}

#[derive(Debug, Deserialize)]
pub struct RunAgentRequest {
    pub prompt: Option<String>,
    pub skill: Option<String>,
    pub config: Option<AgentConfigIn>,
    pub title: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
pub struct FollowupRequest {
    pub message: Option<String>,
    pub mode: Option<String>,
}

// ---- responses ----

#[derive(Debug, Serialize)]
pub struct RunAgentResponse {
    pub run_id: String,
    pub task_id: String,
    pub state: &'static str,
    pub at_capacity: bool,
}

#[derive(Debug, Serialize)]
pub struct McpServerOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warp_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub args: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: &'a BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
pub struct AgentConfigOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_spec: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<&'a str, McpServerOut<'a>>,
}

impl<'a> AgentConfigOut<'a> {
    pub fn from(c: &'a AgentConfig) -> Self {
        AgentConfigOut {
            name: c.name.as_deref(),
            model_id: c.model_id.as_deref(),
            base_prompt: c.base_prompt.as_deref(),
            environment_id: c.environment_id.as_deref(),
            skill_spec: c.skill_spec.as_deref(),
            mcp_servers: c
                .mcp_servers
                .iter()
                .map(|(k, s): (&'a String, &'a McpServer)| {
                    (
                        k.as_str(),
                        McpServerOut {
                            warp_id: s.warp_id.as_deref(),
                            command: s.command.as_deref(),
                            args: &s.args,
                            url: s.url.as_deref(),
                            env: &s.env,
                            headers: &s.headers,
                        },
                    )
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CreatorOut<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub uid: &'a str,
    pub display_name: &'a str,
}

#[derive(Debug, Serialize)]
pub struct StatusMessageOut<'a> {
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct RunItem<'a> {
    pub run_id: String,
    pub task_id: String,
    pub title: &'a str,
    pub state: &'static str,
    pub prompt: &'a str,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    pub source: &'static str,
    pub creator: CreatorOut<'a>,
    pub agent_config: AgentConfigOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_link: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<StatusMessageOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_time: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: &'a BTreeMap<String, String>,
}

/// What a `RunItem` needs beyond the run itself.
pub struct Links<'a> {
    pub public_url: &'a str,
    pub secret: &'a [u8; 32],
    pub now: Timestamp,
}

impl<'a> RunItem<'a> {
    pub fn from(run: &'a Run, links: &Links<'_>) -> Self {
        let id = run.id.to_string();
        let session = run.has_session();
        RunItem {
            task_id: id.clone(),
            title: &run.title,
            state: run.state.as_str(),
            prompt: &run.prompt,
            created_at: format_time(run.created_at),
            updated_at: format_time(run.updated_at),
            started_at: run.started_at.map(format_time),
            source: run.source.as_str(),
            creator: CreatorOut {
                kind: match run.creator.kind {
                    CreatorKind::User => "user",
                    CreatorKind::ServiceAccount => "service_account",
                },
                uid: &run.creator.uid,
                display_name: &run.creator.display_name,
            },
            agent_config: AgentConfigOut::from(&run.config),
            session_id: session.then(|| session_id(run.id)),
            session_link: session.then(|| {
                format!(
                    "{}/sessions/{id}?token={}",
                    links.public_url,
                    session_token(links.secret, run.id)
                )
            }),
            status_message: run.status_message.as_ref().map(|s: &'a StatusMessage| {
                StatusMessageOut {
                    message: &s.message,
                    error_code: s.error_code.as_deref(),
                    retryable: s.retryable,
                }
            }),
            run_time: session.then(|| format_duration(run.run_time_ms(links.now))),
            metadata: &run.metadata,
            run_id: id,
        }
    }
}

/// One stored event as JSON (the events endpoint and `runledger export` / `events --json`).
pub fn event_json(e: &crate::store::Envelope) -> serde_json::Value {
    use crate::domain::Event;
    let data = match &e.event {
        Event::Created(c) => serde_json::json!({
            "title": c.title,
            "prompt": c.prompt,
            "config": AgentConfigOut::from(&c.config),
            "creator": {
                "type": match c.creator.kind { CreatorKind::User => "user", CreatorKind::ServiceAccount => "service_account" },
                "uid": c.creator.uid,
                "display_name": c.creator.display_name,
            },
            "source": c.source.as_str(),
            "metadata": c.metadata,
        }),
        Event::Started { execution } | Event::Succeeded { execution } => {
            serde_json::json!({ "execution": execution })
        }
        Event::FollowupReceived { message, mode, by } => {
            serde_json::json!({ "message": message, "mode": mode.as_str(), "by": by })
        }
        Event::Failed { execution, status } => serde_json::json!({
            "execution": execution,
            "status_message": StatusMessageOut {
                message: &status.message,
                error_code: status.error_code.as_deref(),
                retryable: status.retryable,
            },
        }),
        Event::Cancelled { by } => serde_json::json!({ "by": by }),
    };
    serde_json::json!({
        "run_id": e.run_id.to_string(),
        "seq": e.seq,
        "at": format_time(e.at),
        "type": e.event.kind(),
        "data": data,
    })
}

/// Why a JSON value is not an event as `event_json` writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EventJsonError(String);

#[derive(Deserialize)]
struct EventIn<'a> {
    #[serde(borrow)]
    run_id: &'a str,
    seq: u64,
    #[serde(borrow)]
    at: &'a str,
    #[serde(rename = "type", borrow)]
    kind: &'a str,
}

#[derive(Deserialize)]
struct CreatedIn {
    title: String,
    prompt: String,
    config: AgentConfigIn,
    creator: CreatorIn,
    source: String,
    metadata: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct CreatorIn {
    #[serde(rename = "type")]
    kind: String,
    uid: String,
    display_name: String,
}

#[derive(Deserialize)]
struct ExecutionIn {
    execution: u32,
}

#[derive(Deserialize)]
struct FollowupIn {
    message: String,
    mode: String,
    by: String,
}

#[derive(Deserialize)]
struct FailedIn {
    execution: u32,
    status_message: StatusMessageIn,
}

#[derive(Deserialize)]
struct StatusMessageIn {
    message: String,
    error_code: Option<String>,
    retryable: Option<bool>,
}

#[derive(Deserialize)]
struct CancelledIn {
    by: String,
}

/// The inverse of `event_json`: the envelope an event line was written from (`runledger
/// import`). Only what `event_json` writes is accepted: the envelope is rendered again and
/// must equal the input, so an unknown field, a null or a time in another spelling is refused
/// instead of being silently dropped, and a field that `event_json` stopped writing would fail
/// the round-trip tests rather than vanish from backups.
pub fn event_from_json(
    value: &serde_json::Value,
) -> Result<crate::store::Envelope, EventJsonError> {
    use crate::domain::{Creator, Event, FollowupMode, RunCreated, SourceType};
    use serde::de::DeserializeOwned;
    fn read<T: DeserializeOwned>(
        value: &serde_json::Value,
        what: &str,
    ) -> Result<T, EventJsonError> {
        T::deserialize(value).map_err(|e| EventJsonError(format!("{what}: {e}")))
    }
    let bad = |what: String| EventJsonError(what);
    let head = EventIn::deserialize(value).map_err(|e| bad(format!("not an event: {e}")))?;
    let data = value
        .get("data")
        .ok_or_else(|| bad("not an event: missing field `data`".into()))?;
    let run_id: RunId = head
        .run_id
        .parse()
        .map_err(|_| bad(format!("run_id {:?} is not a run id (a ULID)", head.run_id)))?;
    let at = parse_exact_time(head.at).ok_or_else(|| {
        bad(format!(
            "at {:?} is not a time as runledger writes it (2026-11-21T23:41:29.123Z)",
            head.at
        ))
    })?;
    let what = format!("{} data", head.kind);
    let event = match head.kind {
        "Created" => {
            let c: CreatedIn = read(data, &what)?;
            let kind = match c.creator.kind.as_str() {
                "user" => CreatorKind::User,
                "service_account" => CreatorKind::ServiceAccount,
                other => return Err(bad(format!("creator type {other:?} is unknown"))),
            };
            let source = SourceType::parse(&c.source)
                .ok_or_else(|| bad(format!("source {:?} is unknown", c.source)))?;
            let config = AgentConfig {
                name: c.config.name,
                model_id: c.config.model_id,
                base_prompt: c.config.base_prompt,
                environment_id: c.config.environment_id,
                skill_spec: c.config.skill_spec,
                mcp_servers: c
                    .config
                    .mcp_servers
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, s)| {
                        let server = McpServer {
                            warp_id: s.warp_id,
                            command: s.command,
                            args: s.args.unwrap_or_default(),
                            url: s.url,
                            env: s.env.unwrap_or_default(),
                            headers: s.headers.unwrap_or_default(),
                        };
                        (name, server)
                    })
                    .collect(),
            };
            Event::Created(RunCreated {
                title: c.title,
                prompt: c.prompt,
                config,
                creator: Creator {
                    kind,
                    uid: c.creator.uid,
                    display_name: c.creator.display_name,
                },
                source,
                metadata: c.metadata,
            })
        }
        "Started" => Event::Started {
            execution: read::<ExecutionIn>(data, &what)?.execution,
        },
        "Succeeded" => Event::Succeeded {
            execution: read::<ExecutionIn>(data, &what)?.execution,
        },
        "FollowupReceived" => {
            let f: FollowupIn = read(data, &what)?;
            let mode = FollowupMode::parse(&f.mode)
                .ok_or_else(|| bad(format!("follow-up mode {:?} is unknown", f.mode)))?;
            Event::FollowupReceived {
                message: f.message,
                mode,
                by: f.by,
            }
        }
        "Failed" => {
            let f: FailedIn = read(data, &what)?;
            Event::Failed {
                execution: f.execution,
                status: StatusMessage {
                    message: f.status_message.message,
                    error_code: f.status_message.error_code,
                    retryable: f.status_message.retryable,
                },
            }
        }
        "Cancelled" => Event::Cancelled {
            by: read::<CancelledIn>(data, &what)?.by,
        },
        other => return Err(bad(format!("event type {other:?} is unknown"))),
    };
    let envelope = crate::store::Envelope {
        run_id,
        seq: head.seq,
        at,
        event,
    };
    let written = event_json(&envelope);
    if &written != value {
        return Err(bad(first_difference(value, &written, "")));
    }
    Ok(envelope)
}

/// Where `given` (a line read back) differs from `written` (what `event_json` makes of it).
fn first_difference(given: &serde_json::Value, written: &serde_json::Value, at: &str) -> String {
    use serde_json::Value;
    let path = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    if let (Value::Object(g), Value::Object(w)) = (given, written) {
        if let Some((key, value)) = g.iter().find(|(k, _)| !w.contains_key(*k)) {
            return if value.is_null() {
                format!("field `{}` is null; runledger leaves it out", path(key))
            } else {
                format!("field `{}` is not part of the event format", path(key))
            };
        }
        if let Some(key) = w.keys().find(|k| !g.contains_key(*k)) {
            return format!("field `{}` is missing", path(key));
        }
        for (key, value) in g {
            if let Some(other) = w.get(key).filter(|other| *other != value) {
                return first_difference(value, other, &path(key));
            }
        }
    }
    let at = if at.is_empty() { "the event" } else { at };
    format!("`{at}` is {given}, which runledger writes as {written}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc_millis() {
        assert_eq!(format_time(Timestamp(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_time(Timestamp(951_782_400_000)),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            format_time(Timestamp(4_102_444_799_999)),
            "2099-12-31T23:59:59.999Z"
        );
        // Agrees with the time crate across leap years and month ends.
        for ms in (0..4_000_000_000_000u64).step_by(86_399_999_937) {
            let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
                .expect("in range");
            let expected = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                dt.year(),
                u8::from(dt.month()),
                dt.day(),
                dt.hour(),
                dt.minute(),
                dt.second(),
                dt.millisecond()
            );
            assert_eq!(format_time(Timestamp(ms)), expected);
        }
        assert_eq!(
            format_time(Timestamp(1_763_768_489_123)),
            "2025-11-21T23:41:29.123Z"
        );
        assert_eq!(
            parse_time("2025-11-21T23:41:29.123Z"),
            Some(1_763_768_489_123_000_000)
        );
        assert_eq!(
            parse_time("2025-11-21T23:41:29.123+00:00"),
            Some(1_763_768_489_123_000_000)
        );
        assert_eq!(
            parse_time("2025-11-21T23:41:29.123"),
            Some(1_763_768_489_123_000_000)
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn durations_are_iso8601() {
        assert_eq!(format_duration(0), "PT0S");
        assert_eq!(format_duration(2_004), "PT2.004S");
        assert_eq!(format_duration(150_000), "PT2M30S");
        assert_eq!(format_duration(3_600_000), "PT1H");
    }

    #[test]
    fn session_ids_are_uuid_shaped() {
        let s = session_id(RunId(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef));
        assert_eq!(s, "01234567-89ab-cdef-0123-456789abcdef");
    }
}
