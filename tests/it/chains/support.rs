//! What the chain tests share: a config with a short seal interval, the CLI against a data
//! directory, waiting for a run's proof to show a seal, and rewriting one stored record the way
//! someone with the disk would (a valid checksum, the stored link left as it was).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{cli, Server};
use runledger::store::codec;

/// A fast demo environment, a slow one (to cancel), one that fails, and seals every second.
pub fn config(dir: &Path) -> String {
    let failing = dir.join("fail.sh");
    crate::common::script(&failing, "echo 'boom' >&2; exit 3");
    format!(
        "[server]\nbind = \"127.0.0.1:0\"\nseal_interval_secs = 1\n\n\
         [[environments]]\nid = \"fast\"\nharness = \"demo\"\ndemo_duration_ms = 100\n\n\
         [[environments]]\nid = \"slow\"\nharness = \"demo\"\ndemo_duration_ms = 60000\n\n\
         [[environments]]\nid = \"fails\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        failing.display()
    )
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `runledger ARGS --data-dir DIR`.
pub fn cli_on(data_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--data-dir", path_str(data_dir)]);
    cli(&all, &[])
}

/// Polls a run's proof until a seal covers its event `seq` (or a later one).
pub async fn sealed_proof(s: &Server, id: &str, seq: u64, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let (status, proof) = s.get(&s.key, &format!("/agent/runs/{id}/proof")).await;
        assert_eq!(status, 200, "{proof}");
        if !proof["seal"].is_null() && proof["leaf_seq"].as_u64() >= Some(seq) {
            return proof;
        }
        assert!(
            Instant::now() < deadline,
            "no seal covered event {seq} of run {id} within {secs} s: {proof}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The number of a run's last event.
pub async fn last_seq(s: &Server, id: &str) -> u64 {
    let events = s.events(id).await;
    events.len() as u64 - 1
}

/// Rewrites the stored record `(run, seq)` through `change`, keeping its stored link and
/// giving it a valid checksum: an edit made with the disk in hand.
pub fn rewrite_record(
    data_dir: &Path,
    run: &str,
    seq: u64,
    change: impl FnOnce(&mut runledger::store::Envelope),
) {
    let run_id: runledger::domain::RunId = run.parse().expect("run id");
    let db = sled::open(data_dir.join("sled")).expect("open sled");
    let events = db.open_tree("events").expect("events tree");
    let mut key = run_id.to_bytes().to_vec();
    key.extend_from_slice(&seq.to_be_bytes());
    let old = events.get(&key).expect("read").expect("the record exists");
    let parts = codec::run_record(&old).expect("a record");
    let mut envelope = codec::decode_run(&old).expect("decodes");
    change(&mut envelope);
    let record = match parts.prev {
        Some(prev) => codec::encode_run(&envelope, &prev).expect("encodes"),
        None => {
            let legacy = codec::LegacyEnvelope {
                run_id: envelope.run_id,
                seq: envelope.seq,
                at: envelope.at,
                event: envelope.event,
            };
            codec::encode(&legacy).expect("encodes")
        }
    };
    events.insert(&key, record).expect("write");
    db.flush().expect("flush");
}
