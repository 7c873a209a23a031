//! The run state machine: the state a run's events fold into, the commands clients and the
//! executor issue, and the rules that decide them.
//!
//! `QUEUED → INPROGRESS → SUCCEEDED | FAILED`; `QUEUED | INPROGRESS → CANCELLED` by cancel; a
//! follow-up on a terminal run puts it back to `QUEUED` for a new execution. Decisions return
//! side effects as data (`Effect`); the shell performs them only after the events are durable,
//! and replay never performs them.
//!
//! `state.rs` is the run, `command.rs` what is asked of it and what a decision returns,
//! `decide.rs` the rules (and the scenario tests, which decide and fold together), `evolve.rs`
//! the fold, `children.rs` the rule that admits a child under a parent run. This file is their
//! table of contents.

mod children;
mod command;
mod decide;
mod evolve;
mod state;

pub use children::admit_child;
pub use command::{Command, Decision, Effect, Rejection, MAX_ARTIFACTS, MAX_PENDING_FOLLOWUPS};
pub use decide::{decide, recordable};
pub use evolve::{evolve, fold};
pub use state::{Followup, ReportedArtifact, Run, RunState, RunUsage};
