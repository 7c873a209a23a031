//! Every history of the corpus folds, with this build, to the state recorded with it (a field
//! the recorded state lacks, added to runs since, is not compared: a newer history covers it);
//! and the corpus holds every event variant, records of every schema version and runs of
//! every harness.

use std::collections::BTreeSet;

use serde_json::Value;

use runledger::cli::replay_check::compare_json;
use runledger::domain::{evolve, Event, Run};
use runledger::store::codec::{decode_run, RUN_SCHEMA_VERSION, SCHEMA_VERSION};

use super::file::{self, History};

/// What `history` folds to with this build, and each field where that differs from its
/// recorded state, as `name: field: recorded …, rebuilt …`.
pub(super) fn replay(history: &History) -> Vec<String> {
    let mut run: Option<Run> = None;
    for (seq, record) in history.records.iter().enumerate() {
        let e = match decode_run(record) {
            Ok(e) => e,
            Err(e) => {
                return vec![format!(
                    "{}: record {seq} does not decode: {e}",
                    history.name
                )]
            }
        };
        if e.run_id != history.run_id || e.seq != seq as u64 {
            return vec![format!(
                "{}: record {seq} decodes as {} #{}",
                history.name, e.run_id, e.seq
            )];
        }
        run = evolve(run, e.run_id, &e.event, e.at);
    }
    let rebuilt = run
        .and_then(|r| serde_json::to_string(&r).ok())
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .unwrap_or(Value::Null);
    let mut differences = Vec::new();
    compare_json(
        "",
        &history.state,
        &known(&history.state, rebuilt),
        &mut differences,
    );
    differences
        .into_iter()
        .map(|d| {
            format!(
                "{}: {}: recorded {}, rebuilt {}",
                history.name, d.field, d.stored, d.rebuilt
            )
        })
        .collect()
}

/// `value` without the object fields `recorded` does not have (at any depth).
fn known(recorded: &Value, value: Value) -> Value {
    match (recorded, value) {
        (Value::Object(r), Value::Object(v)) => Value::Object(
            v.into_iter()
                .filter(|(k, _)| r.contains_key(k))
                .map(|(k, v)| {
                    let inner = known(&r[&k], v);
                    (k, inner)
                })
                .collect(),
        ),
        (Value::Array(r), Value::Array(v)) => Value::Array(
            v.into_iter()
                .enumerate()
                .map(|(i, v)| match r.get(i) {
                    Some(r) => known(r, v),
                    None => v,
                })
                .collect(),
        ),
        (_, v) => v,
    }
}

#[test]
fn every_history_folds_to_the_state_recorded_with_it() {
    let histories = file::read_all();
    assert!(histories.len() >= 10, "the corpus is there");
    let failures: Vec<String> = histories.iter().flat_map(replay).collect();
    assert!(
        failures.is_empty(),
        "this build folds recorded histories to other states than were recorded (a change \
         to the fold or to a decoder; see docs/debugging.md, \"Check an upgrade\"):\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_changed_state_is_named_by_its_field() {
    let mut history = file::read_all()
        .into_iter()
        .find(|h| h.name == "rules-v2-requeued")
        .expect("the history");
    history.state["executions"] = Value::from(7);
    assert_eq!(
        replay(&history),
        ["rules-v2-requeued: executions: recorded 7, rebuilt 2"]
    );
}

/// The index of an event's variant; exhaustive, so a new variant does not compile until the
/// corpus is asked to hold it (below).
fn variant(event: &Event) -> usize {
    match event {
        Event::Created(_) => 0,
        Event::Started { .. } => 1,
        Event::FollowupReceived { .. } => 2,
        Event::Succeeded { .. } => 3,
        Event::Failed { .. } => 4,
        Event::Cancelled { .. } => 5,
        Event::FollowupsDelivered { .. } => 6,
        Event::Requeued { .. } => 7,
        Event::UsageRecorded { .. } => 8,
        Event::Admitted(_) => 9,
        Event::ArtifactReported { .. } => 10,
        Event::Attached { .. } => 11,
        Event::Scheduled { .. } => 12,
        Event::StartedOn { .. } => 13,
        Event::Lost { .. } => 14,
        Event::SessionLinkRevoked { .. } => 15,
        Event::Derived(_) => 16,
        Event::Provenance { .. } => 17,
        Event::Changes { .. } => 18,
    }
}

#[test]
fn the_corpus_holds_every_variant_schema_version_and_harness() {
    let write = std::env::var("RUNLEDGER_WRITE_GOLDEN").is_ok();
    for made in super::synthetic::all() {
        let state = serde_json::to_string_pretty(&made.state).expect("state");
        if write {
            file::write_new(made.name, &[made.about], made.run_id, &made.records, &state);
        }
    }
    let histories = file::read_all();
    let (mut variants, mut versions) = (BTreeSet::new(), BTreeSet::new());
    for h in &histories {
        for record in &h.records {
            versions.insert(record[0]);
            if let Ok(e) = decode_run(record) {
                variants.insert(variant(&e.event));
            }
        }
    }
    assert_eq!(variants, (0..=18).collect(), "every event variant");
    assert_eq!(
        versions,
        BTreeSet::from([SCHEMA_VERSION, RUN_SCHEMA_VERSION]),
        "records of every schema version"
    );
    for harness in ["claude", "codex", "gemini", "command"] {
        assert!(
            histories.iter().any(|h| h.name.contains(harness)),
            "no history of a {harness} run"
        );
    }
}
