//! The origins of what the service records on its own: the cause of a start, an end, a lost
//! execution, a delivery, usage, an artifact, the recovery at start, a schedule's firing. One
//! place that words them, so the audit trail (`docs/audit.md`) can list them; it decides
//! nothing and is read by no rule.

use runledger_domain::origin::cut;
use runledger_domain::{Artifact, Origin, Placement, RunSchedule, StatusMessage};

/// The most of a failure's message a cause repeats: the whole message is in the event's
/// status already, the cause names it.
const MESSAGE_IN_CAUSE: usize = 200;

/// A queued run took its slot (and, on a cluster, the scheduler placed it).
pub(super) fn started(placement: Option<&Placement>) -> Origin {
    match placement {
        None => Origin::system("a slot came free in the run's environment"),
        Some(placement) => Origin::system(format!(
            "a slot came free and the cluster placed the run: {placement}"
        )),
    }
}

/// An execution ended: its agent exited, failed, timed out, or the shutdown stopped it.
pub(super) fn finished(execution: u32, outcome: &Result<(), StatusMessage>) -> Origin {
    match outcome {
        Ok(()) => Origin::system(format!(
            "execution {execution}: the agent exited successfully"
        )),
        Err(status) => Origin::system(format!(
            "execution {execution} ended: {}",
            first_line(&status.message)
        )),
    }
}

/// An execution was lost with its node (or the service), and the run queued again.
pub(super) fn lost(execution: u32, status: &StatusMessage) -> Origin {
    Origin::system(format!(
        "execution {execution} was lost: {}",
        first_line(&status.message)
    ))
}

/// The start-up recovery ended an execution the previous process left in progress.
pub(super) fn recovered(execution: u32) -> Origin {
    Origin::system(format!(
        "recovery at start: the service restarted while execution {execution} was in progress"
    ))
}

/// An execution's agent took follow-ups.
pub(super) fn delivered(execution: u32, count: u32) -> Origin {
    Origin::system(format!(
        "execution {execution}: the agent took {count} follow-up(s)"
    ))
}

/// What an execution used was measured when it ended.
pub(super) fn usage(execution: u32) -> Origin {
    Origin::system(format!(
        "execution {execution} ended: its usage was measured"
    ))
}

/// What an execution starts with was measured before its agent started.
pub(super) fn provenance(execution: u32) -> Origin {
    Origin::system(format!(
        "execution {execution} is about to start its agent: what it runs with was measured"
    ))
}

/// An execution's agent exited: what it changed in the workspace was computed.
pub(super) fn changes(execution: u32) -> Origin {
    Origin::system(format!(
        "execution {execution}'s agent exited: what it changed in the workspace was computed"
    ))
}

/// An execution's agent reported an artifact.
pub(super) fn artifact(execution: u32, artifact: &Artifact) -> Origin {
    Origin::system(format!(
        "execution {execution}: the agent reported artifact {}",
        artifact.uid
    ))
}

/// A schedule's firing made the run.
pub(super) fn fired(schedule: &RunSchedule) -> Origin {
    Origin::schedule(format!(
        "schedule {} ({}) fired, due {}",
        schedule.schedule_name,
        schedule.schedule_id,
        runledger_format::time::format_time(schedule.due)
    ))
}

/// The first line of `message`, at most `MESSAGE_IN_CAUSE` bytes.
fn first_line(message: &str) -> &str {
    cut(message.lines().next().unwrap_or(""), MESSAGE_IN_CAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_named_by_its_first_line_only() {
        let status = StatusMessage {
            message: format!("the agent exited with status 3\n{}", "x".repeat(5000)),
            error_code: None,
            retryable: None,
        };
        let origin = finished(1, &Err(status));
        assert_eq!(
            origin.cause.as_deref(),
            Some("execution 1 ended: the agent exited with status 3")
        );
        assert_eq!(origin.channel, runledger_domain::Channel::System);
    }

    #[test]
    fn a_placement_is_named() {
        let placement = Placement::Slurm {
            job_id: 7,
            node: "n3".into(),
        };
        assert_eq!(
            started(Some(&placement)).cause.as_deref(),
            Some("a slot came free and the cluster placed the run: Slurm job 7 on node n3")
        );
    }
}
