//! `GET /api/v1/agent/runs/{id}/steps`: a run's steps (its agent's messages, tool calls with
//! their exit status, denials, usage, follow-ups; a `command` agent's output lines), paged by
//! a cursor into the transcript (`exec/steps`), read as the session page and the console's
//! run page read them (`step_pages.rs`).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::access::{run_id, visible};
use super::error_responses::{BadRequest, InternalError, NotFound, Unauthorized};
use super::problem::ApiError;
use super::step_pages::read;
use super::wire::format_time;
use super::{AppState, Principal};
use runledger_runs::steps::{self, Cursor, Kind, Step};

/// `cursor` and `limit` of a steps query: the cursor (0 when absent) and the most steps.
pub(crate) fn query(raw: &str) -> Result<(Cursor, usize), ApiError> {
    let (mut cursor, mut limit) = (Cursor::default(), steps::DEFAULT_LIMIT);
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        match key.as_ref() {
            "cursor" => {
                cursor = value
                    .parse()
                    .map_err(|e: steps::CursorError| ApiError::bad_request(e.to_string()))?
            }
            "limit" => {
                limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=steps::MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "limit must be an integer from 1 to {}",
                            steps::MAX_LIMIT
                        ))
                    })?
            }
            _ => {}
        }
    }
    Ok((cursor, limit))
}

/// One page of a run's steps.
#[derive(Debug, Serialize, ToSchema)]
pub struct StepsPage {
    pub run_id: String,
    /// The run's state when the page was read.
    pub state: &'static str,
    pub steps: Vec<StepItem>,
    /// The `cursor` to ask for next.
    pub next_cursor: String,
    /// Whether there is more after this page (or, for a live run, may be).
    pub has_more: bool,
}

/// One step. `type` says which of the optional fields it has: `message` (`text`), `tool`
/// (`tool`, `target`, `status`, `exit_code`, `output`, `output_truncated`, `duration_ms`),
/// `denial` (`tool`, `target`), `usage` (`input_tokens`, `cached_input_tokens`,
/// `output_tokens`, `cost_usd`, `model`), `error` (`text`), `followup` (`mode`, `text`),
/// `output` (`stream`, `text`, `lines`, `truncated`).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct StepItem {
    /// Where this step starts: a `cursor` that pages from it.
    pub cursor: String,
    pub execution: u32,
    /// When runledger read the step's first line (RFC 3339).
    pub at: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A tool call's end: `ok`, `error`, or `no_result`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl StepItem {
    pub fn of(step: &Step) -> StepItem {
        let mut item = StepItem {
            cursor: step.cursor.to_string(),
            execution: step.execution,
            at: format_time(step.at),
            kind: step.kind.name(),
            ..StepItem::default()
        };
        match &step.kind {
            Kind::Message { text } | Kind::Error { text } => item.text = Some(text.clone()),
            Kind::Tool {
                name,
                target,
                status,
                exit_code,
                output,
                output_truncated,
                duration_ms,
            } => {
                item.tool = Some(name.clone());
                item.target = target.clone();
                item.status = Some(status.as_str());
                item.exit_code = *exit_code;
                item.output = Some(output.clone());
                item.output_truncated = Some(*output_truncated);
                item.duration_ms = *duration_ms;
            }
            Kind::Denial { tool, target } => {
                item.tool = Some(tool.clone());
                item.target = target.clone();
            }
            Kind::Usage {
                input_tokens,
                cached_input_tokens,
                output_tokens,
                cost_usd,
                model,
            } => {
                item.input_tokens = *input_tokens;
                item.cached_input_tokens = *cached_input_tokens;
                item.output_tokens = *output_tokens;
                item.cost_usd = *cost_usd;
                item.model = model.clone();
            }
            Kind::Followup { mode, text } => {
                item.mode = mode.clone();
                item.text = Some(text.clone());
            }
            Kind::Output {
                stream,
                text,
                lines,
                truncated,
            } => {
                item.stream = Some(stream.clone());
                item.text = Some(text.clone());
                item.lines = Some(*lines);
                item.truncated = Some(*truncated);
            }
        }
        item
    }
}

/// A page of the run's steps: what its agent said and did, read from its transcript
/// (runledger's own endpoint; see `docs/api.md`).
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/steps",
    tag = "runs",
    operation_id = "getRunSteps",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
        ("cursor" = Option<String>, Query, description = "Where to start: 0 (the default), a `next_cursor`, or a step's `cursor`."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000,
         description = "Most steps to return; 100 when absent."),
    ),
    responses(
        (status = 200, description = "A page of the run's steps", body = StepsPage),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn run_steps(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let (cursor, limit) = query(req.query_string())?;
    let run = visible(&state, &key, id)?;
    let page = read(&state, &run, cursor, limit)?;
    Ok(HttpResponse::Ok().json(StepsPage {
        run_id: id.to_string(),
        state: run.state.as_str(),
        steps: page.steps.iter().map(StepItem::of).collect(),
        next_cursor: page.next_cursor.to_string(),
        has_more: page.more || !run.state.is_terminal(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_takes_a_cursor_a_page_gave_and_a_limit_in_range() {
        assert_eq!(query("").ok(), Some((Cursor::default(), 100)));
        assert_eq!(
            query("cursor=12.3&limit=5").ok(),
            Some((
                Cursor {
                    offset: 12,
                    skip: 3
                },
                5
            ))
        );
        for bad in ["cursor=x", "cursor=-1", "limit=0", "limit=1001", "limit=a"] {
            assert!(query(bad).is_err(), "{bad}");
        }
    }
}
