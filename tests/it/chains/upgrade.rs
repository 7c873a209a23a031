//! A store written before chains (schema version 1 records, no seals) opens, is sealed from
//! its state at the upgrade by the first start, verifies, and a version 1 record changed after
//! the upgrade is named by `runledger verify`.

use std::collections::BTreeMap;

use serde_json::json;

use super::support::{cli_on, config, rewrite_record, sealed_proof};
use crate::common::Server;
use runledger::domain::{
    AgentConfig, Creator, CreatorKind, Event, RunCreated, RunId, SourceType, Timestamp,
};
use runledger::store::codec::{encode, LegacyEnvelope};

/// Writes `runs` runs of two version 1 records each (created, cancelled) straight into a new
/// store's `events` tree, as a build before chains left them. Returns their ids.
fn write_version_1_store(data_dir: &std::path::Path, runs: u64) -> Vec<String> {
    let store = runledger::store::Store::open(data_dir, &Default::default()).expect("open");
    let events = store.db().open_tree("events").expect("events tree");
    let mut ids = Vec::new();
    for i in 0..runs {
        let at = Timestamp(1_700_000_000_000 + i * 1000);
        let id = RunId::new(at, u128::from(i) + 1);
        let created = Event::Created(RunCreated {
            title: format!("legacy {i}"),
            prompt: format!("legacy prompt {i}"),
            config: AgentConfig::default(),
            creator: Creator {
                kind: CreatorKind::User,
                uid: "old-key".into(),
                display_name: "old".into(),
            },
            source: SourceType::Api,
            metadata: BTreeMap::new(),
        });
        let cancelled = Event::Cancelled {
            by: "old-key".into(),
        };
        for (seq, event) in [created, cancelled].into_iter().enumerate() {
            let record = encode(&LegacyEnvelope {
                run_id: id,
                seq: seq as u64,
                at: Timestamp(at.0 + seq as u64),
                event,
            })
            .expect("encode");
            let mut key = id.to_bytes().to_vec();
            key.extend_from_slice(&(seq as u64).to_be_bytes());
            events.insert(key, record).expect("insert");
        }
        ids.push(id.to_string());
    }
    store.sync_blocking().expect("sync");
    ids
}

#[tokio::test]
async fn a_store_from_before_chains_is_sealed_at_the_upgrade_and_verifies() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data_dir = tmp.path().join("data");
    let legacy = write_version_1_store(&data_dir, 3);
    let mut s = Server::start_in(tmp.path(), &config(tmp.path()));
    s.wait_ready().await;
    // The first start seals the history as it found it.
    let proof = sealed_proof(&s, &legacy[0], 1, 10).await;
    assert_eq!(proof["leaf_seq"], 1, "{proof}");
    // New runs chain and seal as usual beside the old ones.
    let id = s.create(json!({"prompt": "after the upgrade"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let status = s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    assert!(status.success(), "{}", s.log_text());
    let (ok, out, err) = cli_on(&data_dir, &["verify"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("of 4 runs"), "{out}");

    // A version 1 record changed after the upgrade: the seal names the run's sealed event.
    rewrite_record(&data_dir, &legacy[1], 0, |e| {
        if let Event::Created(c) = &mut e.event {
            c.prompt = "something else".into();
        }
    });
    let (ok, out, err) = cli_on(&data_dir, &["verify"]);
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains(&format!("run {}, event 1", legacy[1])),
        "{err}"
    );
}
