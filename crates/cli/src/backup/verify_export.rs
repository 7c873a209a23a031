//! An export's hash chains and seals, checked as its lines stream by (`ExportChains`, which
//! `import` feeds too), and `runledger verify --export FILE`. An export written before chains
//! has no links and no seals: it reads as unverified, never as failed. An event whose MCP
//! credential values the export shows as `***` (a run from before credentials were sealed
//! stored them in plain text) cannot give its stored link back: its carried link is taken and
//! the event counted as unverifiable, so the rest of its run still verifies.

use std::io::{BufRead, Read as _};
use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _};

use runledger_domain::Event;
use runledger_store::chain::{envelope_link, Link};
use runledger_store::seals::{Checker, Failure, Leaf, Report, Seal};
use runledger_store::Envelope;

use super::format::{Line, MAX_LINE};

/// The chains and seals of an export, checked line by line.
#[derive(Default)]
pub(super) struct ExportChains {
    checker: Checker,
    /// Events that carry a link, and events that do not.
    pub(super) linked: u64,
    pub(super) unlinked: u64,
    /// Events whose redacted credentials keep their link from being recomputed.
    pub(super) redacted: u64,
}

/// Whether an event shows MCP credential values as the export redacts them.
fn shows_redacted_credentials(e: &Envelope) -> bool {
    let config = match &e.event {
        Event::Created(c) => &c.config,
        Event::Admitted(a) => &a.created.config,
        _ => return false,
    };
    config.mcp_servers.values().any(|server| {
        server
            .env
            .values()
            .chain(server.headers.values())
            .any(|v| v == "***")
    })
}

impl ExportChains {
    pub(super) fn seal(&mut self, seal: &Seal, leaves: &[Leaf]) -> Result<(), Failure> {
        self.checker.seal(seal, leaves)
    }

    pub(super) fn event(&mut self, e: &Envelope, link: Option<Link>) -> Result<(), Failure> {
        match link {
            Some(_) => self.linked += 1,
            None => self.unlinked += 1,
        }
        let redacted = link.is_some() && shows_redacted_credentials(e);
        let mut took_carried = false;
        let mut encode_failed = None;
        let result = self.checker.event(
            e.run_id,
            e.seq,
            |prev| match envelope_link(prev, e) {
                Ok(computed) => match link {
                    Some(carried) if redacted && carried != computed => {
                        took_carried = true;
                        carried
                    }
                    _ => computed,
                },
                Err(err) => {
                    encode_failed = Some(err.to_string());
                    [0; 32]
                }
            },
            None,
            link,
        );
        if let Some(err) = encode_failed {
            return Err(Failure {
                run_id: Some(e.run_id),
                seq: Some(e.seq),
                seal: None,
                detail: format!("cannot be encoded: {err}"),
            });
        }
        if took_carried {
            self.redacted += 1;
        }
        result
    }

    pub(super) fn finish(self) -> Result<Report, Failure> {
        self.checker.finish()
    }
}

/// `runledger verify --export FILE`.
pub fn verify_export(path: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut input = std::io::BufReader::with_capacity(1 << 16, file);
    let mut chains = ExportChains::default();
    let mut buf = Vec::new();
    let mut number = 0u64;
    let source = path.display().to_string();
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
        let text = std::str::from_utf8(buf.strip_suffix(b"\n").unwrap_or(&buf))
            .map_err(|_| anyhow!("{source}, line {number}: not UTF-8"))?;
        let line = Line::parse(text).map_err(|e| anyhow!("{source}, line {number}: {e}"))?;
        let checked = match &line {
            Line::Seal(seal, leaves) => chains.seal(seal, leaves),
            Line::Event(e, link) => chains.event(e, *link),
            _ => Ok(()),
        };
        if let Err(failure) = checked {
            bail!("{source}, line {number}: does not verify: {failure}");
        }
    }
    let (linked, unlinked, redacted) = (chains.linked, chains.unlinked, chains.redacted);
    let report = chains
        .finish()
        .map_err(|failure| anyhow!("{source}: does not verify: {failure}"))?;
    report_export(&report, linked, unlinked, redacted);
    print_report(&report, started);
    Ok(())
}

/// What an export's check could not cover, said before the summary.
pub(super) fn report_export(report: &Report, linked: u64, unlinked: u64, redacted: u64) {
    if unlinked > 0 {
        eprintln!(
            "runledger: {unlinked} events carry no link (an export written before hash chains): \
             they are unverified"
        );
    }
    if linked > 0 && report.seals == 0 {
        eprintln!("runledger: the export holds no seal: its chains are consistent but unsealed");
    }
    if redacted > 0 {
        eprintln!(
            "runledger: {redacted} events show MCP credentials as *** (stored in plain text \
             before credentials were sealed); their own content is unverified"
        );
    }
}

/// Prints what a check covered.
pub(crate) fn print_report(report: &Report, started: Instant) {
    println!(
        "verified {} events of {} runs and {} seals in {:.2} s",
        report.events,
        report.runs,
        report.seals,
        started.elapsed().as_secs_f64()
    );
    if report.unsealed_runs > 0 {
        println!(
            "{} events of {} runs are chained but not sealed yet (written after the last seal)",
            report.unsealed_events, report.unsealed_runs
        );
    }
    for seal in &report.key_changes {
        println!("seal {seal} is signed by a new instance key (a first seal, or a restored store)");
    }
    if report.named_leaves > 0 {
        println!(
            "{} leaves of other chains (the admin log) are sealed; their chains are not checked here",
            report.named_leaves
        );
    }
}
