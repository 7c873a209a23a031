//! The `command` harness (and the presets built on it): runs an agent as a child process.
//!
//! One execution: make the run's workspace (fresh until the environment's `setup` commands
//! have succeeded once for the run), write the MCP config file, create the report file
//! (`report.rs`, read every 500 ms and at the end), start the argv with the `RUNLEDGER_*`
//! variables, hand it follow-ups on stdin as JSON lines, and stream its stdout and
//! stderr to the transcript as they arrive. Memory is bounded whatever the agent prints: output
//! moves through fixed-size buffers and a bounded channel, so a fast writer is slowed to the
//! speed of the transcript file instead of filling memory. The exit status decides the outcome;
//! cancellation and `max_runtime_secs` stop the whole process tree.
//!
//! This file is the table of contents only; each step lives in a module of its own:
//! `run` (the order of the steps), `execution` (the `Execution` they share), `prepare`
//! (workspace, home, MCP file, variables, cgroup), `fork` (a fork's start from a snapshot),
//! `provenance` (the commits and the CLI's version, recorded before the agent), `changes`
//! (the bases before the agent, what it changed after it), `files`
//! (private files and CLI configuration, through `safe_fs`), `setup` (repositories and setup
//! commands), `start` (argv, prompt, spawn, stdin at start), `supervise` (waiting, follow-ups,
//! deadline, stopping the tree), `output` (the bounded output streaming), `finish` (exit status
//! to outcome, failure messages) and `keep` (the execution's snapshot, for forks). Their imports
//! form no circle (`tests/it/layers.rs`): `run` is the top, `execution` and `output` import no
//! sibling.

mod changes;
mod execution;
mod files;
mod finish;
mod fork;
mod keep;
mod output;
mod prepare;
mod provenance;
mod run;
mod setup;
mod start;
mod supervise;

pub(super) use run::run;
