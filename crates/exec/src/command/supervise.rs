//! Waits for a started process: its output, the report file every `report::POLL`, follow-ups
//! on stdin (Claude Code's streaming input included), cancellation and the deadline, then stops
//! what the process left (`settle`). It decides no outcome: `finish` reads how a process ended.

use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::execution::Execution;
use super::files::write_private;
use super::output::Output;
use crate::observe::Observer;
use crate::presets;
use crate::process;
use crate::report::{self, Reports};
use crate::transcript::{Entry, Writer};
use crate::{Artifacts, Assignment, Control, Deliveries};
use runledger_domain::harness::Harness;
use runledger_domain::Followup;

/// How long writing one follow-up to an agent's stdin may take.
const STDIN_WRITE_LIMIT: Duration = Duration::from_secs(5);

/// A follow-up as a line for the agent's stdin: a user message of Claude Code's streaming
/// input, or the command harness's documented JSON line.
pub(super) fn followup_line(harness: Harness, followup: &Followup) -> String {
    if harness == Harness::Claude {
        return presets::claude_message(&followup.message);
    }
    // Written by hand to keep the documented key order: type, message, mode.
    let message = serde_json::Value::String(followup.message.clone());
    format!(
        "{{\"type\":\"followup\",\"message\":{message},\"mode\":\"{}\"}}\n",
        followup.mode.as_str()
    )
}

/// Writes a line to the agent's stdin; whether it was written.
pub(super) async fn write_line(stdin: &mut Option<ChildStdin>, line: &str) -> bool {
    let Some(pipe) = stdin.as_mut() else {
        return false;
    };
    // An agent that closed its stdin no longer takes follow-ups; that is not a failure. One
    // that never reads it would fill the pipe and block this write — and with it the whole
    // supervision loop (output, cancel, deadline) — so the write gets a time limit, after which
    // stdin is given up.
    let write = async {
        pipe.write_all(line.as_bytes()).await?;
        pipe.flush().await
    };
    match tokio::time::timeout(STDIN_WRITE_LIMIT, write).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) | Err(_) => {
            *stdin = None;
            false
        }
    }
}

pub(super) enum Ended {
    Exited(std::process::ExitStatus),
    Stopped,
    TimedOut,
}

/// Claude Code's streaming input: the user messages written to its stdin (the turn's prompt
/// first, then follow-ups), the ones it echoed as it took them, and the turns it ended.
#[derive(Default)]
pub(super) struct StreamInput {
    pub(super) written: u32,
    echoed: u32,
    turns: u32,
}

impl StreamInput {
    /// Follow-ups written that the CLI has not (yet) taken.
    fn unconfirmed(&self) -> u32 {
        self.written
            .saturating_sub(1)
            .saturating_sub(self.echoed.saturating_sub(1))
    }

    /// Takes what the observer saw: returns how many more follow-ups the CLI took, and
    /// whether its input should end now (a turn ended with everything written taken, or in
    /// an error, after which nothing more is given to it).
    fn observe(&mut self, observer: &Observer) -> (u32, bool) {
        let echoed = observer.echoed();
        // The first echo is the turn's prompt, not a follow-up.
        let took = echoed
            .saturating_sub(1)
            .saturating_sub(self.echoed.saturating_sub(1));
        self.echoed = echoed;
        let (turns, failed) = observer.turns_ended();
        let turn_ended = turns > self.turns;
        self.turns = turns;
        (took, turn_ended && (failed || self.echoed >= self.written))
    }
}

/// What a child is supervised with: the run's transcript, its control channel, follow-ups not
/// yet handed over, and the execution's deadline.
struct Watch<'a> {
    pub(super) job: &'a Assignment,
    pub(super) writer: &'a mut Writer,
    pub(super) control: &'a mut mpsc::UnboundedReceiver<Control>,
    pub(super) pending: &'a mut Vec<Followup>,
    pub(super) deliveries: &'a Deliveries,
    /// The execution's report file, looked at every `report::POLL`.
    pub(super) reports: &'a mut Option<Reports>,
    pub(super) artifacts: &'a Artifacts,
    /// Where a preset's session id is kept, written as soon as the CLI reports it, so that a
    /// follow-up can resume the session even when the server dies during the turn.
    pub(super) session_path: &'a Path,
    pub(super) deadline: tokio::time::Instant,
}

/// Waits for a child while serving control messages and the deadline. Follow-ups go to
/// `stdin` when there is one, otherwise they wait in `pending`.
async fn supervise(
    child: &mut Child,
    output: &mut Output,
    stdin: &mut Option<ChildStdin>,
    input: &mut Option<StreamInput>,
    w: &mut Watch<'_>,
) -> std::io::Result<Ended> {
    let (job, deadline) = (w.job, w.deadline);
    let mut session_kept = false;
    let mut look = tokio::time::interval(report::POLL);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            status = child.wait() => return Ok(Ended::Exited(status?)),
            _ = look.tick() => {
                collect_reports(w.reports, false, w.writer, job.execution, w.artifacts).await;
            }
            Some((stream, piece)) = output.rx.recv() => {
                output.record(w.writer, job.execution, stream, piece)?;
                if !session_kept {
                    if let Some(id) = output.observer.as_ref().and_then(Observer::session) {
                        session_kept = true;
                        // `finish` tries again and says so in the transcript if it fails.
                        let _ = write_private(w.session_path, id.as_bytes(), None);
                    }
                }
                if let (Some(st), Some(observer)) = (input.as_mut(), output.observer.as_ref()) {
                    let (took, end_input) = st.observe(observer);
                    if took > 0 {
                        w.deliveries.took(took);
                        w.writer.append(&Entry {
                            at: runledger_base::clock::now(),
                            execution: job.execution,
                            stream: "system".into(),
                            text: format!("{took} follow-up(s) reached the agent during its turn"),
                            continued: false,
                        })?;
                    }
                    if end_input {
                        // Claude Code ends once its input ends and it has done what it read.
                        *stdin = None;
                    }
                }
            }
            message = w.control.recv() => match message {
                Some(Control::Followup(f)) => {
                    w.writer.append(&Entry {
                        at: runledger_base::clock::now(),
                        execution: job.execution,
                        stream: "followup".into(),
                        text: format!("({}) {}", f.mode.as_str(), f.message),
                        continued: false,
                    })?;
                    if write_line(stdin, &followup_line(job.environment.harness, &f)).await {
                        match input.as_mut() {
                            // Taken once the CLI echoes it.
                            Some(st) => st.written += 1,
                            None => w.deliveries.took(1),
                        }
                    } else {
                        // Not taken now: it waits for a next turn, or for the next execution.
                        w.pending.push(f);
                    }
                }
                Some(Control::Stop) | None => return Ok(Ended::Stopped),
            },
            _ = tokio::time::sleep_until(deadline) => return Ok(Ended::TimedOut),
        }
    }
}

/// Takes what the agent appended to its report file (`report.rs`, off the async executor):
/// each artifact goes to `artifacts`, each refused line is a line of the transcript.
pub(super) async fn collect_reports(
    slot: &mut Option<Reports>,
    at_end: bool,
    writer: &mut Writer,
    execution: u32,
    artifacts: &Artifacts,
) {
    let Some(mut reports) = slot.take() else {
        return;
    };
    let polled = tokio::task::spawn_blocking(move || {
        let outcomes = reports.poll(at_end);
        (reports, outcomes)
    })
    .await;
    let outcomes = match polled {
        Ok((reports, outcomes)) => {
            *slot = Some(reports);
            outcomes
        }
        Err(e) => {
            // Not looked at again: a panic would only repeat.
            tracing::error!(error = %e, "reading an agent's report file failed");
            return;
        }
    };
    for outcome in outcomes {
        match outcome {
            Ok(artifact) => artifacts.reported(artifact),
            Err(reason) => {
                let _ = writer.append(&Entry {
                    at: runledger_base::clock::now(),
                    execution,
                    stream: "system".into(),
                    text: format!("[runledger] {} refused: {reason}", report::VAR),
                    continued: false,
                });
            }
        }
    }
}

/// A started process of the execution.
pub(super) struct Process {
    child: Child,
    group: Option<i32>,
    output: Output,
    pub(super) stdin: Option<ChildStdin>,
    /// Claude Code's streaming input, for the claude preset.
    pub(super) stream: Option<StreamInput>,
}

impl Process {
    pub(super) fn spawn(mut cmd: Command, observer: Option<Observer>) -> std::io::Result<Process> {
        let mut child = cmd.spawn()?;
        let group = child.id().map(|p| p as i32);
        let stdin = child.stdin.take();
        let output = Output::start(&mut child, observer);
        Ok(Process {
            child,
            group,
            output,
            stdin,
            stream: None,
        })
    }
}

/// What of a process tree outlives it.
#[derive(PartialEq, Eq)]
pub(super) enum Keep {
    /// What a successful setup command leaves running (a database, say) is for the agent.
    OnSuccess,
    Nothing,
}

/// The one place a process is waited for: supervises it to its end, closes its stdin, stops
/// what it leaves (the whole execution's tree, unless `keep` says otherwise) while draining the
/// rest of its output.
pub(super) async fn settle(
    x: &mut Execution<'_>,
    mut process: Process,
    keep: Keep,
) -> (std::io::Result<Ended>, Output) {
    let mut watch = Watch {
        job: x.job,
        writer: &mut x.writer,
        control: &mut x.control,
        pending: &mut x.pending,
        deliveries: &x.deliveries,
        reports: &mut x.reports,
        artifacts: &x.artifacts,
        session_path: &x.session_path,
        deadline: x.deadline,
    };
    let ended = supervise(
        &mut process.child,
        &mut process.output,
        &mut process.stdin,
        &mut process.stream,
        &mut watch,
    )
    .await;
    drop(process.stdin.take());
    x.unconfirmed = process.stream.as_ref().map_or(0, StreamInput::unconfirmed);
    let succeeded = matches!(&ended, Ok(Ended::Exited(status)) if status.success());
    if succeeded && keep == Keep::OnSuccess {
        let _ = process.output.drain(&mut x.writer, x.job.execution).await;
    } else {
        // Whatever the process left behind (background children) goes with it; its output is
        // drained meanwhile, so a tree that prints while shutting down is not blocked on the
        // pipe.
        let stop = async {
            // On Slurm the tree is on the node: Slurm stops the job's steps (srun then ends
            // with them), and what is left of the local srun is stopped after.
            if let Some(steps) = &x.steps {
                let job = steps.allocation.job_id;
                x.sup.cluster.stop_steps(job, x.sup.grace).await;
            }
            process::stop_tree(process.group, &x.marker, x.sup.grace).await;
        };
        let _ = tokio::join!(stop, process.output.drain(&mut x.writer, x.job.execution));
    }
    (ended, process.output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::harness::Harness;

    /// Claude Code's streaming input ends once a turn ended with every message written taken,
    /// or in an error; a message written after the turn's echoes keeps it open for the next.
    #[test]
    fn claude_input_ends_when_a_turn_ended_with_everything_taken() {
        let mut observer = Observer::new(Harness::Claude);
        let mut input = StreamInput {
            written: 2,
            ..StreamInput::default()
        };
        let echo = r#"{"type":"user","isReplay":true,"message":{"role":"user","content":"x"}}"#;
        let ok = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok"}"#;
        let failed = r#"{"type":"result","subtype":"error","is_error":true,"result":"no"}"#;
        let _ = observer.stdout_line(echo);
        assert_eq!(input.observe(&observer), (0, false), "the prompt taken");
        let _ = observer.stdout_line(ok);
        assert_eq!(
            input.observe(&observer),
            (0, false),
            "a follow-up not yet taken"
        );
        assert_eq!(input.unconfirmed(), 1);
        let _ = observer.stdout_line(echo);
        assert_eq!(input.observe(&observer), (1, false), "the follow-up taken");
        let _ = observer.stdout_line(ok);
        assert_eq!(
            input.observe(&observer),
            (0, true),
            "everything taken, turn over"
        );
        assert_eq!(input.unconfirmed(), 0);
        // A failed turn ends the input even with a message not taken.
        input.written += 1;
        let _ = observer.stdout_line(failed);
        assert_eq!(input.observe(&observer), (0, true));
        assert_eq!(input.unconfirmed(), 1);
    }
}
