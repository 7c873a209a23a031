//! The projector writes audit entries many batches late (`projection/src/backlog.rs`). A
//! server killed before it wrote them loses none: the runs they belong to stay under the index
//! floor or keep their dirty markers, and the next start's catch-up indexes their events.

use std::time::Duration;

use super::{audit, cancel, events, TestKey};
use crate::common::{self, Server};
use serde_json::json;

#[tokio::test]
async fn audit_entries_the_projector_had_not_written_survive_a_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(dir.path(), common::CONFIG);
    s.wait_ready().await;
    let admin = TestKey {
        secret: s.key.clone(),
        id: String::new(),
    };
    // Runs older than the index floor when their next command comes: those keep markers.
    let mut old = Vec::new();
    for i in 0..5 {
        old.push(
            s.create(json!({"prompt": format!("old {i}"), "config": {"environment_id": "slow"}}))
                .await,
        );
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for id in &old {
        cancel(&s, &admin, id).await;
    }
    // Young runs, under the floor.
    let mut young = Vec::new();
    for i in 0..30 {
        young.push(
            s.create(json!({"prompt": format!("young {i}"), "config": {"environment_id": "slow"}}))
                .await,
        );
    }
    let key = s.key.clone();
    s.kill();

    let mut s = Server::start_in(dir.path(), common::CONFIG);
    s.key = key;
    s.wait_ready().await;
    let (status, v) = audit(&s, &admin, "type=Created&limit=1000").await;
    assert_eq!(status, 200, "{v}");
    let created: Vec<String> = events(&v)
        .iter()
        .filter_map(|e| e["run_id"].as_str().map(str::to_string))
        .collect();
    for id in old.iter().chain(&young) {
        assert!(created.contains(id), "the create of {id} is missing: {v}");
    }
    let (status, v) = audit(&s, &admin, "type=Cancelled&limit=1000").await;
    assert_eq!(status, 200, "{v}");
    let cancelled: Vec<String> = events(&v)
        .iter()
        .filter_map(|e| e["run_id"].as_str().map(str::to_string))
        .collect();
    for id in &old {
        assert!(cancelled.contains(id), "the cancel of {id} is missing: {v}");
    }
}
