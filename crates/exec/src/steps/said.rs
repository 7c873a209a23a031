//! What one line of a preset CLI's structured output says, as the pieces steps are made of:
//! Claude Code's and Gemini CLI's stream-json, Codex's `--json` events. Pure and per line:
//! pairing a call with its result is `builder.rs`'s.

use runledger_domain::harness::Harness;
use serde_json::Value;

/// One thing a line says.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Said {
    /// The agent's text; `delta`: a piece of a message streamed in parts (Gemini CLI).
    Message {
        text: String,
        delta: bool,
    },
    /// A tool call started; its result comes in a later line, under the same `id`.
    Call {
        id: String,
        name: String,
        target: Option<String>,
    },
    /// A tool call's result.
    Result(Outcome),
    Denial {
        tool: String,
        target: Option<String>,
    },
    Usage {
        input_tokens: Option<u64>,
        cached_input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        cost_usd: Option<f64>,
        model: Option<String>,
    },
    Error(String),
}

/// How a tool call ended, under the call's `id`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Outcome {
    pub(super) id: String,
    pub(super) ok: bool,
    pub(super) exit_code: Option<i64>,
    pub(super) output: String,
    /// The call itself (tool, target), when the line says it again (Codex's completed items),
    /// so a result whose call was not read still makes a step.
    pub(super) call: Option<(String, Option<String>)>,
}

/// What `line` (one whole line of the CLI's stdout) says; `None` when it is not one of the
/// CLI's JSON events (plain output, which is shown as it is).
pub(super) fn said(harness: Harness, line: &str) -> Option<Vec<Said>> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    let event: Value = serde_json::from_str(line).ok()?;
    let kind = event["type"].as_str()?;
    Some(match harness {
        Harness::Claude => claude(kind, &event),
        Harness::Codex => codex(kind, &event),
        Harness::Gemini => gemini(kind, &event),
        Harness::Command | Harness::Demo => return None,
    })
}

/// What a tool call works on (a file, a command, a query…).
fn target(input: &Value) -> Option<String> {
    [
        "command",
        "file_path",
        "path",
        "absolute_path",
        "pattern",
        "query",
        "url",
        "dir_path",
    ]
    .iter()
    .find_map(|k| input[*k].as_str())
    .map(str::to_string)
}

/// A command's exit status as a CLI words it in a failed call's output ("Exit code 2",
/// "Exit Code: 2").
fn exit_code_in(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find("exit code")? + "exit code".len();
    let rest = lower[at..].trim_start_matches([':', ' ']);
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// Tools that run a command line: a success means exit status 0.
pub(super) fn is_shell(tool: &str) -> bool {
    matches!(tool, "Bash" | "run_shell_command" | "shell" | "command")
}

fn count(v: &Value) -> Option<u64> {
    v.as_u64()
}

fn claude(kind: &str, e: &Value) -> Vec<Said> {
    let mut out = Vec::new();
    let blocks = e["message"]["content"].as_array().into_iter().flatten();
    match kind {
        "assistant" => {
            for block in blocks {
                match block["type"].as_str() {
                    Some("text") => out.push(Said::Message {
                        text: block["text"].as_str().unwrap_or_default().to_string(),
                        delta: false,
                    }),
                    Some("tool_use") => out.push(Said::Call {
                        id: block["id"].as_str().unwrap_or_default().to_string(),
                        name: block["name"].as_str().unwrap_or("?").to_string(),
                        target: target(&block["input"]),
                    }),
                    _ => {}
                }
            }
        }
        "user" => {
            for block in blocks.filter(|b| b["type"] == "tool_result") {
                let output = crate::denied_writes::text_of(&block["content"]);
                let ok = block["is_error"] != true;
                out.push(Said::Result(Outcome {
                    id: block["tool_use_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    ok,
                    exit_code: if ok { None } else { exit_code_in(&output) },
                    output,
                    call: None,
                }));
            }
        }
        "result" => {
            let usage = &e["usage"];
            out.push(Said::Usage {
                input_tokens: count(&usage["input_tokens"]),
                cached_input_tokens: count(&usage["cache_read_input_tokens"]),
                output_tokens: count(&usage["output_tokens"]),
                cost_usd: e["total_cost_usd"].as_f64(),
                model: e["modelUsage"]
                    .as_object()
                    .and_then(|m| m.keys().next())
                    .cloned(),
            });
            for denial in e["permission_denials"].as_array().into_iter().flatten() {
                out.push(Said::Denial {
                    tool: denial["tool_name"].as_str().unwrap_or("?").to_string(),
                    target: target(&denial["tool_input"]),
                });
            }
            if e["is_error"] == true {
                let text = e["result"]
                    .as_str()
                    .or_else(|| e["subtype"].as_str())
                    .unwrap_or("error");
                out.push(Said::Error(text.to_string()));
            }
        }
        _ => {}
    }
    out
}

fn codex(kind: &str, e: &Value) -> Vec<Said> {
    let item = &e["item"];
    let id = item["id"].as_str().unwrap_or_default().to_string();
    let call = || -> Option<(String, Option<String>)> {
        match item["type"].as_str()? {
            "command_execution" => {
                Some(("shell".into(), item["command"].as_str().map(str::to_string)))
            }
            "file_change" => {
                let changes: Vec<String> = item["changes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        format!(
                            "{} {}",
                            c["kind"].as_str().unwrap_or("change"),
                            c["path"].as_str().unwrap_or("?")
                        )
                    })
                    .collect();
                Some(("file_change".into(), Some(changes.join(", "))))
            }
            "mcp_tool_call" => Some((
                format!(
                    "mcp:{}.{}",
                    item["server"].as_str().unwrap_or("?"),
                    item["tool"].as_str().unwrap_or("?")
                ),
                None,
            )),
            "web_search" => Some((
                "web_search".into(),
                item["query"].as_str().map(str::to_string),
            )),
            _ => None,
        }
    };
    match kind {
        "item.started" => call()
            .map(|(name, target)| Said::Call { id, name, target })
            .into_iter()
            .collect(),
        "item.completed" => match item["type"].as_str() {
            Some("agent_message") => vec![Said::Message {
                text: item["text"].as_str().unwrap_or_default().to_string(),
                delta: false,
            }],
            Some("error") => vec![Said::Error(
                item["message"].as_str().unwrap_or_default().to_string(),
            )],
            _ => match call() {
                Some(call) => {
                    let exit_code = item["exit_code"].as_i64();
                    let status = item["status"].as_str().unwrap_or_default();
                    vec![Said::Result(Outcome {
                        id,
                        ok: status == "completed" && exit_code.unwrap_or(0) == 0,
                        exit_code,
                        output: item["aggregated_output"]
                            .as_str()
                            .or_else(|| item["error"]["message"].as_str())
                            .unwrap_or_default()
                            .to_string(),
                        call: Some(call),
                    })]
                }
                None => Vec::new(),
            },
        },
        "turn.completed" => {
            let usage = &e["usage"];
            vec![Said::Usage {
                input_tokens: count(&usage["input_tokens"]),
                cached_input_tokens: count(&usage["cached_input_tokens"]),
                output_tokens: count(&usage["output_tokens"]),
                cost_usd: None,
                model: None,
            }]
        }
        "turn.failed" => vec![Said::Error(
            e["error"]["message"]
                .as_str()
                .unwrap_or("turn failed")
                .to_string(),
        )],
        "error" => vec![Said::Error(
            e["message"].as_str().unwrap_or("error").to_string(),
        )],
        _ => Vec::new(),
    }
}

fn gemini(kind: &str, e: &Value) -> Vec<Said> {
    match kind {
        "message" if e["role"] == "assistant" => vec![Said::Message {
            text: e["content"].as_str().unwrap_or_default().to_string(),
            delta: e["delta"] == true,
        }],
        "tool_use" => vec![Said::Call {
            id: e["tool_id"].as_str().unwrap_or_default().to_string(),
            name: e["tool_name"].as_str().unwrap_or("?").to_string(),
            target: target(&e["parameters"]),
        }],
        "tool_result" => {
            let output = e["output"]
                .as_str()
                .or_else(|| e["error"]["message"].as_str())
                .unwrap_or_default()
                .to_string();
            let ok = e["status"] == "success";
            vec![Said::Result(Outcome {
                id: e["tool_id"].as_str().unwrap_or_default().to_string(),
                ok,
                exit_code: if ok { None } else { exit_code_in(&output) },
                output,
                call: None,
            })]
        }
        "result" => {
            let stats = &e["stats"];
            let mut out = vec![Said::Usage {
                input_tokens: count(&stats["input_tokens"]),
                cached_input_tokens: count(&stats["cached"]),
                output_tokens: count(&stats["output_tokens"]),
                cost_usd: None,
                model: stats["models"]
                    .as_object()
                    .and_then(|m| m.keys().next())
                    .cloned(),
            }];
            if e["status"] == "error" {
                out.push(Said::Error(
                    e["error"]["message"]
                        .as_str()
                        .unwrap_or("error")
                        .to_string(),
                ));
            }
            out
        }
        "error" => vec![Said::Error(
            e["message"].as_str().unwrap_or("error").to_string(),
        )],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_read_as_the_clis_word_them() {
        assert_eq!(exit_code_in("Exit code 2\nboom"), Some(2));
        assert_eq!(exit_code_in("Command failed. Exit Code: 127"), Some(127));
        assert_eq!(exit_code_in("no code"), None);
    }

    #[test]
    fn a_line_that_is_not_the_clis_json_says_nothing_structured() {
        assert_eq!(said(Harness::Claude, "plain text"), None);
        assert_eq!(said(Harness::Codex, "{broken"), None);
        assert_eq!(said(Harness::Command, r#"{"type":"assistant"}"#), None);
        assert_eq!(said(Harness::Gemini, r#"{"no_type":1}"#), None);
    }
}
