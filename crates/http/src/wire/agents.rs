//! Response bodies of the Oz read endpoints beside runs: the agents (skills) list, the models
//! list, a run's conversation, the session and conversation redirects and a run's handoff
//! attachments (OpenAPI `ListAgentsResponse`, `ListModelsResponse`, `ConversationResponse`, …).
//! Absent optional fields are omitted, never sent as null.

use serde::Serialize;
use utoipa::ToSchema;

/// The agents (skills) available here (OpenAPI `ListAgentsResponse`). runledger's environments
/// declare no skills, so the list is empty (docs/api.md, "Agents, models and conversations").
#[derive(Debug, Serialize, ToSchema)]
pub struct ListAgentsResponse {
    pub agents: Vec<AgentListItem>,
}

/// One agent and its variants (OpenAPI `AgentListItem`).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentListItem {
    pub name: String,
    pub variants: Vec<AgentListVariant>,
}

/// One variant of an agent (OpenAPI `AgentListVariant`).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentListVariant {
    /// `{owner}/{repo}:{skill_path}`.
    pub id: String,
    pub description: String,
    pub base_prompt: String,
    pub source: AgentListSource,
    pub environments: Vec<AgentListEnvironment>,
}

/// Where a variant's skill is defined (OpenAPI `AgentListSource`).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentListSource {
    pub owner: String,
    pub name: String,
    pub skill_path: String,
}

/// An environment a variant is available in (OpenAPI `AgentListEnvironment`).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentListEnvironment {
    pub uid: String,
    pub name: String,
}

/// The models the environments the key's team may use declare (OpenAPI `ListModelsResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ListModelsResponse<'a> {
    /// The model of the default environment (the first configured one); empty when that
    /// environment leaves the choice to its agent CLI.
    #[schema(value_type = String)]
    pub default_model_id: &'a str,
    pub models: Vec<ModelInfo<'a>>,
}

/// The LLM provider of a model, by the harness whose environments declare it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum ModelProvider {
    Openai,
    Anthropic,
    Google,
    Unknown,
}

/// One model (OpenAPI `ModelInfo`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelInfo<'a> {
    /// The `model_id` environments declare, as runs report it in `agent_config.model_id`.
    #[schema(value_type = String)]
    pub id: &'a str,
    /// The same as `id`: runledger knows no other name for a model.
    #[schema(value_type = String)]
    pub display_name: &'a str,
    pub provider: ModelProvider,
    /// Always false: runledger hands agents no images, whatever the model can read.
    pub vision_supported: bool,
    /// The environments that declare the model, by id.
    pub description: String,
}

/// A run's conversation (OpenAPI `ConversationResponse`): its prompt, follow-ups and the
/// agent's output from its transcript.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationResponse {
    /// The run's id: a run is its own conversation.
    pub conversation_id: String,
    /// One step per execution of the run, in order.
    pub steps: Vec<ConversationStep>,
}

/// The part of a conversation one execution of the run wrote (OpenAPI `ConversationStep`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationStep {
    /// `execution-N`, N the execution's number (as in the transcript's `execution`).
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub completed_at: Option<String>,
    pub messages: Vec<ConversationMessage>,
    /// Always empty: runledger's agents delegate no work to nested runs.
    #[schema(no_recursion)]
    pub steps: Vec<ConversationStep>,
}

/// Who a message is from (OpenAPI `ConversationMessageRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConversationMessageRole {
    User,
    Assistant,
    Tool,
    System,
}

/// Consecutive transcript entries of one role (OpenAPI `ConversationMessage`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationMessage {
    /// The byte offsets of the transcript entries it holds (the transcript API's `offset`);
    /// `prompt` for the run's prompt.
    pub message_ids: Vec<String>,
    pub role: ConversationMessageRole,
    #[schema(format = DateTime)]
    pub timestamp: String,
    pub content: Vec<ConversationContentBlock>,
}

/// One block of a message (OpenAPI `ConversationContentBlock`): text, or an event that is not
/// conversation proper (the agent's stderr, output left out of the answer).
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ConversationContentBlock {
    Text {
        message_id: String,
        text: String,
    },
    Event {
        message_id: String,
        /// `stderr` (the agent's standard error; `data.text`) or `transcript_truncated`
        /// (`data.omitted_bytes` of earlier output are left out; the transcript API has them).
        name: String,
        #[schema(value_type = Object)]
        data: serde_json::Map<String, serde_json::Value>,
    },
}

/// Answer of a session redirect check (the clients' `SessionCheckRedirectResponse`): the
/// conversation to show instead of the session, once the run has finished.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct SessionRedirect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
}

/// Answer of a conversation redirect check (the clients' `ConversationCheckRedirectResponse`):
/// the live session to show instead of the conversation, while the run is not finished.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct ConversationRedirect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// A run's handoff snapshot files (the clients' `RunListHandoffAttachmentsResponse`).
/// runledger's executions upload no snapshots, so the list is empty for every run.
#[derive(Debug, Serialize, ToSchema)]
pub struct HandoffAttachments {
    pub attachments: Vec<HandoffAttachment>,
}

/// One handoff snapshot file.
#[derive(Debug, Serialize, ToSchema)]
pub struct HandoffAttachment {
    pub attachment_id: String,
    pub download_url: String,
    pub filename: String,
}
