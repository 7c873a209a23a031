//! `runledger runs rerun ID [--unpinned] [--follow]`: asks the server for a rerun of a run
//! (`POST /agent/runs/{id}/rerun`), prints the new run's id, and with `--follow` follows its
//! transcript to its end, exiting with its outcome like `runledger run --follow`.

use serde_json::json;

use crate::remote::{Error, Remote};

use super::api::{outcome, print_line, run_path};
use super::transcript::follow_transcript;
use super::wait::Link;

/// Reruns `run_id`, pinned unless `unpinned`; the exit code is the rerun's outcome with
/// `follow`, else 0.
pub(super) async fn rerun(
    remote: &Remote,
    run_id: &str,
    unpinned: bool,
    follow: bool,
) -> anyhow::Result<u8> {
    let created = remote
        .post(
            &format!("{}/rerun", run_path(run_id)),
            &json!({ "pinned": !unpinned }),
        )
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
