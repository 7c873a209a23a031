//! The body of a schedule's create or update into a `ScheduleInput`: its name, cron
//! expression and zone (checked by parsing them), prompt, enabled flag, agent configuration
//! and metadata; the hosted service's options runledger does not offer are refused by name.

use std::collections::BTreeMap;

use super::agent_config::resolve_config;
use super::limits::{check_len, metadata, parse_json, MAX_PROMPT_BYTES, MAX_TITLE_CHARS};
use crate::problem::ApiError;
use runledger_config::Config;
use runledger_domain::AgentConfig;

/// A schedule's create or update, validated: what the `ScheduleSpec` needs but the sealing.
/// `config` and `metadata` are `None` when an update leaves them as they are.
#[derive(Debug)]
pub struct ScheduleInput {
    pub name: String,
    pub cron: String,
    pub time_zone: String,
    pub prompt: String,
    pub enabled: bool,
    pub config: Option<AgentConfig>,
    pub metadata: Option<BTreeMap<String, String>>,
}

/// Validates a schedule's create (`creating`) or update request; `seconds` allows the test
/// mode's 6-field expressions.
pub fn schedule(
    body: &[u8],
    config: &Config,
    creating: bool,
    seconds: bool,
) -> Result<ScheduleInput, ApiError> {
    let known = if creating {
        &crate::fields::SCHEDULE_CREATE
    } else {
        &crate::fields::SCHEDULE_UPDATE
    };
    crate::fields::check(body, known)?;
    let fields = if creating {
        let r: crate::wire::CreateScheduledAgentRequest = parse_json(body)?;
        if r.team == Some(false) {
            return Err(ApiError::bad_request(
                "team: personal schedules are not supported; every schedule belongs to its \
                 key's team",
            ));
        }
        crate::wire::UpdateScheduledAgentRequest {
            enabled: Some(r.fields.enabled.unwrap_or(true)),
            ..r.fields
        }
    } else {
        parse_json::<crate::wire::UpdateScheduledAgentRequest>(body)?
    };
    let name = fields
        .name
        .ok_or_else(|| ApiError::bad_request("name is required"))?;
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("name must not be blank"));
    }
    if name.contains('\0') || name.chars().count() > MAX_TITLE_CHARS {
        return Err(ApiError::bad_request(format!(
            "name must be at most {MAX_TITLE_CHARS} characters without NUL"
        )));
    }
    let enabled = fields
        .enabled
        .ok_or_else(|| ApiError::bad_request("enabled is required"))?;
    let cron = fields
        .cron_schedule
        .ok_or_else(|| ApiError::bad_request("cron_schedule is required"))?;
    let time_zone = schedule_zone(&cron, fields.time_zone.as_deref(), seconds)?;
    match fields.mode.as_deref() {
        None | Some("normal") => {}
        Some("plan" | "orchestrate") => {
            return Err(ApiError::bad_request(
                "mode: scheduled runs support only the normal mode",
            ))
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "mode must be one of normal, plan, orchestrate",
            ))
        }
    }
    if fields.agent_uid.is_some() {
        return Err(ApiError::bad_request(
            "agent_uid: agent identities are not supported; a schedule's runs are made as the \
             key that created the schedule",
        ));
    }
    let prompt = fields.prompt.unwrap_or_default();
    check_len("prompt", &prompt, MAX_PROMPT_BYTES)?;
    let has_skill = fields
        .agent_config
        .as_ref()
        .is_some_and(|c| c.skill_spec.is_some());
    if prompt.trim().is_empty() && !has_skill {
        return Err(ApiError::bad_request(
            "prompt is required (or agent_config.skill_spec)",
        ));
    }
    let resolved = match fields.agent_config {
        Some(c) => Some(resolve_config(Some(c), None, config)?),
        None if creating => Some(resolve_config(None, None, config)?),
        None => None,
    };
    let metadata = match fields.metadata {
        Some(m) => Some(metadata(Some(m))?),
        None if creating => Some(BTreeMap::new()),
        None => None,
    };
    Ok(ScheduleInput {
        name,
        cron: cron.trim().to_string(),
        time_zone,
        prompt,
        enabled,
        config: resolved,
        metadata,
    })
}

/// The zone of `cron_schedule` (from its `CRON_TZ=` prefix, if any, or the request's
/// `time_zone`), with the expression checked in it: a clear 400 naming the problem otherwise.
fn schedule_zone(cron: &str, time_zone: Option<&str>, seconds: bool) -> Result<String, ApiError> {
    use runledger_runs::schedules::cron::{split_zone, When};
    let (prefixed, expression) = split_zone(cron);
    let zone = match (prefixed, time_zone) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::bad_request(format!(
                "cron_schedule names the time zone {a:?} and time_zone {b:?}; give one"
            )))
        }
        (Some(z), _) | (None, Some(z)) => z.to_string(),
        (None, None) => "UTC".to_string(),
    };
    When::parse(expression, &zone, seconds).map_err(|why| {
        let field = if why.contains("IANA") && prefixed.is_none() {
            "time_zone"
        } else {
            "cron_schedule"
        };
        ApiError::bad_request(format!("{field}: {why}"))
    })?;
    Ok(zone)
}
