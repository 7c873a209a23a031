//! Wire types of the schedule endpoints (OpenAPI `CreateScheduledAgentRequest`,
//! `UpdateScheduledAgentRequest`, `ScheduledAgentItem`, `ScheduledAgentHistoryItem`, …).
//! Beyond the document: `time_zone` (request and answer), and `history.recent_runs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::schema::metadata_request_schema;
use super::CloudEnvironmentConfig;
use runledger_format::run::*;
use runledger_format::schema::*;

/// Request body of a schedule's create (OpenAPI `CreateScheduledAgentRequest`): the fields of
/// an update, with `enabled` true when absent, and `team`. Any other field, here or in
/// `agent_config`, is refused with a 400 naming it (`http::fields`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateScheduledAgentRequest {
    #[serde(flatten)]
    pub fields: UpdateScheduledAgentRequest,
    /// Every schedule belongs to its key's team: `false` (a personal schedule) is refused.
    pub team: Option<bool>,
}

/// Request body of a schedule's update (OpenAPI `UpdateScheduledAgentRequest`): `name`,
/// `cron_schedule` and `enabled` are required; an absent `agent_config` or `metadata` keeps
/// the schedule's own. `prompt` is required unless `agent_config.skill_spec` is given. Any
/// other field, here or in `agent_config`, is refused with a 400 naming it (`http::fields`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateScheduledAgentRequest {
    /// Human-readable name, 1–256 characters; the title of every run the schedule makes.
    #[schema(min_length = 1, max_length = 256)]
    pub name: Option<String>,
    /// A 5-field cron expression (minute hour day-of-month month day-of-week) or a macro
    /// (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`),
    /// optionally prefixed `CRON_TZ=<IANA zone> `.
    #[schema(min_length = 1, max_length = 256)]
    pub cron_schedule: Option<String>,
    /// At most 64 KiB.
    #[schema(max_length = 65536)]
    pub prompt: Option<String>,
    /// Whether the schedule fires (on a create, true when absent).
    pub enabled: Option<bool>,
    pub agent_config: Option<AgentConfigIn>,
    /// The IANA time zone the expression is read in (beyond the document; a `CRON_TZ=` prefix
    /// says the same). UTC when neither is given.
    #[schema(max_length = 64)]
    pub time_zone: Option<String>,
    /// Given to every run the schedule makes.
    #[schema(schema_with = metadata_request_schema)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Only `normal` is supported.
    pub mode: Option<String>,
    /// Agent identities are not supported: refused when given.
    pub agent_uid: Option<String>,
}

/// A run a schedule made (beyond the document's history item).
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledRun<'a> {
    pub run_id: String,
    /// The due time the run was made for.
    #[schema(format = DateTime)]
    pub scheduled_for: String,
    #[schema(value_type = RunStateSchema)]
    pub state: &'a str,
}

/// What the scheduler knows of a schedule (OpenAPI `ScheduledAgentHistoryItem`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledAgentHistoryItem<'a> {
    /// When the latest firing made its run.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub last_ran: Option<String>,
    /// The next due time; absent while the schedule is paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub next_run: Option<String>,
    /// The latest runs the schedule made (up to 20), newest first, with their states; only in
    /// the answer for one schedule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recent_runs: Vec<ScheduledRun<'a>>,
}

/// Ownership of a schedule (OpenAPI `Scope`): always its team.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Scope)]
pub struct ScopeOut<'a> {
    /// Always `Team`.
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: &'static str,
    /// The team's name.
    #[schema(value_type = String)]
    pub uid: &'a str,
}

/// One schedule (OpenAPI `ScheduledAgentItem`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduledAgentItem<'a> {
    pub id: String,
    #[schema(value_type = String)]
    pub name: &'a str,
    /// As given, with its `CRON_TZ=` prefix if it had one.
    #[schema(value_type = String)]
    pub cron_schedule: &'a str,
    /// The IANA time zone the expression is read in (beyond the document).
    #[schema(value_type = String)]
    pub time_zone: &'a str,
    pub enabled: bool,
    #[schema(value_type = String)]
    pub prompt: &'a str,
    /// Why the latest firing could not make its run; cleared by a firing that did.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub last_spawn_error: Option<&'a str>,
    pub agent_config: AgentConfigOut<'a>,
    /// The environment the schedule's runs use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<CloudEnvironmentConfig<'a>>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    pub created_by: CreatorOut<'a>,
    pub updated_by: CreatorOut<'a>,
    pub history: ScheduledAgentHistoryItem<'a>,
    pub scope: ScopeOut<'a>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub metadata: &'a BTreeMap<String, String>,
}

/// Every schedule of the key's team, by name (OpenAPI `ListScheduledAgentsResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ListScheduledAgentsResponse<'a> {
    pub schedules: Vec<ScheduledAgentItem<'a>>,
}

/// OpenAPI `DeleteScheduledAgentResponse`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeleteScheduledAgentResponse {
    pub success: bool,
}
