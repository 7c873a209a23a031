//! Recording a stopped store's runs as corpus histories: each run of the store becomes
//! `<prefix>-<environment>-<n>`, its records re-encoded exactly as this build writes them
//! (with their hash chain), beside the state it folds to. The test records a store the real
//! binary just wrote into a scratch directory and replays what it wrote. Run by hand with
//! `RUNLEDGER_CORPUS_STORE=<data dir> RUNLEDGER_CORPUS_NAME=<prefix>` (`docs/debugging.md`,
//! "Check an upgrade"), the same test adds that store's runs to the corpus itself; a name that
//! exists is never rewritten.

use std::path::Path;

use nix::sys::signal::Signal;
use serde_json::json;

use runledger::domain::{evolve, Run, Timestamp};
use runledger::store::chain::{envelope_link, GENESIS};
use runledger::store::codec::encode_run;
use runledger::store::{Options, Store};

use super::file;
use crate::common::{Server, CONFIG};

/// Writes every run of the stopped store in `data` into `out` as `<prefix>-<env>-<n>`;
/// returns the names written.
fn record_store(data: &Path, prefix: &str, about: &str, out: &Path) -> Vec<String> {
    let store = Store::open(
        data,
        &Options {
            cache_bytes: 64 << 20,
            accept_lost_writes: false,
        },
    )
    .expect("a stopped store");
    let mut counts = std::collections::BTreeMap::<String, u32>::new();
    let mut written = Vec::new();
    for id in store.runs_created_since(Timestamp(0)).expect("runs") {
        let (mut run, mut prev, mut records): (Option<Run>, _, Vec<Vec<u8>>) =
            (None, GENESIS, Vec::new());
        let mut kinds = Vec::new();
        for e in store.run_events(id, 0) {
            let e = e.expect("a readable record");
            records.push(encode_run(&e, &prev).expect("encodes"));
            prev = envelope_link(&prev, &e).expect("links");
            kinds.push(e.event.kind());
            run = evolve(run, id, &e.event, e.at);
        }
        let Some(run) = run else { continue };
        let env = run
            .config
            .environment_id
            .clone()
            .unwrap_or_else(|| "default".into());
        let n = counts.entry(env.clone()).or_default();
        *n += 1;
        let name = format!("{prefix}-{env}-{n:02}");
        let state = serde_json::to_string_pretty(&run).expect("state");
        let line = format!(
            "{:?}, {} executions: {}",
            run.state,
            run.executions,
            kinds.join(" ")
        );
        if file::write_new_in(out, &name, &[about, &line], id, &records, &state) {
            written.push(name);
        }
    }
    written
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_store_replays_to_the_states_it_recorded() {
    if let Ok(store) = std::env::var("RUNLEDGER_CORPUS_STORE") {
        let prefix =
            std::env::var("RUNLEDGER_CORPUS_NAME").expect("RUNLEDGER_CORPUS_NAME=<prefix>");
        let about = std::env::var("RUNLEDGER_CORPUS_ABOUT").unwrap_or_default();
        for name in record_store(Path::new(&store), &prefix, &about, &file::dir()) {
            eprintln!("wrote {name}");
        }
    }
    // A store the real binary writes: two runs that succeed.
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(tmp.path(), CONFIG);
    let mut ids = Vec::new();
    for n in 0..2 {
        ids.push(server.create(json!({"prompt": format!("run {n}")})).await);
    }
    for id in &ids {
        server.wait_state(id, "SUCCEEDED").await;
    }
    let status = server.stop_with(Signal::SIGTERM, 20).await;
    assert!(status.success(), "{status:?}");
    let out = tmp.path().join("histories");
    let names = record_store(&tmp.path().join("data"), "t", "a test store", &out);
    assert_eq!(names.len(), 2, "{names:?}");
    // Recorded once: the names are never written again.
    assert!(record_store(&tmp.path().join("data"), "t", "again", &out).is_empty());
    let histories = file::read_all_in(&out);
    assert_eq!(histories.len(), 2);
    for history in &histories {
        assert!(history.records.len() >= 3, "{}", history.name);
        assert_eq!(super::histories::replay(history), Vec::<String>::new());
    }
}
