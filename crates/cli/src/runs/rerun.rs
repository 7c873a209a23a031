//! `runledger runs rerun ID [--unpinned] [--follow]`: asks the server for a rerun of a run
//! (`POST /agent/runs/{id}/rerun`), prints the new run's id, and with `--follow` follows its
//! transcript to its end, exiting with its outcome like `runledger run --follow`.

use serde_json::json;

use crate::remote::Remote;

/// Reruns `run_id`, pinned unless `unpinned`; the exit code is the rerun's outcome with
/// `follow`, else 0.
pub(super) async fn rerun(
    remote: &Remote,
    run_id: &str,
    unpinned: bool,
    follow: bool,
) -> anyhow::Result<u8> {
    super::derive::derive(
        remote,
        run_id,
        "rerun",
        &json!({ "pinned": !unpinned }),
        follow,
    )
    .await
}
