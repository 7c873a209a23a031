//! `runledger runs fork ID --after K --message M [--follow]`: starts a new run from the
//! snapshot execution K of run ID left, continuing its agent's session with the message
//! (`POST /api/v1/agent/runs/{id}/fork`). Prints the new run's id; with `--follow`, streams its
//! transcript and exits as the run ends.

use serde_json::json;

use crate::remote::{Error, Remote};

use super::api::{outcome, print_line, run_path};
use super::transcript::follow_transcript;
use super::wait::Link;

pub(super) async fn fork(
    remote: &Remote,
    run_id: &str,
    after: u32,
    message: &str,
    follow: bool,
) -> anyhow::Result<u8> {
    let body = json!({ "after_execution": after, "message": message });
    let created = remote
        .post(&format!("{}/fork", run_path(run_id)), &body)
        .await?;
    let id = created["run_id"]
        .as_str()
        .ok_or_else(|| Error::Protocol("the server's answer names no run_id".into()))?
        .to_string();
    print_line(&id)?;
    if !follow {
        return Ok(0);
    }
    let mut link = Link { shown: false };
    link.show(remote, &id).await;
    let state = follow_transcript(remote, &id, None, Some(&mut link)).await?;
    Ok(outcome(&id, &state))
}
