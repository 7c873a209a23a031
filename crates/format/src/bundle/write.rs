//! Writing one run's bundle from a store. Two passes: the first renders every section to a
//! hasher only (sizes and SHA-256s for the manifest, which comes first so that a reader checks
//! each section as it streams by), the second writes them. The run is taken as far as its
//! chain head at the start, the transcript as far as its length then, so a run that goes on
//! while it is exported gives a consistent bundle; the same run exported twice gives the same
//! bytes. It holds one event line and one copy buffer at a time.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use runledger_domain::{evolve, Run, RunId};
use runledger_store::chain::{envelope_link, GENESIS};
use runledger_store::Store;

use super::manifest::{Entry, Manifest, SectionKind, FORMAT, MAGIC};
use super::Error;
use crate::events::{event_from_json, event_json};
use crate::time::hex;

/// What a bundle holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub events: u64,
    pub contents: u64,
    pub bytes: u64,
}

/// A writer that only counts and hashes.
#[derive(Default)]
struct Digesting {
    hasher: Sha256,
    size: u64,
}

impl Write for Digesting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(buf);
        self.size += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Digesting {
    fn entry(self, kind: SectionKind) -> Entry {
        Entry {
            name: kind.name(),
            size: self.size,
            sha256: hex(&self.hasher.finalize()),
        }
    }
}

fn store_error(e: impl std::fmt::Display) -> Error {
    Error::Store(e.to_string())
}

/// What the event lines of a run hold: their count, the state they fold to when read back,
/// and the contents they name (by digest).
struct Lines {
    count: u64,
    run: Option<Run>,
    contents: BTreeMap<[u8; 32], runledger_domain::Content>,
}

/// The run's event lines up to `last`, each written to `out`.
fn write_events(
    store: &Store,
    run_id: RunId,
    last: u64,
    out: &mut dyn Write,
) -> Result<Lines, Error> {
    let mut prev = GENESIS;
    let mut run = None;
    let mut contents = BTreeMap::new();
    let mut count = 0;
    for e in store.run_events(run_id, 0) {
        let e = e.map_err(store_error)?;
        if e.seq > last {
            break;
        }
        let link = envelope_link(&prev, &e).map_err(store_error)?;
        prev = link;
        let mut line = event_json(&e);
        // The state is what an import folds: the events as their lines read back.
        let back = event_from_json(&line).map_err(|why| {
            Error::Store(format!(
                "event {} does not read back from its line: {why}",
                e.seq
            ))
        })?;
        // The line as `export::event_line` writes it.
        line["link"] = serde_json::Value::String(hex(&link));
        serde_json::to_writer(&mut *out, &line).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
        run = evolve(run, run_id, &back.event, back.at);
        for content in back.event.contents() {
            contents
                .entry(content.sha256)
                .or_insert_with(|| content.clone());
        }
        count += 1;
    }
    Ok(Lines {
        count,
        run,
        contents,
    })
}

/// Copies the first `size` bytes of `file` to `out`, refusing a file shorter than that.
fn copy_exactly(mut file: File, size: u64, what: &str, out: &mut dyn Write) -> Result<(), Error> {
    // A clone of a file shares its offset: each pass reads from the start.
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
    let copied = std::io::copy(&mut file.take(size), out)?;
    if copied != size {
        return Err(Error::Store(format!(
            "{what} holds {copied} bytes, not {size}"
        )));
    }
    Ok(())
}

/// Writes run `run_id`'s bundle to `out`; `None` when the store has no such run. `transcript`
/// is the run's transcript file, which may not exist.
pub fn write_bundle(
    store: &Store,
    run_id: RunId,
    transcript: &Path,
    out: &mut dyn Write,
) -> Result<Option<Written>, Error> {
    let Some(proof) = store.proof(run_id).map_err(store_error)? else {
        return Ok(None);
    };
    let last = proof.head_seq;
    let proof_bytes = serde_json::to_vec(&proof).map_err(std::io::Error::other)?;

    // Pass 1: sizes and digests.
    let mut digest = Digesting::default();
    let Lines {
        count: events,
        run,
        contents,
    } = write_events(store, run_id, last, &mut digest)?;
    let events_entry = digest.entry(SectionKind::Events);
    let Some(run) = run else {
        return Ok(None);
    };
    let state_bytes = serde_json::to_vec(&run).map_err(std::io::Error::other)?;
    let small = |kind: SectionKind, bytes: &[u8]| {
        let mut d = Digesting::default();
        d.update_with(bytes);
        d.entry(kind)
    };
    let mut sections = vec![
        small(SectionKind::State, &state_bytes),
        small(SectionKind::Proof, &proof_bytes),
        events_entry,
    ];
    let transcript_file = match File::open(transcript) {
        Ok(file) => Some(file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::Store(format!("{}: {e}", transcript.display()))),
    };
    let transcript_size = match &transcript_file {
        Some(file) => {
            let size = file.metadata()?.len();
            let mut d = Digesting::default();
            copy_exactly(file.try_clone()?, size, "the transcript", &mut d)?;
            sections.push(d.entry(SectionKind::Transcript));
            Some(size)
        }
        None => None,
    };
    for content in contents.values() {
        let file = store.content().open_content(content).map_err(store_error)?;
        let mut d = Digesting::default();
        let what = format!("content {}", hex(&content.sha256));
        copy_exactly(file, content.size, &what, &mut d)?;
        let entry = d.entry(SectionKind::Content(content.sha256));
        if entry.sha256 != hex(&content.sha256) {
            return Err(Error::Store(format!(
                "{what} in the content store does not have that SHA-256: it is damaged"
            )));
        }
        sections.push(entry);
    }
    let manifest = Manifest {
        format: FORMAT,
        run_id: run_id.to_string(),
        events,
        sections,
    };

    // Pass 2: the bytes.
    let mut counted = Counting { out, bytes: 0 };
    writeln!(counted, "{MAGIC} {FORMAT}")?;
    serde_json::to_writer(&mut counted, &manifest).map_err(std::io::Error::other)?;
    counted.write_all(b"\n")?;
    for entry in &manifest.sections {
        writeln!(counted, "section {} {}", entry.name, entry.size)?;
        match SectionKind::parse(&entry.name)? {
            SectionKind::State => counted.write_all(&state_bytes)?,
            SectionKind::Proof => counted.write_all(&proof_bytes)?,
            SectionKind::Events => {
                // Rendered again; the same bytes, checked, so a manifest never lies.
                let mut tee = Tee {
                    out: &mut counted,
                    digest: Digesting::default(),
                };
                write_events(store, run_id, last, &mut tee)?;
                if tee.digest.entry(SectionKind::Events) != *entry {
                    return Err(Error::Store(
                        "the run's events changed while they were exported".into(),
                    ));
                }
            }
            SectionKind::Transcript => {
                if let (Some(file), Some(size)) = (&transcript_file, transcript_size) {
                    copy_exactly(file.try_clone()?, size, "the transcript", &mut counted)?;
                }
            }
            SectionKind::Content(sha) => {
                let content = &contents[&sha];
                let file = store.content().open_content(content).map_err(store_error)?;
                copy_exactly(file, content.size, &entry.name, &mut counted)?;
            }
        }
        counted.write_all(b"\n")?;
    }
    Ok(Some(Written {
        events,
        contents: contents.len() as u64,
        bytes: counted.bytes,
    }))
}

impl Digesting {
    fn update_with(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
    }
}

/// A writer that counts what it passes on.
struct Counting<'a> {
    out: &'a mut dyn Write,
    bytes: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A writer that passes bytes on and hashes them.
struct Tee<'a, 'b> {
    out: &'a mut Counting<'b>,
    digest: Digesting,
}

impl Write for Tee<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.digest.update_with(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
