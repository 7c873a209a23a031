//! `runledger replay --check` on a store the real binary wrote: clean after a clean stop; and
//! when a run's log folds to another state than the one recorded for it (here an event added
//! to the log behind the index's back, as a changed fold would see an old record), each
//! differing field is printed as run, field, stored value, rebuilt value, and it exits 1.

use nix::sys::signal::Signal;
use serde_json::json;

use crate::common::{cli, Server, CONFIG};
use runledger::domain::{Event, RunId, Timestamp};
use runledger::store::{Envelope, Options, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_each_field_a_log_no_longer_folds_to() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(tmp.path(), CONFIG);
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(server.create(json!({"prompt": format!("run {n}")})).await);
    }
    for id in &ids {
        server.wait_state(id, "SUCCEEDED").await;
    }
    let status = server.stop_with(Signal::SIGTERM, 20).await;
    assert!(status.success(), "{status:?}");
    let data = tmp.path().join("data");
    let data_arg = data.to_str().expect("utf-8");
    let (ok, out, err) = cli(&["replay", "--check", "--data-dir", data_arg], &[]);
    assert!(ok, "{out}\n{err}");
    assert_eq!(out, "", "nothing differs");
    assert!(
        err.contains("checked") && err.contains("3 runs") && err.contains("0 runs differ"),
        "{err}"
    );

    // The second run's log gains an event its recorded state does not know.
    let second: RunId = ids[1].parse().expect("run id");
    {
        let store = Store::open(&data, &Options::default()).expect("store");
        let next = store.run_events(second, 0).count() as u64;
        store
            .append(&[Envelope {
                run_id: second,
                seq: next,
                at: Timestamp(runledger::clock::now().0),
                event: Event::SessionLinkRevoked { by: "01KEY".into() },
                origin: None,
            }])
            .expect("append");
        store.sync_blocking().expect("sync");
    }
    let (ok, out, err) = cli(&["replay", "--check", "--data-dir", data_arg], &[]);
    assert!(!ok, "a difference fails the check:\n{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.contains(&format!("run {}: session_epoch: stored 0, rebuilt 1", ids[1]).as_str()),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with(&format!("run {}: ", ids[1]))),
        "only the changed run: {out}"
    );
    assert!(err.contains("1 runs differ"), "{err}");
    // `--check` and `--verify` are two questions.
    let (ok, _, err) = cli(
        &["replay", "--check", "--verify", "--data-dir", data_arg],
        &[],
    );
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}
