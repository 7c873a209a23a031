//! Printing runs and events for `runs list`, `runs get` and `runs events`: a table or a
//! record on a terminal, tab-separated lines otherwise, every field made printable, and the
//! short ages and durations they show. It asks the server for nothing but events' pages.

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use serde_json::Value;

use crate::remote::{Error, Remote};
use crate::terminal::{self, printable, Origin};

use super::api::{print_line, run_path, terminal};

/// `runs events`: every page of the history; with `json`, one document shaped as a page.
pub(super) async fn print_events(remote: &Remote, id: &str, as_json: bool) -> anyhow::Result<()> {
    let mut events = Vec::new();
    let mut after: Option<u64> = None;
    let mut first = Value::Null;
    loop {
        let query: Vec<(&str, String)> = after
            .map(|seq| vec![("after_seq", seq.to_string())])
            .unwrap_or_default();
        let page = remote
            .get(&format!("{}/events", run_path(id)), &query)
            .await?;
        let got = page["events"]
            .as_array()
            .ok_or_else(|| Error::Protocol("an events page without events".into()))?;
        if !as_json {
            print_event_lines(got)?;
        } else {
            events.extend(got.iter().cloned());
        }
        if first.is_null() {
            first = page.clone();
        }
        match page["next"].as_u64() {
            Some(next) if Some(next) != after => after = Some(next),
            _ => break,
        }
    }
    if as_json {
        first["events"] = Value::Array(events);
        if let Some(page) = first.as_object_mut() {
            page.remove("next");
        }
        print_line(&terminal::json(&first))?;
    }
    Ok(())
}

fn print_event_lines(events: &[Value]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for e in events {
        writeln!(
            out,
            "{:>4}  {}  {:<16}  {}",
            e["seq"],
            field(e, "at"),
            field(e, "type"),
            terminal::json(&e["data"])
        )?;
        if let Some(line) = crate::origin_line::origin_line(e) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// A list page: a table on a terminal, tab-separated lines otherwise; the next page's cursor
/// on stderr.
pub(super) fn print_list(page: &Value) -> anyhow::Result<()> {
    let runs = page["runs"]
        .as_array()
        .ok_or_else(|| Error::Protocol("a list answer without runs".into()))?;
    let now = time::OffsetDateTime::now_utc();
    let mut out = std::io::stdout().lock();
    if std::io::stdout().is_terminal() {
        let mut rows = vec![[
            "ID".to_string(),
            "STATE".into(),
            "TITLE".into(),
            "AGE".into(),
            "DURATION".into(),
            "ENVIRONMENT".into(),
        ]];
        for run in runs {
            rows.push([
                field(run, "run_id"),
                field(run, "state"),
                clip(&single_line(&field(run, "title")), 40),
                age(run, now),
                duration(run, now),
                field(&run["agent_config"], "environment_id"),
            ]);
        }
        write_table(&mut out, &rows)?;
        if runs.is_empty() {
            writeln!(out, "(no runs)")?;
        }
    } else {
        for run in runs {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                field(run, "run_id"),
                field(run, "state"),
                single_line(&field(run, "title")),
                field(run, "created_at"),
                field(&run["agent_config"], "environment_id"),
            )?;
        }
    }
    if let Some(cursor) = page["page_info"]["next_cursor"].as_str() {
        eprintln!("more: --cursor {cursor}");
    }
    Ok(())
}

pub(super) fn print_run(run: &Value) -> anyhow::Result<()> {
    let now = time::OffsetDateTime::now_utc();
    let config = &run["agent_config"];
    let mut lines: Vec<(&str, String)> = vec![
        ("id", field(run, "run_id")),
        ("state", field(run, "state")),
        ("title", single_line(&field(run, "title"))),
        ("environment", field(config, "environment_id")),
        ("model", field(config, "model_id")),
        (
            "created",
            format!("{} ({} ago)", field(run, "created_at"), age(run, now)),
        ),
        ("updated", field(run, "updated_at")),
        ("duration", duration(run, now)),
        (
            "creator",
            format!(
                "{} ({})",
                field(&run["creator"], "display_name"),
                field(&run["creator"], "uid")
            ),
        ),
        ("source", field(run, "source")),
    ];
    if let Some(message) = run["status_message"]["message"].as_str() {
        lines.push(("status", single_line(message)));
    }
    if let Some(link) = run["session_link"].as_str() {
        lines.push(("session", printable(link, Origin::Field).into_owned()));
    }
    lines.push(("prompt", single_line(&field(run, "prompt"))));
    let mut out = std::io::stdout().lock();
    for (name, value) in lines {
        writeln!(out, "{:<12} {value}", format!("{name}:"))?;
    }
    Ok(())
}

/// A string field of an answer, as it may be printed (`terminal::printable`).
fn field(v: &Value, name: &str) -> String {
    printable(v[name].as_str().unwrap_or(""), Origin::Field).into_owned()
}

/// Tabs and line breaks become spaces, other control characters escapes: one record per line,
/// one field per column.
fn single_line(text: &str) -> String {
    printable(text, Origin::Field).replace(['\t', '\n'], " ")
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max - 1).collect::<String>())
    }
}

fn write_table(out: &mut impl std::io::Write, rows: &[[String; 6]]) -> std::io::Result<()> {
    let mut widths = [0; 6];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                line.extend(std::iter::repeat_n(' ', w - cell.chars().count() + 2));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn parse_time(text: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

fn age(run: &Value, now: time::OffsetDateTime) -> String {
    parse_time(&field(run, "created_at"))
        .map(|at| short_duration((now - at).try_into().unwrap_or_default()))
        .unwrap_or_default()
}

/// How long the run has run: from its start to its last change when it is over, to now while
/// it runs.
fn duration(run: &Value, now: time::OffsetDateTime) -> String {
    let Some(start) = run["started_at"].as_str().and_then(parse_time) else {
        return String::new();
    };
    let end = if terminal(run["state"].as_str().unwrap_or("")) {
        parse_time(&field(run, "updated_at")).unwrap_or(now)
    } else {
        now
    };
    short_duration((end - start).try_into().unwrap_or_default())
}

/// `42s`, `5m3s`, `2h5m`, `3d4h`.
pub(super) fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short() {
        assert_eq!(short_duration(Duration::from_secs(42)), "42s");
        assert_eq!(short_duration(Duration::from_secs(303)), "5m3s");
        assert_eq!(short_duration(Duration::from_secs(7500)), "2h5m");
        assert_eq!(
            short_duration(Duration::from_secs(3 * 86400 + 4 * 3600)),
            "3d4h"
        );
    }

    #[test]
    fn a_table_aligns_its_columns_and_a_title_keeps_to_one_line() {
        let cell = |s: &str| s.to_string();
        let rows = [
            [
                cell("ID"),
                cell("STATE"),
                cell("TITLE"),
                cell("AGE"),
                cell("D"),
                cell("ENV"),
            ],
            [
                cell("01M"),
                cell("QUEUED"),
                single_line("a\tb\nc"),
                cell("5s"),
                cell(""),
                cell("x"),
            ],
        ];
        let mut out = Vec::new();
        write_table(&mut out, &rows).expect("write");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "ID   STATE   TITLE  AGE  D  ENV\n01M  QUEUED  a b c  5s      x\n"
        );
        assert_eq!(clip("abcdef", 4), "abc…");
    }
}
