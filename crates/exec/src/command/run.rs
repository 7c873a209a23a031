//! One execution of a command-harness agent from its start to its end, in the order of its
//! steps: prepare, checkout and setup, the agent's turns, the report file's last lines, usage.
//! The steps live in the sibling modules and share an `Execution` (`execution.rs`); a new step
//! goes there too, not here. Nothing in `command/` imports this module: it is the top.

use tokio::sync::mpsc;

use super::changes::{compute, take_bases};
use super::execution::{Execution, Outcome};
use super::files::{saved_session, usable_mcp, write_cli_config};
use super::finish::{finish, internal, unsafe_path};
use super::keep::keep_snapshot;
use super::prepare::prepare;
use super::provenance::record_provenance;
use super::setup::{checkout, setup};
use super::start::start;
use super::supervise::{collect_reports, settle, Keep};
use crate::cgroup::Leaf;
use crate::observe;
use crate::{Artifacts, Assignment, Control, Deliveries, Provenances, Supervision};
use runledger_domain::harness::Harness;
use runledger_domain::{ExecutionChanges, ExecutionUsage, StatusMessage};

/// Runs one execution of a command-harness agent: prepare, setup, start, supervise, finish.
/// Returns its outcome, what it used (`None` when nothing is known) and what it changed in
/// the workspace (`None` when it was stopped or its workspace was never made whole).
pub(crate) async fn run(
    job: &Assignment,
    sup: &Supervision,
    control: mpsc::UnboundedReceiver<Control>,
    deliveries: Deliveries,
    artifacts: Artifacts,
    provenances: Provenances,
) -> (Outcome, Option<ExecutionUsage>, Option<ExecutionChanges>) {
    // Everything of the run is its user's, made from here on.
    let sup = &match sup.for_run(job.run.id).await {
        Ok(sup) => sup,
        Err(message) => return (Some(Err(no_agent_user(message))), None, None),
    };
    let mut x = match prepare(job, sup, control, deliveries, artifacts, provenances) {
        Ok(x) => x,
        Err(message) => return (Some(Err(message)), None, None),
    };
    let outcome = execute(&mut x).await;
    if let Some(steps) = &x.steps {
        steps.clean();
    }
    // Every process of the execution has ended: what it appended last is read now, before
    // its usage and its end are reported.
    collect_reports(
        &mut x.reports,
        true,
        &mut x.writer,
        job.execution,
        &x.artifacts,
    )
    .await;
    if let (Some(Err(_)), Some(limit)) = (&outcome, x.leaf.as_ref().and_then(Leaf::exceeded)) {
        x.system(limit);
    }
    let outcome = outcome.map(|r| r.map_err(|m| x.failed(m)));
    // Every process has ended, so the tree compared is the one the execution left; a stopped
    // execution (a cancel) ended the run, which records nothing more of it.
    let changes = match outcome {
        Some(_) => compute(&mut x).await,
        None => None,
    };
    // Every process has ended: the tree copied is the one the execution left.
    keep_snapshot(&mut x).await;
    // Every process of the execution has been stopped by now, so the cgroup's counter is the
    // whole tree's CPU time.
    let cpu = x.leaf.as_ref().and_then(Leaf::cpu_time);
    if let Some(leaf) = x.leaf.take() {
        leaf.remove().await;
    }
    let usage = crate::usage::execution_usage(
        &x.usage,
        job.run.config.model_id.as_deref(),
        cpu,
        &sup.prices,
    );
    (outcome, usage, changes)
}

/// How a run that cannot have a user of its own fails: before anything of it is made, with the
/// reason (the range is used up, or the store failed).
fn no_agent_user(message: String) -> StatusMessage {
    tracing::error!(%message, "a run cannot have an agent uid");
    StatusMessage {
        message: format!("no user to run the agent as: {message}"),
        error_code: Some("environment_setup_failed".into()),
        retryable: Some(false),
    }
}

/// Setup (until it has succeeded once), then the agent, to its end. A preset's CLI takes no
/// input during a turn, so follow-ups sent meanwhile are delivered as the next turn of the
/// same session as soon as the turn ends.
async fn execute(x: &mut Execution<'_>) -> Outcome {
    if x.needs_setup {
        match checkout(x).await {
            Ok(()) => {}
            Err(Some(message)) => return Some(Err(message)),
            Err(None) => return None,
        }
        if let Some(ended) = setup(x).await {
            return ended;
        }
    }
    // After setup, which starts from an empty workspace, and before the agent.
    let placed = crate::attachments::place(
        &x.job.run,
        &x.workspace,
        &x.sup.content,
        x.sup.sandboxes.owner(),
    );
    match placed {
        Ok(names) if !names.is_empty() => x.system(format!(
            "attachments written to {}: {}",
            crate::attachments::dir(&x.workspace).display(),
            names.join(", ")
        )),
        Ok(_) => {}
        Err(crate::attachments::Error::Path(e)) => {
            return Some(Err(unsafe_path("cannot place the run's attachments", e)))
        }
        Err(e) => return Some(Err(internal(e.to_string()))),
    }
    let harness = x.job.environment.harness;
    if harness.is_preset() {
        let (_, unusable) = usable_mcp(x.job);
        for name in unusable {
            x.system(format!(
                "MCP server {name:?} is left out: it names a server by warp_id, which the {} CLI \
                 cannot reach (give it a command or a url)",
                harness_name(harness)
            ));
        }
        if let Err(e) = write_cli_config(x) {
            return Some(Err(unsafe_path(
                "cannot write the CLI's configuration in the run's home",
                e,
            )));
        }
    }
    // After everything the agent starts with is in place, and before the agent: what it
    // starts with is durable before it can change anything.
    record_provenance(x).await;
    // What the run's changes are counted from, taken before the agent can change anything.
    take_bases(x).await;
    let mut next_turn: Option<String> = None;
    loop {
        let (process, program, takes_stdin) = match start(x, next_turn.take()).await {
            Ok(started) => started,
            Err(message) => return Some(Err(message)),
        };
        let ended = settle(x, process, Keep::Nothing).await;
        let outcome = finish(x, ended);
        let resumable = harness.is_preset() && saved_session(x).is_some();
        if matches!(outcome, Some(Ok(()))) && resumable && !x.pending.is_empty() {
            // One turn per follow-up: each fits one argument, and the transcript shows when
            // each was delivered.
            let followup = x.pending.remove(0);
            x.system(format!(
                "the follow-up sent during the turn is delivered now, as the next turn: {}",
                observe::clip(&observe::one_line(&followup.message))
            ));
            next_turn = Some(followup.message);
            continue;
        }
        // A stopped execution (a cancel) ends the run; nothing is queued again.
        let missed = x.pending.len() + x.unconfirmed as usize;
        if outcome.is_some() && missed > 0 {
            let how = if takes_stdin {
                "on stdin"
            } else {
                "as a next turn"
            };
            let note = format!(
                "{missed} follow-up(s) did not reach the {program} agent {how}; the run is \
                 queued again for them"
            );
            x.system(note);
        }
        return outcome;
    }
}

fn harness_name(harness: Harness) -> &'static str {
    match harness {
        Harness::Claude => "claude",
        Harness::Codex => "codex",
        Harness::Gemini => "gemini",
        Harness::Command => "command",
        Harness::Demo => "demo",
    }
}
