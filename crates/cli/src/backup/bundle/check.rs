//! Reading a bundle through once before anything is written: every section's size and
//! SHA-256 (`format::bundle::read`), every event line as `runledger import` reads a backup's,
//! each of the run in sequence, the run's hash chain link by link against `proof.json`'s head
//! and its seal (signature and Merkle path), every content named by an event present with
//! that event's size, and the events' fold equal to `state.json`. A chain that does not
//! verify is reported, not refused here (`--unverified` decides); anything else is an error
//! naming the section, line or field.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{anyhow, bail, Context as _};

use runledger_domain::{evolve, Run, RunId};
use runledger_format::bundle::manifest::MAX_EVENT_LINE;
use runledger_format::bundle::{BundleReader, Section, SectionKind};
use runledger_format::time::hex;
use runledger_store::chain::{envelope_link, Link, GENESIS};
use runledger_store::seals::{parse_public_key, Proof};
use runledger_store::Envelope;

use super::super::format::Line;

/// What a bundle that passed the checks holds.
pub(super) struct Checked {
    pub(super) run_id: RunId,
    pub(super) events: u64,
    /// The contents the events name: digest and media type.
    pub(super) contents: BTreeMap<[u8; 32], String>,
    /// Why the hash chain or the seal proof does not verify, when it does not.
    pub(super) chain_failure: Option<String>,
    /// The seal whose proof verified, if the run was sealed.
    pub(super) seal: Option<u64>,
}

/// Opens a bundle file for reading.
pub(super) fn open_bundle(path: &Path) -> anyhow::Result<BundleReader<BufReader<File>>> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let declared = file.metadata()?.len();
    let reader = BundleReader::open(BufReader::with_capacity(1 << 16, file))
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    // A size the manifest gives that the file cannot hold is named before anything is read.
    let body = reader.manifest().body_len().unwrap_or(u64::MAX);
    if body > declared {
        bail!(
            "{}: the manifest's sections take {body} bytes but the file holds {declared}: the \
             bundle is truncated or its sizes are wrong",
            path.display()
        );
    }
    Ok(reader)
}

/// Calls `each` with every event line of an `events.jsonl` section, parsed, with its link.
pub(super) fn each_event<R: BufRead>(
    section: &mut Section<'_, R>,
    mut each: impl FnMut(u64, Envelope, Option<Link>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    let mut number = 0u64;
    loop {
        buf.clear();
        let n = (&mut *section)
            .take(MAX_EVENT_LINE + 1)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        let at = |why: String| anyhow!("events.jsonl, line {number}: {why}");
        let Some(text) = buf.strip_suffix(b"\n") else {
            return Err(at(if n as u64 > MAX_EVENT_LINE {
                format!("longer than {MAX_EVENT_LINE} bytes")
            } else {
                "the section ends inside the line".into()
            }));
        };
        let text = std::str::from_utf8(text).map_err(|_| at("not UTF-8".into()))?;
        match Line::parse(text).map_err(at)? {
            Line::Event(e, link) => each(number, e, link)?,
            _ => return Err(at("not an event line".into())),
        }
    }
}

/// Checks the whole bundle at `path`.
pub(super) fn check(path: &Path) -> anyhow::Result<Checked> {
    let mut reader = open_bundle(path)?;
    let source = path.display().to_string();
    let in_file = |e: runledger_format::bundle::Error| anyhow!("{source}: {e}");
    let run_id: RunId = reader
        .manifest()
        .run_id
        .parse()
        .map_err(|_| anyhow!("{source}: the manifest's run id is not a run id"))?;
    let declared_events = reader.manifest().events;
    let mut state_bytes = Vec::new();
    let mut proof: Option<Proof> = None;
    let mut chain_failure: Option<String> = None;
    let mut fail_chain = |why: String| {
        chain_failure.get_or_insert(why);
    };
    let mut run: Option<Run> = None;
    let mut named: BTreeMap<[u8; 32], (u64, String)> = BTreeMap::new();
    let mut present = 0usize;
    let mut events = 0u64;
    let mut head = GENESIS;
    let mut leaf_link: Option<Link> = None;
    while let Some(mut section) = reader.next_section().map_err(in_file)? {
        match section.kind {
            SectionKind::State => {
                section.read_to_end(&mut state_bytes)?;
            }
            SectionKind::Proof => {
                let mut bytes = Vec::new();
                section.read_to_end(&mut bytes)?;
                let read: Proof = serde_json::from_slice(&bytes)
                    .map_err(|e| anyhow!("{source}: proof.json is not a run's proof: {e}"))?;
                if read.run_id != run_id.to_string() {
                    bail!(
                        "{source}: proof.json is the proof of run {}, not of {run_id}",
                        read.run_id
                    );
                }
                proof = Some(read);
            }
            SectionKind::Events => {
                let leaf_seq = proof.as_ref().and_then(|p| p.leaf_seq);
                each_event(&mut section, |number, e, link| {
                    if e.run_id != run_id {
                        bail!(
                            "events.jsonl, line {number}: an event of run {}, not {run_id}",
                            e.run_id
                        );
                    }
                    if e.seq != events {
                        bail!(
                            "events.jsonl, line {number}: event {} where event {events} was due \
                             (events are missing, repeated or out of order)",
                            e.seq
                        );
                    }
                    let computed = envelope_link(&head, &e)?;
                    if link != Some(computed) {
                        fail_chain(format!(
                            "event {} ({}): its link does not follow the run's hash chain (the \
                             event was changed, or one before it)",
                            e.seq,
                            e.event.kind()
                        ));
                    }
                    head = computed;
                    if leaf_seq == Some(e.seq) {
                        leaf_link = Some(computed);
                    }
                    for content in e.event.contents() {
                        named
                            .entry(content.sha256)
                            .or_insert_with(|| (content.size, content.mime_type.clone()));
                    }
                    run = evolve(run.take(), run_id, &e.event, e.at);
                    events += 1;
                    Ok(())
                })
                .map_err(|e| anyhow!("{source}: {e}"))?;
            }
            SectionKind::Transcript => {}
            SectionKind::Content(sha) => {
                match named.get(&sha) {
                    Some((size, _)) if *size == section.entry.size => {}
                    Some((size, _)) => bail!(
                        "{source}: section {} holds {} bytes but the events give that content \
                         {size}",
                        section.entry.name,
                        section.entry.size
                    ),
                    None => bail!(
                        "{source}: section {} is a content no event of the run names",
                        section.entry.name
                    ),
                }
                present += 1;
            }
        }
        section.finish().map_err(in_file)?;
    }
    if let Some((sha, _)) = named.iter().find(|(sha, _)| {
        !reader
            .manifest()
            .sections
            .iter()
            .any(|e| e.name == SectionKind::Content(**sha).name())
    }) {
        bail!(
            "{source}: the events name content {} but the bundle does not hold it",
            hex(sha)
        );
    }
    debug_assert_eq!(present, named.len());
    if events != declared_events {
        bail!("{source}: the manifest counts {declared_events} events but events.jsonl holds {events}");
    }
    let proof = proof.ok_or_else(|| anyhow!("{source}: no proof.json"))?;
    let seal = check_proof(&proof, events, &head, leaf_link, &mut fail_chain);
    compare_state(run.as_ref(), &state_bytes).map_err(|e| anyhow!("{source}: {e}"))?;
    Ok(Checked {
        run_id,
        events,
        contents: named
            .into_iter()
            .map(|(sha, (_, mime))| (sha, mime))
            .collect(),
        chain_failure,
        seal,
    })
}

/// Checks the chain's head against the proof's and the proof's seal (with the key the seal
/// names: the bundle shows which instance sealed it, `runledger verify --proof` checks that
/// key against a trusted one). Returns the seal's number when it verified.
fn check_proof(
    proof: &Proof,
    events: u64,
    head: &Link,
    leaf_link: Option<Link>,
    fail: &mut impl FnMut(String),
) -> Option<u64> {
    if events == 0 || proof.head_seq != events - 1 || proof.head_link != hex(head) {
        fail(format!(
            "the chain's head (event {}, link {}) is not the one proof.json records (event {}, \
             link {})",
            events.saturating_sub(1),
            hex(head),
            proof.head_seq,
            proof.head_link
        ));
        return None;
    }
    let sealed = proof.seal.as_ref()?;
    let Some(key) = parse_public_key(&sealed.public_key) else {
        fail("proof.json's seal names no public key".into());
        return None;
    };
    if let Err(e) = proof.check(&key) {
        fail(format!("the seal proof does not verify: {e}"));
        return None;
    }
    if leaf_link.map(|l| hex(&l)) != proof.leaf_link {
        fail("the sealed event's link is not the one the seal covers".into());
        return None;
    }
    Some(sealed.number)
}

/// Whether the events' fold is `state.json`; names the fields that differ when not.
fn compare_state(run: Option<&Run>, state: &[u8]) -> anyhow::Result<()> {
    let run = run.ok_or_else(|| anyhow!("events.jsonl holds no event"))?;
    let folded = serde_json::to_vec(run)?;
    if folded == state {
        return Ok(());
    }
    let recorded: serde_json::Value =
        serde_json::from_slice(state).map_err(|e| anyhow!("state.json is not JSON: {e}"))?;
    // Through the bytes: a `Value` made from the state directly cannot hold its widest numbers.
    let folded: serde_json::Value = serde_json::from_slice(&folded)?;
    let fields: Vec<String> = match (folded.as_object(), recorded.as_object()) {
        (Some(a), Some(b)) => a
            .keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        _ => vec!["(the whole state)".into()],
    };
    bail!(
        "the events do not fold to the state state.json records; these fields differ: {}",
        if fields.is_empty() {
            "(their encoding)".to_string()
        } else {
            fields.join(", ")
        }
    )
}
