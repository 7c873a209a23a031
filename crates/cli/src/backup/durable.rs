//! Making a rename durable: syncing a directory, or the one a path is in. It moves nothing.

use std::fs;
use std::path::Path;

use anyhow::Context as _;

pub(super) fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

pub(super) fn sync_parent_of(path: &Path) -> anyhow::Result<()> {
    // A bare file name (`--output backup.jsonl`) has the empty path as its parent.
    match path.parent() {
        Some(parent) if parent.as_os_str().is_empty() => sync_dir(Path::new(".")),
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_of_a_bare_file_name_is_the_current_directory() {
        assert!(sync_parent_of(Path::new("backup.jsonl")).is_ok());
        assert!(sync_parent_of(Path::new("/")).is_ok());
    }
}
