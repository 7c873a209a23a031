//! `runledger import --run FILE [--unverified]`: adds one run from a bundle to an existing,
//! stopped store. The bundle is checked whole first (`check`); nothing is written unless it
//! passes. Then, reading the file again: the contents go into the content store (addressed by
//! digest, so one already there is the same bytes) and the transcript into a temporary file,
//! and only then, in a third reading, the events, behind the run's dirty marker; the transcript
//! is moved into place and the read index catches the run up (`Index::catch_up`), which
//! clears the marker. A server killed between leaves the marker, and its start catches up.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _};

use runledger_domain::{Event, RunId};
use runledger_format::bundle::SectionKind;
use runledger_format::time::hex;
use runledger_projection::Index;
use runledger_store::{self as store, Store};

use crate::commands::Cli;
use crate::open::{held, require_store};

use super::check::{check, each_event, open_bundle, Checked};
use super::export::transcript_path;

/// Events appended per write.
const BATCH: usize = 1024;

pub fn import_run(cli: &Cli, path: &Path, unverified: bool) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    require_store(&config)?;
    import_run_into(&config.data_dir, path, unverified).map(|_| ())
}

/// Adds the run of the bundle at `path` to the stopped store in `data_dir` (which must hold
/// one); returns the run's id.
pub fn import_run_into(data_dir: &Path, path: &Path, unverified: bool) -> anyhow::Result<RunId> {
    let started = Instant::now();
    let store = match Store::open(data_dir, &store::Options::default()) {
        Ok(store) => store,
        Err(store::Error::Locked(dir)) => return Err(held(&dir)),
        Err(e) => return Err(e.into()),
    };
    let source = path.display().to_string();
    let run_id = open_bundle(path)
        .map_err(|e| anyhow!("{e}. Nothing was imported"))?
        .manifest()
        .run_id
        .clone();
    if let Ok(id) = run_id.parse() {
        if store.run_head(id)?.is_some() {
            bail!(
                "{} already holds run {run_id}; `import --run` adds a run and never replaces \
                 one. Nothing was imported",
                data_dir.display()
            );
        }
    }
    let checked = check(path).map_err(|e| anyhow!("{e}. Nothing was imported"))?;
    if let Some(why) = &checked.chain_failure {
        if !unverified {
            bail!(
                "{source} does not verify: {why}. The bundle was changed after it was written \
                 (or damaged); nothing was imported. `runledger import --run FILE --unverified` \
                 imports it all the same and records that it did"
            );
        }
        eprintln!(
            "runledger import: WARNING: {source} does not verify ({why}); imported as \
             --unverified asked, and recorded in the store"
        );
    }
    let transcript = write_files(&store, path, &checked, data_dir)?;
    write_events(&store, path, &checked)?;
    if let Some(temp) = &transcript {
        let target = transcript_path(data_dir, checked.run_id);
        fs::rename(temp, &target)
            .with_context(|| format!("cannot move the transcript to {}", target.display()))?;
    }
    if let Some(why) = &checked.chain_failure {
        store.mark_imported_unverified(&format!("{source} (run {}): {why}", checked.run_id))?;
    }
    let index = Index::open(store.db())?;
    // The id is new to the store (checked above), so the index holds nothing of the run.
    index.index_new_run(&store, checked.run_id)?;
    store.sync_blocking()?;
    drop(index);
    eprintln!(
        "imported run {} ({} events, {} contents{}) into {} in {:.2} s",
        checked.run_id,
        checked.events,
        checked.contents.len(),
        match checked.seal {
            Some(n) => format!(", its seal proof verified against seal {n}"),
            None => String::new(),
        },
        data_dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(checked.run_id)
}

/// The second reading: contents into the content store, the transcript into a temporary file
/// beside its place (returned). Every section's digest is checked again as it streams.
fn write_files(
    store: &Store,
    path: &Path,
    checked: &Checked,
    data_dir: &Path,
) -> anyhow::Result<Option<PathBuf>> {
    let mut reader = open_bundle(path)?;
    let source = path.display().to_string();
    let mut transcript = None;
    let result = (|| {
        while let Some(mut section) = reader.next_section()? {
            match section.kind {
                SectionKind::Transcript => {
                    let temp = transcript_temp(data_dir, checked)?;
                    transcript = Some(temp.clone());
                    let mut file = private_file(&temp)?;
                    std::io::copy(&mut section, &mut file)?;
                    file.sync_all()?;
                }
                SectionKind::Content(sha) => {
                    let mime = checked
                        .contents
                        .get(&sha)
                        .map(String::as_str)
                        .unwrap_or("application/octet-stream");
                    let size = section.entry.size;
                    let content = store.content().put_reader(&mut section, size, mime)?;
                    if content.sha256 != sha {
                        bail!("content {} changed while it was imported", hex(&sha));
                    }
                }
                _ => {}
            }
            section.finish()?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(transcript),
        Err(e) => {
            if let Some(temp) = transcript {
                let _ = fs::remove_file(temp);
            }
            Err(anyhow!("{source}: {e}. The run was not imported"))
        }
    }
}

/// The third reading: the events, appended in batches behind the run's dirty marker.
fn write_events(store: &Store, path: &Path, checked: &Checked) -> anyhow::Result<()> {
    let mut reader = open_bundle(path)?;
    store.mark_dirty(checked.run_id)?;
    while let Some(mut section) = reader.next_section()? {
        if section.kind != SectionKind::Events {
            section.finish()?;
            continue;
        }
        let mut batch = Vec::with_capacity(BATCH);
        each_event(&mut section, |_, e, _| {
            // Teams are not records of their own: the run's is made as it is named.
            if let Event::Admitted(a) = &e.event {
                store.keys().create_team(&a.team, e.at)?;
            }
            batch.push(e);
            if batch.len() == BATCH {
                store.append(&batch)?;
                batch.clear();
            }
            Ok(())
        })?;
        store.append(&batch)?;
        section.finish()?;
        // What follows is the transcript and the contents, written already.
        break;
    }
    Ok(())
}

fn transcript_temp(data_dir: &Path, checked: &Checked) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = data_dir.join("transcripts");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir.join(format!(".{}.jsonl.import", checked.run_id)))
}

/// A new file readable by this user only (transcripts can hold secrets).
fn private_file(path: &Path) -> anyhow::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))
}
