//! The argv of an execution: the `command` harness's configured argv with its placeholders
//! filled, or a preset's invocation of a real agent CLI (`claude`, `codex`, `gemini`) in its
//! non-interactive, structured-output mode.
//!
//! A configured argument whose placeholder is empty is left out, so an unset value leaves no
//! dangling argument. A preset passes every value after `=` or after `--`, so nothing a user
//! sends (prompt, follow-up, model id) or a CLI reports (session id) is parsed as an option;
//! an unset model means no `--model` flag. Pure: no I/O.

use runledger_domain::harness::{is_placeholder_name, AgentPermissions, Harness};

/// What placeholders are filled from.
#[derive(Debug, Default, Clone)]
pub struct Values {
    pub prompt: String,
    pub model_id: String,
    pub base_prompt: String,
    pub mcp_config: String,
    pub workspace: String,
}

impl Values {
    fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "prompt" => self.prompt.clone(),
            "model_id" => self.model_id.clone(),
            "base_prompt" => self.base_prompt.clone(),
            "mcp_config" => self.mcp_config.clone(),
            "workspace" => self.workspace.clone(),
            // The prompt with the base prompt in front, for CLIs without a system-prompt flag.
            "full_prompt" => {
                if self.base_prompt.is_empty() {
                    self.prompt.clone()
                } else {
                    format!("{}\n\n{}", self.base_prompt, self.prompt)
                }
            }
            _ => return None,
        })
    }
}

/// What a preset's CLI is told for one turn, besides the placeholders' values.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    /// The CLI's own session to continue (the id it reported), for a follow-up.
    pub session: Option<&'a str>,
    pub permissions: AgentPermissions,
    /// runledger's sandbox contains the agent, so the CLI's own prompts and sandbox are off.
    pub contained: bool,
}

/// The permission flag value of each CLI: full access inside runledger's sandbox, the CLI's own
/// workspace-write mode without it, its own read-only mode for plan and review runs without it.
/// A read-only run inside the sandbox gets full access too: its workspace is mounted read-only
/// (`read_only_workspace`), so every command that only reads runs and the kernel refuses every
/// write, whatever the CLI's own idea of a safe command (`docs/decisions/0030-read-only-runs.md`).
fn mode(harness: Harness, turn: &Turn<'_>) -> &'static str {
    use AgentPermissions::{Edit, ReadOnly};
    match (harness, turn.permissions, turn.contained) {
        (Harness::Claude, _, true) => "bypassPermissions",
        // Edits in the workspace, no other shell commands.
        (Harness::Claude, Edit, false) => "acceptEdits",
        // Print mode's default mode denies every write and records the denial.
        (Harness::Claude, ReadOnly, false) => "default",
        (Harness::Codex, _, true) => "danger-full-access",
        (Harness::Codex, Edit, false) => "workspace-write",
        (Harness::Codex, ReadOnly, false) => "read-only",
        (Harness::Gemini, _, true) => "yolo",
        // Offers file edits but no shell tool.
        (Harness::Gemini, Edit, false) => "auto_edit",
        // Gemini CLI's own read-only mode.
        (Harness::Gemini, ReadOnly, false) => "plan",
        (Harness::Command | Harness::Demo, _, _) => "",
    }
}

/// Whether the agent of this turn gets its workspace mounted read-only: a preset's read-only
/// run inside runledger's sandbox, where the CLI itself is given full access (`mode`). A
/// `command` agent only learns the setting (`RUNLEDGER_AGENT_PERMISSIONS`); setup commands
/// always write.
pub fn read_only_workspace(harness: Harness, turn: &Turn<'_>) -> bool {
    harness.is_preset() && turn.permissions == AgentPermissions::ReadOnly && turn.contained
}

/// One user message of Claude Code's streaming JSON input (`--input-format stream-json`), as
/// a line for its stdin.
pub fn claude_message(text: &str) -> String {
    let message = serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": text},
    });
    format!("{message}\n")
}

/// A preset's arguments after its program. Every value goes after `=` or after `--`, so no
/// prompt, follow-up, model id or session id is ever parsed as an option.
fn preset_args(harness: Harness, values: &Values, turn: &Turn<'_>) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let mut opt = |name: &str, value: &str| {
        if !value.is_empty() {
            args.push(format!("{name}={value}"));
        }
    };
    let model = values.model_id.as_str();
    let mode = mode(harness, turn);
    match harness {
        Harness::Claude => {
            opt("--permission-mode", mode);
            opt("--model", model);
            opt("--append-system-prompt", &values.base_prompt);
            opt("--mcp-config", &values.mcp_config);
            opt("--resume", turn.session.unwrap_or_default());
            // The prompt and the follow-ups are user messages on stdin (`claude_message`), so
            // a follow-up reaches the agent during its turn; the CLI echoes each one as it
            // takes it, which is how the harness knows it was delivered.
            let mut out: Vec<String> = [
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--replay-user-messages",
            ]
            .iter()
            .map(|a| a.to_string())
            .collect();
            out.append(&mut args);
            out
        }
        // No system-prompt flag: the base prompt leads the first turn's prompt. Options go
        // before `resume` (after it they are a usage error).
        Harness::Codex => {
            opt("--sandbox", mode);
            opt("--model", model);
            let mut out: Vec<String> = ["exec", "--json", "--skip-git-repo-check"]
                .iter()
                .map(|a| a.to_string())
                .collect();
            out.append(&mut args);
            match turn.session {
                Some(id) => out.extend([
                    "resume".to_string(),
                    "--".to_string(),
                    id.to_string(),
                    values.prompt.clone(),
                ]),
                None => out.extend(["--".to_string(), full_prompt(values)]),
            }
            out
        }
        // yargs has no `--` for its prompt: `--prompt=` keeps it a value. `--skip-trust`: a
        // fresh workspace is never a trusted folder, and headless runs would exit 55.
        Harness::Gemini => {
            opt("--approval-mode", mode);
            opt("--model", model);
            opt("--resume", turn.session.unwrap_or_default());
            let prompt = if turn.session.is_some() {
                values.prompt.clone()
            } else {
                full_prompt(values)
            };
            let mut out: Vec<String> = ["--skip-trust", "--output-format", "stream-json"]
                .iter()
                .map(|a| a.to_string())
                .collect();
            out.append(&mut args);
            out.push(format!("--prompt={prompt}"));
            out
        }
        Harness::Command | Harness::Demo => Vec::new(),
    }
}

fn full_prompt(values: &Values) -> String {
    values.get("full_prompt").unwrap_or_default()
}

fn fill(arg: &str, values: &Values) -> Option<String> {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + len];
        match values.get(name).filter(|_| is_placeholder_name(name)) {
            Some(v) if !v.is_empty() => {
                out.push_str(&rest[..start]);
                out.push_str(&v);
            }
            Some(_) => return None,
            // Not a placeholder: the text is kept as written.
            None => out.push_str(&rest[..start + len + 1]),
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// What a preset's CLI is told about the report file protocol (`exec::report`), ahead of the
/// run's own base prompt.
pub const REPORT_PROMPT: &str = "\
To report what you produce, append one JSON object per line to the file named by the \
environment variable RUNLEDGER_REPORT (append with >>, never overwrite it):
{\"type\":\"pull_request\",\"url\":\"https://...\",\"branch\":\"...\",\"title\":\"...\"}
{\"type\":\"file\",\"path\":\"...\",\"description\":\"...\"}
{\"type\":\"plan\",\"title\":\"...\",\"markdown\":\"...\"}
{\"type\":\"screenshot\",\"path\":\"...\",\"description\":\"...\"}
Paths are relative to your working directory (the workspace) and must stay inside it; a \
screenshot is a PNG, JPEG, GIF or WebP image. Report each pull request you open.";

/// What a preset's CLI is told of the run's attachments (`names`, in `dir`); empty when
/// there are none.
pub fn attachments_prompt(dir: &str, names: &[&str]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!(
        "The user attached files for this task. They are in {dir} (the directory named by \
         RUNLEDGER_ATTACHMENTS_DIR): {}.",
        quoted.join(", ")
    )
}

/// The base prompt a preset's CLI gets: the report protocol, what is attached (from
/// `attachments_prompt`), then the run's base prompt.
pub fn base_prompt(run_base_prompt: &str, attachments: &str) -> String {
    [REPORT_PROMPT, attachments, run_base_prompt]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The argv of one execution. For the `command` harness, `command` is the whole argv. For a
/// preset, a configured `command` replaces only the CLI program (`["npx", "-y", "@openai/codex"]`,
/// say): the preset's flags, its resume handling and the prompt always follow it.
pub fn argv(harness: Harness, command: &[String], values: &Values, turn: &Turn<'_>) -> Vec<String> {
    let program: Vec<String> = if command.is_empty() {
        match harness {
            Harness::Claude => vec!["claude".into()],
            Harness::Codex => vec!["codex".into()],
            Harness::Gemini => vec!["gemini".into()],
            Harness::Command | Harness::Demo => Vec::new(),
        }
    } else {
        // Each argument is its own group: one with an empty placeholder is left out.
        command.iter().filter_map(|a| fill(a, values)).collect()
    };
    let mut argv = program;
    argv.extend(preset_args(harness, values, turn));
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::harness::{unknown_placeholder, PLACEHOLDERS};

    #[test]
    fn every_placeholder_the_config_accepts_is_filled() {
        let probe = Values::default();
        for name in PLACEHOLDERS {
            assert!(
                probe.get(name).is_some(),
                "{{{name}}} is accepted but never filled"
            );
        }
    }

    fn values() -> Values {
        Values {
            prompt: "fix it".into(),
            model_id: "m1".into(),
            base_prompt: String::new(),
            mcp_config: "/tmp/mcp.json".into(),
            workspace: "/w".into(),
        }
    }

    const EDIT: Turn<'static> = Turn {
        session: None,
        permissions: AgentPermissions::Edit,
        contained: true,
    };

    #[test]
    fn the_base_prompt_tells_the_cli_about_the_report_file() {
        let prompt = base_prompt("be brief", "");
        assert!(prompt.starts_with(REPORT_PROMPT));
        assert!(prompt.ends_with("\n\nbe brief"));
        assert!(prompt.contains("RUNLEDGER_REPORT"));
        for kind in ["pull_request", "file", "plan", "screenshot"] {
            let shape = format!("{{\"type\":\"{kind}\"");
            assert!(REPORT_PROMPT.contains(&shape), "{kind}");
        }
        assert_eq!(base_prompt("", ""), REPORT_PROMPT);
        let attached = attachments_prompt("/w/.runledger/attachments", &["spec.md", "a, b.png"]);
        assert_eq!(
            attached,
            "The user attached files for this task. They are in /w/.runledger/attachments (the \
             directory named by RUNLEDGER_ATTACHMENTS_DIR): \"spec.md\", \"a, b.png\"."
        );
        assert_eq!(
            base_prompt("be brief", &attached),
            format!("{REPORT_PROMPT}\n\n{attached}\n\nbe brief")
        );
        assert_eq!(attachments_prompt("/w", &[]), "");
        let mut v = values();
        v.base_prompt = base_prompt("", "");
        let args = argv(Harness::Claude, &[], &v, &EDIT);
        assert!(args
            .iter()
            .any(|a| a.starts_with("--append-system-prompt=") && a.contains("RUNLEDGER_REPORT")));
    }

    #[test]
    fn presets_put_every_value_after_an_equals_sign_or_a_double_dash() {
        let mut v = values();
        v.prompt = "--version".into();
        assert_eq!(
            argv(Harness::Claude, &[], &v, &EDIT),
            [
                "claude",
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--replay-user-messages",
                "--permission-mode=bypassPermissions",
                "--model=m1",
                "--mcp-config=/tmp/mcp.json",
            ]
        );
        v.prompt = "- fix the typo".into();
        v.base_prompt = "be brief".into();
        v.model_id = String::new();
        assert_eq!(
            argv(Harness::Codex, &[], &v, &EDIT),
            [
                "codex",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--sandbox=danger-full-access",
                "--",
                "be brief\n\n- fix the typo"
            ]
        );
        assert_eq!(
            argv(Harness::Gemini, &[], &v, &EDIT),
            [
                "gemini",
                "--skip-trust",
                "--output-format",
                "stream-json",
                "--approval-mode=yolo",
                "--prompt=be brief\n\n- fix the typo"
            ]
        );
    }

    #[test]
    fn a_follow_up_resumes_the_reported_session_even_with_a_command_override() {
        let turn = Turn {
            session: Some("0199-aa"),
            ..EDIT
        };
        let npx: Vec<String> = ["npx", "-y", "@openai/codex@0.169.0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let args = argv(Harness::Codex, &npx, &values(), &turn);
        assert_eq!(
            args[..3],
            ["npx", "-y", "@openai/codex@0.169.0"].map(String::from)
        );
        assert_eq!(
            args[args.len() - 4..],
            ["resume", "--", "0199-aa", "fix it"].map(String::from)
        );
        let claude = argv(Harness::Claude, &[], &values(), &turn);
        assert!(
            claude.contains(&"--resume=0199-aa".to_string()),
            "{claude:?}"
        );
        let gemini = argv(Harness::Gemini, &[], &values(), &turn);
        assert!(
            gemini.contains(&"--resume=0199-aa".to_string()),
            "{gemini:?}"
        );
    }

    #[test]
    fn a_claude_message_is_one_json_line_whatever_the_text() {
        for text in [
            "--version",
            "- fix the typo",
            "two\nlines \"quoted\" \u{2028} €",
        ] {
            let line = claude_message(text);
            assert_eq!(line.matches('\n').count(), 1, "{line:?}");
            let parsed: serde_json::Value =
                serde_json::from_str(line.trim_end()).expect("one JSON object");
            assert_eq!(parsed["type"], "user");
            assert_eq!(parsed["message"]["role"], "user");
            assert_eq!(parsed["message"]["content"], text);
        }
    }

    #[test]
    fn permissions_choose_each_cli_mode() {
        let read_only = Turn {
            permissions: AgentPermissions::ReadOnly,
            ..EDIT
        };
        let unconfined = Turn {
            contained: false,
            ..EDIT
        };
        let read_only_unconfined = Turn {
            contained: false,
            ..read_only
        };
        let has =
            |h, t: &Turn<'_>, flag: &str| argv(h, &[], &values(), t).contains(&flag.to_string());
        // Inside the sandbox a read-only run's CLI has full access: its workspace is read-only.
        for (harness, full) in [
            (Harness::Claude, "--permission-mode=bypassPermissions"),
            (Harness::Codex, "--sandbox=danger-full-access"),
            (Harness::Gemini, "--approval-mode=yolo"),
        ] {
            assert!(has(harness, &read_only, full), "{harness:?}");
            assert!(has(harness, &EDIT, full), "{harness:?}");
            assert!(read_only_workspace(harness, &read_only), "{harness:?}");
            assert!(!read_only_workspace(harness, &EDIT), "{harness:?}");
            assert!(
                !read_only_workspace(harness, &read_only_unconfined),
                "{harness:?}"
            );
        }
        assert!(!read_only_workspace(Harness::Command, &read_only));
        assert!(has(
            Harness::Claude,
            &unconfined,
            "--permission-mode=acceptEdits"
        ));
        assert!(has(
            Harness::Claude,
            &read_only_unconfined,
            "--permission-mode=default"
        ));
        assert!(has(
            Harness::Codex,
            &unconfined,
            "--sandbox=workspace-write"
        ));
        assert!(has(
            Harness::Codex,
            &read_only_unconfined,
            "--sandbox=read-only"
        ));
        assert!(has(
            Harness::Gemini,
            &unconfined,
            "--approval-mode=auto_edit"
        ));
        assert!(has(
            Harness::Gemini,
            &read_only_unconfined,
            "--approval-mode=plan"
        ));
    }

    #[test]
    fn a_configured_command_is_filled_argument_by_argument() {
        let command: Vec<String> = [
            "run.sh",
            "--model={model_id}",
            "{base_prompt}",
            "{\"a\": 1}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            argv(Harness::Command, &command, &values(), &EDIT),
            ["run.sh", "--model=m1", "{\"a\": 1}"]
        );
        assert_eq!(unknown_placeholder(&command), None);
        assert_eq!(
            unknown_placeholder(&["{modle_id}".to_string()]),
            Some("modle_id".into())
        );
    }
}
