//! `runledger runs changes ID [--patch] [--json]`: what a run's executions changed in its
//! workspace (`GET /agent/runs/{id}/changes`). The summary prints one line per changed file
//! (status, lines added and removed, path) under each repository, then the total; `--patch`
//! writes the run's patch to stdout byte for byte, as the server keeps it, so that
//! `runledger runs changes ID --patch | git apply` applies it.

use std::io::Write as _;

use futures_util::StreamExt as _;
use serde_json::Value;

use super::api::{print_line, run_path};
use crate::remote::Remote;
use crate::terminal::{self, printable, Origin};

pub(super) async fn changes(
    remote: &Remote,
    run_id: &str,
    patch: bool,
    json: bool,
) -> anyhow::Result<()> {
    let path = format!("{}/changes", run_path(run_id));
    if patch {
        let response = remote
            .get_bytes(&path, &[("format", "patch".to_string())])
            .await?;
        if response
            .headers()
            .get("x-runledger-patch-cut")
            .is_some_and(|v| v == "true")
        {
            eprintln!("the patch was cut at the environment's changes_max_mb: it is not whole");
        }
        let mut out = std::io::stdout().lock();
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            out.write_all(&chunk?)?;
        }
        out.flush()?;
        return Ok(());
    }
    let answer = remote.get(&path, &[]).await?;
    if json {
        print_line(&terminal::json(&answer))?;
        return Ok(());
    }
    print_summary(&answer)?;
    Ok(())
}

/// The latest execution's files, by repository, then the total.
fn print_summary(answer: &Value) -> std::io::Result<()> {
    let field = |v: &Value| printable(v.as_str().unwrap_or(""), Origin::Field).into_owned();
    let executions = answer["executions"].as_array().cloned().unwrap_or_default();
    let Some(latest) = executions.last() else {
        return print_line(&"no changes recorded");
    };
    for repository in latest["repositories"].as_array().into_iter().flatten() {
        print_line(&format!(
            "{} (from {})",
            field(&repository["path"]),
            field(&repository["base"])
        ))?;
        if let Some(error) = repository["error"].as_str() {
            print_line(&format!(
                "  not computed whole: {}",
                printable(error, Origin::Field)
            ))?;
        }
        for file in repository["files"].as_array().into_iter().flatten() {
            let lines = if file["binary"].as_bool() == Some(true) {
                "binary".to_string()
            } else {
                format!(
                    "+{} -{}",
                    file["additions"].as_u64().unwrap_or(0),
                    file["deletions"].as_u64().unwrap_or(0)
                )
            };
            let name = match file["old_path"].as_str() {
                Some(old) => format!(
                    "{} -> {}",
                    printable(old, Origin::Field),
                    field(&file["path"])
                ),
                None => field(&file["path"]),
            };
            print_line(&format!(
                "  {:<12} {:>12}  {name}",
                field(&file["status"]),
                lines
            ))?;
        }
    }
    let total = &answer["total"];
    print_line(&format!(
        "{} file(s) changed, +{} -{} (execution {})",
        total["files"].as_u64().unwrap_or(0),
        total["additions"].as_u64().unwrap_or(0),
        total["deletions"].as_u64().unwrap_or(0),
        latest["execution"].as_u64().unwrap_or(0)
    ))?;
    if latest["cut"].as_bool() == Some(true) {
        eprintln!("the diff was cut at the environment's changes_max_mb");
    }
    Ok(())
}
