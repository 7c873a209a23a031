//! An execution's provenance, the parts that need no process: the environment's definition as
//! canonical JSON with its digest (variable and secret names, never values), the containment
//! and limits in force, the model; and `Provenances`, how a harness hands the measured record
//! to the executor and waits until it is durable, so the agent never starts before its
//! provenance is in the log. Measuring commits and the CLI's version is `command/provenance.rs`.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

use runledger_config::Environment;
use runledger_domain::harness::{Harness, Sandbox};
use runledger_domain::{
    AgentCli, EnvironmentDefinition, ExecutionProvenance, ProvenanceLimits, RepositoryCommit, RunId,
};

use crate::reporting::Report;

/// The version of this runledger, as its provenance records it.
pub const RUNLEDGER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where a harness hands its execution's provenance; the receiver answers once it is recorded
/// (or refused), so the harness can wait before starting the agent.
#[derive(Clone)]
pub struct Provenances(
    pub(crate) mpsc::UnboundedSender<(ExecutionProvenance, oneshot::Sender<()>)>,
);

impl Provenances {
    /// Hands `provenance` to the executor and waits until it is recorded (or refused: a
    /// cancel came first). Returns at once when the executor no longer listens.
    pub async fn record(&self, provenance: ExecutionProvenance) {
        let (done, recorded) = oneshot::channel();
        if self.0.send((provenance, done)).is_ok() {
            let _ = recorded.await;
        }
    }
}

/// Records what a harness hands through `Provenances`; returns when every handle is dropped.
pub(crate) async fn record_provenances(
    runs: &impl Report,
    id: RunId,
    execution: u32,
    mut reports: mpsc::UnboundedReceiver<(ExecutionProvenance, oneshot::Sender<()>)>,
) {
    while let Some((provenance, done)) = reports.recv().await {
        runs.record_provenance(id, execution, provenance).await;
        let _ = done.send(());
    }
}

/// The name of a harness as the configuration spells it.
pub fn harness_name(harness: Harness) -> &'static str {
    match harness {
        Harness::Claude => "claude",
        Harness::Codex => "codex",
        Harness::Gemini => "gemini",
        Harness::Command => "command",
        Harness::Demo => "demo",
    }
}

/// The environment's definition as canonical JSON (object keys sorted by `serde_json`'s
/// map), and its SHA-256. Variables and secrets are named, never valued: a secret's value must
/// not reach the log, and an `env` value may be one in all but name.
pub fn definition(environment: &Environment) -> EnvironmentDefinition {
    let e = environment;
    let repos: Vec<Value> = e
        .repos
        .iter()
        .map(|r| json!({"url": r.url, "ref": r.reference, "path": r.path.display().to_string()}))
        .collect();
    let env_names: Vec<&String> = e.env.keys().collect();
    let slurm = e.slurm.as_ref().map(|s| format!("{s:?}"));
    let value = json!({
        "id": e.id,
        "name": e.name,
        "description": e.description,
        "harness": harness_name(e.harness),
        "command": e.command,
        "setup": e.setup,
        "model_id": e.model_id,
        "max_concurrent": e.max_concurrent,
        "max_queued": e.max_queued,
        "max_runtime_secs": e.max_runtime_secs,
        "env": env_names,
        "inherit_env": e.inherit_env,
        "secrets": e.secrets,
        "workspace_root": e.workspace_root.as_ref().map(|p| p.display().to_string()),
        "sandbox": sandbox_name(e),
        "network": e.network,
        "limits": {
            "memory_mb": e.limits.memory_mb,
            "pids_max": e.limits.pids_max,
            "cpu_percent": e.limits.cpu_percent,
        },
        "repos": repos,
        "agent_permissions": format!("{:?}", e.agent_permissions).to_lowercase(),
        "model_base_url": e.model_base_url.as_deref().map(without_userinfo),
        "teams": e.teams,
        "slurm": slurm,
    });
    let definition = value.to_string();
    let digest = Sha256::digest(definition.as_bytes());
    EnvironmentDefinition {
        id: e.id.clone(),
        sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
        definition,
    }
}

/// A URL without a `user:password@` part, which would be a credential.
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

fn sandbox_name(environment: &Environment) -> &'static str {
    match (environment.harness, environment.sandbox) {
        (Harness::Demo, _) => "in-process",
        (_, Some(Sandbox::Bwrap)) => "bwrap",
        (_, Some(Sandbox::None)) | (_, None) => "none",
    }
}

/// The provenance of an execution in `environment` of a run whose model is `run_model`, with
/// the commits and the CLI measured by the harness.
pub fn provenance(
    environment: &Environment,
    run_model: Option<&str>,
    repositories: Vec<RepositoryCommit>,
    agent_cli: Option<AgentCli>,
) -> ExecutionProvenance {
    let model = run_model
        .filter(|m| !m.is_empty())
        .or(Some(environment.model_id.as_str()).filter(|m| !m.is_empty()));
    ExecutionProvenance {
        repositories,
        environment: definition(environment),
        harness: harness_name(environment.harness).to_string(),
        agent_cli,
        runledger_version: RUNLEDGER_VERSION.to_string(),
        sandbox: sandbox_name(environment).to_string(),
        network: environment.network,
        limits: ProvenanceLimits {
            memory_mb: environment.limits.memory_mb,
            pids_max: environment.limits.pids_max,
            cpu_percent: environment.limits.cpu_percent,
        },
        model_id: model.map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_names_variables_and_never_values() {
        let mut env = Environment::demo();
        env.env.insert("API_TOKEN".into(), "hunter2-value".into());
        env.secrets.push("DEPLOY_KEY".into());
        env.model_base_url = Some("https://user:pa55word@models.example/v1".into());
        let d = definition(&env);
        assert!(d.definition.contains("API_TOKEN"));
        assert!(d.definition.contains("DEPLOY_KEY"));
        assert!(!d.definition.contains("hunter2-value"));
        assert!(!d.definition.contains("pa55word"));
        assert!(d.definition.contains("https://models.example/v1"));
        assert_eq!(d.sha256.len(), 64);
        // Canonical: the same definition, the same digest; another, another.
        assert_eq!(definition(&env), d);
        env.env.insert("API_TOKEN".into(), "another".into());
        assert_eq!(
            definition(&env).sha256,
            d.sha256,
            "values are not part of it"
        );
        env.max_runtime_secs += 1;
        assert_ne!(definition(&env).sha256, d.sha256);
    }

    #[test]
    fn the_model_is_the_runs_else_the_environments() {
        let env = Environment::demo();
        let p = provenance(&env, Some("m-run"), Vec::new(), None);
        assert_eq!(p.model_id.as_deref(), Some("m-run"));
        let p = provenance(&env, None, Vec::new(), None);
        assert_eq!(p.model_id.as_deref(), Some("demo"));
        assert_eq!(p.sandbox, "in-process");
    }
}
