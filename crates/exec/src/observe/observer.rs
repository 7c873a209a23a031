//! What one execution's CLI has reported so far (`Observer`): each whole stdout line read by
//! the CLI's format, each stderr line kept for a failure without a structured reason, and at
//! the end the verdict on how the execution ended.

use super::readable::readable;
use super::text::{auth_code, clip, is_session_id, one_line};
use super::tokens::{cost, count, Usage};
use crate::denied_writes;
use crate::transcript::Redactor;
use runledger_domain::harness::Harness;
use runledger_domain::StatusMessage;

/// Stderr lines kept for a failure without a structured reason.
const STDERR_LINES: usize = 3;
/// Stderr lines the CLIs print on every start (Gemini CLI's mode and terminal notes, Codex's
/// stdin note), left out of a failure message.
const NOISE: &[&str] = &[
    "YOLO mode is enabled",
    "Warning: 256-color support not detected",
    "Ripgrep is not available",
    "Reading additional input from stdin",
];
/// Tool calls remembered to name a later denial.
const CALLS_KEPT: usize = 64;

/// A failure the CLI reported in its own words.
#[derive(Debug, Clone, PartialEq)]
struct Reported {
    message: String,
    code: Option<&'static str>,
}

/// What one execution's CLI has reported so far.
#[derive(Debug)]
pub struct Observer {
    harness: Harness,
    session: Option<String>,
    error: Option<Reported>,
    denials: Vec<String>,
    usage: Usage,
    /// The last stderr lines that say something, for a CLI that fails without JSON (its
    /// message can span lines: Gemini CLI's missing-key message is two).
    last_stderr: std::collections::VecDeque<String>,
    /// Claude Code's and Gemini CLI's recent tool calls by id, to name the one a denial
    /// refers to.
    calls: std::collections::VecDeque<denied_writes::Call>,
    /// A read-only run: a write the kernel refused is a denial (`denied_writes`).
    read_only: bool,
    /// Claude Code with streaming input: the user messages it echoed back as it took them
    /// (`--replay-user-messages`), and the turns it ended (`result` lines).
    echoed: u32,
    results: u32,
    /// Whether the last turn ended in an error result.
    last_result_failed: bool,
    redactor: Redactor,
}

impl Observer {
    pub fn new(harness: Harness) -> Observer {
        Observer {
            harness,
            session: None,
            error: None,
            denials: Vec::new(),
            usage: Usage::default(),
            last_stderr: std::collections::VecDeque::new(),
            calls: std::collections::VecDeque::new(),
            echoed: 0,
            results: 0,
            last_result_failed: false,
            redactor: Redactor::default(),
            read_only: false,
        }
    }

    /// The same observer, redacting with `redactor` everything it keeps.
    pub fn redacting(self, redactor: Redactor) -> Observer {
        Observer { redactor, ..self }
    }

    /// A text of the CLI's output, redacted.
    fn redact(&self, text: &str) -> String {
        self.redactor.apply(text).into_owned()
    }

    /// An observer of a read-only run, where a write the kernel refused fails the execution.
    pub fn read_only(mut self) -> Observer {
        self.read_only = true;
        self
    }

    /// How many user messages written to Claude Code's stdin it has taken (echoed back).
    pub fn echoed(&self) -> u32 {
        self.echoed
    }

    /// How many turns Claude Code has ended, and whether the last one failed.
    pub fn turns_ended(&self) -> (u32, bool) {
        (self.results, self.last_result_failed)
    }

    /// The session id the CLI reported (Claude's `session_id`, Codex's `thread_id`, Gemini's
    /// `session_id`), if it looks like one.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// One whole line of the CLI's stdout. Returns what a person reading the transcript wants
    /// of it (assistant text, a tool call with its command or file, a tool's result), each a
    /// readable entry; the raw line stays in the transcript too.
    pub fn stdout_line(&mut self, line: &str) -> Vec<String> {
        let line = line.trim();
        if !line.starts_with('{') {
            return Vec::new();
        }
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            return Vec::new();
        };
        match self.harness {
            Harness::Claude => self.claude(&event),
            Harness::Codex => self.codex(&event),
            Harness::Gemini => self.gemini(&event),
            Harness::Command | Harness::Demo => {}
        }
        if self.read_only {
            self.refused_writes(&event);
        }
        readable(self.harness, &event)
    }

    /// The writes the read-only workspace refused, as the CLI reported their failure.
    fn refused_writes(&mut self, event: &serde_json::Value) {
        let found: Vec<String> = match self.harness {
            Harness::Codex => denied_writes::codex(event),
            Harness::Claude => {
                for call in denied_writes::claude_calls(event) {
                    self.remember(call);
                }
                denied_writes::claude_refused_calls(event)
                    .iter()
                    .map(|id| denied_writes::named(denied_writes::find(&self.calls, id)))
                    .collect()
            }
            Harness::Gemini => denied_writes::gemini_refused_call(event, &self.calls)
                .into_iter()
                .collect(),
            Harness::Command | Harness::Demo => Vec::new(),
        };
        for denial in found {
            // Codex's denials name its command straight from the event; the others' come from
            // remembered calls, already redacted.
            let denial = self.redact(&denial);
            if !self.denials.contains(&denial) {
                self.denials.push(denial);
            }
        }
    }

    /// Keeps a tool call until its result names a denial; a call without a result is dropped
    /// with the oldest once there are many.
    fn remember(&mut self, mut call: denied_writes::Call) {
        call.what = self.redact(&call.what);
        if self.calls.len() == CALLS_KEPT {
            self.calls.pop_front();
        }
        self.calls.push_back(call);
    }

    /// One whole line of the CLI's stderr.
    pub fn stderr_line(&mut self, line: &str) {
        let clean = one_line(&self.redact(line));
        // What the CLIs print on every start says nothing about a failure.
        if clean.is_empty() || NOISE.iter().any(|n| clean.starts_with(n)) {
            return;
        }
        // Codex's own sandbox rejects a write only in the tool result and in this log line.
        if self.harness == Harness::Codex && clean.contains("read-only sandbox") {
            let denial = "a write (blocked by Codex's read-only sandbox)".to_string();
            if !self.denials.contains(&denial) {
                self.denials.push(denial);
            }
        }
        if self.last_stderr.len() == STDERR_LINES {
            self.last_stderr.pop_front();
        }
        self.last_stderr.push_back(clean);
    }

    fn set_session(&mut self, id: Option<&str>) {
        // A session id is passed back to the CLI as it is: one that holds a secret cannot be
        // redacted, so it is not kept (a follow-up then starts a new session).
        let clean = |id: &&str| matches!(self.redactor.apply(id), std::borrow::Cow::Borrowed(_));
        if let Some(id) = id.filter(|id| is_session_id(id) && clean(id)) {
            if self.session.is_none() {
                self.session = Some(id.to_string());
            }
        }
    }

    fn report(&mut self, message: &str, status: Option<u64>) {
        let message = one_line(&self.redact(message));
        if message.is_empty() {
            return;
        }
        let code = auth_code(&message, status);
        // The first error names the cause; later ones (a final result repeating it) add nothing.
        if self.error.is_none() {
            self.error = Some(Reported { message, code });
        }
    }

    fn claude(&mut self, e: &serde_json::Value) {
        self.set_session(e["session_id"].as_str());
        match e["type"].as_str() {
            Some("user") if e["isReplay"] == true => self.echoed += 1,
            Some("result") => {
                self.results += 1;
                self.last_result_failed = e["is_error"].as_bool() == Some(true);
                if let Some(denials) = e["permission_denials"].as_array() {
                    for d in denials {
                        let tool = d["tool_name"].as_str().unwrap_or("a tool");
                        let input = &d["tool_input"];
                        let what = input["file_path"]
                            .as_str()
                            .or_else(|| input["command"].as_str())
                            .map(|w| format!("{tool} ({w})"))
                            .unwrap_or_else(|| tool.to_string());
                        let what = self.redact(&what);
                        self.denials.push(what);
                    }
                }
                if e["is_error"].as_bool() == Some(true) {
                    let text = e["result"]
                        .as_str()
                        .or_else(|| e["subtype"].as_str())
                        .unwrap_or("the CLI reported an error");
                    self.report(text, e["api_error_status"].as_u64());
                }
                // The result line's usage covers the whole turn; its input is the uncached
                // part, the cache writes and the cache reads.
                let usage = &e["usage"];
                let parts = (
                    count(&usage["input_tokens"]),
                    count(&usage["cache_creation_input_tokens"]),
                    count(&usage["cache_read_input_tokens"]),
                    count(&usage["output_tokens"]),
                );
                // With streaming input one process runs several turns: each result's usage is
                // its own turn's, while `total_cost_usd` is the process's running total.
                if let (Ok(input), Ok(written), Ok(read), Ok(output)) = parts {
                    if usage.is_object() {
                        self.add_usage(input + written + read, read, output);
                    }
                }
                self.usage.cost_usd = cost(&e["total_cost_usd"]);
            }
            Some("system") if e["subtype"] == "init" => self.set_model(e["model"].as_str()),
            Some("assistant") if e["error"].is_string() => {
                // `"error": "authentication_failed"` with the reason as the message's text.
                let text = e["message"]["content"]
                    .as_array()
                    .and_then(|c| c.iter().find_map(|b| b["text"].as_str()))
                    .unwrap_or_default()
                    .to_string();
                let status = (e["error"] == "authentication_failed").then_some(401);
                self.report(&text, status);
            }
            _ => {}
        }
    }

    fn codex(&mut self, e: &serde_json::Value) {
        match e["type"].as_str() {
            Some("thread.started") => self.set_session(e["thread_id"].as_str()),
            Some("turn.failed") => {
                let message = e["error"]["message"].as_str().unwrap_or("the turn failed");
                self.report(message, None);
            }
            Some("error") => {
                if let Some(message) = e["message"].as_str() {
                    self.report(message, None);
                }
            }
            Some("turn.completed") => {
                // Its input counts the cached tokens too (`cached_input_tokens`).
                let usage = &e["usage"];
                let parts = (
                    count(&usage["input_tokens"]),
                    count(&usage["cached_input_tokens"]),
                    count(&usage["output_tokens"]),
                );
                if let (Ok(input), Ok(cached), Ok(output)) = parts {
                    if usage.is_object() {
                        let turn = Usage {
                            turns: 1,
                            input_tokens: input,
                            cached_input_tokens: cached.min(input),
                            output_tokens: output,
                            cost_usd: None,
                            model: None,
                        };
                        self.usage.absorb(&turn);
                    }
                }
            }
            _ => {}
        }
    }

    fn gemini(&mut self, e: &serde_json::Value) {
        self.set_session(e["session_id"].as_str());
        if e["type"] == "tool_use" {
            let tool = e["tool_name"].as_str().unwrap_or("a tool");
            let id = e["tool_id"].as_str().unwrap_or_default();
            self.remember(denied_writes::Call::new(id, tool, &e["parameters"]));
        }
        // Plan mode (read-only) answers a write with a policy violation; the turn goes on and
        // the CLI exits 0.
        if e["type"] == "tool_result" && e["error"]["type"] == "policy_violation" {
            let id = e["tool_id"].as_str().unwrap_or_default();
            let what = denied_writes::find(&self.calls, id)
                .map_or_else(|| "a tool".to_string(), |call| call.what.clone());
            self.denials.push(what);
        }
        if e["type"] == "result" {
            if e["status"] == "error" {
                let message = e["error"]["message"].as_str().unwrap_or("the CLI failed");
                self.report(message, None);
            }
            // `input_tokens` is the prompt, the cached part (`cached`) included.
            let stats = &e["stats"];
            let parts = (
                count(&stats["input_tokens"]),
                count(&stats["cached"]),
                count(&stats["output_tokens"]),
            );
            if let (Ok(input), Ok(cached), Ok(output)) = parts {
                if stats.is_object() {
                    self.set_usage(input, cached, output);
                }
            }
        }
        if e["type"] == "init" {
            self.set_model(e["model"].as_str());
        }
    }

    /// The usage report of a whole turn (Claude Code's and Gemini CLI's final line).
    fn set_usage(&mut self, input: u64, cached: u64, output: u64) {
        self.usage.turns = 1;
        self.usage.input_tokens = input;
        self.usage.cached_input_tokens = cached.min(input);
        self.usage.output_tokens = output;
    }

    /// Adds one more turn of the same process (Claude Code's streaming input).
    fn add_usage(&mut self, input: u64, cached: u64, output: u64) {
        self.usage.turns = 1;
        self.usage.input_tokens = self.usage.input_tokens.saturating_add(input);
        self.usage.cached_input_tokens = self
            .usage
            .cached_input_tokens
            .saturating_add(cached.min(input));
        self.usage.output_tokens = self.usage.output_tokens.saturating_add(output);
    }

    fn set_model(&mut self, model: Option<&str>) {
        let model = model.map(|m| self.redact(m));
        // A model id is short and printable; anything else is not one to price by.
        if let Some(m) = model
            .filter(|m| !m.is_empty() && m.len() <= 200 && m.chars().all(|c| c.is_ascii_graphic()))
        {
            self.usage.model = Some(m);
        }
    }

    /// How the execution ended, given the CLI's exit (`Some(code)`, or `None` for a signal)
    /// and a description of it ("exit code 1").
    pub fn verdict(&self, code: Option<i32>, exit: &str) -> Result<(), StatusMessage> {
        let cli = match self.harness {
            Harness::Claude => "Claude Code",
            Harness::Codex => "Codex",
            Harness::Gemini => "Gemini CLI",
            Harness::Command | Harness::Demo => "the agent",
        };
        if let Some(reported) = &self.error {
            return Err(StatusMessage {
                message: clip(&format!("{cli} failed ({exit}): {}", reported.message)),
                error_code: reported.code.map(str::to_string),
                retryable: Some(false),
            });
        }
        if !self.denials.is_empty() {
            return Err(StatusMessage {
                message: clip(&format!(
                    "{cli} was denied the tools it needed: {} (agent_permissions = \"read-only\" \
                     or the CLI's own permission mode)",
                    self.denials.join(", ")
                )),
                error_code: Some("not_authorized".into()),
                retryable: Some(false),
            });
        }
        if code == Some(0) {
            return Ok(());
        }
        let reason = if self.last_stderr.is_empty() {
            "it printed no reason".to_string()
        } else {
            Vec::from(self.last_stderr.clone()).join(" ")
        };
        let reason = reason.as_str();
        Err(StatusMessage {
            message: clip(&format!("{cli} exited with {exit}: {reason}")),
            error_code: auth_code(reason, None).map(str::to_string),
            retryable: Some(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::readable::READABLE_LIMIT;
    use crate::observe::text::MESSAGE_LIMIT;

    fn observe(harness: Harness, stdout: &[&str], stderr: &[&str]) -> Observer {
        let mut o = Observer::new(harness);
        for l in stdout {
            let _ = o.stdout_line(l);
        }
        for l in stderr {
            o.stderr_line(l);
        }
        o
    }

    #[test]
    fn what_is_kept_from_a_cli_is_redacted_before_it_is_cut() {
        const SECRET: &str = "sk-0123456789abcdef";
        let observe_redacted = |harness: Harness, stdout: &[String], stderr: &[String]| {
            let mut o = Observer::new(harness).redacting(Redactor::new([("KEY", SECRET)]));
            for l in stdout {
                let _ = o.stdout_line(l);
            }
            for l in stderr {
                o.stderr_line(l);
            }
            o
        };
        let line = |v: serde_json::Value| v.to_string();
        // The secret straddles the message's cut: redacted first, no piece of it is left.
        let long = format!("{}{SECRET} tail", "x".repeat(560));
        let claude = observe_redacted(
            Harness::Claude,
            &[
                line(serde_json::json!({"type": "system", "subtype": "init",
                    "session_id": SECRET, "model": format!("m-{SECRET}")})),
                line(
                    serde_json::json!({"type": "result", "is_error": true, "result": long,
                    "permission_denials": [{"tool_name": "Bash",
                        "tool_input": {"command": format!("echo {SECRET}")}}]}),
                ),
            ],
            &[],
        );
        assert_eq!(claude.session(), None);
        assert_eq!(claude.usage().model.as_deref(), Some("m-[secret:KEY]"));
        let message = claude
            .verdict(Some(1), "exit code 1")
            .expect_err("failed")
            .message;
        assert!(!message.contains("sk-01"), "{message}");
        assert!(message.ends_with('…'), "{message}");
        let denied = observe_redacted(
            Harness::Claude,
            &[line(serde_json::json!({"type": "result",
                "permission_denials": [{"tool_name": "Bash",
                    "tool_input": {"command": format!("echo {SECRET}")}}]}))],
            &[],
        );
        let message = denied
            .verdict(Some(0), "exit code 0")
            .expect_err("denied")
            .message;
        assert!(message.contains("Bash (echo [secret:KEY])"), "{message}");
        let codex = observe_redacted(
            Harness::Codex,
            &[line(serde_json::json!({"type": "turn.failed",
                "error": {"message": format!("bad key {SECRET}")}}))],
            &[],
        );
        let message = codex
            .verdict(Some(1), "exit code 1")
            .expect_err("failed")
            .message;
        assert!(message.ends_with("bad key [secret:KEY]"), "{message}");
        let gemini = observe_redacted(
            Harness::Gemini,
            &[line(
                serde_json::json!({"type": "init", "session_id": "ok-session",
                "model": SECRET}),
            )],
            &[format!("Error: key {SECRET} refused")],
        );
        assert_eq!(gemini.session(), Some("ok-session"));
        assert_eq!(gemini.usage().model.as_deref(), Some("[secret:KEY]"));
        let message = gemini
            .verdict(Some(1), "exit code 1")
            .expect_err("failed")
            .message;
        assert!(
            message.ends_with("Error: key [secret:KEY] refused"),
            "{message}"
        );
    }

    #[test]
    fn claude_denials_fail_an_exit_0_with_the_tool_and_file() {
        let o = observe(
            Harness::Claude,
            &[
                r#"{"type":"system","subtype":"init","session_id":"3f1e-ab"}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"3f1e-ab","total_cost_usd":0.0123,"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":7},"permission_denials":[{"tool_name":"Write","tool_input":{"file_path":"/w/hello.txt","content":"x"}}]}"#,
            ],
            &[],
        );
        assert_eq!(o.session(), Some("3f1e-ab"));
        assert_eq!(o.usage().input_tokens, 15);
        assert_eq!(o.usage().cost_usd, Some(0.0123));
        let err = o.verdict(Some(0), "exit code 0").expect_err("denied");
        assert!(
            err.message.contains("Write (/w/hello.txt)"),
            "{}",
            err.message
        );
        assert_eq!(err.error_code.as_deref(), Some("not_authorized"));
    }

    #[test]
    fn claude_turns_of_one_process_add_their_tokens_and_keep_the_running_cost() {
        let o = observe(
            Harness::Claude,
            &[
                r#"{"type":"result","subtype":"success","is_error":false,"result":"a","total_cost_usd":0.0016,"usage":{"input_tokens":200,"output_tokens":40}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"b","total_cost_usd":0.0024,"usage":{"input_tokens":100,"output_tokens":20}}"#,
            ],
            &[],
        );
        assert_eq!(o.usage().input_tokens, 300);
        assert_eq!(o.usage().output_tokens, 60);
        assert_eq!(o.usage().cost_usd, Some(0.0024));
    }

    #[test]
    fn claude_not_logged_in_is_authentication_required() {
        let o = observe(
            Harness::Claude,
            &[
                r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login","session_id":"s1"}"#,
            ],
            &[],
        );
        let err = o.verdict(Some(1), "exit code 1").expect_err("failed");
        assert_eq!(
            err.message,
            "Claude Code failed (exit code 1): Not logged in · Please run /login"
        );
        assert_eq!(err.error_code.as_deref(), Some("authentication_required"));
    }

    #[test]
    fn codex_turn_failed_and_thread_id() {
        let o = observe(
            Harness::Codex,
            &[
                r#"{"type":"thread.started","thread_id":"0199-aa"}"#,
                r#"{"type":"turn.failed","error":{"message":"Missing environment variable: `OPENAI_API_KEY`."}}"#,
            ],
            &["Reading additional input from stdin..."],
        );
        assert_eq!(o.session(), Some("0199-aa"));
        let err = o.verdict(Some(1), "exit code 1").expect_err("failed");
        assert!(err.message.contains("OPENAI_API_KEY"), "{}", err.message);
        assert_eq!(err.error_code.as_deref(), Some("authentication_required"));
    }

    #[test]
    fn codex_read_only_sandbox_rejection_on_stderr_is_a_denial() {
        let o = observe(
            Harness::Codex,
            &[r#"{"type":"turn.completed","usage":{"input_tokens":3,"output_tokens":4}}"#],
            &["\u{1b}[2m2026\u{1b}[0m ERROR codex_core: patch rejected: writing is blocked by read-only sandbox"],
        );
        assert_eq!(o.usage().output_tokens, 4);
        let err = o.verdict(Some(0), "exit code 0").expect_err("denied");
        assert!(err.message.contains("read-only sandbox"), "{}", err.message);
    }

    #[test]
    fn a_write_the_read_only_workspace_refused_fails_only_a_read_only_run() {
        let lines = [
            r#"{"type":"item.completed","item":{"type":"command_execution","command":"bash -lc 'echo x > f'","aggregated_output":"bash: line 1: f: Read-only file system\n","exit_code":1,"status":"failed"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":3,"output_tokens":4}}"#,
        ];
        let mut o = Observer::new(Harness::Codex).read_only();
        for l in lines {
            let _ = o.stdout_line(l);
        }
        let err = o.verdict(Some(0), "exit code 0").expect_err("denied");
        assert!(
            err.message.contains("command (bash -lc 'echo x > f')")
                && err.message.contains("denied"),
            "{}",
            err.message
        );
        assert_eq!(err.error_code.as_deref(), Some("not_authorized"));
        // In an edit run the agent saw the error and may have worked around it.
        assert!(observe(Harness::Codex, &lines, &[])
            .verdict(Some(0), "exit code 0")
            .is_ok());
        let mut claude = Observer::new(Harness::Claude).read_only();
        for l in [
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/w/h.txt"}}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"EROFS: read-only file system, open '/w/h.txt'","is_error":true,"tool_use_id":"t1"}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok"}"#,
        ] {
            let _ = claude.stdout_line(l);
        }
        let err = claude.verdict(Some(0), "exit code 0").expect_err("denied");
        assert!(err.message.contains("Write (/w/h.txt)"), "{}", err.message);
        let mut gemini = Observer::new(Harness::Gemini).read_only();
        for l in [
            r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"s1","parameters":{"command":"touch t"}}"#,
            r#"{"type":"tool_result","tool_id":"s1","status":"success","output":"touch: cannot touch 't': Read-only file system"}"#,
            r#"{"type":"result","status":"success","stats":{"input_tokens":2,"output_tokens":1}}"#,
        ] {
            let _ = gemini.stdout_line(l);
        }
        let err = gemini.verdict(Some(0), "exit code 0").expect_err("denied");
        assert!(
            err.message.contains("run_shell_command (touch t)"),
            "{}",
            err.message
        );
    }

    #[test]
    fn gemini_without_json_takes_stderr_as_one_clean_line() {
        let o = observe(
            Harness::Gemini,
            &["not json"],
            &[
                "YOLO mode is enabled. All tool calls will be automatically approved.",
                "\u{1b}[31mWhen using Gemini API, you must specify the GEMINI_API_KEY environment variable.\u{1b}[0m",
                "   ",
                "Update your environment and try again.",
            ],
        );
        let err = o.verdict(Some(41), "exit code 41").expect_err("failed");
        assert_eq!(
            err.message,
            "Gemini CLI exited with exit code 41: When using Gemini API, you must specify the GEMINI_API_KEY environment variable. Update your environment and try again."
        );
        assert_eq!(err.error_code.as_deref(), Some("authentication_required"));
        assert!(observe(Harness::Gemini, &[], &[])
            .verdict(Some(0), "")
            .is_ok());
    }

    #[test]
    fn gemini_plan_mode_policy_violation_is_a_denial() {
        let o = observe(
            Harness::Gemini,
            &[
                r#"{"type":"init","session_id":"d388-aa"}"#,
                r#"{"type":"tool_use","tool_name":"write_file","tool_id":"w1","parameters":{"file_path":"hello.txt"}}"#,
                r#"{"type":"tool_result","tool_id":"w1","status":"error","error":{"type":"policy_violation","message":"denied"}}"#,
                r#"{"type":"result","status":"success","stats":{"input_tokens":200,"output_tokens":40}}"#,
            ],
            &[],
        );
        let err = o.verdict(Some(0), "exit code 0").expect_err("denied");
        assert!(
            err.message.contains("write_file (hello.txt)"),
            "{}",
            err.message
        );
        assert_eq!(o.usage().input_tokens, 200);
    }

    #[test]
    fn readable_entries_name_text_tool_calls_and_results() {
        let mut claude = Observer::new(Harness::Claude);
        assert_eq!(
            claude.stdout_line(r#"{"type":"assistant","message":{"content":[{"type":"text","text":"I'll write it."},{"type":"tool_use","name":"Write","input":{"file_path":"/w/a.txt","content":"x"}}]}}"#),
            ["assistant: I'll write it.", "tool call Write: /w/a.txt"]
        );
        assert_eq!(
            claude.stdout_line(r#"{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"text","text":"ok"}],"is_error":true}]}}"#),
            ["tool result (error): ok"]
        );
        let mut codex = Observer::new(Harness::Codex);
        assert_eq!(
            codex.stdout_line(r#"{"type":"item.completed","item":{"type":"command_execution","command":"bash -lc 'ls'","aggregated_output":"a\n","exit_code":0}}"#),
            ["command (exit 0): bash -lc 'ls'\na"]
        );
        let mut gemini = Observer::new(Harness::Gemini);
        assert_eq!(
            gemini.stdout_line(r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t","parameters":{"command":"make"}}"#),
            ["tool call run_shell_command: make"]
        );
        // Not JSON, or JSON of no interest: nothing.
        assert!(gemini.stdout_line("plain text").is_empty());
        assert!(gemini
            .stdout_line(r#"{"type":"init","session_id":"s"}"#)
            .is_empty());
        // A huge tool output is cut.
        let big = format!(
            r#"{{"type":"tool_result","tool_id":"t","status":"success","output":"{}"}}"#,
            "x".repeat(100_000)
        );
        assert!(gemini.stdout_line(&big)[0].chars().count() < READABLE_LIMIT + 40);
    }

    #[test]
    fn hostile_session_ids_are_ignored_and_messages_are_clipped_at_words() {
        let o = observe(
            Harness::Gemini,
            &[
                r#"{"type":"init","session_id":"--version"}"#,
                r#"{"type":"init","session_id":"../x"}"#,
            ],
            &[],
        );
        assert_eq!(o.session(), None);
        let long = "word ".repeat(400);
        let clipped = clip(&long);
        assert!(clipped.ends_with("word…"), "{clipped}");
        assert!(clipped.chars().count() <= MESSAGE_LIMIT + 1);
        assert_eq!(one_line("a\n\tb\r\n\u{1b}[1mc\u{1b}[0m"), "a b c");
    }
}
