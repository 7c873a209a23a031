//! A seal follows a write within `server.seal_interval_secs` and none comes while idle; a
//! stopped store verifies, and a record rewritten on disk is named by `runledger verify`.

use std::time::{Duration, Instant};

use serde_json::json;

use super::support::{cli_on, config, last_seq, rewrite_record, sealed_proof};
use crate::common::Server;
use runledger::domain::Event;

#[tokio::test]
async fn a_seal_follows_a_write_within_the_interval_and_none_comes_while_idle() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(tmp.path(), &config(tmp.path()));
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "seal me"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let seq = last_seq(&s, &id).await;
    let written = Instant::now();
    // The interval is 1 s: the run's end is sealed within it (with slack for a loaded host).
    let proof = sealed_proof(&s, &id, seq, 5).await;
    assert!(written.elapsed() < Duration::from_secs(5));
    assert_eq!(proof["leaf_seq"], seq, "{proof}");
    assert_eq!(proof["unsealed_events"], 0, "{proof}");
    // The admin log's `ServerStarted` may be sealed on its own in the first interval; the
    // run's seal is the last one before the idle time.
    let number = proof["seal"]["number"].as_u64().expect("a seal number");
    // Idle for three intervals: no write, so no seal (observed below through the store), but
    // the final one a graceful stop makes for the admin log's `ServerStopped`.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    assert!(status.success(), "{}", s.log_text());
    let (ok, out, err) = cli_on(&s.data_dir, &["verify"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("and {} seals", number + 1)),
        "seals were made while nothing was written: {out}"
    );
    assert!(!out.contains("not sealed"), "{out}");
}

#[tokio::test]
async fn verify_names_the_first_run_and_event_that_does_not_verify() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(tmp.path(), &config(tmp.path()));
    s.wait_ready().await;
    let failed = s
        .create(json!({"prompt": "x", "config": {"environment_id": "fails"}}))
        .await;
    let ok_run = s.create(json!({"prompt": "y"})).await;
    s.wait_state(&failed, "FAILED").await;
    s.wait_state(&ok_run, "SUCCEEDED").await;
    let status = s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    assert!(status.success(), "{}", s.log_text());
    let (ok, out, err) = cli_on(&s.data_dir, &["verify"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("verified"), "{out}");

    // The failure turned into a success, on disk, checksum and stored link as they were.
    let events = {
        let store =
            runledger::store::Store::open(&s.data_dir, &Default::default()).expect("open store");
        let run_id = failed.parse().expect("run id");
        store
            .run_events(run_id, 0)
            .collect::<Result<Vec<_>, _>>()
            .expect("events")
    };
    let at = events
        .iter()
        .position(|e| matches!(e.event, Event::Failed { .. }))
        .expect("a Failed event") as u64;
    rewrite_record(&s.data_dir, &failed, at, |e| {
        e.event = Event::Succeeded { execution: 1 };
    });
    let (ok, out, err) = cli_on(&s.data_dir, &["verify"]);
    assert!(!ok, "an edited store verified: {out}{err}");
    assert!(
        err.contains(&format!("run {failed}, event {at}")),
        "the edited event is not named: {err}"
    );
}
