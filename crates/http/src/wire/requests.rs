//! Request bodies of the v1 API (OpenAPI `RunAgentRequest`, …), as parsed before validation
//! (`http::validate` checks what the types cannot say).

use std::collections::BTreeMap;

use serde::Deserialize;
use utoipa::ToSchema;

use super::schema::metadata_request_schema;
use runledger_format::run::*;
use runledger_format::schema::*;

/// Request body of a create (OpenAPI `RunAgentRequest`). Either `prompt` or a skill (`skill`
/// or `config.skill_spec`) is required. The other fields of the hosted service's request and
/// of the official clients are accepted and ignored; any other field, here or in `config`, is
/// refused with a 400 naming it (`http::fields`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct RunAgentRequest {
    /// The instruction for the agent. At most 64 KiB; required unless a skill is given.
    #[schema(max_length = 65536)]
    pub prompt: Option<String>,
    /// Skill to run (`owner/repo:skill-name` or `owner/repo:path/to/SKILL.md`); takes
    /// precedence over `config.skill_spec`. At most 256 bytes.
    #[schema(max_length = 256, pattern = r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+:\S+$")]
    pub skill: Option<String>,
    pub config: Option<AgentConfigIn>,
    /// Title of the run (at most 256 characters, not blank); generated from the prompt when
    /// absent.
    #[schema(min_length = 1, max_length = 256)]
    pub title: Option<String>,
    #[schema(schema_with = metadata_request_schema)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Files for the agent: at most 5, each at most 10 MiB and 20 MiB together (decoded). They
    /// are written to the run's workspace, in `$RUNLEDGER_ATTACHMENTS_DIR`, before its agent
    /// starts.
    #[schema(max_items = 5)]
    pub attachments: Option<Vec<AttachmentInput>>,
    /// The run that spawns this one (its id, a ULID): it must exist and be visible to the
    /// key. The new run is its child, within `max_depth` and `max_children` (`docs/api.md`).
    #[schema(max_length = 64)]
    pub parent_run_id: Option<String>,
}

/// A file attached to a create (OpenAPI `AttachmentInput`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct AttachmentInput {
    /// The file's name in the attachments directory: one path component (no `/`, `\` or NUL,
    /// not `.` or `..`), no control characters, 1-255 bytes, unique within the request.
    #[schema(min_length = 1, max_length = 255)]
    pub file_name: String,
    /// A media type, `type/subtype` with optional parameters, at most 255 bytes.
    #[schema(max_length = 255)]
    pub mime_type: String,
    /// The bytes, base64 (standard alphabet; padding optional).
    #[schema(format = Byte)]
    pub data: String,
}

/// Request body of a follow-up.
#[derive(Debug, Deserialize, ToSchema)]
pub struct FollowupRequest {
    /// The message for the agent: not blank, at most 64 KiB. (Optional for serde so that a
    /// missing message gets a precise 400.)
    #[schema(value_type = String, required = true, min_length = 1, max_length = 65536,
             pattern = r"\S")]
    pub message: Option<String>,
    /// `normal` when absent.
    #[schema(value_type = Option<FollowupModeSchema>)]
    pub mode: Option<String>,
}

/// Request body of a cancel (runledger's extension; optional: the official clients send none
/// or `{}`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct CancelRequest {
    /// Why the run is cancelled, recorded in the `Cancelled` event's `origin.reason`. At most
    /// 1024 bytes, no control characters.
    #[schema(max_length = 1024)]
    pub reason: Option<String>,
    /// Whether the run's unfinished descendants are cancelled with it (runledger's extension
    /// for trees of runs); `true` when absent.
    pub cascade: Option<bool>,
}

/// Request body of a key create.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateApiKeyRequest {
    /// 1–128 bytes, not blank.
    #[schema(min_length = 1, max_length = 128, pattern = r"\S")]
    pub name: String,
    /// `personal` when absent.
    #[schema(value_type = Option<KeyKindSchema>)]
    pub kind: Option<String>,
    /// `false` when absent.
    pub admin: Option<bool>,
    /// The team whose runs the key sees and creates; it must exist. `default` when absent.
    #[schema(pattern = r"^[a-z0-9][a-z0-9_-]{0,62}$")]
    pub team: Option<String>,
}

/// A request to create a team.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTeamRequest {
    /// 1–63 characters: lowercase letters, digits, `-` and `_`, starting with a letter or a
    /// digit.
    #[schema(pattern = r"^[a-z0-9][a-z0-9_-]{0,62}$")]
    pub name: String,
}
