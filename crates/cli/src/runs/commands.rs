//! `runledger run PROMPT` and `runledger runs …`: each command's request to the server and
//! what it prints or follows. It reads no profile itself (`api::connect` does) and prints
//! runs and transcripts through `show` and `transcript`.

use std::io::IsTerminal as _;

use serde_json::json;

use crate::commands::{ApiArgs, RunsCmd};
use crate::remote::Error;
use crate::terminal;

use super::api::{block_on, connect, outcome, print_line, run_path};
use super::show::{print_events, print_list, print_run};
use super::transcript::{follow_transcript, print_transcript, read_followups};
use super::travel::{print_at, print_diff, print_states};
use super::wait::{wait_for, Link};

/// `runledger run PROMPT`.
pub fn run(
    api: &ApiArgs,
    prompt: &str,
    environment: Option<&str>,
    model: Option<&str>,
    title: Option<&str>,
    follow: bool,
    wait: bool,
) -> anyhow::Result<u8> {
    let remote = connect(api)?;
    block_on(async {
        let mut config = serde_json::Map::new();
        if let Some(env) = environment {
            config.insert("environment_id".into(), json!(env));
        }
        if let Some(model) = model {
            config.insert("model_id".into(), json!(model));
        }
        let mut body = json!({ "prompt": prompt, "config": config });
        if let Some(title) = title {
            body["title"] = json!(title);
        }
        let created = remote.post("/api/v1/agent/runs", &body).await?;
        let id = created["run_id"]
            .as_str()
            .ok_or_else(|| Error::Protocol("the server's answer names no run_id".into()))?
            .to_string();
        print_line(&id)?;
        // A run has a session link once it has started: `--follow` and `--wait` name it then.
        let mut link = Link { shown: false };
        link.show(&remote, &id).await;
        if follow {
            let followups = std::io::stdin().is_terminal().then(read_followups);
            let state = follow_transcript(&remote, &id, followups, Some(&mut link)).await?;
            Ok(outcome(&id, &state))
        } else if wait {
            let state = wait_for(&remote, &id, &mut link).await?;
            Ok(outcome(&id, &state))
        } else {
            Ok(0)
        }
    })
}

/// `runledger runs …`.
pub fn runs(api: &ApiArgs, command: &RunsCmd) -> anyhow::Result<u8> {
    let remote = connect(api)?;
    block_on(async {
        match command {
            RunsCmd::List {
                states,
                environment,
                name,
                creator,
                source,
                model,
                since,
                until,
                search,
                limit,
                cursor,
                json,
            } => {
                let mut query: Vec<(&str, String)> =
                    states.iter().map(|s| ("state", s.to_uppercase())).collect();
                let now = time::OffsetDateTime::now_utc();
                for (field, value) in [
                    ("environment_id", environment.clone()),
                    ("name", name.clone()),
                    ("creator", creator.clone()),
                    ("source", source.clone()),
                    ("model_id", model.clone()),
                    ("created_after", since.as_deref().map(|t| when(t, now))),
                    ("created_before", until.as_deref().map(|t| when(t, now))),
                    ("q", search.clone()),
                    ("limit", limit.map(|n| n.to_string())),
                    ("cursor", cursor.clone()),
                ] {
                    if let Some(value) = value {
                        query.push((field, value));
                    }
                }
                let page = remote.get("/api/v1/agent/runs", &query).await?;
                if *json {
                    print_line(&terminal::json(&page))?;
                } else {
                    print_list(&page)?;
                }
                Ok(0)
            }
            RunsCmd::Get {
                run_id,
                at: Some(seq),
                json,
            } => {
                print_at(&remote, run_id, *seq, *json).await?;
                Ok(0)
            }
            RunsCmd::Get { run_id, json, .. } => {
                let run = remote.get(&run_path(run_id), &[]).await?;
                if *json {
                    print_line(&terminal::json(&run))?;
                } else {
                    print_run(&run)?;
                }
                Ok(0)
            }
            RunsCmd::Logs { run_id, follow } => {
                if *follow {
                    let state = follow_transcript(&remote, run_id, None, None).await?;
                    Ok(outcome(run_id, &state))
                } else {
                    print_transcript(&remote, run_id).await?;
                    Ok(0)
                }
            }
            RunsCmd::Followup {
                run_id,
                message,
                mode,
            } => {
                let reply = remote
                    .post(
                        &format!("{}/followups", run_path(run_id)),
                        &json!({ "message": message, "mode": mode }),
                    )
                    .await?;
                eprintln!(
                    "sent the follow-up to run {run_id}; it is {}",
                    reply["state"].as_str().unwrap_or("?")
                );
                Ok(0)
            }
            RunsCmd::Fork {
                run_id,
                after,
                message,
                follow,
            } => super::fork::fork(&remote, run_id, *after, message, *follow).await,
            RunsCmd::Rerun {
                run_id,
                unpinned,
                follow,
            } => Ok(super::rerun::rerun(&remote, run_id, *unpinned, *follow).await?),
            RunsCmd::Cancel { run_id, no_cascade } => {
                let body = if *no_cascade {
                    json!({ "cascade": false })
                } else {
                    json!({})
                };
                remote
                    .post(&format!("{}/cancel", run_path(run_id)), &body)
                    .await?;
                eprintln!("cancelled run {run_id}");
                Ok(0)
            }
            RunsCmd::Tree { run_id, json } => {
                super::tree::tree(&remote, run_id, *json).await?;
                Ok(0)
            }
            RunsCmd::Steps { run_id, json } => {
                super::steps::print_steps(&remote, run_id, *json).await?;
                Ok(0)
            }
            RunsCmd::RevokeLink { run_id } => {
                let run = remote
                    .post(
                        &format!("{}/session-link/revoke", run_path(run_id)),
                        &json!({}),
                    )
                    .await?;
                eprintln!("revoked every session link of run {run_id} handed out so far");
                match run["session_link"].as_str() {
                    Some(link) => println!("{link}"),
                    None => {
                        eprintln!("the run has no session yet: its first link comes when it starts")
                    }
                }
                Ok(0)
            }
            RunsCmd::Events {
                run_id,
                states: true,
                json,
            } => {
                print_states(&remote, run_id, *json).await?;
                Ok(0)
            }
            RunsCmd::Events { run_id, json, .. } => {
                print_events(&remote, run_id, *json).await?;
                Ok(0)
            }
            RunsCmd::Changes {
                run_id,
                patch,
                json,
            } => {
                super::changes::changes(&remote, run_id, *patch, *json).await?;
                Ok(0)
            }
            RunsCmd::Diff { run_a, run_b, json } => {
                print_diff(&remote, run_a, run_b, *json).await?;
                Ok(0)
            }
        }
    })
}

/// A `--since`/`--until` value: an age (`30m`, `12h`, `7d`, `45s`) is turned into the time that
/// long before `now`; anything else is sent as it is (RFC 3339, which the server checks).
pub(super) fn when(text: &str, now: time::OffsetDateTime) -> String {
    let text = text.trim();
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        "w" => 7 * 86400,
        _ => return text.to_string(),
    };
    match number.parse::<i64>() {
        Ok(n) if n >= 0 => {
            let at = now - time::Duration::seconds(n.saturating_mul(seconds));
            at.format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_else(|_| text.to_string())
        }
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_become_times_and_other_values_pass_through() {
        let now = time::macros::datetime!(2026-11-26 12:00:00 UTC);
        assert_eq!(when("30m", now), "2026-11-26T11:30:00Z");
        assert_eq!(when("2d", now), "2026-11-24T12:00:00Z");
        assert_eq!(when("2026-01-01T00:00:00Z", now), "2026-01-01T00:00:00Z");
        assert_eq!(when("soon", now), "soon");
        assert_eq!(when("-3h", now), "-3h");
    }
}
