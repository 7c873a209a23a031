//! Adds histories to the corpus from a stopped store the real binary wrote. Not a test: run by
//! hand, as `docs/debugging.md` ("Check an upgrade") says, with
//! `RUNLEDGER_CORPUS_STORE=<data dir> RUNLEDGER_CORPUS_NAME=<prefix>` and `--run-ignored only`;
//! each run of the store becomes `<prefix>-<environment>-<n>`, records re-encoded exactly as
//! this build writes them (with their hash chain). A name that exists is never rewritten.

use runledger::domain::{evolve, Run, Timestamp};
use runledger::store::chain::{envelope_link, GENESIS};
use runledger::store::codec::encode_run;
use runledger::store::{Options, Store};

use super::file;

#[test]
#[ignore = "run by hand to add histories to the corpus (docs/debugging.md)"]
fn record_the_runs_of_a_store() {
    let dir = std::env::var("RUNLEDGER_CORPUS_STORE").expect("RUNLEDGER_CORPUS_STORE=<data dir>");
    let prefix = std::env::var("RUNLEDGER_CORPUS_NAME").expect("RUNLEDGER_CORPUS_NAME=<prefix>");
    let about = std::env::var("RUNLEDGER_CORPUS_ABOUT").unwrap_or_default();
    let store = Store::open(
        std::path::Path::new(&dir),
        &Options {
            cache_bytes: 64 << 20,
            accept_lost_writes: false,
        },
    )
    .expect("a stopped store");
    let mut counts = std::collections::BTreeMap::<String, u32>::new();
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
        if file::write_new(&name, &[&about, &line], id, &records, &state) {
            eprintln!("wrote {name}");
        }
    }
}
