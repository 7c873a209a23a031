//! The fields a create-run or schedule body may name. A field that neither runledger nor the
//! Oz API document defines (nor one of its official clients sends) is refused with a `400`
//! naming it, before the body is read as its type: serde would drop it silently, and a typo
//! then changes what runs — a schedule sent with `config` instead of `agent_config` ran in the
//! default environment, with that environment's secrets and sandbox. Fields the document or a
//! client defines but runledger does not use are still accepted (and ignored, or refused by
//! `validate` with their own documented answer); this module only knows names, never values.
//!
//! The agent config object (`config` of a run, `agent_config` of a schedule) is checked too,
//! one level down, for the same reason: `enviroment_id` would otherwise run in the default
//! environment. Deeper objects (an MCP server, `harness`, …) are typed or ignored wholesale.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::problem::ApiError;

/// The fields of a run's create (`RunAgentRequest`).
pub const RUN: Known = Known {
    what: "a run's create",
    used: &[
        "prompt",
        "skill",
        "config",
        "title",
        "metadata",
        "attachments",
        "parent_run_id",
    ],
    // The Oz document's `team`, `agent_identity_uid`, `conversation_id`, `interactive`; the Python client's `mode` and `on_behalf_of`; the TypeScript client's
    // `images` (the older name of attachments).
    accepted: &[
        "team",
        "agent_identity_uid",
        "conversation_id",
        "interactive",
        "mode",
        "on_behalf_of",
        "images",
    ],
    nested: Some(("config", &CONFIG)),
};

/// The fields of a schedule's create (`CreateScheduledAgentRequest`).
pub const SCHEDULE_CREATE: Known = Known {
    what: "a schedule",
    used: &[
        "name",
        "cron_schedule",
        "prompt",
        "enabled",
        "agent_config",
        "team",
        "time_zone",
        "metadata",
        "mode",
        "agent_uid",
    ],
    accepted: &[],
    nested: Some(("agent_config", &CONFIG)),
};

/// The fields of a schedule's update (`UpdateScheduledAgentRequest`): a create's but `team`,
/// which neither the document's update nor a client's defines.
pub const SCHEDULE_UPDATE: Known = Known {
    what: "a schedule's update",
    used: &[
        "name",
        "cron_schedule",
        "prompt",
        "enabled",
        "agent_config",
        "time_zone",
        "metadata",
        "mode",
        "agent_uid",
    ],
    accepted: &[],
    nested: Some(("agent_config", &CONFIG)),
};

/// The fields of an agent config (`AmbientAgentConfig`).
const CONFIG: Known = Known {
    what: "an agent config",
    used: &[
        "name",
        "model_id",
        "base_prompt",
        "environment_id",
        "skill_spec",
        "mcp_servers",
    ],
    // The Oz document's `computer_use_enabled`, `idle_timeout_minutes`, `worker_host`,
    // `harness`, `harness_auth_secrets`; the Python client's (0.15) `credential_strategy`,
    // `inference_providers`, `memory_stores`, `runner_id`, `session_sharing`, `skills`.
    accepted: &[
        "computer_use_enabled",
        "idle_timeout_minutes",
        "worker_host",
        "harness",
        "harness_auth_secrets",
        "credential_strategy",
        "inference_providers",
        "memory_stores",
        "runner_id",
        "session_sharing",
        "skills",
    ],
    nested: None,
};

/// The fields one kind of body may name.
pub struct Known {
    /// What the body is, for the message.
    what: &'static str,
    /// Fields runledger reads.
    used: &'static [&'static str],
    /// Fields the Oz document or an official client defines that runledger accepts unread.
    accepted: &'static [&'static str],
    /// The one field whose object is checked as well, and its fields.
    nested: Option<(&'static str, &'static Known)>,
}

impl Known {
    fn knows(&self, field: &str) -> bool {
        self.used.contains(&field) || self.accepted.contains(&field)
    }
}

/// Refuses `body` (a `400` naming the field) when it names a field `known` does not define.
/// A body that is not a JSON object (or whose nested config is not an object) passes: reading
/// it as its type refuses it with the precise error.
pub fn check(body: &[u8], known: &'static Known) -> Result<(), ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let Ok(found) = (Fields { known }).deserialize(&mut de) else {
        return Ok(());
    };
    match found {
        None => Ok(()),
        Some((path, within)) => Err(ApiError::bad_request(format!(
            "unknown field {path:?}: neither runledger nor the Oz API defines it in {}; the \
             fields runledger reads there are {}",
            within.what,
            within.used.join(", ")
        ))),
    }
}

/// The first unknown field of an object, as a path (`config.enviroment_id`), with the
/// `Known` it is missing from; `None` when every field is known.
type Unknown = Option<(String, &'static Known)>;

struct Fields {
    known: &'static Known,
}

impl<'de> DeserializeSeed<'de> for Fields {
    type Value = Unknown;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Unknown, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Fields {
    type Value = Unknown;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unknown, A::Error> {
        let mut unknown: Unknown = None;
        // Every entry is read, even after an unknown one: a body that is not valid JSON to
        // its end is refused as malformed, not for a field.
        while let Some(field) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match self.known.nested {
                Some((name, inner)) if field == name => {
                    let found = map.next_value_seed(Nested { known: inner })?;
                    if unknown.is_none() {
                        unknown = found.map(|(path, within)| (format!("{name}.{path}"), within));
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    if unknown.is_none() && !self.known.knows(&field) {
                        unknown = Some((field.into_owned(), self.known));
                    }
                }
            }
        }
        Ok(unknown)
    }
}

/// The nested config: an object is checked, `null` (an absent config) passes.
struct Nested {
    known: &'static Known,
}

impl<'de> DeserializeSeed<'de> for Nested {
    type Value = Unknown;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Unknown, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Nested {
    type Value = Unknown;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object or null")
    }

    fn visit_none<E>(self) -> Result<Unknown, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Unknown, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Unknown, D::Error> {
        Fields { known: self.known }.deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str, known: &'static Known) -> Option<String> {
        check(body.as_bytes(), known).err().map(|e| e.detail)
    }

    #[test]
    fn a_schedule_sent_with_config_is_refused_naming_config() {
        let body =
            r#"{"name":"n","cron_schedule":"@daily","prompt":"p","config":{"environment_id":"x"}}"#;
        for known in [&SCHEDULE_CREATE, &SCHEDULE_UPDATE] {
            let detail = refused(body, known).expect("refused");
            assert!(detail.starts_with("unknown field \"config\":"), "{detail}");
            assert!(detail.contains("agent_config"), "{detail}");
        }
    }

    #[test]
    fn every_field_of_the_document_and_the_clients_passes() {
        let run = r#"{"prompt":"p","skill":"o/r:s","title":"t","metadata":{},"attachments":[],
            "team":true,"agent_identity_uid":"a","conversation_id":"c","parent_run_id":"r",
            "interactive":false,"mode":"normal","on_behalf_of":"u","images":[],
            "config":{"name":"n","model_id":"m","base_prompt":"b","environment_id":"e",
              "skill_spec":"o/r:s","mcp_servers":{},"computer_use_enabled":true,
              "idle_timeout_minutes":5,"worker_host":"w","harness":{"type":"claude"},
              "harness_auth_secrets":{},"credential_strategy":null,"inference_providers":{},
              "memory_stores":[],"runner_id":"r","session_sharing":{},"skills":[]}}"#;
        assert_eq!(refused(run, &RUN), None);
        let schedule = r#"{"name":"n","cron_schedule":"@daily","prompt":"p","enabled":true,
            "agent_config":{"environment_id":"e"},"time_zone":"UTC","metadata":{},
            "mode":"normal","agent_uid":"a"}"#;
        assert_eq!(refused(schedule, &SCHEDULE_UPDATE), None);
        let create = format!("{}, \"team\": true}}", schedule.trim_end_matches('}'));
        assert_eq!(refused(&create, &SCHEDULE_CREATE), None);
        // `team` is the document's on a create only.
        let detail = refused(&create, &SCHEDULE_UPDATE).expect("refused");
        assert!(detail.starts_with("unknown field \"team\""), "{detail}");
    }

    #[test]
    fn an_unknown_field_of_the_config_is_named_with_its_path() {
        let detail =
            refused(r#"{"prompt":"p","config":{"enviroment_id":"x"}}"#, &RUN).expect("refused");
        assert!(
            detail.starts_with("unknown field \"config.enviroment_id\""),
            "{detail}"
        );
        assert!(detail.contains("an agent config"), "{detail}");
        let detail = refused(
            r#"{"agent_config":{"modelid":"m"},"name":"n"}"#,
            &SCHEDULE_CREATE,
        )
        .expect("refused");
        assert!(
            detail.starts_with("unknown field \"agent_config.modelid\""),
            "{detail}"
        );
        // Deeper objects are not looked into: an MCP server's fields are typed by serde.
        let deep = r#"{"prompt":"p","config":{"mcp_servers":{"x":{"anything":1}}}}"#;
        assert_eq!(refused(deep, &RUN), None);
    }

    #[test]
    fn the_first_unknown_field_is_named_and_escaped_names_are_read() {
        let detail =
            refused(r#"{"prompt":"p","surprise":{"a":1},"later":2}"#, &RUN).expect("refused");
        assert!(detail.starts_with("unknown field \"surprise\""), "{detail}");
        // A known name spelt with an escape is still that name.
        assert_eq!(refused(r#"{"pro\u006dpt":"p"}"#, &RUN), None);
        let detail = refused(r#"{"a\nb":1}"#, &RUN).expect("refused");
        assert!(detail.starts_with("unknown field \"a\\nb\""), "{detail}");
    }

    #[test]
    fn what_is_not_an_object_is_left_to_the_typed_reading() {
        for body in [
            "",
            "[]",
            "1",
            "{\"prompt\":",
            "{\"config\": 5, \"x\": 1}",
            "null",
        ] {
            assert_eq!(refused(body, &RUN), None, "{body}");
        }
        assert_eq!(refused(r#"{"prompt":"p","config":null}"#, &RUN), None);
    }
}
