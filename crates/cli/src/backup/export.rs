//! `runledger export [--with-keys] [--output FILE]`: every event of a stopped store as
//! JSON lines, the contents they name before them, with `--with-keys` the admin audit log, and with `--with-keys` the frame with the
//! key records and instance secrets. A file is written 0600 under a temporary name and only
//! replaces FILE once whole; a damaged store's export goes to stdout only. It only reads the
//! store.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};

use runledger_format::admin::admin_json;
use runledger_format::export::write_run_records;
use runledger_store::{self as store, Store};

use crate::commands::Cli;
use crate::open::{open_salvage, require_store};

use super::durable::sync_parent_of;
use super::format::{Counts, Line, FORMAT};

/// What an export wrote.
#[derive(Debug, Default)]
struct Written {
    counts: Counts,
    damaged: u64,
}

fn write_export(store: &Store, with_keys: bool, out: &mut dyn Write) -> anyhow::Result<Written> {
    let mut written = Written::default();
    let line = |out: &mut dyn Write, record: &Line| writeln!(out, "{}", record.to_json());
    if with_keys {
        line(out, &Line::Header { format: FORMAT })?;
    }
    let records = write_run_records(store, out, &mut |why| {
        eprintln!("runledger export: {why}");
    })?;
    written.counts.events = records.events;
    written.counts.contents = records.contents;
    written.counts.schedule_events = records.schedule_events;
    written.counts.seals = records.seals;
    written.damaged = records.damaged;
    // The admin audit log in a full backup only (a plain export is the runs' and schedules'
    // events), whole, after both, so that an import can verify its chain.
    for record in store.admin_records().filter(|_| with_keys) {
        match record {
            Ok(entry) => {
                line(out, &Line::Admin(admin_json(&entry)))?;
                written.counts.admin += 1;
            }
            Err(e) => {
                eprintln!("runledger export: skipped a damaged admin audit record: {e}");
                written.damaged += 1;
            }
        }
    }
    if with_keys {
        for key in store.keys().list()? {
            line(out, &Line::Key(key))?;
            written.counts.keys += 1;
        }
        for name in store::INSTANCE_SECRETS {
            if let Some(value) = store.existing_secret(name)? {
                let name = name.to_string();
                line(out, &Line::Secret { name, value })?;
                written.counts.secrets += 1;
            }
        }
        line(out, &Line::End(written.counts))?;
    }
    Ok(written)
}

/// An export file being written: created 0600 under a temporary name beside `path`, and
/// renamed over `path` only once it is whole and durable, so a failed export never leaves a
/// truncated backup under the name of a good one. Dropped unfinished, it is removed.
pub(super) struct OutputFile {
    path: PathBuf,
    temp: PathBuf,
    pub(super) file: Option<BufWriter<fs::File>>,
}

impl OutputFile {
    pub(super) fn create(path: &Path) -> anyhow::Result<OutputFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let name = path
            .file_name()
            .ok_or_else(|| anyhow!("{} is not a file name", path.display()))?;
        let temp = path.with_file_name(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            ulid::Ulid::new().to_string().to_lowercase()
        ));
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .with_context(|| format!("cannot create {}", temp.display()))?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            temp,
            file: Some(BufWriter::new(file)),
        })
    }

    pub(super) fn finish(mut self) -> anyhow::Result<()> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&self.temp, &self.path)
            .with_context(|| format!("cannot move the export to {}", self.path.display()))?;
        sync_parent_of(&self.path)
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

pub fn export(cli: &Cli, with_keys: bool, output: Option<&Path>) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    require_store(&config)?;
    let store = open_salvage(&config)?;
    if with_keys {
        eprintln!(
            "runledger export: WARNING: --with-keys writes the instance secrets (which sign \
             session links and decrypt runs' MCP credentials) and the API key hashes; anyone \
             with this backup can read every run's session page and credentials and restore a \
             server that accepts your keys. Keep it private"
        );
    }
    let written = match output {
        None => {
            let mut out = BufWriter::new(std::io::stdout().lock());
            let written = write_export(&store, with_keys, &mut out)?;
            out.flush()?;
            written
        }
        Some(path) => {
            let mut file = OutputFile::create(path)?;
            let out = file.file.as_mut().context("the export file is closed")?;
            let written = write_export(&store, with_keys, out)?;
            // A backup of a damaged store would replace what may be the last whole one.
            if written.damaged == 0 && store.lost_writes().is_none() {
                file.finish()?;
            } else {
                drop(file);
                eprintln!(
                    "runledger export: {} was left as it was: the export is incomplete; write \
                     it to stdout to salvage what is left",
                    path.display()
                );
            }
            written
        }
    };
    let c = written.counts;
    if with_keys {
        eprintln!(
            "exported {} events, {} API keys and {} instance secrets",
            c.events, c.keys, c.secrets
        );
    } else {
        eprintln!("exported {} events", c.events);
    }
    if c.contents > 0 {
        eprintln!("exported {} attachment and artifact contents", c.contents);
    }
    if c.admin > 0 {
        eprintln!("exported {} admin audit records", c.admin);
    }
    if written.damaged > 0 {
        bail!("{} damaged records could not be exported", written.damaged);
    }
    if store.lost_writes().is_some() {
        bail!("the store lost acknowledged writes; the export holds what is left");
    }
    Ok(())
}
