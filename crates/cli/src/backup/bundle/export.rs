//! `runledger export --run ID [--output FILE]`: one run's bundle from a stopped store, to
//! stdout or to FILE (0600, under a temporary name until whole, as the whole-store export).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use runledger_domain::RunId;
use runledger_format::bundle::write_bundle;

use crate::commands::Cli;
use crate::open::{open_salvage, require_store};

use super::super::export::OutputFile;

/// Where a data directory keeps a run's transcript (as `runledger_exec::transcript` writes it).
pub fn transcript_path(data_dir: &Path, run_id: RunId) -> PathBuf {
    data_dir.join("transcripts").join(format!("{run_id}.jsonl"))
}

pub fn export_run(cli: &Cli, run: &str, output: Option<&Path>) -> anyhow::Result<()> {
    let run_id: RunId = run
        .parse()
        .map_err(|_| anyhow::anyhow!("{run:?} is not a run id"))?;
    let config = cli.load_config(None)?;
    require_store(&config)?;
    let store = open_salvage(&config)?;
    let transcript = transcript_path(&config.data_dir, run_id);
    let written = match output {
        None => {
            let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            let written = write_bundle(&store, run_id, &transcript, &mut out)?;
            out.flush()?;
            written
        }
        Some(path) => {
            let mut file = OutputFile::create(path)?;
            let written = write_bundle(&store, run_id, &transcript, file.writer()?)?;
            if written.is_some() {
                file.finish()?;
            }
            written
        }
    };
    let Some(written) = written else {
        bail!("{} holds no run {run_id}", config.data_dir.display());
    };
    eprintln!(
        "exported run {run_id}: {} events, {} attachment and artifact contents, {} bytes",
        written.events, written.contents, written.bytes
    );
    if store.lost_writes().is_some() {
        bail!("the store lost acknowledged writes; the bundle holds what is left");
    }
    Ok(())
}

impl OutputFile {
    fn writer(&mut self) -> anyhow::Result<&mut dyn Write> {
        Ok(self.file.as_mut().context("the export file is closed")?)
    }
}
