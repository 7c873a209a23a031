//! Restoring a backup's lines into an empty store: each line read within `MAX_LINE`, parsed,
//! checked in order and written through `Store`, the frame's counts compared at its end; then
//! the read index rebuilt and the events this version would not record reported. It writes
//! only the store it is given, which `import` stages; it knows neither sled's layout nor the
//! index's.

use std::io::{BufRead, Read as _};
use std::path::Path;

use anyhow::{anyhow, bail, Context as _};

use runledger_domain::{evolve, recordable, Event, Run};
use runledger_format::time::hex;
use runledger_projection::Index;
use runledger_store::{self as store, Store};

use super::admin_chain::AdminChain;
use super::checks::Checker;
use super::format::{Counts, Line, FORMAT, MAX_LINE};
use super::incoming::{content_piece, Incoming};
use super::verify_export::{report_export, ExportChains};

/// How many events an import lists by name when they are not what this version records.
const SHOWN_NOTES: u64 = 10;

/// Restores the lines of `input` into `store` (which must be empty), checking the export's
/// chains and seals as they come. `source` names the input in messages. With `unverified`, an
/// export that does not verify is restored all the same and the store records that it was.
fn restore(
    store: &Store,
    mut input: impl BufRead,
    source: &str,
    unverified: bool,
) -> anyhow::Result<Counts> {
    let mut chains = Some(ExportChains::default());
    let mut refused: Option<String> = None;
    // Kept once the whole export has verified against them (dropped with --unverified).
    let mut seals = Vec::new();
    let mut counts = Counts::default();
    let mut checker = Checker::default();
    let mut admin = AdminChain::default();
    let mut framed = false;
    let mut ended = false;
    let mut buf = Vec::new();
    let mut number = 0u64;
    let mut incoming: Option<Incoming> = None;
    loop {
        buf.clear();
        let n = (&mut input)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("cannot read {source}"))?;
        if n == 0 {
            break;
        }
        number += 1;
        let at_line = |problem: String| anyhow!("{source}, line {number}: {problem}");
        let text = line_text(&buf, n).map_err(at_line)?;
        if ended {
            return Err(at_line("a line after the end record".into()));
        }
        match Line::parse(text).map_err(at_line)? {
            Line::Header { format } => {
                if number != 1 {
                    return Err(at_line("a backup header that is not the first line".into()));
                }
                if format != FORMAT {
                    return Err(at_line(format!(
                        "backup format {format}; this version reads format {FORMAT}"
                    )));
                }
                framed = true;
            }
            Line::Seal(seal, leaves) => {
                if let Some(checking) = chains.as_mut() {
                    if let Err(failure) = checking.seal(&seal, &leaves) {
                        refused = Some(format!("line {number}: {failure}"));
                        chains = None;
                    }
                }
                seals.push((seal, leaves));
                counts.seals += 1;
            }
            Line::Event(e, link) => {
                checker.event(&e).map_err(at_line)?;
                if let Some(checking) = chains.as_mut() {
                    if let Err(failure) = checking.event(&e, link) {
                        refused = Some(format!("line {number}: {failure}"));
                        chains = None;
                    }
                }
                store.append(std::slice::from_ref(&e))?;
                // Teams are not lines of their own: each one a run or a key names is made.
                if let Event::Admitted(a) = &e.event {
                    store.keys().create_team(&a.team, e.at)?;
                }
                counts.events += 1;
            }
            Line::Schedule(e) => {
                checker.schedule_event(&e).map_err(at_line)?;
                store.append_schedule(std::slice::from_ref(&e))?;
                if let runledger_domain::ScheduleEvent::Created { team, .. } = &e.event {
                    store.keys().create_team(team, e.at)?;
                }
                counts.schedule_events += 1;
            }
            Line::Admin(item) => {
                let record = admin.next(&item).map_err(at_line)?;
                store.restore_admin(&record)?;
                counts.admin += 1;
            }
            Line::Key(k) => {
                if !store.keys().restore(&k)? {
                    return Err(at_line(format!(
                        "key {} has the id or the hash of an earlier key",
                        k.id
                    )));
                }
                store.keys().create_team(&k.team, k.created_at)?;
                counts.keys += 1;
            }
            Line::Secret { name, value } => {
                if !store::INSTANCE_SECRETS.contains(&name.as_str()) {
                    return Err(at_line(format!(
                        "unknown instance secret {name:?} (this version knows {})",
                        store::INSTANCE_SECRETS.join(", ")
                    )));
                }
                if !store.restore_secret(&name, &value)? {
                    return Err(at_line(format!("secret {name:?} appears twice")));
                }
                counts.secrets += 1;
            }
            Line::Content {
                sha256,
                size,
                offset,
                data,
            } => {
                if content_piece(store, &mut incoming, sha256, size, offset, &data)
                    .map_err(at_line)?
                {
                    counts.contents += 1;
                }
            }
            Line::End(end) => {
                if !framed {
                    return Err(at_line("an end record without a backup header".into()));
                }
                end_matches(&end, &counts).map_err(at_line)?;
                ended = true;
            }
        }
    }
    if let Some(checking) = chains {
        let (linked, unlinked, redacted) = (checking.linked, checking.unlinked, checking.redacted);
        match checking.finish() {
            Ok(report) => {
                report_export(&report, linked, unlinked, redacted);
                if report.unsealed_events > 0 && report.seals > 0 {
                    eprintln!(
                        "runledger import: {} events of {} runs were written after the export's \
                         last seal: chained, not sealed",
                        report.unsealed_events, report.unsealed_runs
                    );
                }
            }
            Err(failure) => refused = Some(failure.to_string()),
        }
    }
    if let Some(why) = refused {
        if !unverified {
            bail!(
                "{source} does not verify: {why}. The export was changed after it was written \
                 (or damaged); nothing was imported. `runledger import --unverified` imports it \
                 all the same and records that it did"
            );
        }
        eprintln!("runledger import: WARNING: {source} does not verify ({why}); imported as --unverified asked, without its seals, and recorded in the store");
        store.mark_imported_unverified(&format!("{source}: {why}"))?;
    } else {
        for (seal, leaves) in &seals {
            store.restore_seal(seal, leaves)?;
        }
    }
    if let Some(part) = incoming {
        bail!(
            "{source} ends with content {} after {} of its {} bytes: the backup is truncated",
            hex(&part.sha256),
            part.next,
            part.size
        );
    }
    if framed && !ended {
        bail!("{source} ends after line {number} without its end record: the backup is truncated");
    }
    Ok(counts)
}

/// The text of a line read whole: `buf` holds the `n` bytes read, at most `MAX_LINE + 1`.
fn line_text(buf: &[u8], n: usize) -> Result<&str, String> {
    let Some(text) = buf.strip_suffix(b"\n") else {
        return Err(if n as u64 > MAX_LINE {
            format!("longer than {MAX_LINE} bytes: not a runledger export")
        } else {
            "the last line has no line end: the file is truncated".into()
        });
    };
    std::str::from_utf8(text).map_err(|_| "not UTF-8".into())
}

/// Whether the end record counts what the lines before it hold.
fn end_matches(end: &Counts, counts: &Counts) -> Result<(), String> {
    if end != counts {
        return Err(format!(
            "the end record counts {} events, {} schedule events, {} admin records, {} keys \
             and {} secrets, but the lines before it hold {}, {}, {}, {} and {}",
            end.events,
            end.schedule_events,
            end.admin,
            end.keys,
            end.secrets,
            counts.events,
            counts.schedule_events,
            counts.admin,
            counts.keys,
            counts.secrets
        ));
    }
    Ok(())
}

/// Reports the events that this version's rules would not have recorded where they stand.
/// They are imported all the same: `evolve` folds them (it is total), and a backup written by
/// an older version with other rules must still restore. Returns how many there were.
fn audit(store: &Store) -> anyhow::Result<u64> {
    let mut run: Option<Run> = None;
    let mut odd = 0u64;
    for e in store.scan() {
        let e = e?;
        if run.as_ref().is_some_and(|r| r.id != e.run_id) {
            run = None;
        }
        if !recordable(run.as_ref(), &e.event) {
            odd += 1;
            if odd <= SHOWN_NOTES {
                eprintln!(
                    "runledger import: note: event {} ({}) of run {} is not what this version \
                     records in that state; imported as it is",
                    e.seq,
                    e.event.kind(),
                    e.run_id
                );
            }
        }
        for content in e.event.contents() {
            if store.content().open_content(content).is_err() {
                eprintln!(
                    "runledger import: warning: run {} names content {} (event {}), which the \
                     backup does not hold; it cannot be downloaded or attached again",
                    e.run_id,
                    hex(&content.sha256),
                    e.seq
                );
            }
        }
        run = evolve(run, e.run_id, &e.event, e.at);
    }
    Ok(odd)
}

/// Builds a complete store in `dir` (an empty directory) from `input`.
pub(super) fn build(
    dir: &Path,
    input: impl BufRead,
    source: &str,
    unverified: bool,
) -> anyhow::Result<(Counts, u64)> {
    let store = Store::open(dir, &store::Options::default())?;
    let counts = restore(&store, input, source, unverified)?;
    let index = Index::open(store.db())?;
    let runs = index.rebuild(&store)?.runs;
    let odd = audit(&store)?;
    if odd > SHOWN_NOTES {
        eprintln!(
            "runledger import: note: {} more such events",
            odd - SHOWN_NOTES
        );
    }
    store.sync_blocking()?;
    // Dropping both handles closes sled (the store joins its sync thread), so nothing writes
    // to the files while they move.
    drop(index);
    drop(store);
    // sled snapshots its page table only when it opens a database: opened once more, it
    // covers the whole import, and the first start need not scan it.
    if let Err(e) = store::refresh_snapshot(dir) {
        eprintln!(
            "runledger import: warning: could not write sled's snapshot ({e}); the first start \
             scans the whole store"
        );
    }
    Ok((counts, runs))
}
