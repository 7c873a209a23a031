//! The lines of a backup: an event line exactly as `format::events::event_json` writes it (with
//! its hash chain's `link`), a seal line (`format::seals`), a schedule's event line, an admin audit record's line, and the `--with-keys` frame (header, key, secret, content and end
//! records), each rendered and read back. Reading refuses anything that would not render to
//! the same line. It knows nothing of files or stores.

use serde::Deserialize;
use serde_json::{json, Value};

use runledger_domain::DEFAULT_TEAM;
use runledger_format::admin::AdminItem;
use runledger_format::events::event_from_json;
use runledger_format::export::content_json;
use runledger_format::schedules::{schedule_event_from_json, schedule_event_json};
use runledger_format::time::{format_time, hex, parse_exact_time, unhex32};
use runledger_store::api_keys::{KeyKind, KeyRecord};
use runledger_store::chain::Link;
use runledger_store::seals::{Leaf, Seal};
use runledger_store::{Envelope, ScheduleEnvelope};

use runledger_format::export::event_line;
use runledger_format::seals::seal_json;

/// The version of the frame `--with-keys` writes; an import refuses versions it does not know.
pub(super) const FORMAT: u64 = 1;
/// The longest line an import reads. The largest event is a create whose 1 MiB body is all
/// control characters, which JSON escapes six-fold; anything far longer is not a backup, and
/// the bound keeps a wrong file from filling memory.
pub(super) const MAX_LINE: u64 = 64 * 1024 * 1024;

/// One line of a backup.
// As for `Event`: one line exists at a time, so boxing the large variant would only add an
// allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Line {
    /// An event, with the link of its run's hash chain the export gives it (`None` in exports
    /// written before chains).
    Event(Envelope, Option<Link>),
    /// A seal with its leaves; an export writes them before the events.
    Seal(Seal, Vec<Leaf>),
    /// An event of a schedule's log.
    Schedule(ScheduleEnvelope),
    /// A record of the admin audit log (`record: "admin"` and the API's item).
    Admin(AdminItem),
    Header {
        format: u64,
    },
    Key(KeyRecord),
    Secret {
        name: String,
        value: [u8; 32],
    },
    /// A piece of a content the events name, at `offset` of its `size` bytes.
    Content {
        sha256: [u8; 32],
        size: u64,
        offset: u64,
        data: Vec<u8>,
    },
    End(Counts),
}

/// What a backup holds; the `end` line repeats it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) events: u64,
    pub(super) keys: u64,
    pub(super) secrets: u64,
    /// Whole contents (attachments, artifacts' bytes); written in the end record only when
    /// there are any, so a backup without them reads as it was written.
    pub(super) contents: u64,
    /// Schedule events; like `contents`, in the end record only when there are any.
    pub(super) schedule_events: u64,
    /// Admin audit records; like `contents`, in the end record only when there are any.
    pub(super) admin: u64,
    /// Seals; like `contents`, in the end record only when there are any.
    pub(super) seals: u64,
}

impl Line {
    pub(super) fn to_json(&self) -> Value {
        match self {
            Line::Event(e, link) => event_line(e, link.as_ref()),
            Line::Seal(seal, leaves) => seal_json(seal, leaves),
            Line::Schedule(e) => schedule_event_json(e),
            Line::Admin(item) => {
                let mut v = serde_json::to_value(item).unwrap_or_default();
                v["record"] = json!("admin");
                v
            }
            Line::Header { format } => json!({ "record": "backup", "format": format }),
            Line::Key(k) => {
                let mut v = json!({
                    "record": "key",
                    "id": k.id,
                    "name": k.name,
                    "kind": k.kind.as_str(),
                    "admin": k.admin,
                    "hash": hex(&k.hash),
                    "created_at": format_time(k.created_at),
                });
                if let Some(t) = k.revoked_at {
                    v["revoked_at"] = json!(format_time(t));
                }
                // Written only when not `default`, so a backup from before teams reads back
                // exactly as it was written.
                if k.team != DEFAULT_TEAM {
                    v["team"] = json!(k.team);
                }
                v
            }
            Line::Secret { name, value } => {
                json!({ "record": "secret", "name": name, "value": hex(value) })
            }
            Line::Content {
                sha256,
                size,
                offset,
                data,
            } => content_json(sha256, *size, *offset, data),
            Line::End(c) => {
                let mut v = json!({
                    "record": "end",
                    "events": c.events,
                    "keys": c.keys,
                    "secrets": c.secrets,
                });
                if c.contents > 0 {
                    v["contents"] = json!(c.contents);
                }
                if c.schedule_events > 0 {
                    v["schedule_events"] = json!(c.schedule_events);
                }
                if c.admin > 0 {
                    v["admin"] = json!(c.admin);
                }
                if c.seals > 0 {
                    v["seals"] = json!(c.seals);
                }
                v
            }
        }
    }

    /// Reads one line. Errors say what is wrong without quoting values, which may be secrets.
    pub(super) fn parse(text: &str) -> Result<Line, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let Some(record) = value.get("record") else {
            let mut value = value;
            let link = match value.as_object_mut().and_then(|o| o.remove("link")) {
                None => None,
                Some(Value::String(text)) => Some(
                    unhex32(&text)
                        .ok_or_else(|| "an event's link is not 64 hex digits".to_string())?,
                ),
                Some(_) => return Err("an event's link is not a string".into()),
            };
            return event_from_json(&value)
                .map(|e| Line::Event(e, link))
                .map_err(|e| format!("not an event as runledger exports it: {e}"));
        };
        let line = match record.as_str() {
            Some(runledger_format::schedules::RECORD) => {
                Line::Schedule(schedule_event_from_json(&value)?)
            }
            Some("admin") => {
                let mut item = value.clone();
                if let Some(fields) = item.as_object_mut() {
                    fields.remove("record");
                }
                Line::Admin(read::<AdminItem>(&item, "admin")?)
            }
            Some("backup") => Line::Header {
                format: read::<HeaderIn>(&value, "backup")?.format,
            },
            Some("key") => Line::Key(read::<KeyIn>(&value, "key")?.record()?),
            Some("secret") => {
                let s: SecretIn = read(&value, "secret")?;
                let value = unhex32(&s.value)
                    .ok_or_else(|| format!("secret {:?}: value is not 64 hex digits", s.name))?;
                Line::Secret {
                    name: s.name,
                    value,
                }
            }
            Some("content") => {
                use base64::Engine;
                let c: ContentIn = read(&value, "content")?;
                let sha256 = unhex32(&c.sha256)
                    .ok_or_else(|| "content: sha256 is not 64 hex digits".to_string())?;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(c.data.as_bytes())
                    .map_err(|_| format!("content {}: data is not base64", c.sha256))?;
                Line::Content {
                    sha256,
                    size: c.size,
                    offset: c.offset,
                    data,
                }
            }
            Some("end") => {
                let c: EndIn = read(&value, "end")?;
                Line::End(Counts {
                    events: c.events,
                    keys: c.keys,
                    secrets: c.secrets,
                    contents: c.contents,
                    schedule_events: c.schedule_events,
                    admin: c.admin,
                    seals: c.seals,
                })
            }
            Some("seal") => {
                let (seal, leaves) = runledger_format::seals::seal_from_json(&value)?;
                Line::Seal(seal, leaves)
            }
            _ => return Err(format!("unknown record {record}")),
        };
        // As for events: only what export writes, so nothing in the line is silently dropped.
        if line.to_json() != value {
            return Err(format!(
                "the {record} record has fields that runledger does not write, or writes otherwise"
            ));
        }
        Ok(line)
    }
}

fn read<T: for<'de> Deserialize<'de>>(value: &Value, what: &str) -> Result<T, String> {
    T::deserialize(value).map_err(|e| format!("bad {what} record: {e}"))
}

#[derive(Deserialize)]
struct HeaderIn {
    format: u64,
}

#[derive(Deserialize)]
struct KeyIn {
    id: String,
    name: String,
    kind: String,
    admin: bool,
    hash: String,
    created_at: String,
    revoked_at: Option<String>,
    team: Option<String>,
}

impl KeyIn {
    fn record(self) -> Result<KeyRecord, String> {
        let time = |field: &str, s: &str| {
            parse_exact_time(s).ok_or_else(|| format!("key {}: {field} is not a time", self.id))
        };
        if self.id.is_empty() {
            return Err("a key record without an id".into());
        }
        if let Some(team) = &self.team {
            if !runledger_domain::valid_team_name(team) {
                return Err(format!("key {}: team is not a team name", self.id));
            }
        }
        Ok(KeyRecord {
            kind: KeyKind::parse(&self.kind)
                .ok_or_else(|| format!("key {}: kind {:?} is unknown", self.id, self.kind))?,
            hash: unhex32(&self.hash)
                .ok_or_else(|| format!("key {}: hash is not 64 hex digits", self.id))?,
            created_at: time("created_at", &self.created_at)?,
            revoked_at: match &self.revoked_at {
                Some(t) => Some(time("revoked_at", t)?),
                None => None,
            },
            admin: self.admin,
            name: self.name,
            id: self.id,
            team: self.team.unwrap_or_else(|| DEFAULT_TEAM.to_string()),
        })
    }
}

#[derive(Deserialize)]
struct SecretIn {
    name: String,
    value: String,
}

#[derive(Deserialize)]
struct EndIn {
    events: u64,
    keys: u64,
    secrets: u64,
    #[serde(default)]
    contents: u64,
    #[serde(default)]
    schedule_events: u64,
    #[serde(default)]
    admin: u64,
    #[serde(default)]
    seals: u64,
}

#[derive(Deserialize)]
struct ContentIn {
    sha256: String,
    size: u64,
    offset: u64,
    data: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use runledger_domain::{
        AgentConfig, CostSource, Creator, CreatorKind, Event, ExecutionUsage, FollowupMode,
        InferenceCost, McpServer, RunCreated, RunId, SourceType, StatusMessage, Timestamp, Tokens,
    };
    use runledger_format::events::event_json;
    use runledger_store as store;
    use std::collections::BTreeMap;

    use super::super::fixtures::one_of_each;

    fn text() -> impl Strategy<Value = String> {
        // Any Unicode, control characters included: JSON must carry them all.
        prop_oneof![Just(String::new()), ".{0,12}", "[a-z]{1,6}"]
    }

    fn opt_text() -> impl Strategy<Value = Option<String>> {
        proptest::option::of(text())
    }

    fn map() -> impl Strategy<Value = BTreeMap<String, String>> {
        proptest::collection::btree_map(text(), text(), 0..3)
    }

    fn mcp_server() -> impl Strategy<Value = McpServer> {
        (
            opt_text(),
            opt_text(),
            proptest::collection::vec(text(), 0..3),
            opt_text(),
            map(),
            map(),
        )
            .prop_map(|(warp_id, command, args, url, env, headers)| McpServer {
                warp_id,
                command,
                args,
                url,
                env,
                headers,
            })
    }

    fn created() -> impl Strategy<Value = Event> {
        let config = (
            opt_text(),
            opt_text(),
            opt_text(),
            opt_text(),
            opt_text(),
            proptest::collection::btree_map(text(), mcp_server(), 0..3),
        )
            .prop_map(
                |(name, model_id, base_prompt, environment_id, skill_spec, mcp_servers)| {
                    AgentConfig {
                        name,
                        model_id,
                        base_prompt,
                        environment_id,
                        skill_spec,
                        mcp_servers,
                    }
                },
            );
        (
            text(),
            text(),
            config,
            any::<bool>(),
            text(),
            text(),
            proptest::sample::select(SourceType::ALL.to_vec()),
            map(),
        )
            .prop_map(
                |(title, prompt, config, service, uid, display_name, source, metadata)| {
                    Event::Created(RunCreated {
                        title,
                        prompt,
                        config,
                        creator: Creator {
                            kind: if service {
                                CreatorKind::ServiceAccount
                            } else {
                                CreatorKind::User
                            },
                            uid,
                            display_name,
                        },
                        source,
                        metadata,
                    })
                },
            )
    }

    fn event() -> impl Strategy<Value = Event> {
        let mode = proptest::sample::select(vec![
            FollowupMode::Normal,
            FollowupMode::Plan,
            FollowupMode::Orchestrate,
        ]);
        prop_oneof![
            created(),
            any::<u32>().prop_map(|execution| Event::Started { execution }),
            (any::<u32>(), any::<u64>(), text()).prop_map(|(execution, job_id, node)| {
                Event::StartedOn {
                    execution,
                    placement: runledger_domain::Placement::Slurm { job_id, node },
                }
            }),
            (any::<u32>(), text()).prop_map(|(execution, message)| Event::Lost {
                execution,
                status: StatusMessage {
                    message,
                    error_code: Some("internal_error".into()),
                    retryable: Some(true),
                },
            }),
            (text(), mode, text()).prop_map(|(message, mode, by)| Event::FollowupReceived {
                message,
                mode,
                by
            }),
            any::<u32>().prop_map(|execution| Event::Succeeded { execution }),
            (
                any::<u32>(),
                text(),
                opt_text(),
                proptest::option::of(any::<bool>())
            )
                .prop_map(|(execution, message, error_code, retryable)| {
                    Event::Failed {
                        execution,
                        status: StatusMessage {
                            message,
                            error_code,
                            retryable,
                        },
                    }
                }),
            text().prop_map(|by| Event::Cancelled { by }),
            text().prop_map(|by| Event::SessionLinkRevoked { by }),
            (any::<u32>(), any::<u32>())
                .prop_map(|(execution, count)| Event::FollowupsDelivered { execution, count }),
            any::<u32>().prop_map(|execution| Event::Requeued { execution }),
            (any::<u32>(), execution_usage())
                .prop_map(|(execution, usage)| Event::UsageRecorded { execution, usage }),
        ]
    }

    fn execution_usage() -> impl Strategy<Value = ExecutionUsage> {
        let tokens =
            (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(input, cached_input, output)| {
                Tokens {
                    input,
                    cached_input,
                    output,
                }
            });
        let cost = (
            any::<u64>(),
            proptest::sample::select(vec![CostSource::Cli, CostSource::Prices]),
        )
            .prop_map(|(nano_usd, source)| InferenceCost { nano_usd, source });
        (
            proptest::option::of(tokens),
            opt_text(),
            proptest::option::of(cost),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(|(tokens, model, inference, cpu_ms, compute_nano_usd)| {
                ExecutionUsage {
                    tokens,
                    model,
                    inference,
                    cpu_ms,
                    compute_nano_usd,
                }
            })
    }

    fn envelope() -> impl Strategy<Value = Envelope> {
        (any::<u128>(), any::<u64>(), any::<u64>(), event()).prop_map(|(id, seq, at, event)| {
            Envelope {
                run_id: RunId(id),
                seq,
                at: Timestamp(at),
                origin: None,
                event,
            }
        })
    }

    proptest! {
        /// Every field of every variant survives export → import (MCP credential values as
        /// `***`, see `as_exported`), and the line is the same after a second export.
        #[test]
        fn an_event_line_reads_back_as_the_envelope_it_was_written_from(e in envelope()) {
            let text = event_json(&e).to_string();
            let line = Line::parse(&text).map_err(TestCaseError::fail)?;
            prop_assert_eq!(&line, &Line::Event(as_exported(e), None));
            prop_assert_eq!(line.to_json().to_string(), text);
        }

        #[test]
        fn times_read_back_exactly(ms in any::<u64>()) {
            prop_assert_eq!(parse_exact_time(&format_time(Timestamp(ms))), Some(Timestamp(ms)));
        }
    }

    /// An event as a backup holds it: MCP credential values read `***`. A run admitted since
    /// credentials are sealed stores `***` already (its values are in `sealed`, whose key only
    /// `--with-keys` carries); a legacy run's plain values are not written to a backup at all.
    fn as_exported(mut e: Envelope) -> Envelope {
        match &mut e.event {
            Event::Created(c) => runledger_store::credentials::redact(&mut c.config),
            Event::Admitted(a) => runledger_store::credentials::redact(&mut a.created.config),
            _ => {}
        }
        e
    }

    #[test]
    fn every_variant_reads_back() {
        let events = one_of_each();
        // Exhaustive, so a new variant does not compile until it is added to `one_of_each`.
        let variant = |e: &Event| match e {
            Event::Created(_) => 0,
            Event::Started { .. } => 1,
            Event::FollowupReceived { .. } => 2,
            Event::Succeeded { .. } => 3,
            Event::Failed { .. } => 4,
            Event::Cancelled { .. } => 5,
            Event::FollowupsDelivered { .. } => 6,
            Event::Requeued { .. } => 7,
            Event::UsageRecorded { .. } => 8,
            Event::Admitted(_) => 9,
            Event::ArtifactReported { .. } => 10,
            Event::Attached { .. } => 11,
            Event::Scheduled { .. } => 12,
            Event::StartedOn { .. } => 13,
            Event::Lost { .. } => 14,
            Event::SessionLinkRevoked { .. } => 15,
            Event::Derived(_) => 16,
            Event::Provenance { .. } => 17,
            Event::Changes { .. } => 18,
        };
        let covered: Vec<_> = events.iter().map(variant).collect();
        assert_eq!(
            covered,
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10, 11, 12, 13, 14, 15, 16, 16, 17, 18]
        );
        for (seq, event) in events.into_iter().enumerate() {
            let envelope = Envelope {
                run_id: RunId::new(Timestamp(1_763_768_489_123), 77),
                seq: seq as u64,
                at: Timestamp(1_763_768_489_123 + seq as u64),
                origin: None,
                event,
            };
            let line = Line::parse(&event_json(&envelope).to_string());
            assert_eq!(line, Ok(Line::Event(as_exported(envelope), None)));
        }
    }

    /// A legacy `Created` stored its MCP credentials in plain text; its export shows the
    /// names only, so a backup never carries a usable credential.
    #[test]
    fn a_legacy_runs_credentials_are_not_exported() {
        let created = one_of_each().remove(0);
        let Event::Created(c) = &created else {
            panic!("one_of_each starts with a Created")
        };
        assert_eq!(c.config.mcp_servers["fs"].env["TOKEN"], "t");
        let envelope = Envelope {
            run_id: RunId::new(Timestamp(1_763_768_489_123), 77),
            seq: 0,
            at: Timestamp(1_763_768_489_123),
            origin: None,
            event: created,
        };
        let line = event_json(&envelope);
        assert_eq!(
            line["data"]["config"]["mcp_servers"]["fs"]["env"],
            json!({"TOKEN": "***"})
        );
        let Ok(Line::Event(back, _)) = Line::parse(&line.to_string()) else {
            panic!("the line reads back")
        };
        let Event::Created(c) = back.event else {
            panic!("as a Created")
        };
        assert_eq!(c.config.mcp_servers["fs"].env["TOKEN"], "***");
    }

    #[test]
    fn non_canonical_lines_are_refused_naming_the_field() {
        let e = Envelope {
            run_id: RunId::new(Timestamp(1_763_768_489_123), 5),
            seq: 0,
            at: Timestamp(1_763_768_489_123),
            origin: None,
            event: Event::Failed {
                execution: 1,
                status: StatusMessage {
                    message: "exit 3".into(),
                    error_code: None,
                    retryable: Some(false),
                },
            },
        };
        let good = event_json(&e);
        let mut extra = good.clone();
        extra["data"]["oops"] = json!(1);
        let mut null = good.clone();
        null["data"]["status_message"]["error_code"] = Value::Null;
        let mut offset = good.clone();
        offset["at"] = json!("2025-11-21T23:41:29.123+00:00");
        let mut lower = good.clone();
        lower["run_id"] = json!(e.run_id.to_string().to_lowercase());
        for (bad, needle) in [
            (extra, "data.oops"),
            (null, "data.status_message.error_code"),
            (offset, "at"),
            (lower, "run_id"),
        ] {
            let err = Line::parse(&bad.to_string()).expect_err("refused");
            assert!(err.contains(needle), "{err}");
        }
        assert!(Line::parse("{\"run_id\":")
            .expect_err("refused")
            .starts_with("not JSON"));
        assert!(Line::parse(r#"{"record":"keys"}"#)
            .expect_err("refused")
            .contains("unknown record"));
    }

    #[test]
    fn key_secret_and_frame_lines_round_trip() {
        let key = KeyRecord {
            id: "01KAKZ0000000000000000000A".into(),
            name: "ci \"bot\"".into(),
            kind: KeyKind::Agent,
            admin: false,
            hash: [0xab; 32],
            created_at: Timestamp(1_763_768_489_123),
            revoked_at: Some(Timestamp(1_763_768_500_000)),
            team: "infra".into(),
        };
        for line in [
            Line::Header { format: FORMAT },
            Line::Key(key.clone()),
            Line::Key(KeyRecord {
                revoked_at: None,
                admin: true,
                ..key
            }),
            Line::Secret {
                name: store::SESSION_SECRET.into(),
                value: [7; 32],
            },
            Line::End(Counts {
                events: 3,
                keys: 2,
                secrets: 1,
                contents: 0,
                schedule_events: 0,
                admin: 0,
                seals: 0,
            }),
            Line::End(Counts {
                events: 3,
                keys: 2,
                secrets: 1,
                contents: 4,
                schedule_events: 7,
                admin: 5,
                seals: 0,
            }),
            Line::Content {
                sha256: [9; 32],
                size: 10,
                offset: 4,
                data: vec![0, 255, 1],
            },
            Line::Content {
                sha256: [0; 32],
                size: 0,
                offset: 0,
                data: Vec::new(),
            },
        ] {
            assert_eq!(Line::parse(&line.to_json().to_string()), Ok(line));
        }
        let upper = r#"{"record":"secret","name":"session_secret","value":"ABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABAB"}"#;
        let err = Line::parse(upper).expect_err("not as written");
        assert!(
            !err.contains("ABAB"),
            "an error must not quote a secret: {err}"
        );
    }
}
