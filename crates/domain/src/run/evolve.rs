//! How events change a run: `evolve` folds one event into its state and `fold` a whole log.
//! Total: any stored log replays, an event that does not apply changing only the bookkeeping;
//! it never rejects and never performs an effect.

use crate::events::Event;
use crate::ids::{RunId, Timestamp};

use super::state::{Followup, ReportedArtifact, Run, RunState, RunUsage};

/// Folds one event, recorded at `at`, into the state of run `id`. Total: an event that does not
/// apply (which a log written through `decide` never contains) changes nothing but the run's
/// bookkeeping (`next_seq`, `updated_at`), so positions in the log stay consistent.
pub fn evolve(run: Option<Run>, id: RunId, event: &Event, at: Timestamp) -> Option<Run> {
    let Some(mut run) = run else {
        return admit(id, event, at);
    };
    run.next_seq += 1;
    run.updated_at = run.updated_at.max(at);
    match event {
        Event::Created(_) | Event::Admitted(_) => {}
        Event::Started { execution } | Event::StartedOn { execution, .. } => {
            run.state = RunState::InProgress;
            run.executions = *execution;
            run.started_at.get_or_insert(at);
            run.execution_started_at = Some(at);
            // Handed to this execution at its start; owed until it reports taking them.
            run.owed = std::mem::take(&mut run.pending_followups);
            run.status_message = None;
        }
        Event::FollowupReceived { message, mode, .. } => {
            let followup = Followup {
                message: message.clone(),
                mode: *mode,
            };
            match run.state {
                RunState::Queued => run.pending_followups.push(followup),
                RunState::InProgress => run.owed.push(followup),
                _ => {
                    run.state = RunState::Queued;
                    run.resumed_by = Some(followup);
                    run.status_message = None;
                }
            }
        }
        Event::Succeeded { .. } => {
            finish_execution(&mut run, at);
            run.state = RunState::Succeeded;
        }
        Event::Failed { status, .. } => {
            finish_execution(&mut run, at);
            run.state = RunState::Failed;
            run.status_message = Some(status.clone());
        }
        Event::Cancelled { .. } => {
            finish_execution(&mut run, at);
            run.state = RunState::Cancelled;
            run.pending_followups.clear();
            run.owed.clear();
        }
        Event::FollowupsDelivered { execution, count } => {
            if run.state == RunState::InProgress && *execution == run.executions {
                let taken = (*count as usize).min(run.owed.len());
                run.owed.drain(..taken);
            }
        }
        Event::Requeued { execution } => {
            let finished = matches!(run.state, RunState::Succeeded | RunState::Failed);
            if finished && *execution == run.executions && !run.owed.is_empty() {
                let mut owed = std::mem::take(&mut run.owed).into_iter();
                run.state = RunState::Queued;
                run.resumed_by = owed.next();
                run.pending_followups = owed.collect();
                run.status_message = None;
            }
        }
        Event::Lost { execution, status } => {
            if run.state == RunState::InProgress && *execution == run.executions {
                finish_execution(&mut run, at);
                run.state = RunState::Queued;
                // Owed first: they were received before anything still pending. The run keeps
                // its `resumed_by`, so the next execution starts as the lost one did.
                let mut owed = std::mem::take(&mut run.owed);
                owed.append(&mut run.pending_followups);
                run.pending_followups = owed;
                run.status_message = Some(status.clone());
            }
        }
        Event::UsageRecorded { execution, usage } => run.usage.add(*execution, usage),
        Event::ArtifactReported {
            execution,
            artifact,
        } => run.artifacts.push(ReportedArtifact {
            at,
            execution: *execution,
            artifact: artifact.clone(),
        }),
        // Only right after the run's admission: a later one would change what its agent
        // was given.
        Event::Attached { attachments } => {
            let before = 2 + u64::from(run.schedule.is_some()) + u64::from(run.derived.is_some());
            if run.next_seq == before && run.attachments.is_empty() {
                run.attachments = attachments.clone();
            }
        }
        // Only as the second event of the admission (before any `Attached`): a later one
        // would make a run that was not a schedule's into one.
        Event::Scheduled { schedule } => {
            if run.next_seq == 2
                && run.schedule.is_none()
                && run.derived.is_none()
                && run.attachments.is_empty()
            {
                run.schedule = Some(schedule.clone());
            }
        }
        // Only as the second event of the admission: a later one would rewrite where the
        // run came from.
        Event::Derived(derived) => {
            if run.next_seq == 2
                && run.derived.is_none()
                && run.schedule.is_none()
                && run.attachments.is_empty()
            {
                // A fork's agent continues the original's session with the fork's message, as
                // a follow-up that resumed the run would: every execution until one ends takes
                // it (a lost one's successor too).
                if let crate::events::Derivation::Fork { message, .. } = &derived.kind {
                    run.resumed_by = Some(Followup {
                        message: message.clone(),
                        mode: crate::events::FollowupMode::Normal,
                    });
                }
                run.derived = Some(derived.clone());
            }
        }
        Event::SessionLinkRevoked { .. } => {
            run.session_epoch = run.session_epoch.saturating_add(1);
        }
        // The latest execution's, as `decide` records them: in order, once each.
        Event::Provenance {
            execution,
            provenance,
        } => {
            if run.provenance.as_ref().is_none_or(|(e, _)| e < execution) {
                run.provenance = Some((*execution, provenance.clone()));
            }
        }
        // Read back from the log by the changes endpoint; the run's state does not hold them.
        Event::Changes { .. } => {}
    }
    Some(run)
}

/// The run a log's first event makes: a `Created` (from before teams) or an `Admitted`;
/// any other first event makes none.
fn admit(id: RunId, event: &Event, at: Timestamp) -> Option<Run> {
    let (created, team, sealed) = match event {
        Event::Created(created) => (created, crate::DEFAULT_TEAM, None),
        Event::Admitted(a) => (&a.created, a.team.as_str(), a.sealed.as_ref()),
        _ => return None,
    };
    Some(Run {
        id,
        title: created.title.clone(),
        prompt: created.prompt.clone(),
        config: created.config.clone(),
        creator: created.creator.clone(),
        source: created.source,
        metadata: created.metadata.clone(),
        team: team.to_string(),
        sealed: sealed.cloned(),
        state: RunState::Queued,
        created_at: at,
        updated_at: at,
        started_at: None,
        status_message: None,
        executions: 0,
        pending_followups: Vec::new(),
        resumed_by: None,
        owed: Vec::new(),
        run_time_ms: 0,
        execution_started_at: None,
        next_seq: 1,
        usage: RunUsage::default(),
        artifacts: Vec::new(),
        attachments: Vec::new(),
        schedule: None,
        derived: None,
        session_epoch: 0,
        provenance: None,
    })
}

fn finish_execution(run: &mut Run, at: Timestamp) {
    if let Some(start) = run.execution_started_at.take() {
        run.run_time_ms += at.0.saturating_sub(start.0);
    }
}

/// Folds a whole log, oldest first.
pub fn fold<'a>(
    id: RunId,
    events: impl IntoIterator<Item = (&'a Event, Timestamp)>,
) -> Option<Run> {
    events
        .into_iter()
        .fold(None, |run, (event, at)| evolve(run, id, event, at))
}
