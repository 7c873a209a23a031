//! Validation of request bodies and query strings into domain values, with error messages that
//! name the offending field. The limits bound the size of every stored event and so of each
//! run's state, which keeps the log, the read index and memory per run small.

use std::collections::BTreeMap;

use super::problem::ApiError;
use super::wire::{parse_time, AgentConfigIn, FollowupRequest, McpServerIn, RunAgentRequest};
use crate::config::Config;
use crate::domain::{
    AgentConfig, Creator, FollowupMode, McpServer, RunCreated, RunState, SourceType, Timestamp,
};
use crate::projection::{Cursor, Order, Query, SortBy};

pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
pub const MAX_BASE_PROMPT_BYTES: usize = 16 * 1024;
pub const MAX_TITLE_CHARS: usize = 256;
pub const MAX_FIELD_BYTES: usize = 256;
pub const MAX_MCP_SERVERS: usize = 16;
pub const MAX_MCP_VALUE_BYTES: usize = 2048;
pub const MAX_FOLLOWUP_BYTES: usize = 64 * 1024;
pub const MAX_METADATA_KEYS: usize = 20;
pub const MAX_METADATA_FILTERS: usize = 5;
const TITLE_FROM_PROMPT_CHARS: usize = 80;

/// `sort_by` values of the list query. One table serves the parser and the OpenAPI document.
pub const SORT_BY: [(&str, SortBy); 3] = [
    ("updated_at", SortBy::UpdatedAt),
    ("created_at", SortBy::CreatedAt),
    ("title", SortBy::Title),
];

/// `sort_order` values of the list query.
pub const SORT_ORDER: [(&str, Order); 2] = [("desc", Order::Desc), ("asc", Order::Asc)];

/// States of the hosted service that runledger runs never take. As `state` filters they are
/// accepted and match nothing, so a client written for the hosted service gets an empty list
/// rather than a 400.
pub const FOREIGN_STATES: [&str; 4] = ["PENDING", "CLAIMED", "BLOCKED", "ERROR"];

/// List filters of the hosted service that name things runledger runs never have (schedules,
/// artifacts, parent runs, automations): with any of them, whatever its value, nothing matches.
pub const MATCH_NOTHING_PARAMS: [&str; 5] = [
    "schedule_id",
    "ancestor_run_id",
    "artifact_type",
    "factory_uid",
    "automation_id",
];

fn check_len(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max {
        return Err(ApiError::bad_request(format!(
            "{field} is longer than {max} bytes"
        )));
    }
    // Values reach agents as environment variables and arguments, which cannot hold NUL.
    if value.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "{field} must not contain NUL characters"
        )));
    }
    Ok(())
}

fn short_field(field: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        Some(v) if v.is_empty() => Err(ApiError::bad_request(format!("{field} must not be empty"))),
        Some(v) => {
            check_len(field, &v, MAX_FIELD_BYTES)?;
            Ok(Some(v))
        }
        None => Ok(None),
    }
}

/// The skill's name, if `spec` is `owner/repo:skill-name` or `owner/repo:path/to/SKILL.md`.
pub fn skill_name(spec: &str) -> Option<String> {
    let (repo, skill) = spec.split_once(':')?;
    let (owner, name) = repo.split_once('/')?;
    let part_ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    if !part_ok(owner)
        || !part_ok(name)
        || skill.is_empty()
        || skill.chars().any(char::is_whitespace)
    {
        return None;
    }
    if let Some(dir) = skill.strip_suffix("SKILL.md") {
        let dir = dir.trim_end_matches('/');
        if dir.split('/').any(|seg| seg == "..") {
            return None;
        }
        // `owner/repo:SKILL.md` names the repository's own skill.
        return Some(
            dir.rsplit('/')
                .next()
                .filter(|s| !s.is_empty())
                .unwrap_or(name)
                .to_string(),
        );
    }
    skill
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        .then(|| skill.to_string())
}

fn mcp_server(name: &str, s: McpServerIn) -> Result<McpServer, ApiError> {
    let field = format!("config.mcp_servers.{name}");
    let set = [s.warp_id.is_some(), s.command.is_some(), s.url.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if set != 1 {
        return Err(ApiError::bad_request(format!(
            "{field} must have exactly one of warp_id, command or url"
        )));
    }
    for (what, v) in [
        ("command", &s.command),
        ("url", &s.url),
        ("warp_id", &s.warp_id),
    ] {
        if let Some(v) = v {
            check_len(&format!("{field}.{what}"), v, MAX_MCP_VALUE_BYTES)?;
        }
    }
    let args_len: usize = s.args.iter().flatten().map(String::len).sum();
    let maps = s.env.iter().chain(s.headers.iter()).flatten();
    let maps_len: usize = maps.map(|(k, v)| k.len() + v.len()).sum();
    if args_len + maps_len > MAX_MCP_VALUE_BYTES * 4 {
        return Err(ApiError::bad_request(format!(
            "{field}: args, env and headers together exceed {} bytes",
            MAX_MCP_VALUE_BYTES * 4
        )));
    }
    if let Some(url) = &s.url {
        let ok = (url.starts_with("https://") || url.starts_with("http://"))
            && url.len() > "https://".len()
            && !url.chars().any(char::is_whitespace);
        if !ok {
            return Err(ApiError::bad_request(format!(
                "{field}.url must be an http(s) URL"
            )));
        }
    }
    for (what, v) in [("warp_id", &s.warp_id), ("command", &s.command)] {
        if v.as_deref() == Some("") {
            return Err(ApiError::bad_request(format!(
                "{field}.{what} must not be empty"
            )));
        }
    }
    Ok(McpServer {
        warp_id: s.warp_id,
        command: s.command,
        args: s.args.unwrap_or_default(),
        url: s.url,
        env: s.env.unwrap_or_default(),
        headers: s.headers.unwrap_or_default(),
    })
}

fn resolve_config(
    input: Option<AgentConfigIn>,
    skill: Option<String>,
    config: &Config,
) -> Result<AgentConfig, ApiError> {
    let input = input.unwrap_or(AgentConfigIn {
        name: None,
        model_id: None,
        base_prompt: None,
        environment_id: None,
        skill_spec: None,
        mcp_servers: None,
    });
    // The top-level `skill` takes precedence over `config.skill_spec` (OpenAPI).
    let (skill_field, skill_spec) = match skill {
        Some(s) if s.len() > MAX_FIELD_BYTES => {
            return Err(ApiError::bad_request(format!(
                "skill is longer than {MAX_FIELD_BYTES} bytes"
            )))
        }
        Some(s) => ("skill", Some(s)),
        None => (
            "config.skill_spec",
            short_field("config.skill_spec", input.skill_spec)?,
        ),
    };
    let skill_named = match &skill_spec {
        Some(spec) => Some(skill_name(spec).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{skill_field} must be owner/repo:skill-name or owner/repo:path/to/SKILL.md"
            ))
        })?),
        None => None,
    };
    let environment = match short_field("config.environment_id", input.environment_id)? {
        Some(id) => config.environment(&id).ok_or_else(|| {
            ApiError::bad_request(format!(
                "config.environment_id: no environment named {id:?} is configured"
            ))
        })?,
        None => config.default_environment(),
    };
    if let Some(base) = &input.base_prompt {
        check_len("config.base_prompt", base, MAX_BASE_PROMPT_BYTES)?;
    }
    let servers = input.mcp_servers.unwrap_or_default();
    if servers.len() > MAX_MCP_SERVERS {
        return Err(ApiError::bad_request(format!(
            "config.mcp_servers has more than {MAX_MCP_SERVERS} entries"
        )));
    }
    let mut mcp_servers = BTreeMap::new();
    for (name, server) in servers {
        if name.is_empty() || name.len() > 64 {
            return Err(ApiError::bad_request(
                "config.mcp_servers names must be 1-64 bytes",
            ));
        }
        let server = mcp_server(&name, server)?;
        mcp_servers.insert(name, server);
    }
    Ok(AgentConfig {
        name: short_field("config.name", input.name)?.or(skill_named),
        model_id: Some(
            short_field("config.model_id", input.model_id)?
                .unwrap_or_else(|| environment.model_id.clone()),
        ),
        base_prompt: input.base_prompt,
        environment_id: Some(environment.id.clone()),
        skill_spec,
        mcp_servers,
    })
}

pub fn metadata(
    input: Option<BTreeMap<String, String>>,
) -> Result<BTreeMap<String, String>, ApiError> {
    let input = input.unwrap_or_default();
    if input.len() > MAX_METADATA_KEYS {
        return Err(ApiError::bad_request(format!(
            "metadata has more than {MAX_METADATA_KEYS} keys"
        )));
    }
    for (k, v) in &input {
        metadata_pair(k, v)?;
    }
    Ok(input)
}

fn metadata_pair(k: &str, v: &str) -> Result<(), ApiError> {
    if k.is_empty()
        || k.len() > 64
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(ApiError::bad_request(format!(
            "metadata key {k:?} must be 1-64 characters of [a-zA-Z0-9._-]"
        )));
    }
    if v.len() > 256 || v.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "metadata value of {k:?} must be at most 256 bytes without NUL"
        )));
    }
    Ok(())
}

/// A title from the prompt's first non-empty line, shortened at a character boundary.
pub fn title_from(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= TITLE_FROM_PROMPT_CHARS {
        return line.to_string();
    }
    let cut: String = line.chars().take(TITLE_FROM_PROMPT_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// Validates a create request into the `Created` event's payload.
pub fn create(body: &[u8], config: &Config, creator: Creator) -> Result<RunCreated, ApiError> {
    let request: RunAgentRequest = parse_json(body)?;
    let prompt = request.prompt.unwrap_or_default();
    check_len("prompt", &prompt, MAX_PROMPT_BYTES)?;
    let has_skill = request.skill.is_some()
        || request
            .config
            .as_ref()
            .is_some_and(|c| c.skill_spec.is_some());
    if prompt.trim().is_empty() && !has_skill {
        return Err(ApiError::bad_request(
            "prompt is required (or a skill to run)",
        ));
    }
    let config = resolve_config(request.config, request.skill, config)?;
    let title = match request.title {
        Some(t) if t.trim().is_empty() => {
            return Err(ApiError::bad_request("title must not be empty"))
        }
        Some(t) if t.contains('\0') => {
            return Err(ApiError::bad_request(
                "title must not contain NUL characters",
            ))
        }
        Some(t) if t.chars().count() > MAX_TITLE_CHARS => {
            return Err(ApiError::bad_request(format!(
                "title is longer than {MAX_TITLE_CHARS} characters"
            )))
        }
        Some(t) => t,
        None if !prompt.trim().is_empty() => title_from(&prompt),
        None => config.name.clone().unwrap_or_else(|| "Skill run".into()),
    };
    Ok(RunCreated {
        title,
        prompt,
        config,
        creator,
        source: SourceType::Api,
        metadata: metadata(request.metadata)?,
    })
}

pub fn followup(body: &[u8]) -> Result<(String, FollowupMode), ApiError> {
    let request: FollowupRequest = parse_json(body)?;
    let message = request.message.unwrap_or_default();
    if message.trim().is_empty() {
        return Err(ApiError::bad_request(
            "message is required and must not be empty",
        ));
    }
    check_len("message", &message, MAX_FOLLOWUP_BYTES)?;
    let mode = match request.mode.as_deref() {
        None => FollowupMode::Normal,
        Some(m) => FollowupMode::parse(m).ok_or_else(|| {
            ApiError::bad_request("mode must be one of normal, plan, orchestrate")
        })?,
    };
    Ok((message, mode))
}

pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request needs a JSON body"));
    }
    serde_json::from_slice(body).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Data => "wrong type or value",
            _ => "malformed JSON",
        };
        ApiError::bad_request(format!("{what}: {e}"))
    })
}

fn lookup<T: Copy>(table: &[(&str, T)], name: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// Parses the list query string (`state` repeats; `metadata[key]=value`).
pub fn list_query(raw: &str) -> Result<Query, ApiError> {
    let mut q = Query {
        limit: 20,
        ..Query::default()
    };
    let mut seen_cursor = None;
    let mut foreign_state = false;
    let time = |key: &str, value: &str, ceil: bool| -> Result<Timestamp, ApiError> {
        let nanos = parse_time(value)
            .ok_or_else(|| ApiError::bad_request(format!("{key} must be an RFC 3339 timestamp")))?;
        if nanos < 0 {
            return Err(ApiError::bad_request(format!("{key} is before 1970")));
        }
        let ms = nanos / 1_000_000;
        let ms = if ceil && nanos % 1_000_000 != 0 {
            ms + 1
        } else {
            ms
        };
        Ok(Timestamp(ms as u64))
    };
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        let value = value.into_owned();
        let nonempty = |v: String| -> Result<String, ApiError> {
            if v.is_empty() {
                Err(ApiError::bad_request(format!("{key} must not be empty")))
            } else {
                Ok(v)
            }
        };
        match key.as_ref() {
            "limit" => {
                let n: usize = value
                    .parse()
                    .map_err(|_| ApiError::bad_request("limit must be an integer from 1 to 500"))?;
                if !(1..=500).contains(&n) {
                    return Err(ApiError::bad_request(
                        "limit must be an integer from 1 to 500",
                    ));
                }
                q.limit = n;
            }
            "cursor" => seen_cursor = Some(value),
            "sort_by" => {
                q.sort_by = lookup(&SORT_BY, &value).ok_or_else(|| {
                    ApiError::bad_request("sort_by must be one of updated_at, created_at, title")
                })?;
            }
            "sort_order" => {
                q.order = lookup(&SORT_ORDER, &value)
                    .ok_or_else(|| ApiError::bad_request("sort_order must be asc or desc"))?;
            }
            "state" if FOREIGN_STATES.contains(&value.as_str()) => {
                foreign_state = true;
            }
            "state" => {
                let state = RunState::parse(&value).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "state {value:?} is not one of QUEUED, INPROGRESS, SUCCEEDED, FAILED, CANCELLED"
                    ))
                })?;
                if !q.states.contains(&state) {
                    q.states.push(state);
                }
            }
            "name" | "config_name" => q.name = Some(nonempty(value)?),
            "model_id" => q.model_id = Some(nonempty(value)?),
            "creator" => q.creator = Some(nonempty(value)?),
            "environment_id" => q.environment_id = Some(nonempty(value)?),
            "source" => {
                q.source = Some(SourceType::parse(&value).ok_or_else(|| {
                    ApiError::bad_request(format!("source {value:?} is not a known source type"))
                })?)
            }
            "created_after" => q.created_after = Some(time("created_after", &value, false)?),
            "created_before" => q.created_before = Some(time("created_before", &value, true)?),
            "updated_after" => q.updated_after = Some(time("updated_after", &value, false)?),
            "q" => q.q = Some(value).filter(|v| !v.is_empty()),
            "skill" | "skill_spec" => q.skill_spec = Some(nonempty(value)?),
            k if MATCH_NOTHING_PARAMS.contains(&k) => {
                q.matches_nothing = true;
            }
            other => {
                if let Some(k) = other
                    .strip_prefix("metadata[")
                    .and_then(|r| r.strip_suffix(']'))
                {
                    metadata_pair(k, &value)?;
                    q.metadata.retain(|(existing, _)| existing != k);
                    q.metadata.push((k.to_string(), value));
                    if q.metadata.len() > MAX_METADATA_FILTERS {
                        return Err(ApiError::bad_request(format!(
                            "at most {MAX_METADATA_FILTERS} metadata filters"
                        )));
                    }
                }
                // Remaining parameters of the hosted API (`execution_location`, `executor`)
                // do not narrow runledger's runs; they are ignored.
            }
        }
    }
    q.metadata.sort();
    q.states.sort();
    if foreign_state && q.states.is_empty() {
        q.matches_nothing = true;
    }
    if let Some(c) = seen_cursor {
        q.cursor = Some(
            Cursor::decode(&c)
                .map_err(|_| ApiError::bad_request("cursor is not valid for this server"))?,
        );
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_names() {
        assert_eq!(skill_name("acme/tools:deploy").as_deref(), Some("deploy"));
        assert_eq!(
            skill_name("acme/tools:.claude/skills/deploy/SKILL.md").as_deref(),
            Some("deploy")
        );
        assert_eq!(skill_name("acme/tools:SKILL.md").as_deref(), Some("tools"));
        assert_eq!(skill_name("tools:deploy"), None);
        assert_eq!(skill_name("acme/tools:"), None);
        assert_eq!(skill_name("acme/tools:two words"), None);
        assert_eq!(skill_name("acme/tools:../SKILL.md"), None);
    }

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(title_from("\n  Fix the bug  \nmore"), "Fix the bug");
        let long = "x".repeat(200);
        let t = title_from(&long);
        assert_eq!(t.chars().count(), TITLE_FROM_PROMPT_CHARS);
        assert!(t.ends_with('…'));
    }

    #[test]
    fn list_query_parses_every_filter() {
        let q = list_query(
            "state=QUEUED&state=FAILED&config_name=n&model_id=m&creator=c&source=API&environment_id=e\
             &created_after=2026-01-01T00:00:00Z&created_before=2026-01-02T00:00:00.0005Z\
             &updated_after=2026-01-01T00:00:00Z&q=bug&metadata%5Bteam%5D=core&sort_by=title&sort_order=asc&limit=7",
        )
        .expect("valid");
        assert_eq!(q.states, vec![RunState::Queued, RunState::Failed]);
        assert_eq!(q.name.as_deref(), Some("n"));
        assert_eq!(q.source, Some(SourceType::Api));
        assert_eq!(q.metadata, vec![("team".to_string(), "core".to_string())]);
        assert_eq!(q.created_before, Some(Timestamp(1_767_312_000_001)));
        assert_eq!(q.sort_by, SortBy::Title);
        assert_eq!(q.order, Order::Asc);
        assert_eq!(q.limit, 7);
    }

    #[test]
    fn list_query_refuses_bad_values() {
        for bad in [
            "limit=0",
            "limit=501",
            "limit=ten",
            "state=DONE",
            "sort_by=agent",
            "sort_order=up",
            "source=EMAIL",
            "created_after=yesterday",
            "cursor=xyz",
            "metadata%5Bbad%20key%5D=1",
        ] {
            assert!(list_query(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn metadata_rules() {
        let mut ok = BTreeMap::new();
        ok.insert("team.name-1_x".to_string(), "v".to_string());
        assert!(metadata(Some(ok)).is_ok());
        let too_many: BTreeMap<_, _> = (0..21).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(metadata(Some(too_many)).is_err());
        let nul: BTreeMap<_, _> = [("k".to_string(), "a\0b".to_string())].into();
        assert!(metadata(Some(nul)).is_err());
        let long: BTreeMap<_, _> = [("k".to_string(), "x".repeat(257))].into();
        assert!(metadata(Some(long)).is_err());
    }
}
