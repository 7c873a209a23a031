//! What the console shows of an execution's provenance: a section of the run page (from the
//! run's JSON, whose `provenance` is the latest execution's) and the short parts of a
//! `Provenance` event in the timeline. Every value is escaped; the environment's definition
//! is shown as its digest, not its text.

use serde_json::Value;

use super::display::text;
use crate::html::escape;

/// The short parts of a `Provenance` event's `data`: each repository's commit, the CLI's
/// version, the environment's digest and the model.
pub(super) fn event_parts(data: &Value) -> Vec<String> {
    let mut parts = Vec::new();
    for repo in data["repositories"].as_array().into_iter().flatten() {
        parts.push(format!(
            "{} at <code>{}</code>",
            escape(text(&repo["url"])),
            escape(short(text(&repo["commit"])))
        ));
    }
    if let Some(cli) = data["agent_cli"].as_object() {
        let version = cli
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("version unknown");
        parts.push(format!(
            "{} {}",
            escape(cli.get("name").and_then(Value::as_str).unwrap_or("")),
            escape(version)
        ));
    }
    parts.push(format!(
        "environment {} <code>{}</code>",
        escape(text(&data["environment"]["id"])),
        escape(short(text(&data["environment"]["sha256"])))
    ));
    if let Some(model) = data["model_id"].as_str() {
        parts.push(format!("model {}", escape(model)));
    }
    parts
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The run page's "Provenance" section: what the latest execution ran with, when it recorded
/// it.
pub(super) fn section(run: &Value) -> String {
    let p = &run["provenance"];
    if !p.is_object() {
        return String::new();
    }
    let mut rows = vec![(
        "Execution".to_string(),
        p["execution"].as_u64().unwrap_or(0).to_string(),
    )];
    for repo in p["repositories"].as_array().into_iter().flatten() {
        let wanted = repo["ref"].as_str().unwrap_or("default branch");
        rows.push((
            format!("Repository {}", text(&repo["path"])),
            format!(
                "{} ({wanted}) at {}",
                text(&repo["url"]),
                text(&repo["commit"])
            ),
        ));
    }
    if let Some(cli) = p["agent_cli"].as_object() {
        rows.push((
            "Agent CLI".into(),
            format!(
                "{} {}",
                cli.get("name").and_then(Value::as_str).unwrap_or(""),
                cli.get("version")
                    .and_then(Value::as_str)
                    .unwrap_or("(version unknown)")
            ),
        ));
    }
    rows.push(("Harness".into(), text(&p["harness"]).to_string()));
    rows.push((
        "Environment".into(),
        format!(
            "{} sha256:{}",
            text(&p["environment"]["id"]),
            text(&p["environment"]["sha256"])
        ),
    ));
    rows.push((
        "Sandbox".into(),
        format!(
            "{}, network {}",
            text(&p["sandbox"]),
            if p["network"].as_bool() == Some(true) {
                "on"
            } else {
                "off"
            }
        ),
    ));
    if let Some(model) = p["model_id"].as_str() {
        rows.push(("Model".into(), model.to_string()));
    }
    rows.push((
        "runledger".into(),
        text(&p["runledger_version"]).to_string(),
    ));
    let mut body = String::from("<h2>Provenance</h2><dl class=\"details provenance\">");
    for (name, value) in rows {
        body.push_str(&format!(
            "<dt>{}</dt><dd>{}</dd>",
            escape(&name),
            escape(&value)
        ));
    }
    body.push_str("</dl>");
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn provenance() -> Value {
        json!({
            "execution": 2,
            "repositories": [{"url": "https://git.example/<b>x</b>.git", "path": ".", "ref": "main",
                              "commit": "0123456789abcdef0123456789abcdef01234567"}],
            "environment": {"id": "env", "sha256": "ab".repeat(32), "definition": "{}"},
            "harness": "claude",
            "agent_cli": {"name": "claude", "version": "2.0.1 <script>"},
            "runledger_version": "0.1.0",
            "sandbox": "bwrap", "network": false, "limits": {},
            "model_id": "sonnet"
        })
    }

    #[test]
    fn the_section_shows_commits_cli_and_digest_escaped() {
        let html = section(&json!({"provenance": provenance()}));
        assert!(html.contains("<h2>Provenance</h2>"), "{html}");
        assert!(
            html.contains("0123456789abcdef0123456789abcdef01234567"),
            "{html}"
        );
        assert!(html.contains("claude 2.0.1 &lt;script&gt;"), "{html}");
        assert!(
            html.contains(&format!("env sha256:{}", "ab".repeat(32))),
            "{html}"
        );
        assert!(
            !html.contains("<script>") && !html.contains("<b>"),
            "{html}"
        );
        assert_eq!(section(&json!({})), "");
    }

    #[test]
    fn an_event_shows_short_commits_and_the_version() {
        let parts = event_parts(&provenance()).join(", ");
        assert!(parts.contains("<code>0123456789ab</code>"), "{parts}");
        assert!(parts.contains("claude 2.0.1 &lt;script&gt;"), "{parts}");
        assert!(parts.contains("model sonnet"), "{parts}");
    }
}
