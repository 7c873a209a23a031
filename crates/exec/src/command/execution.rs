//! The state one execution's steps share: `Execution` (where it works, what its processes get,
//! its transcript, follow-ups and deadline) and `Outcome`, how it ended. It is the bottom of
//! `command/`: it imports none of the sibling modules and holds no step of its own.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tokio::sync::mpsc;

use crate::cgroup::Leaf;
use crate::observe;
use crate::process::Marker;
use crate::report::Reports;
use crate::sandbox::Launcher;
use crate::transcript::{Entry, Redactor, Writer};
use crate::{Artifacts, Assignment, Control, Deliveries, Provenances, Supervision};
use runledger_domain::{Followup, StatusMessage};

/// How an execution ended: `None` when it was stopped by a cancel.
pub(super) type Outcome = Option<Result<(), StatusMessage>>;

/// One execution, once prepared: where it works and what its processes get.
pub(super) struct Execution<'a> {
    pub(super) job: &'a Assignment,
    pub(super) sup: &'a Supervision,
    pub(super) launcher: &'a dyn Launcher,
    /// On Slurm: the launcher of the execution's job steps, used instead of `launcher`.
    pub(super) steps: Option<crate::slurm::StepLauncher>,
    pub(super) marker: Marker,
    pub(super) writer: Writer,
    pub(super) redactor: Redactor,
    pub(super) workspace: PathBuf,
    pub(super) home: PathBuf,
    pub(super) mcp_path: PathBuf,
    /// The execution's `RUNLEDGER_REPORT` file.
    pub(super) report_path: PathBuf,
    pub(super) reports: Option<Reports>,
    /// Where the artifacts the agent reported are handed.
    pub(super) artifacts: Artifacts,
    /// Where the execution's provenance is handed before its agent starts.
    pub(super) provenances: Provenances,
    pub(super) setup_done: PathBuf,
    /// Where the session id a preset's CLI reported is kept across executions and restarts.
    pub(super) session_path: PathBuf,
    pub(super) needs_setup: bool,
    pub(super) vars: BTreeMap<String, String>,
    pub(super) deadline: tokio::time::Instant,
    pub(super) control: mpsc::UnboundedReceiver<Control>,
    /// Follow-ups not yet handed to the agent, oldest first.
    pub(super) pending: Vec<Followup>,
    /// Where the agent's taking of follow-ups is reported.
    pub(super) deliveries: Deliveries,
    /// Follow-ups written to Claude Code's input that it had not taken when it ended.
    pub(super) unconfirmed: u32,
    /// The execution's cgroup, when its environment sets limits or the host accounts CPU.
    pub(super) leaf: Option<Leaf>,
    /// What the CLI's turns of this execution reported, added up.
    pub(super) usage: observe::Usage,
}

impl Execution<'_> {
    /// What starts the execution's processes: its job steps on Slurm, else the sandbox.
    pub(super) fn launcher(&self) -> &dyn Launcher {
        match &self.steps {
            Some(steps) => steps,
            None => self.launcher,
        }
    }

    pub(super) fn system(&mut self, text: String) {
        let _ = self.writer.append(&Entry {
            at: runledger_base::clock::now(),
            execution: self.job.execution,
            stream: "system".into(),
            text,
            continued: false,
        });
    }

    /// How a failure is recorded: a limit the execution hit is named first, and the message
    /// (which may quote the agent's stderr, and goes to the event log) is redacted like the
    /// transcript.
    pub(super) fn failed(&self, mut message: StatusMessage) -> StatusMessage {
        if let Some(limit) = self.leaf.as_ref().and_then(Leaf::exceeded) {
            message.message = format!("{limit}; {}", message.message);
        }
        message.message = self.redactor.apply(&message.message).into_owned();
        message
    }
}
