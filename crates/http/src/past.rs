//! A run's past states as the API answers them: the run right after one of its events
//! (`as_of`, through `runledger_runs::actor::History`), rendered like a run the API answers
//! except that `run_time` counts to the state's own `updated_at` (not to now), so a past
//! state's JSON depends only on the events up to it and the server's links; and the fields two
//! renderings differ in. Shared by the time-travel endpoints (`travel`) and the console's "run
//! at this event"; it checks no key (callers check visibility first) and names no handler.

use serde_json::{Map, Value};

use super::problem::ApiError;
use super::wire::{Links, RunItem};
use super::AppState;
use runledger_domain::Run;

/// The JSON of a past state of a run (see the module's note on `run_time`).
pub(crate) fn past_json(run: &Run, links: &Links<'_>) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(&past_item(run, links)).map_err(|e| ApiError::internal(&e))
}

/// A past state as a `RunItem`: `run_time` as it was at the state's `updated_at`.
pub(crate) fn past_item<'a>(run: &'a Run, links: &Links<'_>) -> RunItem<'a> {
    let mut item = RunItem::from(run, links);
    let then = Links {
        public_url: links.public_url,
        secret: links.secret,
        now: run.updated_at,
        ttl_secs: links.ttl_secs,
    };
    item.run_time = RunItem::from(run, &then).run_time;
    item
}

/// `run` (visible to the caller, as it is now) as it was right after its event `seq`, or a 404
/// that names `seq` and how many events the run has.
pub(crate) fn as_of(state: &AppState, run: &Run, seq: u64) -> Result<Run, ApiError> {
    let beyond = || {
        ApiError::not_found(format!(
            "run {} has {} events (seq 0 to {}); there is no event {seq}",
            run.id,
            run.next_seq,
            run.next_seq.saturating_sub(1)
        ))
    };
    if seq >= run.next_seq {
        return Err(beyond());
    }
    state.runs.history().as_of(run.id, seq)?.ok_or_else(beyond)
}

/// The top-level fields whose value differs between two rendered runs, sorted.
pub(crate) fn changed(before: &Value, after: &Value) -> Vec<String> {
    let empty = Map::new();
    let before = before.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    let mut fields: Vec<String> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .chain(before.keys().filter(|k| !after.contains_key(*k)).cloned())
        .collect();
    fields.sort();
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changed_names_differing_added_and_removed_fields() {
        let before = json!({"a": 1, "b": 2, "gone": true});
        let after = json!({"a": 1, "b": 3, "new": "x"});
        assert_eq!(changed(&before, &after), ["b", "gone", "new"]);
        assert_eq!(changed(&json!({}), &json!({"z": 1, "y": 2})), ["y", "z"]);
    }
}
