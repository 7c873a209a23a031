//! Validation of request bodies and query strings into domain values, with error messages that
//! name the offending field. The limits bound the size of every stored event and so of each
//! run's state, which keeps the log, the read index and memory per run small.
//!
//! One file per request: `run_create` (a run's create, with its `attachments`), `followup`,
//! `cancel`,
//! `schedule_body` (a schedule's create or update), `list` (the runs list's query and cursor),
//! `queries` (the transcript, events and agents queries), `audit` (the audit events query); what they share is `limits` (the
//! limits, field errors, metadata, the JSON body) and `agent_config` (a request's agent
//! configuration).

mod agent_config;
mod attachments;
mod audit;
mod cancel;
mod followup;
mod limits;
mod list;
mod queries;
mod run_create;
mod schedule_body;

pub use agent_config::skill_name;
pub use attachments::{
    valid_file_name, MAX_ATTACHMENTS, MAX_ATTACHMENTS_TOTAL_BYTES, MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENT_NAME_BYTES,
};
pub use audit::{audit_query, AuditRequest, DEFAULT_AUDIT_LIMIT, MAX_AUDIT_LIMIT};
pub use cancel::{cancel, Cancel};
pub use followup::followup;
pub use limits::{
    check_len, metadata, parse_json, DEFAULT_EVENTS_LIMIT, DEFAULT_TRANSCRIPT_LIMIT,
    MAX_BASE_PROMPT_BYTES, MAX_EVENTS_LIMIT, MAX_FIELD_BYTES, MAX_FOLLOWUP_BYTES, MAX_LIST_LIMIT,
    MAX_MCP_SERVERS, MAX_MCP_VALUE_BYTES, MAX_PROMPT_BYTES, MAX_QUERY_TEXT_BYTES, MAX_TITLE_CHARS,
    MAX_TRANSCRIPT_LIMIT,
};
pub use list::{list_query, FOREIGN_ARTIFACT_TYPES, MATCH_NOTHING_PARAMS};
pub use queries::{agents_query, events_query, transcript_query};
pub use run_create::{create, title_from};
pub use schedule_body::{schedule, ScheduleInput};

#[cfg(test)]
mod properties;
#[cfg(test)]
mod test_support;
