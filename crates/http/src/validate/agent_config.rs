//! A request's agent configuration (a run's `config` and `skill`, a schedule's
//! `agent_config`) into the domain's `AgentConfig`: the skill spec and the name it gives, the
//! environment (the configured default when none is named) and its model, the MCP servers.
//! Shared by the run create and the schedule bodies; it reads no body itself.

use std::collections::BTreeMap;

use super::limits::{
    check_len, short_field, MAX_BASE_PROMPT_BYTES, MAX_FIELD_BYTES, MAX_MCP_SERVERS,
    MAX_MCP_VALUE_BYTES,
};
use crate::problem::ApiError;
use crate::wire::{AgentConfigIn, McpServerIn};
use runledger_config::Config;
use runledger_domain::{AgentConfig, McpServer};

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
    Ok(McpServer::from(s))
}

/// The agent configuration of a create or schedule; the top-level `skill` (a run's) wins over
/// `config.skill_spec`.
pub(super) fn resolve_config(
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
        // An environment without a model leaves it to the agent (a CLI's own default).
        model_id: short_field("config.model_id", input.model_id)?
            .or_else(|| Some(environment.model_id.clone()).filter(|m| !m.is_empty())),
        base_prompt: input.base_prompt,
        environment_id: Some(environment.id.clone()),
        skill_spec,
        mcp_servers,
    })
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
}
