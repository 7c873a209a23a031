//! `event_from_json`, the exact inverse of `event_json` (`runledger import`): a line is read into
//! an envelope, written again and compared, so anything `event_json` would not write is refused,
//! naming the first field that differs.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::run::*;
use crate::time::parse_exact_time;
use runledger_domain::{
    AgentConfig, CostSource, CreatorKind, Event, ExecutionUsage, InferenceCost, McpServer,
    RunAdmitted, RunCreated, RunId, StatusMessage, Tokens,
};
use runledger_store::Envelope;

use super::data::*;
use super::error::{bad, read, EventJsonError};
use super::line::event_json;
use super::origin::OriginData;
use super::provenance::ProvenanceData;

#[derive(Deserialize)]
struct EventIn<'a> {
    #[serde(borrow)]
    run_id: &'a str,
    seq: u64,
    #[serde(borrow)]
    at: &'a str,
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    origin: Option<OriginData>,
}

#[derive(Deserialize)]
struct CreatedIn {
    title: String,
    prompt: String,
    config: AgentConfigIn,
    creator: CreatorIn,
    source: String,
    metadata: BTreeMap<String, String>,
    team: Option<String>,
    sealed_credentials: Option<SealedOut>,
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
struct StartedIn {
    execution: u32,
    placement: Option<PlacementData>,
}

#[derive(Deserialize)]
struct DeliveredIn {
    execution: u32,
    count: u32,
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

/// The payload of `Cancelled` and `SessionLinkRevoked`: the key that asked.
#[derive(Deserialize)]
struct CancelledIn {
    by: String,
}

/// The inverse of `event_json`: the envelope an event line was written from (`runledger
/// import`). Only what `event_json` writes is accepted: the envelope is rendered again and
/// must equal the input, so an unknown field, a null or a time in another spelling is refused
/// instead of being silently dropped, and a field that `event_json` stopped writing would fail
/// the round-trip tests rather than vanish from backups.
pub fn event_from_json(value: &serde_json::Value) -> Result<Envelope, EventJsonError> {
    let head = EventIn::deserialize(value).map_err(|e| bad(format!("not an event: {e}")))?;
    let data = value
        .get("data")
        .ok_or_else(|| bad("not an event: missing field `data`".into()))?;
    let (run_id, at) = place(&head)?;
    let envelope = Envelope {
        run_id,
        seq: head.seq,
        at,
        event: event_of(head.kind, data)?,
        origin: head.origin.map(OriginData::origin).transpose()?,
    };
    round_trips(value, &envelope)?;
    Ok(envelope)
}

/// The run and the time of an event line.
fn place(head: &EventIn<'_>) -> Result<(RunId, runledger_domain::Timestamp), EventJsonError> {
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
    Ok((run_id, at))
}

/// The event of type `kind` whose payload is `data`.
fn event_of(kind: &str, data: &serde_json::Value) -> Result<Event, EventJsonError> {
    use runledger_domain::FollowupMode;
    let what = format!("{kind} data");
    Ok(match kind {
        "Created" => created(read(data, &what)?)?,
        "Started" => {
            let started: StartedIn = read(data, &what)?;
            match started.placement {
                None => Event::Started {
                    execution: started.execution,
                },
                Some(placement) => Event::StartedOn {
                    execution: started.execution,
                    placement: placement.placement(),
                },
            }
        }
        "Lost" => {
            let f: FailedIn = read(data, &what)?;
            Event::Lost {
                execution: f.execution,
                status: StatusMessage {
                    message: f.status_message.message,
                    error_code: f.status_message.error_code,
                    retryable: f.status_message.retryable,
                },
            }
        }
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
        "SessionLinkRevoked" => Event::SessionLinkRevoked {
            by: read::<CancelledIn>(data, &what)?.by,
        },
        "FollowupsDelivered" => {
            let d: DeliveredIn = read(data, &what)?;
            Event::FollowupsDelivered {
                execution: d.execution,
                count: d.count,
            }
        }
        "Requeued" => Event::Requeued {
            execution: read::<ExecutionIn>(data, &what)?.execution,
        },
        "UsageRecorded" => usage_recorded(read(data, &what)?)?,
        "ArtifactReported" => read::<ArtifactReportedData>(data, &what)?.event()?,
        "Attached" => read::<AttachedData>(data, &what)?.event()?,
        "Scheduled" => read::<ScheduledData>(data, &what)?.event()?,
        "Derived" => read::<super::derived::DerivedData>(data, &what)?.event()?,
        "Provenance" => {
            let (execution, provenance) = read::<ProvenanceData>(data, &what)?.provenance();
            Event::Provenance {
                execution,
                provenance,
            }
        }
        "Changes" => {
            let (execution, changes) =
                read::<super::changes::ChangesData>(data, &what)?.changes()?;
            Event::Changes { execution, changes }
        }
        other => return Err(bad(format!("event type {other:?} is unknown"))),
    })
}

/// A `Created` event from its payload.
fn created(c: CreatedIn) -> Result<Event, EventJsonError> {
    use runledger_domain::{Creator, SourceType};
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
            .map(|(name, s)| (name, McpServer::from(s)))
            .collect(),
    };
    let created = RunCreated {
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
    };
    let sealed = c
        .sealed_credentials
        .as_ref()
        .map(SealedOut::sealed)
        .transpose()?;
    Ok(match c.team {
        Some(team) if !runledger_domain::valid_team_name(&team) => {
            return Err(bad(format!("team {team:?} is not a team name")))
        }
        Some(team) => Event::Admitted(RunAdmitted {
            created,
            team,
            sealed,
        }),
        None if sealed.is_some() => {
            return Err(bad(
                "sealed_credentials belong to a run with a team; this one has none".into(),
            ))
        }
        None => Event::Created(created),
    })
}

/// A `UsageRecorded` event from its payload.
fn usage_recorded(u: UsageData<'static>) -> Result<Event, EventJsonError> {
    let inference = match u.inference_cost {
        None => None,
        Some(c) => Some(InferenceCost {
            nano_usd: c.nano_usd,
            source: CostSource::parse(&c.source)
                .ok_or_else(|| bad(format!("inference cost source {:?} is unknown", c.source)))?,
        }),
    };
    Ok(Event::UsageRecorded {
        execution: u.execution,
        usage: ExecutionUsage {
            tokens: u.tokens.map(|t| Tokens {
                input: t.input,
                cached_input: t.cached_input,
                output: t.output,
            }),
            model: u.model.map(Cow::into_owned),
            inference,
            cpu_ms: u.cpu_ms,
            compute_nano_usd: u.compute_cost_nano_usd,
        },
    })
}

/// Refuses a line that `event_json` would not write exactly so: an unknown field, a null, a
/// time in another spelling.
fn round_trips(value: &serde_json::Value, envelope: &Envelope) -> Result<(), EventJsonError> {
    let written = event_json(envelope);
    if &written != value {
        return Err(bad(first_difference(value, &written, "")));
    }
    Ok(())
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
