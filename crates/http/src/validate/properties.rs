//! Property tests: any input is parsed or refused with a 400 (never a panic, never another
//! status), and what a valid request says comes back unchanged in the parsed value. Test code
//! only.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::problem::ApiError;
use crate::wire::{format_time, FOREIGN_STATES, SORT_BY, SORT_ORDER};
use runledger_config::{Config, Environment, Overrides};
use runledger_domain::{Creator, CreatorKind, FollowupMode, RunState, SourceType, Timestamp};
use runledger_runs::query::Query;

fn config() -> Config {
    let mut config = Config::load(None, &Overrides::default()).expect("defaults");
    config.environments.push(Environment {
        id: "other".into(),
        model_id: "other-model".into(),
        ..Environment::demo()
    });
    config
}

fn creator() -> Creator {
    Creator {
        kind: CreatorKind::User,
        uid: "key".into(),
        display_name: "key".into(),
    }
}

fn refused_with_400<T>(result: Result<T, ApiError>) -> Result<(), TestCaseError> {
    if let Err(e) = result {
        prop_assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}", e);
    }
    Ok(())
}

/// A non-blank string without NUL.
fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[^\\x00]{{0,{max}}}"))
        .expect("regex")
        .prop_filter("blank", |s| !s.trim().is_empty())
}

/// A short string without NUL (possibly blank).
fn short() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[^\\x00]{1,24}").expect("regex")
}

fn metadata_key() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[A-Za-z0-9._-]{1,64}").expect("regex")
}

fn metadata_value() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[^\\x00]{0,60}").expect("regex")
}

/// Arbitrary JSON whose object keys are mostly the fields the parsers read, so the values
/// reach the checks behind the type checks.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        4 => proptest::sample::select(vec![
            "prompt", "skill", "config", "title", "metadata", "name", "model_id",
            "base_prompt", "environment_id", "skill_spec", "mcp_servers", "warp_id",
            "command", "args", "url", "env", "headers", "message", "mode", "kind", "admin",
        ])
        .prop_map(String::from),
        1 => ".{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,30}".prop_map(Value::from),
        Just(Value::from("demo")),
        Just(Value::from("acme/tools:deploy")),
        Just(Value::from("https://mcp.example.com")),
    ];
    leaf.prop_recursive(4, 48, 8, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
struct QuerySpec {
    states: Vec<RunState>,
    foreign: Option<&'static str>,
    name: Option<String>,
    model_id: Option<String>,
    creator: Option<String>,
    environment_id: Option<String>,
    source: Option<SourceType>,
    skill_spec: Option<String>,
    created_after: Option<u64>,
    created_before: Option<u64>,
    updated_after: Option<u64>,
    q: Option<String>,
    metadata: BTreeMap<String, String>,
    sort: usize,
    order: usize,
    limit: usize,
    artifact_type: Option<&'static str>,
    /// A schedule id (a ULID of any time and randomness).
    schedule_id: Option<runledger_domain::RunId>,
}

fn query_spec() -> impl Strategy<Value = QuerySpec> {
    // Up to the last millisecond of 9999, the last year RFC 3339 can write.
    let ms = || proptest::option::of(0u64..=253_402_300_799_999);
    (
        (
            proptest::sample::subsequence(RunState::ALL.to_vec(), 0..=5),
            proptest::option::of(proptest::sample::select(FOREIGN_STATES.to_vec())),
            proptest::option::of(short()),
            proptest::option::of(short()),
            proptest::option::of(short()),
            proptest::option::of(short()),
            proptest::option::of(proptest::sample::select(SourceType::ALL.to_vec())),
            proptest::option::of(short()),
        ),
        (
            ms(),
            ms(),
            ms(),
            proptest::option::of(short()),
            proptest::collection::btree_map(metadata_key(), metadata_value(), 0..=5),
            0..SORT_BY.len(),
            0..SORT_ORDER.len(),
            1usize..=500,
            proptest::option::of(proptest::sample::select(
                runledger_domain::ArtifactKind::TYPE_NAMES.to_vec(),
            )),
            proptest::option::of(any::<u128>().prop_map(runledger_domain::RunId)),
        ),
    )
        .prop_map(
            |(
                (states, foreign, name, model_id, creator, environment_id, source, skill_spec),
                (
                    created_after,
                    created_before,
                    updated_after,
                    q,
                    metadata,
                    sort,
                    order,
                    limit,
                    artifact_type,
                    schedule_id,
                ),
            )| QuerySpec {
                states,
                foreign,
                name,
                model_id,
                creator,
                environment_id,
                source,
                skill_spec,
                created_after,
                created_before,
                updated_after,
                q,
                metadata,
                sort,
                order,
                limit,
                artifact_type,
                schedule_id,
            },
        )
}

fn query_string(spec: &QuerySpec) -> String {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| pairs.push((k.to_string(), v));
    for s in &spec.states {
        add("state", s.as_str().into());
    }
    if let Some(f) = spec.foreign {
        add("state", f.into());
    }
    let strings = [
        ("config_name", &spec.name),
        ("model_id", &spec.model_id),
        ("creator", &spec.creator),
        ("environment_id", &spec.environment_id),
        ("skill_spec", &spec.skill_spec),
        ("q", &spec.q),
    ];
    for (k, v) in strings {
        if let Some(v) = v {
            add(k, v.clone());
        }
    }
    if let Some(s) = spec.source {
        add("source", s.as_str().into());
    }
    if let Some(t) = spec.artifact_type {
        add("artifact_type", t.into());
    }
    if let Some(id) = spec.schedule_id {
        add("schedule_id", id.to_string());
    }
    let times = [
        ("created_after", spec.created_after),
        ("created_before", spec.created_before),
        ("updated_after", spec.updated_after),
    ];
    for (k, v) in times {
        if let Some(ms) = v {
            add(k, format_time(Timestamp(ms)));
        }
    }
    for (k, v) in &spec.metadata {
        add(&format!("metadata[{k}]"), v.clone());
    }
    add("sort_by", SORT_BY[spec.sort].0.into());
    add("sort_order", SORT_ORDER[spec.order].0.into());
    add("limit", spec.limit.to_string());
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&pairs)
        .finish()
}

proptest! {
    #[test]
    fn any_query_string_is_parsed_or_refused(raw in ".{0,200}") {
        refused_with_400(list_query(&raw))?;
    }

    #[test]
    fn known_parameters_with_any_values_are_parsed_or_refused(
        pairs in proptest::collection::vec(
            (
                prop_oneof![
                    3 => proptest::sample::select(vec![
                        "limit", "cursor", "sort_by", "sort_order", "state", "name",
                        "config_name", "model_id", "creator", "source", "environment_id",
                        "created_after", "created_before", "updated_after", "q", "skill",
                        "skill_spec", "schedule_id", "execution_location", "artifact_type", "metadata[k]",
                        "metadata[]", "metadata[a b]", "metadata[",
                    ])
                    .prop_map(String::from),
                    1 => ".{0,12}",
                ],
                prop_oneof![".{0,40}", "[0-9+-]{1,22}", "[0-9T:.Z+-]{10,35}"],
            ),
            0..12,
        )
    ) {
        let raw = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&pairs)
            .finish();
        refused_with_400(list_query(&raw))?;
    }

    #[test]
    fn valid_queries_round_trip(spec in query_spec()) {
        let raw = query_string(&spec);
        let q = list_query(&raw).map_err(|e| TestCaseError::fail(format!("{raw}: {e}")))?;
        let mut states = spec.states.clone();
        states.sort();
        let mut metadata: Vec<_> = spec.metadata.clone().into_iter().collect();
        metadata.sort();
        let expected = Query {
            matches_nothing: spec.foreign.is_some() && spec.states.is_empty(),
            states,
            name: spec.name.clone(),
            model_id: spec.model_id.clone(),
            creator: spec.creator.clone(),
            environment_id: spec.environment_id.clone(),
            source: spec.source,
            skill_spec: spec.skill_spec.clone(),
            created_after: spec.created_after.map(Timestamp),
            created_before: spec.created_before.map(Timestamp),
            updated_after: spec.updated_after.map(Timestamp),
            q: spec.q.clone(),
            metadata,
            sort_by: SORT_BY[spec.sort].1,
            order: SORT_ORDER[spec.order].1,
            limit: spec.limit,
            cursor: None,
            // Set by the handler from the key, never from the query string.
            team: String::new(),
            every_team: false,
            artifact_type: spec.artifact_type,
            schedule_id: spec.schedule_id.map(|id| id.to_string()),
            rerun_of: None,
            ancestor_run_id: None,
            parent_run_id: None,
        };
        prop_assert_eq!(q, expected);
    }

    #[test]
    fn any_body_is_parsed_or_refused(body in proptest::collection::vec(any::<u8>(), 0..200)) {
        refused_with_400(create(&body, &config(), creator()))?;
        refused_with_400(followup(&body))?;
    }

    #[test]
    fn any_json_is_parsed_or_refused(value in json_value()) {
        let body = serde_json::to_vec(&value).expect("json");
        refused_with_400(create(&body, &config(), creator()))?;
        refused_with_400(followup(&body))?;
    }

    #[test]
    fn valid_creates_round_trip(
        prompt in text(300),
        title in proptest::option::of(text(40)),
        metadata in proptest::collection::btree_map(metadata_key(), metadata_value(), 0..=20),
        environment in proptest::option::of(proptest::sample::select(vec!["demo", "other"])),
        model_id in proptest::option::of(short()),
        name in proptest::option::of(short()),
        base_prompt in proptest::option::of(short()),
        servers in proptest::collection::btree_map(
            "[a-z0-9_-]{1,64}",
            (0usize..3, "[a-z0-9./-]{1,40}"),
            0..=16,
        ),
    ) {
        let mut config_in = serde_json::Map::new();
        for (k, v) in [
            ("environment_id", environment.map(String::from)),
            ("model_id", model_id.clone()),
            ("name", name.clone()),
            ("base_prompt", base_prompt.clone()),
        ] {
            if let Some(v) = v {
                config_in.insert(k.into(), v.into());
            }
        }
        let field = |kind: usize| ["warp_id", "command", "url"][kind];
        let value = |kind: usize, v: &str| if kind == 2 { format!("https://{v}") } else { v.to_string() };
        config_in.insert(
            "mcp_servers".into(),
            servers
                .iter()
                .map(|(n, (kind, v))| (n.clone(), json!({ field(*kind): value(*kind, v) })))
                .collect::<serde_json::Map<_, _>>()
                .into(),
        );
        let mut body = json!({"prompt": prompt, "metadata": metadata, "config": config_in});
        if let Some(t) = &title {
            body["title"] = t.clone().into();
        }
        let body = serde_json::to_vec(&body).expect("json");
        let (created, uploads, _) = create(&body, &config(), creator())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(uploads.is_empty());
        let environment = environment.unwrap_or("demo");
        prop_assert_eq!(&created.prompt, &prompt);
        prop_assert_eq!(created.title, title.unwrap_or_else(|| title_from(&prompt)));
        prop_assert_eq!(created.metadata, metadata);
        prop_assert_eq!(created.config.environment_id.as_deref(), Some(environment));
        let default_model = if environment == "demo" { "demo" } else { "other-model" };
        prop_assert_eq!(
            created.config.model_id.as_deref(),
            Some(model_id.as_deref().unwrap_or(default_model))
        );
        prop_assert_eq!(created.config.name, name);
        prop_assert_eq!(created.config.base_prompt, base_prompt);
        prop_assert_eq!(created.config.mcp_servers.len(), servers.len());
        for (n, (kind, v)) in &servers {
            let s = &created.config.mcp_servers[n];
            let got = [&s.warp_id, &s.command, &s.url][*kind];
            prop_assert_eq!(got.clone(), Some(value(*kind, v)));
        }
    }

    #[test]
    fn valid_followups_round_trip(
        message in text(300),
        mode in proptest::option::of(proptest::sample::select(FollowupMode::ALL.to_vec())),
    ) {
        let mut body = json!({"message": message});
        if let Some(m) = mode {
            body["mode"] = m.as_str().into();
        }
        let body = serde_json::to_vec(&body).expect("json");
        let (got, got_mode) = followup(&body).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, message);
        prop_assert_eq!(got_mode, mode.unwrap_or_default());
    }
}
