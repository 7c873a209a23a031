//! The readable transcript entries of a CLI's structured events: its text, its tool calls and
//! their results, its errors, each cut to a bounded length. Pure: it formats one event and
//! decides nothing about the execution.

use runledger_domain::harness::Harness;

/// Longest readable entry, in characters.
pub(super) const READABLE_LIMIT: usize = 2000;

/// The readable entries of one CLI event.
pub(super) fn readable(harness: Harness, e: &serde_json::Value) -> Vec<String> {
    let kind = e["type"].as_str().unwrap_or_default();
    let mut out = match harness {
        Harness::Claude => readable_claude(kind, e),
        Harness::Codex => readable_codex(kind, e),
        Harness::Gemini => readable_gemini(kind, e),
        Harness::Command | Harness::Demo => Vec::new(),
    };
    out.retain(|t| !t.ends_with(": "));
    out
}

/// A text cut to `READABLE_LIMIT` characters, marked when cut.
fn short(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= READABLE_LIMIT {
        text.to_string()
    } else {
        let cut: String = text.chars().take(READABLE_LIMIT).collect();
        format!("{cut}…")
    }
}

/// What a tool call works on (a file, a command, a query…), for its line.
fn target(input: &serde_json::Value) -> String {
    ["file_path", "command", "path", "pattern", "query", "url"]
        .iter()
        .find_map(|k| input[*k].as_str())
        .map(|v| format!(": {}", short(v)))
        .unwrap_or_default()
}

/// Claude Code's stream-json: assistant text and tool calls, tool results, the result.
fn readable_claude(kind: &str, e: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    match kind {
        "assistant" => {
            for block in e["message"]["content"].as_array().into_iter().flatten() {
                match block["type"].as_str() {
                    Some("text") => out.push(format!(
                        "assistant: {}",
                        short(block["text"].as_str().unwrap_or_default())
                    )),
                    Some("tool_use") => out.push(format!(
                        "tool call {}{}",
                        block["name"].as_str().unwrap_or("?"),
                        target(&block["input"])
                    )),
                    _ => {}
                }
            }
        }
        "user" => {
            for block in e["message"]["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    let text = crate::denied_writes::text_of(&block["content"]);
                    let error = if block["is_error"] == true {
                        " (error)"
                    } else {
                        ""
                    };
                    out.push(format!("tool result{error}: {}", short(&text)));
                }
            }
        }
        "result" => {
            out.push(format!(
                "result: {}",
                short(e["result"].as_str().unwrap_or_default())
            ));
        }
        _ => {}
    }
    out
}

/// Codex's JSON events: completed items (messages, commands, file changes, MCP calls), failures.
fn readable_codex(kind: &str, e: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    match kind {
        "item.completed" => {
            let item = &e["item"];
            match item["type"].as_str().unwrap_or_default() {
                "agent_message" => out.push(format!(
                    "assistant: {}",
                    short(item["text"].as_str().unwrap_or_default())
                )),
                "command_execution" => out.push(format!(
                    "command (exit {}): {}\n{}",
                    item["exit_code"]
                        .as_i64()
                        .map_or("?".to_string(), |c| c.to_string()),
                    short(item["command"].as_str().unwrap_or_default()),
                    short(item["aggregated_output"].as_str().unwrap_or_default())
                )),
                "file_change" => {
                    for change in item["changes"].as_array().into_iter().flatten() {
                        out.push(format!(
                            "file {} ({}): {}",
                            change["kind"].as_str().unwrap_or("change"),
                            item["status"].as_str().unwrap_or("?"),
                            change["path"].as_str().unwrap_or("?")
                        ));
                    }
                }
                "mcp_tool_call" => out.push(format!(
                    "MCP tool {}.{} ({})",
                    item["server"].as_str().unwrap_or("?"),
                    item["tool"].as_str().unwrap_or("?"),
                    item["status"].as_str().unwrap_or("?")
                )),
                _ => {}
            }
        }
        "turn.failed" => {
            out.push(format!(
                "error: {}",
                short(e["error"]["message"].as_str().unwrap_or_default())
            ));
        }
        _ => {}
    }
    out
}

/// Gemini CLI's stream-json: assistant deltas, tool calls and their results.
fn readable_gemini(kind: &str, e: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    match kind {
        "message" if e["role"] == "assistant" => {
            // Gemini CLI streams the text in deltas: one entry per delta keeps them in order.
            out.push(format!(
                "assistant: {}",
                short(e["content"].as_str().unwrap_or_default())
            ));
        }
        "tool_use" => out.push(format!(
            "tool call {}{}",
            e["tool_name"].as_str().unwrap_or("?"),
            target(&e["parameters"])
        )),
        "tool_result" => {
            let text = e["output"]
                .as_str()
                .or_else(|| e["error"]["message"].as_str())
                .unwrap_or_default();
            out.push(format!(
                "tool result ({}): {}",
                e["status"].as_str().unwrap_or("?"),
                short(text)
            ));
        }
        _ => {}
    }
    out
}
