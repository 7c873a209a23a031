//! The parts of a run that the API's requests and answers and the stored events share: the
//! agent configuration with its MCP servers (as a request gives it and as it is stored), the
//! creator and the status message of a failure. Every output of an MCP server's `env` and
//! `headers` goes through `McpServerOut`, which shows their names and `***` for every value
//! (whatever the run stored: sealed runs hold `***` already, legacy runs their plain values).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::schema::*;
use runledger_domain::{AgentConfig, Creator, CreatorKind, McpServer, StatusMessage, REDACTED};

/// An MCP server for the agent (OpenAPI `MCPServerConfig`). Exactly one of `warp_id`,
/// `command` and `url` must be set. `args`, `env` and `headers` together hold at most 8192
/// bytes.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = MCPServerConfigRequest)]
pub struct McpServerIn {
    /// Reference to a shared MCP server (passed to the agent as given). At most 2048 bytes.
    #[schema(min_length = 1, max_length = 2048)]
    pub warp_id: Option<String>,
    /// Stdio transport: the command to run. At most 2048 bytes.
    #[schema(min_length = 1, max_length = 2048)]
    pub command: Option<String>,
    /// Stdio transport: the command's arguments.
    pub args: Option<Vec<String>>,
    /// SSE/HTTP transport: an `http://` or `https://` URL without whitespace. At most 2048 bytes.
    #[schema(max_length = 2048, pattern = r"^https?://\S+$")]
    pub url: Option<String>,
    /// Environment variables for the server. The values are credentials: stored encrypted,
    /// handed to the agent, and returned as `***`.
    pub env: Option<BTreeMap<String, String>>,
    /// HTTP headers for the SSE/HTTP transport. The values are credentials: stored encrypted,
    /// handed to the agent, and returned as `***`.
    pub headers: Option<BTreeMap<String, String>>,
}

/// The domain value of a (validated, or exported and so once validated) MCP server.
impl From<McpServerIn> for McpServer {
    fn from(s: McpServerIn) -> McpServer {
        McpServer {
            warp_id: s.warp_id,
            command: s.command,
            args: s.args.unwrap_or_default(),
            url: s.url,
            env: s.env.unwrap_or_default(),
            headers: s.headers.unwrap_or_default(),
        }
    }
}

/// The agent configuration of a create request (OpenAPI `AmbientAgentConfig`). Other fields
/// of the hosted service's config are accepted and ignored.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = AgentConfigRequest)]
pub struct AgentConfigIn {
    /// Label for grouping and filtering; set from the skill when absent. 1–256 bytes.
    #[schema(min_length = 1, max_length = 256)]
    pub name: Option<String>,
    /// Model to use; the environment's `model_id` when absent. 1–256 bytes.
    #[schema(min_length = 1, max_length = 256)]
    pub model_id: Option<String>,
    /// Custom base prompt for the agent. At most 16 KiB.
    #[schema(max_length = 16384)]
    pub base_prompt: Option<String>,
    /// A configured environment's id; the first configured environment when absent.
    #[schema(min_length = 1, max_length = 256)]
    pub environment_id: Option<String>,
    /// `owner/repo:skill-name` or `owner/repo:path/to/SKILL.md`. At most 256 bytes. (The
    /// pattern is the shape; `validate::skill_name` checks more, such as no `..` in a path.)
    #[schema(max_length = 256, pattern = r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+:\S+$")]
    pub skill_spec: Option<String>,
    /// MCP servers by name (names 1–64 bytes), at most 16.
    pub mcp_servers: Option<BTreeMap<String, McpServerIn>>,
}

/// An MCP server as stored (OpenAPI `MCPServerConfig`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MCPServerConfig)]
pub struct McpServerOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub warp_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub command: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    #[schema(value_type = Vec<String>)]
    pub args: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = "uri")]
    pub url: Option<&'a str>,
    /// The server's environment variables by name; every value reads `***`.
    #[serde(skip_serializing_if = "Redacted::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub env: Redacted<'a>,
    /// The server's HTTP headers by name; every value reads `***`.
    #[serde(skip_serializing_if = "Redacted::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub headers: Redacted<'a>,
}

/// Credential values by name, serialized with every value `***`: the names stay visible,
/// the values never leave the service this way.
#[derive(Debug, Clone, Copy)]
pub struct Redacted<'a>(pub &'a BTreeMap<String, String>);

impl Redacted<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Redacted<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.keys().map(|k| (k, REDACTED)))
    }
}

/// The resolved configuration of a run (OpenAPI `AmbientAgentConfig`): `model_id` and
/// `environment_id` are always filled in.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AmbientAgentConfig)]
pub struct AgentConfigOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub model_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub base_prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub environment_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub skill_spec: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, McpServerOut>)]
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
                            env: Redacted(&s.env),
                            headers: Redacted(&s.headers),
                        },
                    )
                })
                .collect(),
        }
    }
}

/// Who created a run: the kind of its API key.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CreatorType {
    User,
    ServiceAccount,
}

impl From<CreatorKind> for CreatorType {
    fn from(k: CreatorKind) -> CreatorType {
        match k {
            CreatorKind::User => CreatorType::User,
            CreatorKind::ServiceAccount => CreatorType::ServiceAccount,
        }
    }
}

/// The creator of a run (OpenAPI `RunCreatorInfo`): `uid` and `display_name` are the id and
/// name of the API key that created it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RunCreatorInfo)]
pub struct CreatorOut<'a> {
    #[serde(rename = "type")]
    pub kind: CreatorType,
    #[schema(value_type = String)]
    pub uid: &'a str,
    #[schema(value_type = String)]
    pub display_name: &'a str,
}

impl<'a> CreatorOut<'a> {
    pub fn from(c: &'a Creator) -> Self {
        CreatorOut {
            kind: c.kind.into(),
            uid: &c.uid,
            display_name: &c.display_name,
        }
    }
}

/// Why a run failed (OpenAPI `RunStatusMessage`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RunStatusMessage)]
pub struct StatusMessageOut<'a> {
    #[schema(value_type = String)]
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = PlatformErrorCodeSchema)]
    pub error_code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub retryable: Option<bool>,
}

impl<'a> StatusMessageOut<'a> {
    pub fn from(s: &'a StatusMessage) -> Self {
        StatusMessageOut {
            message: &s.message,
            error_code: s.error_code.as_deref(),
            retryable: s.retryable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever a config holds (plain values of a run from before credentials were sealed
    /// included), its output shows the names and `***`.
    #[test]
    fn mcp_credential_values_are_shown_as_placeholders() {
        let server = McpServer {
            command: Some("npx".into()),
            env: BTreeMap::from([("TOKEN".into(), "ghp_plain".into())]),
            headers: BTreeMap::from([("Authorization".into(), "Bearer x".into())]),
            ..McpServer::default()
        };
        let config = AgentConfig {
            mcp_servers: BTreeMap::from([
                ("gh".into(), server),
                (
                    "bare".into(),
                    McpServer {
                        url: Some("https://a".into()),
                        ..McpServer::default()
                    },
                ),
            ]),
            ..AgentConfig::default()
        };
        let json = serde_json::to_value(AgentConfigOut::from(&config)).expect("serializes");
        assert_eq!(
            json["mcp_servers"],
            serde_json::json!({
                "gh": {"command": "npx", "env": {"TOKEN": "***"},
                       "headers": {"Authorization": "***"}},
                "bare": {"url": "https://a"}
            })
        );
    }
}

/// Something a run's executions produced, as `RunItem.artifacts` lists it (OpenAPI
/// `ArtifactItem`, discriminated by `artifact_type`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "artifact_type")]
pub enum ArtifactItem {
    #[serde(rename = "PLAN")]
    #[schema(title = "PlanArtifact")]
    Plan {
        /// When the artifact was reported (RFC 3339).
        #[schema(value_type = String, format = DateTime)]
        created_at: String,
        data: PlanArtifactData,
    },
    #[serde(rename = "PULL_REQUEST")]
    #[schema(title = "PullRequestArtifact")]
    PullRequest {
        #[schema(value_type = String, format = DateTime)]
        created_at: String,
        data: PullRequestArtifactData,
    },
    #[serde(rename = "SCREENSHOT")]
    #[schema(title = "ScreenshotArtifact")]
    Screenshot {
        #[schema(value_type = String, format = DateTime)]
        created_at: String,
        data: ScreenshotArtifactData,
    },
    #[serde(rename = "FILE")]
    #[schema(title = "FileArtifact")]
    File {
        #[schema(value_type = String, format = DateTime)]
        created_at: String,
        data: FileArtifactData,
    },
}

/// A plan (OpenAPI `PlanArtifactData`). `document_uid` is the artifact's uid: the plan is its
/// own document.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanArtifactData {
    /// Names the artifact in `GET /agent/artifacts/{artifactUid}`.
    pub artifact_uid: String,
    pub document_uid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// A pull request (OpenAPI `PullRequestArtifactData`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PullRequestArtifactData {
    #[schema(format = "uri")]
    pub url: String,
    pub branch: String,
}

/// A screenshot (OpenAPI `ScreenshotArtifactData`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ScreenshotArtifactData {
    pub artifact_uid: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`, from the image's first bytes.
    pub mime_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A file of the workspace (OpenAPI `FileArtifactData`).
#[derive(Debug, Serialize, ToSchema)]
pub struct FileArtifactData {
    pub artifact_uid: String,
    /// The file's path relative to the run's workspace, `/`-separated.
    pub filepath: String,
    /// The last component of `filepath`.
    pub filename: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// From the file name's extension; `application/octet-stream` when it tells nothing.
    pub mime_type: String,
    pub size_bytes: u64,
}

/// The last component of a workspace-relative path.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl ArtifactItem {
    pub fn from(reported: &runledger_domain::ReportedArtifact) -> ArtifactItem {
        use runledger_domain::ArtifactKind;
        let created_at = crate::time::format_time(reported.at);
        let uid = reported.artifact.uid.clone();
        match &reported.artifact.kind {
            ArtifactKind::Plan { title, .. } => ArtifactItem::Plan {
                created_at,
                data: PlanArtifactData {
                    artifact_uid: uid.clone(),
                    document_uid: uid,
                    title: title.clone(),
                },
            },
            ArtifactKind::PullRequest { url, branch, .. } => ArtifactItem::PullRequest {
                created_at,
                data: PullRequestArtifactData {
                    url: url.clone(),
                    branch: branch.clone(),
                },
            },
            ArtifactKind::Screenshot {
                description,
                content,
                ..
            } => ArtifactItem::Screenshot {
                created_at,
                data: ScreenshotArtifactData {
                    artifact_uid: uid,
                    mime_type: content.mime_type.clone(),
                    description: description.clone(),
                },
            },
            ArtifactKind::File {
                path,
                description,
                content,
            } => ArtifactItem::File {
                created_at,
                data: FileArtifactData {
                    artifact_uid: uid,
                    filename: file_name(path).to_string(),
                    filepath: path.clone(),
                    description: description.clone(),
                    mime_type: content.mime_type.clone(),
                    size_bytes: content.size,
                },
            },
        }
    }
}

crate::string_enum_schema! {
    /// An artifact type to filter runs by; `EXTERNAL_REFERENCE`, which runledger's agents never
    /// report, matches nothing.
    ArtifactTypeFilterSchema as "ArtifactTypeFilter" = {
        let [a, b, c, d] = runledger_domain::ArtifactKind::TYPE_NAMES;
        [a, b, c, d, "EXTERNAL_REFERENCE"]
    }
}
