//! How the executor reports back to the runs: the calls of `Report` (start, deliveries,
//! artifacts, usage, the end) and what became of a start (`Started`). The executor writes no
//! event itself; whatever implements this (the run's actor) decides and records.

use runledger_domain::{
    Artifact, ExecutionProvenance, ExecutionUsage, Placement, RunId, StatusMessage,
};

/// How the executor reports back: a queued run taking its slot, what an execution used, and its
/// end. All go through the run's actor (`actor::Runs` implements this), so the executor never
/// writes an event itself and never needs more of the service than these calls.
pub trait Report: Clone + 'static {
    /// Whether new work may start: `false` while the store refuses writes (it is low on space
    /// or failed), when an agent would only add output to a filling disk and its start would be
    /// refused anyway.
    fn accepts_new_work(&self) -> bool;
    /// Starts a run that took a slot (at `placement`, when a cluster scheduler placed it).
    fn start(
        &self,
        id: RunId,
        placement: Option<Placement>,
    ) -> impl std::future::Future<Output = Started>;
    /// Records how an execution ended. A refusal (a cancel or a later execution came first)
    /// is expected and only logged.
    fn finish(
        &self,
        id: RunId,
        execution: u32,
        outcome: Result<(), StatusMessage>,
    ) -> impl std::future::Future<Output = ()>;
    /// Records that execution `execution` was lost with its node and queues the run again for
    /// a new execution (`on_node_failure = "requeue"`). A refusal (a cancel came first) is
    /// only logged.
    fn lose(
        &self,
        id: RunId,
        execution: u32,
        status: StatusMessage,
    ) -> impl std::future::Future<Output = ()>;
    /// Records that execution `execution` took the next `count` follow-ups owed to it. A
    /// refusal (the run was cancelled, or it owes nothing) is expected and only logged.
    fn delivered(
        &self,
        id: RunId,
        execution: u32,
        count: u32,
    ) -> impl std::future::Future<Output = ()>;
    /// Records what an execution used, before its `finish` (so the usage is durable with the
    /// run's end). A refusal (an earlier execution's report, or a second one) is only logged.
    fn record_usage(
        &self,
        id: RunId,
        execution: u32,
        usage: ExecutionUsage,
    ) -> impl std::future::Future<Output = ()>;
    /// Records an artifact the execution reported (`report.rs`), before its usage and its
    /// end. A refusal (the execution is no longer the run's current one, or the run holds
    /// `MAX_ARTIFACTS`) is only logged, never retried.
    fn report_artifact(
        &self,
        id: RunId,
        execution: u32,
        artifact: Artifact,
    ) -> impl std::future::Future<Output = ()>;
    /// Records what execution `execution` runs with, before its agent starts. A refusal (a
    /// cancel came first, or it was recorded already) is only logged.
    fn record_provenance(
        &self,
        id: RunId,
        execution: u32,
        provenance: ExecutionProvenance,
    ) -> impl std::future::Future<Output = ()>;
    /// Records what execution `execution` left changed in its workspace, after its agent
    /// exited and before its end. A refusal (a cancel came first) is only logged.
    fn record_changes(
        &self,
        id: RunId,
        execution: u32,
        changes: runledger_domain::ExecutionChanges,
    ) -> impl std::future::Future<Output = ()>;
}

/// What became of a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// The run is in progress: its `Launch` effect holds the slot.
    Yes,
    /// Refused for good (the run was cancelled meanwhile): the slot is handed back.
    Refused,
    /// The store stopped writing since the check: the run stays first in line for when writes
    /// resume, and the slot is handed back.
    Deferred,
}
