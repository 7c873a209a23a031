//! The vocabulary of how an environment's agents run: the harness, how its processes are
//! contained, what a preset's agent may do, its resource limits, and the placeholders a
//! `command` may name. The configuration reads these values from the file and `exec` acts on
//! them; this module holds only the values and their checks, so that both point down to it
//! (docs/decisions/0018-layers.md). It does no I/O and imports nothing of the crate.

use serde::Deserialize;

/// The harness that runs an environment's agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Harness {
    Demo,
    Command,
    Claude,
    Codex,
    Gemini,
}

impl Harness {
    /// Whether this is one of the presets that drive a real agent CLI.
    pub fn is_preset(self) -> bool {
        matches!(self, Harness::Claude | Harness::Codex | Harness::Gemini)
    }
}

/// What a preset's agent may do in its workspace (`agent_permissions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentPermissions {
    /// Edit files and run commands without asking: runledger's sandbox is the boundary.
    #[default]
    Edit,
    /// Read and answer only, for plan and review runs: a write attempt ends the run `FAILED`.
    ReadOnly,
}

impl AgentPermissions {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentPermissions::Edit => "edit",
            AgentPermissions::ReadOnly => "read-only",
        }
    }
}

/// How an environment's agent processes are contained (`docs/security.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sandbox {
    /// Every process of an execution runs inside bubblewrap.
    Bwrap,
    /// Unconfined: the agent sees what the agent user sees on the host.
    None,
}

/// Where an environment's Slurm executions go (`[environments.slurm]`): the allocation of each
/// execution asks for these, besides the limits and the time limit the environment sets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Slurm {
    pub partition: String,
    pub constraint: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    /// Generic resources, e.g. `gpu:1`.
    pub gres: Option<String>,
    /// Further `salloc` options, passed as they are.
    pub extra_args: Vec<String>,
    /// What becomes of an execution whose node fails, or that a restart of the server finds
    /// in progress.
    pub on_node_failure: OnNodeFailure,
}

impl Slurm {
    /// Whether a lost execution is queued again rather than failed.
    pub fn requeues_lost(&self) -> bool {
        self.on_node_failure == OnNodeFailure::Requeue
    }
}

/// What becomes of an execution lost with its node (`on_node_failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnNodeFailure {
    /// The run ends `FAILED` (`internal_error`, retryable).
    #[default]
    Fail,
    /// The run is queued again for a new execution on another node.
    Requeue,
}

/// Where an environment's agents run (`runs_on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunsOn {
    /// On the server's own host.
    #[default]
    Local,
    /// As Slurm job steps on the nodes of a cluster (`[environments.slurm]`).
    Slurm,
}

/// The resource limits of one environment, enforced with cgroups; `None` where it sets none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory_mb: Option<u64>,
    pub pids_max: Option<u64>,
    pub cpu_percent: Option<u64>,
}

impl Limits {
    pub fn any(&self) -> bool {
        self.memory_mb.is_some() || self.pids_max.is_some() || self.cpu_percent.is_some()
    }
}

/// The placeholders a `command` argument may name, each filled per execution by
/// `exec::presets`.
pub const PLACEHOLDERS: &[&str] = &[
    "prompt",
    "full_prompt",
    "model_id",
    "base_prompt",
    "mcp_config",
    "workspace",
];

/// A placeholder is `{name}` with a name of lowercase letters and underscores; other braces
/// (JSON in an argument, say) are plain text.
pub fn is_placeholder_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

/// The placeholders an argument names, in order.
pub fn placeholders(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + len];
        if is_placeholder_name(name) {
            out.push(name.to_string());
        }
        rest = &rest[start + len + 1..];
    }
    out
}

/// The first placeholder of a template that does not exist; checked when the config loads.
pub fn unknown_placeholder(args: &[String]) -> Option<String> {
    args.iter()
        .flat_map(|a| placeholders(a))
        .find(|p| !PLACEHOLDERS.contains(&p.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_placeholders_are_found_and_other_braces_are_text() {
        let command = vec!["run".to_string(), "{prompt}".into(), "{\"a\": 1}".into()];
        assert_eq!(unknown_placeholder(&command), None);
        assert_eq!(
            unknown_placeholder(&["{modle_id}".to_string()]),
            Some("modle_id".into())
        );
    }
}
