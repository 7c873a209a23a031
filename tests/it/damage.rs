//! Damaged data directories (issue #4, "corruption is loud, never silent"). Each test damages a
//! *copy* of a real server's data directory, the way a bad disk would:
//! - one event record whose bytes were flipped (our CRC catches it): the service keeps serving
//!   every other run, the damaged run answers a clear error naming nothing internal, the log
//!   names the run and the record, and `export` exports everything else and says what it
//!   skipped;
//! - a byte flipped in sled's own log file: sled's recovery would silently drop everything
//!   after it, so the commit watermark makes the server refuse to start and `export` warn,
//!   until `runledger replay` accepts the loss;
//! - the same byte after a clean stop, whose snapshot of sled's page table points at the
//!   damaged message: sled refuses to open, and so does everything of ours with a message that
//!   says what to do, until `runledger replay` sets the snapshot aside and recovers from the log.

use crate::common;

use std::path::Path;

use common::{cli, Server, CONFIG};
use nix::sys::signal::Signal;
use serde_json::json;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// How `three_runs` stops its server.
enum Stop {
    /// SIGTERM: every acknowledged command is in the read index when it exits.
    Clean,
    /// SIGKILL: the log is as the last sync left it, the index may lag it.
    Kill,
}

/// A stopped server's data directory with three finished runs; returns their ids and the key.
async fn three_runs(dir: &Path, stop: Stop) -> (Vec<String>, String) {
    let mut server = Server::start_in(dir, CONFIG);
    let mut ids = Vec::new();
    for name in ["first", "second", "third"] {
        ids.push(
            server
                .create(json!({"prompt": format!("the {name} run, marker-{name}")}))
                .await,
        );
    }
    for id in &ids {
        server.wait_state(id, "SUCCEEDED").await;
    }
    let key = server.key.clone();
    match stop {
        Stop::Clean => {
            let status = server.stop_with(Signal::SIGTERM, 20).await;
            assert!(status.success(), "{status:?}");
        }
        Stop::Kill => server.kill(),
    }
    (ids, key)
}

/// `three_runs` stopped as `stop`, copied to `dir/copy`, with a byte of the second run's
/// prompt flipped in the copy's sled log: returns the runs, the key and the copy.
async fn damaged_copy(dir: &Path, stop: Stop) -> (Vec<String>, String, std::path::PathBuf) {
    let (ids, key) = three_runs(dir, stop).await;
    let copy = dir.join("copy");
    copy_dir(&dir.join("data"), &copy.join("data"));
    damage_second_prompt(&copy.join("data"));
    (ids, key, copy)
}

/// After a `replay` accepted the loss: a verification is clean and the server starts on the
/// copy and serves the first run.
async fn serves_what_is_left(copy: &Path, key: String, first: &str) {
    let data = copy.join("data");
    let data_arg = data.to_str().expect("utf-8 path");
    let (ok, _, err) = cli(&["replay", "--verify", "--data-dir", data_arg], &[]);
    assert!(ok, "{err}");
    let mut server = Server::start_in(copy, CONFIG);
    server.key = key;
    server.wait_ready().await;
    assert_eq!(server.run(first).await["run_id"], first);
}

/// Flips a byte of the second run's prompt where sled's log file holds it first.
fn damage_second_prompt(data: &Path) {
    let file = data.join("sled").join("db");
    let mut bytes = std::fs::read(&file).expect("read sled log");
    let needle = b"marker-second";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the prompt is in sled's log");
    bytes[at] ^= 0x20;
    std::fs::write(&file, bytes).expect("write sled log");
}

/// Starts the server on `dir/data` (the copy) and expects it to refuse: returns its stderr.
fn serve_refused(dir: &Path) -> String {
    std::fs::write(dir.join("runledger.toml"), CONFIG).expect("config");
    let config = dir.join("runledger.toml");
    let data = dir.join("data");
    let out = std::process::Command::new(common::BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run serve");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    err
}

#[tokio::test]
async fn a_damaged_event_record_fails_only_its_own_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // A clean stop, so that each run's row is in the index: killed, the server may not have
    // written the index rows of runs that finished just before (they were answered from the
    // projector's pending rows), and a run whose first record is damaged cannot be indexed
    // again from its log.
    let (ids, key) = three_runs(tmp.path(), Stop::Clean).await;
    let copy = tmp.path().join("copy");
    copy_dir(&tmp.path().join("data"), &copy.join("data"));

    // Flip one byte inside the body of the second run's first event (its Created record).
    {
        let store = runledger::store::Store::open(
            &copy.join("data"),
            &runledger::store::Options::default(),
        )
        .expect("open copy");
        let events = store.db().open_tree("events").expect("events tree");
        let id: runledger::domain::RunId = ids[1].parse().expect("id");
        let mut key_bytes = id.to_bytes().to_vec();
        key_bytes.extend_from_slice(&0u64.to_be_bytes());
        let mut value = events
            .get(&key_bytes)
            .expect("get")
            .expect("record")
            .to_vec();
        let last = value.len() - 1;
        value[last] ^= 0x40;
        events.insert(key_bytes, value).expect("insert");
        // Also as if the server had died between an append and its index update: startup
        // must then try to catch this run up, fail on it alone, and serve the others.
        store.mark_dirty(id).expect("mark dirty");
        store.sync_blocking().expect("sync");
    }

    let mut server = Server::start_in(&copy, CONFIG);
    server.key = key;
    server.wait_ready().await;
    // Every run is still listed and readable (reads come from the index).
    let (status, page) = server.get(&server.key, "/agent/runs").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(3));
    for id in [&ids[0], &ids[2]] {
        assert_eq!(server.run(id).await["state"], "SUCCEEDED");
    }
    // The damaged run keeps the state its index row had (the catch-up of a damaged log cannot
    // run).
    assert_eq!(server.run(&ids[1]).await["run_id"], ids[1].as_str());
    // The healthy runs' histories and commands work.
    assert_eq!(
        server.events(&ids[0]).await.len(),
        server.events(&ids[2]).await.len()
    );
    let (status, body) = server
        .post(
            &server.key,
            &format!("/agent/runs/{}/followups", ids[0]),
            json!({"message": "more"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // The damaged run answers a clear, non-retryable error, for reads of its log and commands.
    for (status, body) in [
        server
            .get(&server.key, &format!("/agent/runs/{}/events", ids[1]))
            .await,
        server
            .post(
                &server.key,
                &format!("/agent/runs/{}/followups", ids[1]),
                json!({"message": "more"}),
            )
            .await,
    ] {
        assert_eq!(status, 500, "{body}");
        assert_eq!(body["retryable"], false, "{body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("damaged"), "{body}");
        assert!(
            !detail.contains("sled") && !detail.contains("crc"),
            "{body}"
        );
    }
    // The server log names the run and the record.
    common::eventually(5, "the damage to be logged", || {
        let log = server.log_text();
        log.contains(&format!(
            "corrupt event record of run {} at sequence 0",
            ids[1]
        ))
    })
    .await;
    drop(server);

    // export: everything readable, the damaged record named on stderr, a failing exit code.
    let data = copy.join("data");
    let data = data.to_str().expect("utf-8 path");
    let (ok, out, err) = cli(&["export", "--data-dir", data], &[]);
    assert!(!ok, "export must fail when it skipped records: {err}");
    assert!(
        err.contains(&format!("run {} at sequence 0", ids[1])),
        "{err}"
    );
    let exported: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    for id in [&ids[0], &ids[2]] {
        assert!(
            exported.iter().any(|e| e["run_id"] == *id && e["seq"] == 0),
            "{id}"
        );
    }
    assert!(exported
        .iter()
        .any(|e| e["run_id"] == ids[1] && e["seq"] == 1));
    assert!(!exported
        .iter()
        .any(|e| e["run_id"] == ids[1] && e["seq"] == 0));
}

#[tokio::test]
async fn a_store_that_lost_acknowledged_writes_is_refused_until_the_loss_is_accepted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Killed, so that no snapshot covers the damaged message: sled's recovery scans the log,
    // its message CRC fails there, and it silently drops that message and all later ones.
    // (After a clean stop sled refuses to open instead: the next test.)
    let (ids, key, copy) = damaged_copy(tmp.path(), Stop::Kill).await;
    let data = copy.join("data");
    let data_arg = data.to_str().expect("utf-8 path");

    // The server refuses to start, saying why and what to do.
    let err = serve_refused(&copy);
    assert!(err.contains("lost acknowledged writes"), "{err}");
    assert!(err.contains("runledger replay"), "{err}");

    // export still exports what is left, warns, and fails.
    let (ok, out, err) = cli(&["export", "--data-dir", data_arg], &[]);
    assert!(!ok);
    assert!(err.contains("lost acknowledged writes"), "{err}");
    assert!(out.lines().any(|l| l.contains(&ids[0])), "{out}");
    // A verification reports the loss and changes nothing.
    let (ok, _, err) = cli(&["replay", "--verify", "--data-dir", data_arg], &[]);
    assert!(!ok, "{err}");
    let (ok, _, _) = cli(&["replay", "--verify", "--data-dir", data_arg], &[]);
    assert!(!ok, "verify must not accept the loss");

    // replay accepts the loss; the server then serves what is left.
    let (ok, _, err) = cli(&["replay", "--data-dir", data_arg], &[]);
    assert!(ok, "{err}");
    serves_what_is_left(&copy, key, &ids[0]).await;
}

#[tokio::test]
async fn a_store_sled_refuses_to_open_is_recovered_from_its_log_by_replay() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // A clean stop leaves a snapshot of sled's page table that points into the log: the
    // damaged message is then one sled reads at open, and it refuses to open.
    let (ids, key, copy) = damaged_copy(tmp.path(), Stop::Clean).await;
    let data = copy.join("data");
    let data_arg = data.to_str().expect("utf-8 path");

    // The server refuses to start, saying why and what to do; so do the offline commands.
    let err = serve_refused(&copy);
    assert!(err.contains("is damaged"), "{err}");
    assert!(err.contains("Recovering from damage"), "{err}");
    assert!(err.contains("runledger replay"), "{err}");
    let (ok, _, err) = cli(&["export", "--data-dir", data_arg], &[]);
    assert!(!ok);
    assert!(err.contains("is damaged"), "{err}");
    // A verification changes nothing, so the next start is refused the same way.
    let (ok, _, err) = cli(&["replay", "--verify", "--data-dir", data_arg], &[]);
    assert!(!ok);
    assert!(err.contains("is damaged"), "{err}");
    assert!(serve_refused(&copy).contains("is damaged"));

    // replay sets sled's snapshot aside (kept), recovers from the log and accepts the loss.
    let (ok, _, err) = cli(&["replay", "--data-dir", data_arg], &[]);
    assert!(ok, "{err}");
    assert!(err.contains("moved sled's snapshot to"), "{err}");
    let aside: Vec<_> = std::fs::read_dir(&data)
        .expect("read data dir")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("damaged-snapshot-")
        })
        .collect();
    assert_eq!(aside.len(), 1);
    assert!(std::fs::read_dir(aside[0].path())
        .expect("read set-aside dir")
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("snap.")));
    serves_what_is_left(&copy, key, &ids[0]).await;
}
