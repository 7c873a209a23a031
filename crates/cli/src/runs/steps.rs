//! `runledger runs steps ID`: a run's steps (`GET /api/v1/agent/runs/{id}/steps`), every page
//! of them, one line per step for a person (an agent's text escaped and marked as the agent's),
//! or each step's JSON on a line of its own with `--json`.

use serde_json::Value;

use super::api::{print_line, run_path};
use crate::remote::Remote;
use crate::terminal::{self, printable, Origin};

/// Prints every step of run `id`, page by page.
pub(super) async fn print_steps(remote: &Remote, id: &str, json: bool) -> anyhow::Result<()> {
    let mut cursor = "0".to_string();
    loop {
        let page = remote
            .get(
                &format!("{}/steps", run_path(id)),
                &[("cursor", cursor.clone()), ("limit", "1000".to_string())],
            )
            .await?;
        let steps = page["steps"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for step in steps {
            let line = if json {
                terminal::json(step)
            } else {
                describe(step)
            };
            print_line(&line)?;
        }
        let next = page["next_cursor"].as_str().unwrap_or_default().to_string();
        let terminal_state = matches!(
            page["state"].as_str(),
            Some("SUCCEEDED" | "FAILED" | "CANCELLED" | "ERROR")
        );
        // A live run's steps go on; this prints what there is now and stops at its end.
        if next.is_empty() || next == cursor || (steps.is_empty() && !terminal_state) {
            return Ok(());
        }
        if page["has_more"] != true {
            return Ok(());
        }
        cursor = next;
    }
}

fn field<'a>(step: &'a Value, name: &str) -> &'a str {
    step[name].as_str().unwrap_or_default()
}

/// One step as a line: its execution, its kind and what it says.
fn describe(step: &Value) -> String {
    let execution = step["execution"].as_u64().unwrap_or(0);
    let text = |name| printable(field(step, name), Origin::AgentRest).into_owned();
    let what = match field(step, "type") {
        "message" => format!("agent: {}", text("text")),
        "tool" => {
            let end = match step["exit_code"].as_i64() {
                Some(code) => format!("exit {code}"),
                None => field(step, "status").to_string(),
            };
            let took = step["duration_ms"]
                .as_u64()
                .map(|ms| format!(", {ms} ms"))
                .unwrap_or_default();
            format!("tool {} {} ({end}{took})", text("tool"), text("target"))
        }
        "denial" => format!("denied {} {}", text("tool"), text("target")),
        "usage" => format!(
            "usage: {} input, {} output tokens{}",
            step["input_tokens"]
                .as_u64()
                .map_or("?".into(), |n| n.to_string()),
            step["output_tokens"]
                .as_u64()
                .map_or("?".into(), |n| n.to_string()),
            step["cost_usd"]
                .as_f64()
                .map(|c| format!(", ${c:.4}"))
                .unwrap_or_default()
        ),
        "error" => format!("error: {}", text("text")),
        "followup" => format!("follow-up: {}", text("text")),
        "output" => format!("{}: {}", text("stream"), text("text")),
        other => printable(other, Origin::Field).into_owned(),
    };
    format!("[{execution}] {what}")
}
