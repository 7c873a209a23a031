//! The part `runs rerun` and `runs fork` share: ask the server for a run made from another
//! (`POST /agent/runs/{id}/rerun` or `…/fork`), print the new run's id, and with `--follow`
//! follow its transcript to its end, exiting with its outcome like `runledger run --follow`.

use serde_json::Value;

use crate::remote::{Error, Remote};

use super::api::{outcome, print_line, run_path};
use super::transcript::follow_transcript;
use super::wait::Link;

/// Posts `body` to `action` (`rerun`, `fork`) of `run_id`; the exit code is the new run's
/// outcome with `follow`, else 0.
pub(super) async fn derive(
    remote: &Remote,
    run_id: &str,
    action: &str,
    body: &Value,
    follow: bool,
) -> anyhow::Result<u8> {
    let created = remote
        .post(&format!("{}/{action}", run_path(run_id)), body)
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
