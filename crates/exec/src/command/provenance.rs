//! Measures what the execution's agent starts with and records it before the agent starts:
//! the commit each repository's checkout holds (`git rev-parse HEAD`, as the server, in the
//! workspace) and, for a preset, what its CLI's `--version` prints, run the way the agent will
//! be (same launcher, sandbox, variables and PATH), bounded in time and output. The rest of
//! the record comes from `crate::provenance`. A measurement that fails leaves its field empty
//! and says why in the transcript; it never fails the execution.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::execution::Execution;
use super::start::{command, findable};
use crate::presets::{self, Values};
use runledger_domain::harness::Sandbox;
use runledger_domain::{AgentCli, RepositoryCommit};

/// How long a CLI's `--version` may take: a Node CLI starts in a second or two.
const VERSION_TIMEOUT: Duration = Duration::from_secs(15);
/// The most bytes of its output that are read; the first line is what is kept.
const VERSION_BYTES: usize = 4096;
/// The most characters of the version line that are kept.
const VERSION_CHARS: usize = 200;

/// Measures the execution's provenance and waits until it is recorded.
pub(super) async fn record_provenance(x: &mut Execution<'_>) {
    let repositories = commits(x).await;
    let agent_cli = agent_cli(x).await;
    let env = &x.job.environment;
    let provenance = crate::provenance::provenance(
        env,
        x.job.run.config.model_id.as_deref(),
        repositories,
        agent_cli,
    );
    let mut summary: Vec<String> = provenance
        .repositories
        .iter()
        .map(|r| format!("{} at {}", r.url, short(&r.commit)))
        .collect();
    if let Some(cli) = &provenance.agent_cli {
        let version = cli.version.as_deref().unwrap_or("version unknown");
        summary.push(format!("{} {version}", cli.name));
    }
    summary.push(format!(
        "environment {}",
        short(&provenance.environment.sha256)
    ));
    x.system(format!("provenance: {}", summary.join(", ")));
    x.provenances.record(provenance).await;
}

fn short(hash: &str) -> &str {
    hash.get(..12)
        .unwrap_or(if hash.is_empty() { "(unknown)" } else { hash })
}

/// Each repository of the environment and the commit its checkout's `HEAD` names now.
async fn commits(x: &mut Execution<'_>) -> Vec<RepositoryCommit> {
    let mut repos: Vec<&runledger_config::Repo> = x.job.environment.repos.iter().collect();
    // The order they were checked out in (`setup::checkout`).
    repos.sort_by_key(|r| {
        r.path
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .count()
    });
    let mut out = Vec::with_capacity(repos.len());
    for repo in repos {
        let dest = x.workspace.join(&repo.path);
        let commit = match crate::repos::head_commit(&dest, x.deadline).await {
            Ok(commit) => commit,
            Err(message) => {
                x.system(format!(
                    "provenance: cannot tell the commit of {} at {}: {message}",
                    repo.url,
                    repo.path.display()
                ));
                String::new()
            }
        };
        out.push(RepositoryCommit {
            url: repo.url.clone(),
            path: repo.path.display().to_string(),
            reference: repo.reference.clone(),
            commit,
        });
    }
    out
}

/// A preset's CLI and what its `--version` printed; `None` for the command harness.
async fn agent_cli(x: &mut Execution<'_>) -> Option<AgentCli> {
    let env = &x.job.environment;
    if !env.harness.is_preset() {
        return None;
    }
    let turn = presets::Turn {
        session: None,
        permissions: env.agent_permissions,
        contained: env.sandbox == Some(Sandbox::Bwrap),
    };
    let argv = presets::argv(env.harness, &env.command, &Values::default(), &turn);
    let program = argv.first()?.clone();
    let version = match version(x, &program).await {
        Ok(line) => Some(line),
        Err(message) => {
            x.system(format!("provenance: no version of {program}: {message}"));
            None
        }
    };
    Some(AgentCli {
        name: program,
        version,
    })
}

/// The first line `program --version` prints (stdout, else stderr), redacted like the
/// transcript.
async fn version(x: &Execution<'_>, program: &str) -> Result<String, String> {
    let path = x.vars.get("PATH").map(String::as_str);
    if !findable(program, &x.workspace, path) {
        return Err("no such program on the agent's PATH".into());
    }
    let mut cmd = command(x, program, &["--version".to_string()], true);
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start it: {e}"))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("its output was not piped".into());
    };
    let read = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let limit = VERSION_BYTES as u64;
        let (mut stdout, mut stderr) = (stdout.take(limit), stderr.take(limit));
        let (a, b) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
        a.and(b).map_err(|e| e.to_string())?;
        let status = child.wait().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((status, out, err))
    };
    let (status, out, err) = match tokio::time::timeout(VERSION_TIMEOUT, read).await {
        Ok(result) => result?,
        // Dropping the child kills it (`kill_on_drop`).
        Err(_) => return Err(format!("no answer in {} s", VERSION_TIMEOUT.as_secs())),
    };
    if !status.success() {
        return Err(format!("it exited with {status}"));
    }
    let first = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| l.chars().take(VERSION_CHARS).collect::<String>())
    };
    let line = first(&out)
        .or_else(|| first(&err))
        .ok_or_else(|| "it printed nothing".to_string())?;
    Ok(x.redactor.apply(&line).into_owned())
}
