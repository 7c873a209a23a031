//! `runledger replay --verify` over the schedules' logs: each log read through from its
//! creation, checking that it folds without a gap and that the runs its firings name exist. It
//! reads a stopped store; the live schedules (`runledger_runs::schedules`) never call it.

use runledger_domain::{evolve_schedule, Schedule, ScheduleId};
use runledger_store::Store;

/// What `runledger replay --verify` finds in the schedules' logs.
#[derive(Debug, Default)]
pub struct Verified {
    pub schedules: usize,
    pub events: u64,
    /// Damaged records, logs that do not start with their creation or skip a sequence
    /// number, firings whose run is not in the log (other than a latest firing, which the
    /// next start completes).
    pub differences: Vec<String>,
    /// Latest firings whose run the next start makes.
    pub pending: Vec<String>,
}

/// Reads every schedule's log through, checking it folds from its creation without a gap
/// and that the runs its firings name exist.
pub fn verify_logs(store: &Store) -> Verified {
    let mut verified = Verified::default();
    let mut current: Option<(ScheduleId, Option<Schedule>)> = None;
    let finish = |verified: &mut Verified, id: ScheduleId, schedule: Option<Schedule>| {
        let Some(s) = schedule else { return };
        verified.schedules += 1;
        // Only the remembered firings are checked: older ones' runs were checked as they
        // were made, and walking every firing would be a second log scan.
        for (i, f) in s.firings.iter().enumerate() {
            let exists = store.run_events(f.run_id, 0).next().is_some();
            if exists {
                continue;
            }
            let what = format!(
                "schedule {id}: the firing due at {} names run {}, which is not in the log",
                runledger_format::time::format_time(f.due),
                f.run_id
            );
            if i + 1 == s.firings.len() {
                verified.pending.push(what);
            } else {
                verified.differences.push(what);
            }
        }
    };
    for record in store.scan_schedules() {
        let e = match record {
            Ok(e) => e,
            Err(e) => {
                verified.differences.push(e.to_string());
                continue;
            }
        };
        verified.events += 1;
        if current.as_ref().is_none_or(|(id, _)| *id != e.schedule_id) {
            if let Some((id, s)) = current.take() {
                finish(&mut verified, id, s);
            }
            current = Some((e.schedule_id, None));
        }
        let Some((id, state)) = current.as_mut() else {
            continue;
        };
        let expected = state.as_ref().map_or(0, |s| s.next_seq);
        if e.seq != expected {
            verified.differences.push(format!(
                "schedule {id}: event {} where event {expected} was due",
                e.seq
            ));
        }
        *state = evolve_schedule(state.take(), *id, &e.event, e.at);
        if state.is_none() {
            verified.differences.push(format!(
                "schedule {id}: event {} ({}) before the schedule's creation",
                e.seq,
                e.event.kind()
            ));
        }
    }
    if let Some((id, s)) = current.take() {
        finish(&mut verified, id, s);
    }
    verified
}
