//! The JSON form of a schedule's stored event, as `runledger export` writes it (a
//! `schedule_event` record) and `runledger events <schedule id>` prints it, and its reading
//! back, which refuses anything that would not render to the same line.
//!
//! ```text
//! {"record":"schedule_event","schedule_id":ULID,"seq":N,"at":TIME,"event":{"type":KIND,…}}
//! ```
//! Ids are ULIDs, times RFC 3339 with milliseconds, sealed credentials base64 (as in a run's
//! `Created`), the agent config as a run's is stored (credential values read `***`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::events::SealedOut;
use super::time::{format_time, parse_exact_time};
use runledger_domain::{AgentConfig, Creator, RunId, ScheduleEvent, ScheduleSpec};
use runledger_store::ScheduleEnvelope;

/// The record type of a schedule event line.
pub const RECORD: &str = "schedule_event";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    record: String,
    schedule_id: String,
    seq: u64,
    at: String,
    event: EventOut,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecOut {
    name: String,
    cron: String,
    time_zone: String,
    prompt: String,
    config: AgentConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sealed_credentials: Option<SealedOut>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    metadata: BTreeMap<String, String>,
}

// The variant names are the `type` tags of the lines, which name schedule events apart from
// a run's in the same backup.
#[allow(clippy::enum_variant_names)]
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
enum EventOut {
    ScheduleCreated {
        spec: SpecOut,
        enabled: bool,
        team: String,
        by: Creator,
    },
    ScheduleUpdated {
        spec: SpecOut,
        enabled: bool,
        by: Creator,
    },
    SchedulePaused {
        by: String,
    },
    ScheduleResumed {
        by: String,
    },
    ScheduleDeleted {
        by: String,
    },
    ScheduleFired {
        due: String,
        run_id: String,
    },
    ScheduleFireFailed {
        due: String,
        error: String,
    },
}

fn spec_out(s: &ScheduleSpec) -> SpecOut {
    SpecOut {
        name: s.name.clone(),
        cron: s.cron.clone(),
        time_zone: s.time_zone.clone(),
        prompt: s.prompt.clone(),
        config: s.config.clone(),
        sealed_credentials: s.sealed.as_ref().map(SealedOut::from),
        metadata: s.metadata.clone(),
    }
}

fn spec_in(s: SpecOut) -> Result<ScheduleSpec, String> {
    Ok(ScheduleSpec {
        sealed: match &s.sealed_credentials {
            Some(sealed) => Some(sealed.sealed().map_err(|e| e.to_string())?),
            None => None,
        },
        name: s.name,
        cron: s.cron,
        time_zone: s.time_zone,
        prompt: s.prompt,
        config: s.config,
        metadata: s.metadata,
    })
}

/// The line of one stored schedule event.
pub fn schedule_event_json(e: &ScheduleEnvelope) -> Value {
    let event = match &e.event {
        ScheduleEvent::Created {
            spec,
            enabled,
            team,
            by,
        } => EventOut::ScheduleCreated {
            spec: spec_out(spec),
            enabled: *enabled,
            team: team.clone(),
            by: by.clone(),
        },
        ScheduleEvent::Updated { spec, enabled, by } => EventOut::ScheduleUpdated {
            spec: spec_out(spec),
            enabled: *enabled,
            by: by.clone(),
        },
        ScheduleEvent::Paused { by } => EventOut::SchedulePaused { by: by.clone() },
        ScheduleEvent::Resumed { by } => EventOut::ScheduleResumed { by: by.clone() },
        ScheduleEvent::Deleted { by } => EventOut::ScheduleDeleted { by: by.clone() },
        ScheduleEvent::Fired { due, run_id } => EventOut::ScheduleFired {
            due: format_time(*due),
            run_id: run_id.to_string(),
        },
        ScheduleEvent::FireFailed { due, error } => EventOut::ScheduleFireFailed {
            due: format_time(*due),
            error: error.clone(),
        },
    };
    // Plain structs and string-keyed maps always serialise.
    serde_json::to_value(Line {
        record: RECORD.to_string(),
        schedule_id: e.schedule_id.to_string(),
        seq: e.seq,
        at: format_time(e.at),
        event,
    })
    .unwrap_or(Value::Null)
}

/// Reads a schedule event line back; refuses a line `schedule_event_json` would not write.
pub fn schedule_event_from_json(value: &Value) -> Result<ScheduleEnvelope, String> {
    let line = Line::deserialize(value).map_err(|e| format!("bad schedule_event record: {e}"))?;
    let id = |what: &str, s: &str| {
        s.parse::<RunId>()
            .map_err(|_| format!("schedule_event: {what} is not a ULID"))
    };
    let time = |what: &str, s: &str| {
        parse_exact_time(s).ok_or_else(|| format!("schedule_event: {what} is not a time"))
    };
    let event = match line.event {
        EventOut::ScheduleCreated {
            spec,
            enabled,
            team,
            by,
        } => {
            if !runledger_domain::valid_team_name(&team) {
                return Err("schedule_event: team is not a team name".into());
            }
            ScheduleEvent::Created {
                spec: spec_in(spec)?,
                enabled,
                team,
                by,
            }
        }
        EventOut::ScheduleUpdated { spec, enabled, by } => ScheduleEvent::Updated {
            spec: spec_in(spec)?,
            enabled,
            by,
        },
        EventOut::SchedulePaused { by } => ScheduleEvent::Paused { by },
        EventOut::ScheduleResumed { by } => ScheduleEvent::Resumed { by },
        EventOut::ScheduleDeleted { by } => ScheduleEvent::Deleted { by },
        EventOut::ScheduleFired { due, run_id } => ScheduleEvent::Fired {
            due: time("due", &due)?,
            run_id: id("run_id", &run_id)?,
        },
        EventOut::ScheduleFireFailed { due, error } => ScheduleEvent::FireFailed {
            due: time("due", &due)?,
            error,
        },
    };
    let envelope = ScheduleEnvelope {
        schedule_id: id("schedule_id", &line.schedule_id)?,
        seq: line.seq,
        at: time("at", &line.at)?,
        event,
    };
    if &schedule_event_json(&envelope) != value {
        return Err(
            "the schedule_event record has fields that runledger does not write, or writes \
             otherwise"
                .into(),
        );
    }
    Ok(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{CreatorKind, Sealed, Timestamp};

    fn samples() -> Vec<ScheduleEvent> {
        let spec = ScheduleSpec {
            name: "nightly".into(),
            cron: "CRON_TZ=Europe/Berlin 0 3 * * *".into(),
            time_zone: "Europe/Berlin".into(),
            prompt: "upgrade\n\"deps\"".into(),
            config: AgentConfig {
                environment_id: Some("fast".into()),
                ..AgentConfig::default()
            },
            sealed: Some(Sealed {
                nonce: [7; 24],
                ciphertext: vec![1, 2, 3, 250],
            }),
            metadata: [("k".to_string(), "v".to_string())].into(),
        };
        let by = Creator {
            kind: CreatorKind::ServiceAccount,
            uid: "01KEY".into(),
            display_name: "ci".into(),
        };
        vec![
            ScheduleEvent::Created {
                spec: spec.clone(),
                enabled: true,
                team: "infra".into(),
                by: by.clone(),
            },
            ScheduleEvent::Updated {
                spec: ScheduleSpec {
                    sealed: None,
                    metadata: BTreeMap::new(),
                    ..spec
                },
                enabled: false,
                by,
            },
            ScheduleEvent::Paused { by: "k".into() },
            ScheduleEvent::Resumed { by: "k".into() },
            ScheduleEvent::Deleted { by: "k".into() },
            ScheduleEvent::Fired {
                due: Timestamp(1_764_126_000_000),
                run_id: RunId(u128::MAX >> 2),
            },
            ScheduleEvent::FireFailed {
                due: Timestamp(1_764_126_060_000),
                error: "queue full".into(),
            },
        ]
    }

    #[test]
    fn every_schedule_event_reads_back_as_it_was_written() {
        for (seq, event) in samples().into_iter().enumerate() {
            let e = ScheduleEnvelope {
                schedule_id: RunId(0x0190_0000_0000_0000_0000_0000_0000_002a),
                seq: seq as u64,
                at: Timestamp(1_764_126_000_123),
                event,
            };
            let line = schedule_event_json(&e);
            assert_eq!(line["record"], RECORD);
            assert_eq!(schedule_event_from_json(&line), Ok(e));
        }
    }

    #[test]
    fn a_line_with_more_or_other_than_written_is_refused() {
        let e = ScheduleEnvelope {
            schedule_id: RunId(5),
            seq: 0,
            at: Timestamp(1_000),
            event: ScheduleEvent::Paused { by: "k".into() },
        };
        let mut extra = schedule_event_json(&e);
        extra["event"]["note"] = "x".into();
        assert!(schedule_event_from_json(&extra).is_err());
        let mut other = schedule_event_json(&e);
        other["at"] = "1970-01-01T00:00:01Z".into();
        assert!(schedule_event_from_json(&other).is_err());
        // Empty metadata spelt out reads, but is not what export writes.
        let created = ScheduleEnvelope {
            event: samples().remove(1),
            ..e
        };
        let mut spelt = schedule_event_json(&created);
        spelt["event"]["spec"]["metadata"] = serde_json::json!({});
        assert!(schedule_event_from_json(&spelt)
            .expect_err("not as written")
            .contains("writes otherwise"));
        let mut bad_id = schedule_event_json(&e);
        bad_id["schedule_id"] = "nope".into();
        assert!(schedule_event_from_json(&bad_id).is_err());
    }
}
