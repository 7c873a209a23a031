//! What runs before the agent in a fresh workspace: the environment's repositories checked out
//! (then handed to the agent user) and its setup commands, in order. A cancel stops either at
//! once; what a successful setup command leaves running is kept for the agent.

use std::process::Stdio;

use super::execution::{Execution, Outcome};
use super::files::write_private;
use super::finish::{failure, internal, io_failure, timed_out, unsafe_path};
use super::start::command;
use super::supervise::{settle, Ended, Keep, Process};
use crate::process;
use crate::transcript::Entry;
use crate::Control;
use runledger_domain::StatusMessage;

/// Fills the fresh workspace with the environment's repositories (outer paths first, so a
/// repository can be checked out inside another), and hands them to the agent user. A cancel
/// meanwhile stops git at once (`Err(None)`); follow-ups wait for the agent.
pub(super) async fn checkout(x: &mut Execution<'_>) -> Result<(), Option<StatusMessage>> {
    let mut repos: Vec<&runledger_config::Repo> = x.job.environment.repos.iter().collect();
    repos.sort_by_key(|r| {
        r.path
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .count()
    });
    let count = repos.len();
    let mut pins = pins(x);
    for (i, repo) in repos.into_iter().enumerate() {
        // The first pin of the repository's URL not yet used: the pins are in checkout order.
        let pin = pins
            .iter()
            .position(|p| p.repository == repo.url)
            .map(|at| pins.remove(at).commit);
        let wanted = match &pin {
            Some(commit) => format!("pinned at {commit}"),
            None => repo
                .reference
                .clone()
                .unwrap_or_else(|| "default branch".into()),
        };
        x.system(format!(
            "repository {}/{count}: {} ({wanted}) at {}",
            i + 1,
            repo.url,
            repo.path.display()
        ));
        let started = std::time::Instant::now();
        let (sup, workspace) = (x.sup, x.workspace.clone());
        let checking_out = sup
            .mirrors
            .checkout(repo, &workspace, pin.as_deref(), x.deadline);
        tokio::pin!(checking_out);
        let checked_out = loop {
            tokio::select! {
                result = &mut checking_out => break result,
                message = x.control.recv() => match message {
                    Some(Control::Followup(f)) => {
                        let _ = x.writer.append(&Entry {
                            at: runledger_base::clock::now(),
                            execution: x.job.execution,
                            stream: "followup".into(),
                            text: format!("({}) {}", f.mode.as_str(), f.message),
                            continued: false,
                        });
                        x.pending.push(f);
                    }
                    // Dropping the checkout kills git (`kill_on_drop`).
                    Some(Control::Stop) | None => {
                        x.system("stopped".into());
                        return Err(None);
                    }
                },
            }
        };
        if let Err(failure) = checked_out {
            x.system(failure.message.clone());
            return Err(Some(StatusMessage {
                message: failure.message,
                error_code: Some("environment_setup_failed".into()),
                retryable: Some(failure.retryable),
            }));
        }
        x.system(format!(
            "repository {}/{count} checked out in {} ms",
            i + 1,
            started.elapsed().as_millis()
        ));
    }
    // The fresh workspace was the server's while git filled it; now it is the agent's whole.
    if x.sup.sandboxes.agent_user().is_some() {
        let root = x.workspace.clone();
        let sandboxes = x.sup.sandboxes.clone();
        let handed = tokio::task::spawn_blocking(move || sandboxes.hand_over_tree(&root)).await;
        let what = "cannot hand the workspace and its repositories to the agent user";
        match handed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Some(unsafe_path(what, e))),
            Err(e) => return Err(Some(internal(format!("{what}: {e}")))),
        }
    }
    Ok(())
}

/// The commits a pinned rerun checks its repositories out at (`Derivation::Rerun`), in the
/// order its original's first execution recorded them; none for any other run.
fn pins(x: &Execution<'_>) -> Vec<runledger_domain::RepoPin> {
    match &x.job.run.derived {
        Some(runledger_domain::RunDerivation {
            kind: runledger_domain::Derivation::Rerun { pinned: true, pins },
            ..
        }) => pins.clone(),
        _ => Vec::new(),
    }
}

/// Runs the environment's setup commands in order; `Some` ends the execution there.
pub(super) async fn setup(x: &mut Execution<'_>) -> Option<Outcome> {
    let env = &x.job.environment;
    for (i, line) in env.setup.iter().enumerate() {
        x.system(format!("setup {}/{}: {line}", i + 1, env.setup.len()));
        let mut cmd = command(x, "sh", &["-c".into(), line.clone()], false);
        cmd.stdin(Stdio::null());
        let process = match Process::spawn(cmd, None) {
            Ok(p) => p,
            Err(e) => {
                process::stop_tree(None, &x.marker, x.sup.grace).await;
                return Some(Some(Err(internal(format!(
                    "cannot start setup command {}: {e}",
                    i + 1
                )))));
            }
        };
        let (ended, output) = settle(x, process, Keep::OnSuccess).await;
        match ended {
            Ok(Ended::Exited(status)) if status.success() => {}
            Ok(Ended::Exited(status)) => {
                let what = format!("setup command {} ({line})", i + 1);
                return Some(Some(Err(failure(
                    &what,
                    status,
                    &output.tail(),
                    Some("environment_setup_failed"),
                ))));
            }
            Ok(Ended::Stopped) => {
                x.system("stopped".into());
                return Some(None);
            }
            Ok(Ended::TimedOut) => return Some(Some(Err(timed_out(env.max_runtime_secs)))),
            Err(e) => {
                return Some(Some(Err(io_failure(
                    &format!("lost track of setup command {}", i + 1),
                    &e,
                ))))
            }
        }
    }
    if let Err(e) = write_private(&x.setup_done, b"", None) {
        return Some(Some(Err(unsafe_path(
            "cannot record that setup completed",
            e,
        ))));
    }
    None
}
