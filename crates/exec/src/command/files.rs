//! The files of a run the server writes for its agent: private files (the MCP file, the session
//! id, `setup.done`) and the configuration a preset's CLI reads in the run's home. Everything
//! in the agent's home is reached through `safe_fs`; nothing here follows a link the agent
//! left, and nothing here starts a process.

use std::path::Path;

use super::execution::Execution;
use crate::observe;
use crate::safe_fs::{self, Links, Owner};
use crate::Assignment;
use runledger_domain::harness::Harness;

/// Writes a file only its owner can read (MCP configs can hold credentials), given to
/// `owner`: `path` is in the run's agent files, a directory only the server can write, and the
/// file is replaced, never written through.
pub(super) fn write_private(
    path: &Path,
    contents: &[u8],
    owner: Option<Owner>,
) -> Result<(), safe_fs::Error> {
    let (dir, name) = split(path)?;
    safe_fs::Dir::open(dir)?.replace(name, contents, 0o600, owner)
}

/// The directory and the name of `path`, a file the server writes.
fn split(path: &Path) -> Result<(&Path, &str), safe_fs::Error> {
    match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(safe_fs::Error::Refused {
            path: path.to_path_buf(),
            why: "it is not a file in a directory",
        }),
    }
}

/// Objects are merged key by key; anything else in `ours` replaces what was there.
fn merge(into: &mut serde_json::Value, ours: &serde_json::Value) {
    match (into.as_object_mut(), ours.as_object()) {
        (Some(into), Some(ours)) => {
            for (k, v) in ours {
                merge(into.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        _ => *into = ours.clone(),
    }
}

/// The MCP servers of the run that a preset's CLI can use, and the names of those it cannot
/// (a `warp_id` entry names a server of the original platform, which no CLI can reach).
pub(super) fn usable_mcp(
    job: &Assignment,
) -> (Vec<(&String, &runledger_domain::McpServer)>, Vec<String>) {
    let mut usable = Vec::new();
    let mut unusable = Vec::new();
    for (name, server) in &job.run.config.mcp_servers {
        if server.command.is_some() || server.url.is_some() {
            usable.push((name, server));
        } else {
            unusable.push(name.clone());
        }
    }
    (usable, unusable)
}

/// Writes what a preset's CLI reads at start into the run's private home, after setup (so a
/// setup command's own settings there are kept and extended) and never into the workspace:
/// Codex's `config.toml` (model provider, MCP servers), Gemini CLI's `settings.json` (auth
/// type, MCP servers). Claude Code gets its MCP servers with `--mcp-config`.
///
/// The home is the agent's, kept between executions: everything in it is reached through
/// `safe_fs`, so a link, a FIFO or a hard link the agent left at these names is refused, never
/// followed (`docs/security.md`, "Paths the agent controls").
pub(super) fn write_cli_config(x: &Execution<'_>) -> Result<(), safe_fs::Error> {
    let env = &x.job.environment;
    let (servers, _) = usable_mcp(x.job);
    let owner = x.sup.sandboxes.owner();
    let config_dir = |name: &str| -> Result<safe_fs::Dir, safe_fs::Error> {
        let dir = safe_fs::Dir::open(&x.home)?.make_dir(name, 0o700)?;
        dir.set_owner(owner)?;
        Ok(dir)
    };
    match env.harness {
        Harness::Codex => {
            let dir = config_dir(".codex")?;
            let file = "config.toml";
            let mut config: toml::Table = dir
                .read(Path::new(file), Links::Refused)?
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|t| t.parse().ok())
                .unwrap_or_default();
            codex_config(&mut config, env.model_base_url.as_deref(), servers);
            dir.replace(file, config.to_string().as_bytes(), 0o600, owner)
        }
        Harness::Gemini => {
            let dir = config_dir(".gemini")?;
            let file = "settings.json";
            let mut settings = dir
                .read(Path::new(file), Links::Refused)?
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({}));
            let mut ours = serde_json::json!({});
            // An API key (GEMINI_API_KEY) unless setup chose another auth type.
            if !settings["security"]["auth"]["selectedType"].is_string() {
                ours["security"] = serde_json::json!({"auth": {"selectedType": "gemini-api-key"}});
            }
            let mut mcp = serde_json::Map::new();
            for (name, server) in servers {
                let entry = if let Some(command) = &server.command {
                    serde_json::json!({"command": command, "args": server.args, "env": server.env})
                } else {
                    serde_json::json!({"httpUrl": server.url, "headers": server.headers})
                };
                mcp.insert(name.clone(), entry);
            }
            if !mcp.is_empty() {
                ours["mcpServers"] = serde_json::Value::Object(mcp);
            }
            // Merged into what is there, keeping everything else.
            merge(&mut settings, &ours);
            dir.replace(file, settings.to_string().as_bytes(), 0o600, owner)
        }
        Harness::Claude | Harness::Command | Harness::Demo => Ok(()),
    }
}

/// Codex's `config.toml` with runledger's model provider (for `model_base_url`) and the run's
/// MCP servers.
fn codex_config(
    config: &mut toml::Table,
    model_base_url: Option<&str>,
    servers: Vec<(&String, &runledger_domain::McpServer)>,
) {
    if let Some(url) = model_base_url {
        let mut provider = toml::Table::new();
        provider.insert("name".into(), "runledger model_base_url".into());
        provider.insert("base_url".into(), url.into());
        provider.insert("env_key".into(), "OPENAI_API_KEY".into());
        provider.insert("wire_api".into(), "responses".into());
        provider.insert("supports_websockets".into(), false.into());
        let providers = config
            .entry("model_providers")
            .or_insert_with(|| toml::Table::new().into());
        if let Some(providers) = providers.as_table_mut() {
            providers.insert("runledger".into(), provider.into());
        }
        config.insert("model_provider".into(), "runledger".into());
    }
    let mut mcp = toml::Table::new();
    for (name, server) in servers {
        let mut entry = toml::Table::new();
        if let Some(command) = &server.command {
            entry.insert("command".into(), command.clone().into());
            entry.insert("args".into(), server.args.clone().into());
            let vars: toml::Table = server
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            entry.insert("env".into(), vars.into());
        } else if let Some(url) = &server.url {
            entry.insert("url".into(), url.clone().into());
            let headers: toml::Table = server
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            entry.insert("http_headers".into(), headers.into());
        }
        mcp.insert(name.clone(), entry.into());
    }
    if !mcp.is_empty() {
        config.insert("mcp_servers".into(), mcp.into());
    }
}

/// The session a preset's CLI reported in an earlier execution of the run.
pub(super) fn saved_session(x: &Execution<'_>) -> Option<String> {
    let (dir, name) = split(&x.session_path).ok()?;
    let bytes = safe_fs::Dir::open(dir)
        .ok()?
        .read(Path::new(name), Links::Allowed)
        .ok()??;
    let text = String::from_utf8(bytes).ok()?;
    let id = text.trim();
    observe::is_session_id(id).then(|| id.to_string())
}
