//! `runledger import`: reads the export from a file or stdin, builds the store in a staging
//! directory and moves it into place only once it is whole; on failure the data directory is
//! as it was. What the lines hold and how they are checked is `restore`'s.

use std::fs;
use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;

use crate::commands::Cli;

use super::restore::build;
use super::staging::Staging;

pub fn import(cli: &Cli, file: Option<&Path>, unverified: bool) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    let target = config.data_dir.clone();
    let (input, source): (Box<dyn BufRead>, String) = match file {
        None => (Box::new(std::io::stdin().lock()), "stdin".into()),
        Some(p) if p == Path::new("-") => (Box::new(std::io::stdin().lock()), "stdin".into()),
        Some(p) => {
            let f = fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            (
                Box::new(std::io::BufReader::with_capacity(1 << 16, f)),
                p.display().to_string(),
            )
        }
    };
    let started = Instant::now();
    let staging = Staging::prepare(&target)?;
    let built = build(staging.dir(), input, &source, unverified);
    let (counts, runs) = match built {
        Ok(built) => built,
        Err(e) => {
            staging.abandon();
            eprintln!(
                "runledger import: nothing was imported; {} is as it was",
                target.display()
            );
            return Err(e);
        }
    };
    if let Err(e) = staging.commit() {
        eprintln!(
            "runledger import: the store was built but could not be moved into {}",
            target.display()
        );
        return Err(e);
    }
    eprintln!(
        "imported {} events of {runs} runs, {} API keys and {} instance secrets into {} in {:.2} s",
        counts.events,
        counts.keys,
        counts.secrets,
        target.display(),
        started.elapsed().as_secs_f64()
    );
    if counts.contents > 0 {
        eprintln!(
            "imported {} attachment and artifact contents",
            counts.contents
        );
    }
    if counts.schedule_events > 0 {
        eprintln!("imported {} schedule events", counts.schedule_events);
    }
    if counts.admin > 0 {
        eprintln!(
            "imported {} admin audit records, their hash chain verified",
            counts.admin
        );
    }
    if counts.keys == 0 {
        eprintln!(
            "runledger import: the backup holds no API keys (export --with-keys writes them); \
             the server creates a new admin key when it starts"
        );
    }
    eprintln!(
        "runledger import: transcripts are not part of a backup; copy the old data \
         directory's transcripts/ into {}",
        target.display()
    );
    Ok(())
}
