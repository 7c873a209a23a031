//! Schedules (issue #21): named prompts that fire on a cron expression, each firing an
//! ordinary run. This module is the shell around the pure aggregate (`domain::schedule`): it
//! holds every schedule's folded state in memory (a schedule is a few hundred bytes; 10,000 of
//! them are a few MB), records commands in the schedules' logs (`store/schedules.rs`), and runs
//! the scheduler, one task that sleeps until the earliest due time.
//!
//! **Exactly once.** A firing is two durable steps: `Fired { due, run_id }` in the schedule's
//! log, then the run under that id (`Runs::create_scheduled`). The run id is chosen before the
//! first step, so a crash between the two leaves a firing that names a run which does not
//! exist, and the next start makes that run, under that id: never a second one. A crash
//! before the first step leaves nothing, and the start's catch-up fires that due time (below).
//! The domain refuses a second `Fired` for a due time at or before the last one recorded.
//!
//! **Catch-up.** At start, a schedule that missed due times while the server was down fires
//! once, for the latest of them, and then waits for its next due time: at most one catch-up
//! run per schedule, however long the server was down. A due time counts as missed when it is
//! after both the last firing and the schedule's last change (a paused-then-resumed schedule
//! never catches up on what it missed while paused).
//!
//! **Commands** on one schedule are serialised by a per-schedule lock held across decide,
//! append and sync; different schedules' commands share group commits.
//!
//! The files: `handle` (the `Schedules` handle, the start's fold, the queries), `commands`
//! (the commands and the record step), `agenda` (the state in memory and the due-time rules),
//! `scheduler` (the scheduler task and a firing), `recovery` (the start's completions and
//! catch-ups), `cron` (the expressions), `error`.

mod agenda;
mod commands;
pub mod cron;
mod error;
mod handle;
mod recovery;
mod scheduler;

pub use agenda::View;
pub use error::Error;
pub use handle::{Schedules, CRASH_VAR};
