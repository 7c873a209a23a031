//! Where an import builds its store and how it moves it into place: beside a data directory
//! that does not exist yet, or inside an empty one, which may be a mount point. It refuses a
//! directory that holds runs or keys, or that a server holds, and never merges.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use runledger_store::{self as store, Store};

use crate::open::held;

use super::durable::{sync_dir, sync_parent_of};

/// Where an import builds its store, and how it moves it into place.
pub(super) enum Staging {
    /// The data directory does not exist: it is built whole beside it and renamed into place,
    /// so it appears complete or not at all.
    Beside { target: PathBuf, dir: PathBuf },
    /// The data directory exists and holds no runs and no keys. It may be a mount point, onto
    /// which nothing can be renamed, so the store is built inside it, in `dir`, and its
    /// entries are renamed into place (an empty store they replace goes first).
    Inside { target: PathBuf, dir: PathBuf },
}

impl Staging {
    pub(super) fn prepare(target: &Path) -> anyhow::Result<Staging> {
        let suffix = ulid::Ulid::new().to_string().to_lowercase();
        match fs::metadata(target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
                    bail!("{} cannot be a data directory", target.display());
                };
                fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
                let dir = parent.join(format!("{}.import-{suffix}", name.to_string_lossy()));
                fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
                Ok(Staging::Beside {
                    target: target.to_path_buf(),
                    dir,
                })
            }
            Err(e) => Err(e).with_context(|| format!("cannot inspect {}", target.display())),
            Ok(meta) if !meta.is_dir() => {
                bail!("{} exists and is not a directory", target.display())
            }
            Ok(_) => {
                refuse_unless_empty(target)?;
                let dir = target.join(format!(".import-{suffix}"));
                fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
                Ok(Staging::Inside {
                    target: target.to_path_buf(),
                    dir,
                })
            }
        }
    }

    pub(super) fn dir(&self) -> &Path {
        match self {
            Staging::Beside { dir, .. } | Staging::Inside { dir, .. } => dir,
        }
    }

    /// Moves the finished store into place and makes the move durable.
    pub(super) fn commit(self) -> anyhow::Result<()> {
        match &self {
            Staging::Beside { target, dir } => {
                // Fails if the data directory appeared meanwhile with anything in it: never merge.
                fs::rename(dir, target).with_context(|| {
                    format!("cannot move {} to {}", dir.display(), target.display())
                })?;
                sync_parent_of(target)
            }
            Staging::Inside { target, dir } => {
                // A server may have started on the directory since the first check.
                refuse_unless_empty(target)?;
                let aside = dir.join("replaced");
                fs::create_dir(&aside)?;
                let mv = |from: &Path, to: &Path| {
                    fs::rename(from, to).with_context(|| {
                        format!("cannot move {} to {}", from.display(), to.display())
                    })
                };
                for name in store::STORE_ENTRIES {
                    if fs::symlink_metadata(target.join(name)).is_ok() {
                        mv(&target.join(name), &aside.join(name))?;
                    }
                }
                // sled's directory before the watermark: a store without its watermark opens
                // as a new one would, while a stale watermark beside it would read as a loss.
                for name in store::STORE_ENTRIES {
                    mv(&dir.join(name), &target.join(name))?;
                }
                sync_dir(target)?;
                fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))
            }
        }
    }

    /// Removes everything the import wrote; the data directory is as it was.
    pub(super) fn abandon(self) {
        let dir = self.dir();
        if let Err(e) = fs::remove_dir_all(dir) {
            eprintln!(
                "runledger import: cannot remove the staging directory {}: {e}",
                dir.display()
            );
        }
    }
}

/// Refuses a data directory that holds runs or keys, or that a server holds.
fn refuse_unless_empty(target: &Path) -> anyhow::Result<()> {
    if !Store::exists_in(target) {
        return Ok(());
    }
    let store = match Store::open(target, &store::Options::default()) {
        Ok(store) => store,
        Err(store::Error::Locked(dir)) => return Err(held(&dir)),
        Err(e) => return Err(e.into()),
    };
    let (events, keys) = (
        store.event_count() + store.schedule_event_count(),
        store.keys().list()?.len(),
    );
    if events > 0 || keys > 0 {
        bail!(
            "{} already holds {events} events and {keys} API keys; `runledger import` restores \
             only into a new or empty data directory and never merges. Choose another \
             --data-dir, or move this one away first",
            target.display()
        );
    }
    Ok(())
}
