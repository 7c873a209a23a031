//! Argument templates of the command harness: the plain `command` argv and the presets for
//! real agent CLIs (`claude`, `codex`, `gemini`), each run in its non-interactive mode.
//!
//! A template is a list of groups; a group is a few arguments that go together (`--model`,
//! `{model_id}`). Placeholders are filled from the run; a group in which any placeholder is
//! empty is left out, so an unset base prompt or model leaves no dangling flag behind.

use crate::config::Harness;

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

/// The built-in template of a preset (`None` for `command` and `demo`). `resumed`: the
/// execution continues a finished run, and `{prompt}` holds the follow-up that resumed it.
pub fn preset(harness: Harness, resumed: bool) -> Option<&'static [&'static [&'static str]]> {
    match (harness, resumed) {
        // Claude Code: print mode, streamed JSON output, system prompt appended, MCP servers
        // from the generated file; a resumed run continues the workspace's last conversation.
        (Harness::Claude, false) => Some(&[
            &["claude"],
            &["-p", "{prompt}"],
            &["--output-format", "stream-json", "--verbose"],
            &["--model", "{model_id}"],
            &["--append-system-prompt", "{base_prompt}"],
            &["--mcp-config", "{mcp_config}"],
        ]),
        (Harness::Claude, true) => Some(&[
            &["claude"],
            &["-p", "{prompt}"],
            &["--continue"],
            &["--output-format", "stream-json", "--verbose"],
            &["--model", "{model_id}"],
            &["--append-system-prompt", "{base_prompt}"],
            &["--mcp-config", "{mcp_config}"],
        ]),
        // Codex CLI: `codex exec` runs one task non-interactively (`exec resume --last`
        // continues the last one); it has no system-prompt flag, so the base prompt leads.
        (Harness::Codex, false) => Some(&[
            &["codex", "exec"],
            &["--skip-git-repo-check"],
            &["--model", "{model_id}"],
            &["{full_prompt}"],
        ]),
        (Harness::Codex, true) => Some(&[
            &["codex", "exec", "resume", "--last"],
            &["--skip-git-repo-check"],
            &["--model", "{model_id}"],
            &["{prompt}"],
        ]),
        // Gemini CLI: `-p` runs one prompt non-interactively; MCP servers are read from the
        // workspace's `.gemini/settings.json`, which the harness writes. It cannot continue a
        // session, so a resumed run's prompt carries the original task and the follow-up.
        (Harness::Gemini, _) => Some(&[
            &["gemini"],
            &["--model", "{model_id}"],
            &["-p", "{full_prompt}"],
        ]),
        (Harness::Command | Harness::Demo, _) => None,
    }
}

/// Whether a template names placeholders that do not exist; checked when the config loads.
pub fn unknown_placeholder(args: &[String]) -> Option<String> {
    let probe = Values::default();
    args.iter()
        .flat_map(|a| placeholders(a))
        .find(|p| probe.get(p).is_none())
}

/// A placeholder is `{name}` with a name of lowercase letters and underscores; other braces
/// (JSON in an argument, say) are plain text.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

fn placeholders(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + len];
        if is_name(name) {
            out.push(name.to_string());
        }
        rest = &rest[start + len + 1..];
    }
    out
}

fn fill(arg: &str, values: &Values) -> Option<String> {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + len];
        match values.get(name).filter(|_| is_name(name)) {
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

/// The argv of one execution. A configured `command` replaces the preset's template; each of its
/// arguments is its own group.
pub fn argv(harness: Harness, command: &[String], values: &Values, resumed: bool) -> Vec<String> {
    let groups: Vec<Vec<String>> = if !command.is_empty() {
        command.iter().map(|a| vec![a.clone()]).collect()
    } else {
        preset(harness, resumed)
            .unwrap_or(&[])
            .iter()
            .map(|g| g.iter().map(|a| a.to_string()).collect())
            .collect()
    };
    groups
        .iter()
        .filter_map(|group| {
            group
                .iter()
                .map(|a| fill(a, values))
                .collect::<Option<Vec<_>>>()
        })
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Values {
        Values {
            prompt: "fix it".into(),
            model_id: "m1".into(),
            base_prompt: String::new(),
            mcp_config: "/tmp/mcp.json".into(),
            workspace: "/w".into(),
        }
    }

    #[test]
    fn presets_leave_out_groups_with_empty_values() {
        assert_eq!(
            argv(Harness::Claude, &[], &values(), false),
            [
                "claude",
                "-p",
                "fix it",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "m1",
                "--mcp-config",
                "/tmp/mcp.json"
            ]
        );
        let mut v = values();
        v.base_prompt = "be brief".into();
        v.model_id = String::new();
        assert_eq!(
            argv(Harness::Codex, &[], &v, false),
            [
                "codex",
                "exec",
                "--skip-git-repo-check",
                "be brief\n\nfix it"
            ]
        );
        assert_eq!(
            argv(Harness::Gemini, &[], &values(), false),
            ["gemini", "--model", "m1", "-p", "fix it"]
        );
        assert_eq!(
            argv(Harness::Codex, &[], &values(), true),
            [
                "codex",
                "exec",
                "resume",
                "--last",
                "--skip-git-repo-check",
                "--model",
                "m1",
                "fix it"
            ]
        );
        assert!(argv(Harness::Claude, &[], &values(), true).contains(&"--continue".to_string()));
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
            argv(Harness::Command, &command, &values(), false),
            ["run.sh", "--model=m1", "{\"a\": 1}"]
        );
        assert_eq!(unknown_placeholder(&command), None);
        assert_eq!(
            unknown_placeholder(&["{modle_id}".to_string()]),
            Some("modle_id".into())
        );
    }
}
