//! The body of a run's create (`POST /agent/run`) into the `Created` event's payload and the
//! attachments to store: the prompt or skill, the title (or one made from the prompt), the
//! agent configuration, the metadata. The parts shared with other bodies are `limits` and
//! `agent_config`; the attachments are `attachments`.

use super::agent_config::resolve_config;
use super::attachments::attachments;
use super::limits::{check_len, metadata, parse_json, MAX_PROMPT_BYTES, MAX_TITLE_CHARS};
use crate::problem::ApiError;
use crate::wire::RunAgentRequest;
use runledger_config::Config;
use runledger_domain::{Creator, RunCreated, RunId, SourceType};
use runledger_runs::actor::Upload;

const TITLE_FROM_PROMPT_CHARS: usize = 80;

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

/// Validates a create request into the `Created` event's payload, the attachments to store
/// and the run that spawns it (`parent_run_id`, whose existence the handler checks).
pub fn create(
    body: &[u8],
    config: &Config,
    creator: Creator,
) -> Result<(RunCreated, Vec<Upload>, Option<RunId>), ApiError> {
    crate::fields::check(body, &crate::fields::RUN)?;
    let request: RunAgentRequest = parse_json(body)?;
    let uploads = attachments(request.attachments)?;
    let parent = request
        .parent_run_id
        .as_deref()
        .map(parent_id)
        .transpose()?;
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
    let created = RunCreated {
        title,
        prompt,
        config,
        creator,
        source: SourceType::Api,
        metadata: metadata(request.metadata)?,
    };
    Ok((created, uploads, parent))
}

/// `parent_run_id` as a run id: a value that is no run id names no run, so it is refused as
/// an unknown parent is (`crate::tree`), naming the field.
fn parent_id(raw: &str) -> Result<RunId, ApiError> {
    raw.parse().map_err(|_| {
        let shown: String = raw.chars().take(64).collect();
        ApiError::bad_request(format!("parent_run_id: no run with id {shown:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::followup;
    use crate::validate::limits::MAX_FOLLOWUP_BYTES;
    use crate::validate::test_support::refusal;

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(title_from("\n  Fix the bug  \nmore"), "Fix the bug");
        let long = "x".repeat(200);
        let t = title_from(&long);
        assert_eq!(t.chars().count(), TITLE_FROM_PROMPT_CHARS);
        assert!(t.ends_with('…'));
    }

    #[test]
    fn body_field_limits_name_the_field_and_the_limit() {
        let config = Config::load(None, &Default::default()).expect("defaults");
        let creator = || Creator {
            kind: runledger_domain::CreatorKind::User,
            uid: "k".into(),
            display_name: "k".into(),
        };
        let create = |body: serde_json::Value| {
            super::create(body.to_string().as_bytes(), &config, creator())
        };
        let at = |n: usize| "x".repeat(n);
        assert!(create(serde_json::json!({"prompt": at(MAX_PROMPT_BYTES)})).is_ok());
        for (body, want) in [
            (
                serde_json::json!({"prompt": at(MAX_PROMPT_BYTES + 1)}),
                "prompt is longer than 65536 bytes",
            ),
            (
                serde_json::json!({"prompt": "p", "title": "é".repeat(257)}),
                "title is longer than 256 characters",
            ),
            (
                serde_json::json!({"prompt": "p", "config": {"base_prompt": at(16 * 1024 + 1)}}),
                "config.base_prompt is longer than 16384 bytes",
            ),
            (
                serde_json::json!({"prompt": "p", "config": {"model_id": at(257)}}),
                "config.model_id is longer than 256 bytes",
            ),
            (
                serde_json::json!({"prompt": "p", "metadata": {at(65): "v"}}),
                "metadata key of 65 bytes must be 1-64 characters of [a-zA-Z0-9._-]",
            ),
            (
                serde_json::json!({"prompt": "p", "metadata": {"k": at(257)}}),
                "metadata value of \"k\" must be at most 256 bytes without NUL",
            ),
        ] {
            assert_eq!(refusal(create(body)), want);
        }
        assert!(create(serde_json::json!({"prompt": "p", "title": "é".repeat(256)})).is_ok());
        assert_eq!(
            refusal(followup(
                serde_json::json!({"message": at(MAX_FOLLOWUP_BYTES + 1)})
                    .to_string()
                    .as_bytes()
            )),
            "message is longer than 65536 bytes"
        );
    }
}
