//! Execution: environment queues and capacity, and the agents that work on runs.
//!
//! The executor keeps, per environment, a FIFO queue of runs waiting for a slot and the number
//! of slots in use (`max_concurrent`). It is driven by the effects of decided commands (enqueue,
//! dequeue, launch, deliver, stop) and drives runs back through `Runs` (start, finish). It never
//! writes events itself: every state change goes through the run's actor, so a late agent can
//! never overwrite a cancellation. Agent output goes to the transcript, beside the log.
//!
//! Harnesses: `demo` (in-process, `demo.rs`) and the `command` harness with its presets
//! (`command/`, `presets.rs`), whose child processes `process.rs` finds and stops, and whose
//! agents report artifacts through a file (`report.rs`). This
//! module alone knows processes; nothing else in the service spawns or signals one.
//!
//! The executor itself is `executor/`; what a harness is given and reports through is
//! `assignment.rs`, how the executor reports back to the runs `reporting.rs`, and what
//! harnesses need from the service `supervision.rs`. The snapshot each execution leaves, from
//! which a fork starts, is `snapshot/`; where a run's own files live, `run_files.rs`. This file
//! is the table of contents.

#![forbid(unsafe_code)]

mod agents;
mod assignment;
pub mod attachments;
pub mod cgroup;
mod changes;
mod command;
mod demo;
mod denied_writes;
mod executor;
pub mod lines;
pub mod observe;
pub mod presets;
pub mod process;
pub mod provenance;
pub mod report;
mod reporting;
pub mod repos;
mod run_files;
pub mod safe_fs;
pub mod sandbox;
mod seccomp;
pub mod slurm;
pub mod snapshot;
pub mod steps;
mod supervision;
pub mod transcript;
pub mod usage;

pub use assignment::{Artifacts, Assignment, Control, Deliveries};
pub use executor::{interrupted_by_shutdown, Executor, QueueFull, Reservation};
pub use provenance::Provenances;
pub use reporting::{Report, Started};
pub use supervision::Supervision;
pub use transcript::Transcripts;
