//! `runledger audit [events]`: run events across runs from a running server
//! (`GET /api/v1/audit/events`), one page newest first, or with `--follow` each new matching
//! event as the server indexes it, resuming after the last one printed when the connection
//! drops. A table on a terminal (tab-separated lines otherwise), the API's JSON with `--json`.
//! The subcommand leaves room for the audit trail's other queries beside `events`.

use std::io::Write as _;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource as _};
use futures_util::StreamExt as _;
use serde_json::Value;

use crate::commands::{ApiArgs, AuditCmd, AuditEventsArgs};
use crate::remote::{Error, Remote};
use crate::terminal::{self, printable, Origin};

use super::api::{block_on, connect, print_line};
use super::commands::when;
use super::transcript::bounded_lines;

const PATH: &str = "/api/v1/audit/events";

/// How often a dropped follow reconnects in a row before it gives up.
const MAX_RECONNECTS: u32 = 5;

/// `runledger audit …`.
pub fn audit(
    api: &ApiArgs,
    command: Option<&AuditCmd>,
    events: &AuditEventsArgs,
) -> anyhow::Result<u8> {
    let args = match command {
        Some(AuditCmd::Events(args)) => args,
        Some(AuditCmd::Pubkey { .. }) => {
            anyhow::bail!("`runledger audit pubkey` reads the data directory, not a server")
        }
        None => events,
    };
    if args.admin {
        if args.run_id.is_some() || args.team.is_some() || args.follow || args.cursor.is_some() {
            anyhow::bail!("--admin takes --type, --actor, --since, --until and --json only");
        }
        let filters = crate::AdminFilters {
            types: args.types.clone(),
            actor: args.actor.clone(),
            since: args.since.clone(),
            until: args.until.clone(),
            json: args.json,
        };
        return crate::audit_admin(api, &filters);
    }
    let remote = connect(api)?;
    let query = query(args);
    block_on(async {
        if args.follow {
            follow(&remote, &query, args.json, args.cursor.as_deref()).await?;
        } else {
            let page = remote.get(PATH, &query).await?;
            if args.json {
                print_line(&terminal::json(&page))?;
            } else {
                let events = page["events"]
                    .as_array()
                    .ok_or_else(|| Error::Protocol("an audit page without events".into()))?;
                print_rows(events, true)?;
                if let Some(next) = page["page_info"]["next_cursor"].as_str() {
                    eprintln!("more: --cursor {next}");
                }
            }
        }
        Ok(0)
    })
}

/// The request's query string from the command line (`--since 12h` is 12 hours ago).
fn query(args: &AuditEventsArgs) -> Vec<(&'static str, String)> {
    let now = time::OffsetDateTime::now_utc();
    let mut query: Vec<(&str, String)> = args.types.iter().map(|t| ("type", t.clone())).collect();
    for (field, value) in [
        ("actor", args.actor.clone()),
        ("run_id", args.run_id.clone()),
        ("team", args.team.clone()),
        ("since", args.since.as_deref().map(|t| when(t, now))),
        ("until", args.until.as_deref().map(|t| when(t, now))),
        ("limit", args.limit.map(|n| n.to_string())),
    ] {
        if let Some(value) = value {
            query.push((field, value));
        }
    }
    // A follow starts after the cursor (else from now); a page starts before it.
    if let Some(cursor) = &args.cursor {
        query.push(("cursor", cursor.clone()));
    }
    query
}

/// Who caused an event, as a person reads it: its origin's key name (and id), else the key
/// the event names.
fn actor(event: &Value) -> String {
    let key = &event["origin"]["key"];
    if let Some(id) = key["id"].as_str() {
        return match key["name"].as_str() {
            Some(name) if !name.is_empty() => format!("{name} ({id})"),
            _ => id.to_string(),
        };
    }
    let data = &event["data"];
    data["by"]
        .as_str()
        .or_else(|| data["creator"]["uid"].as_str())
        .or_else(|| event["origin"]["channel"].as_str())
        .unwrap_or("-")
        .to_string()
}

fn text<'a>(event: &'a Value, field: &str) -> &'a str {
    event[field].as_str().unwrap_or("")
}

/// The events as rows: aligned under a header on a terminal (`table`), tab-separated otherwise
/// (and as they come while following).
fn print_rows(events: &[Value], table: bool) -> std::io::Result<()> {
    let rows: Vec<[String; 6]> = events
        .iter()
        .map(|e| {
            [
                text(e, "at"),
                text(e, "type"),
                text(e, "run_id"),
                &e["seq"].to_string(),
                &actor(e),
                text(e, "team"),
            ]
            .map(|cell| printable(cell, Origin::Field).into_owned())
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if table && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        let header = ["AT", "TYPE", "RUN", "SEQ", "ACTOR", "TEAM"].map(str::to_string);
        let mut widths = header.clone().map(|h| h.chars().count());
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in std::iter::once(&header).chain(&rows) {
            let line: Vec<String> = row
                .iter()
                .zip(widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            writeln!(out, "{}", line.join("  ").trim_end())?;
        }
    } else {
        for row in &rows {
            writeln!(out, "{}", row.join("\t"))?;
        }
    }
    out.flush()
}

/// Follows the audit stream until interrupted, reconnecting after the last event printed.
async fn follow(
    remote: &Remote,
    query: &[(&str, String)],
    as_json: bool,
    cursor: Option<&str>,
) -> anyhow::Result<()> {
    // The cursor is the stream's start, given as its Last-Event-ID.
    let query: Vec<(&str, String)> = query
        .iter()
        .filter(|(k, _)| *k != "cursor")
        .cloned()
        .collect();
    let mut last_id: Option<String> = cursor.map(str::to_string);
    let mut retry = Duration::from_secs(2);
    let mut failures = 0;
    loop {
        let response = match remote.event_stream(PATH, &query, last_id.as_deref()).await {
            Ok(response) => response,
            Err(e) if e.is_transient() && failures < MAX_RECONNECTS => {
                failures += 1;
                tokio::time::sleep(retry).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut events = bounded_lines(response).eventsource();
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(EventStreamError::Transport(e))
                    if e.kind() == std::io::ErrorKind::InvalidData =>
                {
                    return Err(Error::Protocol(e.to_string()).into())
                }
                Err(EventStreamError::Utf8(_) | EventStreamError::Parser(_)) => {
                    return Err(Error::Protocol(
                        "the audit stream is not a valid event stream".into(),
                    )
                    .into())
                }
                Err(EventStreamError::Transport(_)) => break,
            };
            if let Some(r) = event.retry {
                retry = r.min(Duration::from_secs(30));
            }
            if event.event == "error" {
                let e: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                return Err(Error::Refused {
                    status: 500,
                    detail: e["detail"].as_str().unwrap_or(&event.data).to_string(),
                }
                .into());
            }
            if event.data.is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(&event.data).map_err(|_| {
                Error::Protocol("an event of the audit stream is not JSON".to_string())
            })?;
            failures = 0;
            if as_json {
                print_line(&terminal::json(&value))?;
            } else {
                print_rows(std::slice::from_ref(&value), false)?;
            }
            if !event.id.is_empty() {
                last_id = Some(event.id);
            }
        }
        failures += 1;
        if failures > MAX_RECONNECTS {
            return Err(Error::Unreachable {
                url: remote.url(PATH, &[]),
                reason: format!("the stream dropped {MAX_RECONNECTS} times in a row"),
            }
            .into());
        }
        tokio::time::sleep(retry).await;
    }
}
