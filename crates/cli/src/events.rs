//! `runledger events RUN_ID`: a run's or a schedule's event history, read from a stopped
//! store one event at a time (a human line each, with a line naming its origin when it has one,
//! or JSON lines with `--json`). It only reads.

use std::io::Write;

use anyhow::bail;

use runledger_format::events::event_json;
use runledger_format::time::format_time;

use crate::commands::Cli;
use crate::open::{open_salvage, require_store};
use crate::terminal;

pub fn events(cli: &Cli, run_id: &str, json: bool) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    require_store(&config)?;
    let store = open_salvage(&config)?;
    let id = run_id
        .parse()
        .map_err(|_| anyhow::anyhow!("{run_id:?} is not a run id"))?;
    // Read and printed one event at a time: a long history costs no more memory than a short one.
    let mut log = store.run_events(id, 0).peekable();
    if log.peek().is_none() {
        // Run and schedule ids are both ULIDs: a schedule's log is printed the same way.
        let mut schedule = store.schedule_events(id, 0).peekable();
        if schedule.peek().is_none() {
            bail!("no run or schedule with id {run_id}");
        }
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for e in schedule {
            let e = &e?;
            let v = runledger_format::schedules::schedule_event_json(e);
            if json {
                writeln!(out, "{}", terminal::json(&v))?;
            } else {
                writeln!(
                    out,
                    "{:>4}  {}  {:<18}  {}",
                    e.seq,
                    format_time(e.at),
                    e.event.kind(),
                    terminal::json(&v["event"])
                )?;
            }
        }
        return Ok(());
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for e in log {
        let e = &e?;
        if json {
            writeln!(out, "{}", terminal::json(&event_json(e)))?;
        } else {
            let v = event_json(e);
            writeln!(
                out,
                "{:>4}  {}  {:<16}  {}",
                e.seq,
                format_time(e.at),
                e.event.kind(),
                terminal::json(&v["data"])
            )?;
            if let Some(line) = crate::origin_line::origin_line(&v) {
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(())
}
