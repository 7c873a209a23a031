//! `runledger runs fork ID --after K --message M [--follow]`: starts a new run from the
//! snapshot execution K of run ID left, continuing its agent's session with the message
//! (`POST /api/v1/agent/runs/{id}/fork`). Prints the new run's id; with `--follow`, streams its
//! transcript and exits as the run ends.

use serde_json::json;

use crate::remote::Remote;

pub(super) async fn fork(
    remote: &Remote,
    run_id: &str,
    after: u32,
    message: &str,
    follow: bool,
) -> anyhow::Result<u8> {
    super::derive::derive(
        remote,
        run_id,
        "fork",
        &json!({ "after_execution": after, "message": message }),
        follow,
    )
    .await
}
