//! Recognises, in a preset CLI's structured output, a write the kernel refused during a
//! read-only run: inside runledger's sandbox such a run's workspace (and the whole host but its
//! home and `/tmp`) is mounted read-only, so a write fails with `EROFS` wherever the CLI sends
//! it — its shell tool, its own file tool, a script — and the CLI only hands the error to the
//! model. The observer (`observe/`) turns what this module finds into the run's failure.
//!
//! Pure: it reads one parsed output event at a time and decides nothing from a tool's output
//! except the kernel's own message for `EROFS`, and only for a tool call that failed (a command
//! with a non-zero exit, a result marked as an error) where the CLI says so. Gemini CLI marks
//! neither for a shell command, so for its shell tool the message alone counts: a command that
//! only prints the words fails the run, the safe side of the mistake.

/// How `strerror(EROFS)` reads in every tool's error: the C library's "Read-only file system",
/// Node's "EROFS: read-only file system", Python's "[Errno 30] Read-only file system".
const EROFS_TEXT: &str = "read-only file system";

/// Whether a tool's output carries the kernel's refusal of a write.
fn refused(text: &str) -> bool {
    text.to_lowercase().contains(EROFS_TEXT)
}

/// Gemini CLI's shell tool, whose result carries no exit status.
const GEMINI_SHELL: &str = "run_shell_command";

/// A tool call the CLI announced, kept until its result arrives.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub tool: String,
    /// How a denial names it: the tool and the file or command it was given.
    pub what: String,
}

impl Call {
    pub fn new(id: &str, tool: &str, input: &serde_json::Value) -> Call {
        let what = input["file_path"]
            .as_str()
            .or_else(|| input["command"].as_str())
            .map(|w| format!("{tool} ({w})"))
            .unwrap_or_else(|| tool.to_string());
        Call {
            id: id.to_string(),
            tool: tool.to_string(),
            what,
        }
    }
}

/// The call with `id` among those remembered.
pub fn find<'a>(calls: &'a std::collections::VecDeque<Call>, id: &str) -> Option<&'a Call> {
    calls.iter().find(|call| call.id == id)
}

/// What a denied write is called in the run's status message.
fn denial(what: &str) -> String {
    format!("{what}: the write was refused (read-only file system)")
}

/// Codex: a completed `command_execution` that exited non-zero with the refusal in its output,
/// or a `file_change` (an `apply_patch`) that failed — in a read-only run a patch can only be a
/// write that was denied.
pub fn codex(event: &serde_json::Value) -> Vec<String> {
    if event["type"] != "item.completed" {
        return Vec::new();
    }
    let item = &event["item"];
    match item["type"].as_str() {
        Some("command_execution") => {
            let failed = item["exit_code"].as_i64().is_some_and(|c| c != 0);
            let output = item["aggregated_output"].as_str().unwrap_or_default();
            if failed && refused(output) {
                let command = item["command"].as_str().unwrap_or("a command");
                vec![denial(&format!("command ({command})"))]
            } else {
                Vec::new()
            }
        }
        Some("file_change") if item["status"] == "failed" => item["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|change| {
                let path = change["path"].as_str().unwrap_or("a file");
                denial(&format!("apply_patch ({path})"))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Claude Code: the ids of the tool calls in a `user` line whose result is an error carrying
/// the refusal (its shell tool prefixes the exit code, its Write tool reports `EROFS`).
pub fn claude_refused_calls(event: &serde_json::Value) -> Vec<String> {
    if event["type"] != "user" {
        return Vec::new();
    }
    let blocks = event["message"]["content"].as_array().into_iter().flatten();
    blocks
        .filter(|b| b["type"] == "tool_result" && b["is_error"] == true)
        .filter(|b| refused(&text_of(&b["content"])))
        .filter_map(|b| b["tool_use_id"].as_str().map(str::to_string))
        .collect()
}

/// Claude Code: the tool calls of an `assistant` line.
pub fn claude_calls(event: &serde_json::Value) -> Vec<Call> {
    if event["type"] != "assistant" {
        return Vec::new();
    }
    let blocks = event["message"]["content"].as_array().into_iter().flatten();
    blocks
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            let id = b["id"].as_str().unwrap_or_default();
            Call::new(id, b["name"].as_str().unwrap_or("a tool"), &b["input"])
        })
        .collect()
}

/// Gemini CLI: the call (among `calls`) of a `tool_result` that carries the refusal in its
/// output or its error: a result marked as an error, or one of the shell tool, whose result
/// is never marked. A reading tool's successful result that quotes the words is no denial.
pub fn gemini_refused_call(
    event: &serde_json::Value,
    calls: &std::collections::VecDeque<Call>,
) -> Option<String> {
    if event["type"] != "tool_result" {
        return None;
    }
    let text = [&event["output"], &event["error"]["message"]]
        .iter()
        .filter_map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if !refused(&text) {
        return None;
    }
    let call = find(calls, event["tool_id"].as_str().unwrap_or_default());
    let shell = call.is_some_and(|c| c.tool == GEMINI_SHELL);
    (event["status"] == "error" || shell).then(|| named(call))
}

/// The denial of a call, if it was remembered.
pub fn named(call: Option<&Call>) -> String {
    denial(call.map_or("a tool", |c| c.what.as_str()))
}

/// A tool result's text: a string, or the text parts of a list.
pub fn text_of(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> serde_json::Value {
        serde_json::from_str(text).expect("json")
    }

    #[test]
    fn a_codex_command_counts_only_when_it_failed_with_the_refusal() {
        let denied = json(
            r#"{"type":"item.completed","item":{"type":"command_execution","command":"/usr/bin/bash -lc 'touch t'","aggregated_output":"touch: cannot touch 't': Read-only file system\n","exit_code":1,"status":"failed"}}"#,
        );
        assert_eq!(
            codex(&denied),
            ["command (/usr/bin/bash -lc 'touch t'): the write was refused (read-only file system)"]
        );
        // The words in the output of a command that succeeded (a file quoting them) are no denial.
        let read = json(
            r#"{"type":"item.completed","item":{"type":"command_execution","command":"cat notes","aggregated_output":"Read-only file system\n","exit_code":0}}"#,
        );
        assert!(codex(&read).is_empty());
        let other = json(
            r#"{"type":"item.completed","item":{"type":"command_execution","command":"false","aggregated_output":"","exit_code":1}}"#,
        );
        assert!(codex(&other).is_empty());
        let started = json(
            r#"{"type":"item.started","item":{"type":"file_change","changes":[{"path":"/w/a"}],"status":"failed"}}"#,
        );
        assert!(codex(&started).is_empty());
    }

    #[test]
    fn a_failed_codex_patch_names_each_file() {
        let patch = json(
            r#"{"type":"item.completed","item":{"type":"file_change","changes":[{"path":"/w/a.txt","kind":"add"},{"path":"/w/b.txt","kind":"update"}],"status":"failed"}}"#,
        );
        let denials = codex(&patch);
        assert_eq!(denials.len(), 2);
        assert!(
            denials[0].starts_with("apply_patch (/w/a.txt)"),
            "{denials:?}"
        );
        assert!(
            denials[1].starts_with("apply_patch (/w/b.txt)"),
            "{denials:?}"
        );
        let applied = json(
            r#"{"type":"item.completed","item":{"type":"file_change","changes":[{"path":"/w/a.txt"}],"status":"completed"}}"#,
        );
        assert!(codex(&applied).is_empty());
    }

    #[test]
    fn claude_error_results_with_the_refusal_name_their_calls() {
        let calls = claude_calls(&json(
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"touch t"}},{"type":"tool_use","id":"t2","name":"Write","input":{"file_path":"/w/h.txt"}}]}}"#,
        ));
        let named_as: Vec<(&str, &str)> = calls
            .iter()
            .map(|c| (c.id.as_str(), c.what.as_str()))
            .collect();
        assert_eq!(
            named_as,
            [("t1", "Bash (touch t)"), ("t2", "Write (/w/h.txt)")]
        );
        let results = json(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"Exit code 1\ntouch: cannot touch 't': Read-only file system","is_error":true,"tool_use_id":"t1"},{"type":"tool_result","content":[{"type":"text","text":"EROFS: read-only file system, open '/w/h.txt'"}],"is_error":true,"tool_use_id":"t2"},{"type":"tool_result","content":"Read-only file system","is_error":false,"tool_use_id":"t3"}]}}"#,
        );
        assert_eq!(claude_refused_calls(&results), ["t1", "t2"]);
        let remembered = calls.into_iter().collect();
        assert!(named(find(&remembered, "t1")).starts_with("Bash (touch t): "));
        assert!(named(find(&remembered, "zz")).starts_with("a tool: "));
    }

    #[test]
    fn gemini_shell_results_and_error_results_with_the_refusal_count() {
        let calls: std::collections::VecDeque<Call> = [
            Call::new("s1", "run_shell_command", &json(r#"{"command":"touch t"}"#)),
            Call::new("w1", "write_file", &json(r#"{"file_path":"h.txt"}"#)),
            Call::new("r1", "read_file", &json(r#"{"file_path":"notes.md"}"#)),
        ]
        .into_iter()
        .collect();
        let shell = json(
            r#"{"type":"tool_result","tool_id":"s1","status":"success","output":"touch: cannot touch 't': Read-only file system"}"#,
        );
        let denied = gemini_refused_call(&shell, &calls).expect("the shell's refusal");
        assert!(
            denied.starts_with("run_shell_command (touch t): "),
            "{denied}"
        );
        let write = json(
            r#"{"type":"tool_result","tool_id":"w1","status":"error","error":{"type":"file_write_failure","message":"EROFS: read-only file system, open '/w/h.txt'"}}"#,
        );
        let denied = gemini_refused_call(&write, &calls).expect("the write's refusal");
        assert!(denied.starts_with("write_file (h.txt): "), "{denied}");
        // A file that only mentions the refusal, read with the file tool, is no denial.
        let read = json(
            r#"{"type":"tool_result","tool_id":"r1","status":"success","output":"EROFS: read-only file system"}"#,
        );
        assert_eq!(gemini_refused_call(&read, &calls), None);
        let fine = json(r#"{"type":"tool_result","tool_id":"s1","status":"success","output":"a"}"#);
        assert_eq!(gemini_refused_call(&fine, &calls), None);
    }
}
