//! A run carried from one store to another with `export --run` and `import --run`: the second
//! server lists it and answers its GET, events, transcript and artifact as the first did; the
//! same run exported twice is the same bytes.

use crate::common;

use common::Server;
use serde_json::Value;

use super::support::{import, source, target};

/// The fields of a run that do not depend on the server answering (links are signed by the
/// instance and carry its address).
fn comparable(run: &Value) -> Value {
    let mut run = run.clone();
    if let Some(o) = run.as_object_mut() {
        o.remove("session_link");
    }
    if let Some(artifacts) = run["artifacts"].as_array_mut() {
        for a in artifacts {
            if let Some(d) = a["data"].as_object_mut() {
                d.remove("download_url");
                d.remove("expires_at");
            }
        }
    }
    run
}

#[tokio::test]
async fn a_run_moves_to_another_store_whole_and_exports_to_the_same_bytes() {
    let src = source().await;
    let out = tempfile::tempdir().expect("tempdir");
    let (first, second) = (out.path().join("a.bundle"), out.path().join("b.bundle"));
    let (ok, err) = src.export(&first);
    assert!(ok, "{err}");
    assert!(err.contains("exported run"), "{err}");
    let (ok, err) = src.export(&second);
    assert!(ok, "{err}");
    let bytes = std::fs::read(&first).expect("bundle");
    assert_eq!(
        bytes,
        std::fs::read(&second).expect("bundle"),
        "the same bytes twice"
    );
    assert!(bytes.starts_with(b"runledger-bundle 1\n"));
    assert!(bytes.len() > 2_500_000, "{}", bytes.len());

    let (dir, key) = target().await;
    let (ok, err) = import(dir.path(), &first, &[]);
    assert!(ok, "{err}");
    assert!(err.contains("its seal proof verified"), "{err}");

    let config = std::fs::read_to_string(dir.path().join("runledger.toml")).expect("config");
    let mut s = Server::start_in(dir.path(), &config);
    s.key = key.clone();
    s.wait_ready().await;
    let run = s.run(&src.id).await;
    assert_eq!(comparable(&run), comparable(&src.run));
    assert_eq!(s.events(&src.id).await, src.events);
    assert_eq!(s.transcript_text(&src.id).await, src.transcript);
    assert_eq!(
        super::support::download_artifact(&s, &key, &run).await,
        src.artifact
    );
    let (status, list) = s.get(&key, "/agent/runs").await;
    assert_eq!(status, 200, "{list}");
    assert!(
        list["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .any(|r| r["run_id"] == src.id.as_str()),
        "{list}"
    );
    let (status, list) = s.get(&key, "/agent/runs?state=SUCCEEDED").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["runs"][0]["run_id"], src.id.as_str(), "{list}");
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
}
