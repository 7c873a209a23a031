//! The run's attachments in its workspace: the files a client attached at create, copied from
//! the content store into `<workspace>/.runledger/attachments/` before the agent starts, and
//! named to the agent by `RUNLEDGER_ATTACHMENTS_DIR`.
//!
//! Every execution puts back the attachments that are missing, and leaves a file the agent
//! changed as it is (the workspace is the agent's from then on). Everything is reached from the
//! workspace's descriptor through `safe_fs`: a link, a file or a FIFO the agent left where a
//! directory or an attachment belongs is unlinked (never followed) and the real one made in
//! its place, so an agent cannot make the server write, read or hand over anything elsewhere.

use std::io;
use std::path::{Path, PathBuf};

use super::safe_fs::{self, Dir, Owner};
use runledger_domain::Run;
use runledger_store::content::ContentStore;

/// Where the attachments are, relative to the workspace.
pub const DIR: [&str; 2] = [".runledger", "attachments"];

/// The attachments directory of the workspace `workspace`.
pub fn dir(workspace: &Path) -> PathBuf {
    DIR.iter().fold(workspace.to_path_buf(), |p, c| p.join(c))
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A path in the workspace could not be used (`safe_fs`).
    #[error(transparent)]
    Path(#[from] safe_fs::Error),
    #[error("attachment {name:?} cannot be read from the content store: {reason}")]
    Content { name: String, reason: String },
}

/// The real directory `name` in `parent`, given to `owner`: anything else there (a link, a
/// file) is unlinked first.
fn real_dir(parent: &Dir, name: &str, owner: Option<Owner>) -> Result<Dir, safe_fs::Error> {
    let dir = match parent.make_dir(name, 0o755) {
        Err(safe_fs::Error::Refused { .. }) => {
            parent.remove(name)?;
            parent.make_dir(name, 0o755)?
        }
        made => made?,
    };
    dir.set_owner(owner)?;
    Ok(dir)
}

/// Copies the run's missing attachments into its workspace, given to `owner` (the agent's
/// user). Returns the names it wrote.
pub fn place(
    run: &Run,
    workspace: &Path,
    content: &ContentStore,
    owner: Option<Owner>,
) -> Result<Vec<String>, Error> {
    if run.attachments.is_empty() {
        return Ok(Vec::new());
    }
    let mut dir = Dir::open(workspace)?;
    for part in DIR {
        dir = real_dir(&dir, part, owner)?;
    }
    let mut written = Vec::new();
    for attachment in &run.attachments {
        let name = attachment.file_name.as_str();
        match dir.open_file(Path::new(name), safe_fs::Links::Allowed) {
            // The agent's copy, changed or not, stays: it is never read here.
            Ok(_) => continue,
            Err(e) if is_not_found(&e) => {}
            Err(_) => dir.remove(name)?,
        }
        let mut source = content
            .open_content(&attachment.content)
            .map_err(|e| Error::Content {
                name: name.to_string(),
                reason: e.to_string(),
            })?;
        let mut file = dir.create_file(name, 0o644, owner)?;
        io::copy(&mut source, &mut file)
            .and_then(|_| file.sync_all())
            .map_err(|source| safe_fs::Error::Io {
                path: dir.path().join(name),
                source,
            })?;
        written.push(name.to_string());
    }
    Ok(written)
}

fn is_not_found(e: &safe_fs::Error) -> bool {
    matches!(e, safe_fs::Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{sample_run, Attachment};

    fn setup(name: &str) -> (PathBuf, ContentStore, Run) {
        let base = std::env::temp_dir().join(format!(
            "runledger-attach-{name}-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let content = ContentStore::open(&base.join("data")).expect("content store");
        let mut run = sample_run(1);
        run.attachments = vec![
            Attachment {
                file_name: "notes é.md".into(),
                content: content
                    .put_bytes(b"# notes\n", "text/markdown")
                    .expect("put"),
            },
            Attachment {
                file_name: "blob.bin".into(),
                content: content
                    .put_bytes(&[0u8, 1, 2, 255], "application/octet-stream")
                    .expect("put"),
            },
        ];
        let workspace = base.join("ws");
        std::fs::create_dir_all(&workspace).expect("workspace");
        (base, content, run)
    }

    #[test]
    fn attachments_are_written_once_and_an_agents_change_is_kept() {
        let (base, content, run) = setup("once");
        let ws = base.join("ws");
        let written = place(&run, &ws, &content, None).expect("placed");
        assert_eq!(written, ["notes é.md", "blob.bin"]);
        assert_eq!(
            std::fs::read(dir(&ws).join("blob.bin")).expect("read"),
            [0u8, 1, 2, 255]
        );
        std::fs::write(dir(&ws).join("notes é.md"), b"changed").expect("change");
        std::fs::remove_file(dir(&ws).join("blob.bin")).expect("remove");
        let again = place(&run, &ws, &content, None).expect("placed again");
        assert_eq!(again, ["blob.bin"]);
        assert_eq!(
            std::fs::read(dir(&ws).join("notes é.md")).expect("read"),
            b"changed"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn links_left_by_an_agent_are_not_followed() {
        let (base, content, run) = setup("links");
        let ws = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(&outside).expect("outside");
        // The whole directory replaced by a link to elsewhere.
        std::fs::create_dir_all(ws.join(".runledger")).expect("dir");
        std::os::unix::fs::symlink(&outside, dir(&ws)).expect("link");
        place(&run, &ws, &content, None).expect("placed");
        assert!(std::fs::symlink_metadata(dir(&ws)).expect("dir").is_dir());
        assert_eq!(std::fs::read_dir(&outside).expect("outside").count(), 0);
        // One file replaced by a link to a file elsewhere.
        let victim = outside.join("victim");
        std::fs::write(&victim, b"keep").expect("victim");
        std::fs::remove_file(dir(&ws).join("blob.bin")).expect("remove");
        std::os::unix::fs::symlink(&victim, dir(&ws).join("blob.bin")).expect("link");
        place(&run, &ws, &content, None).expect("placed");
        assert_eq!(std::fs::read(&victim).expect("victim"), b"keep");
        assert_eq!(
            std::fs::read(dir(&ws).join("blob.bin")).expect("read"),
            [0u8, 1, 2, 255]
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_missing_content_is_a_clear_failure() {
        let (base, content, run) = setup("missing");
        std::fs::remove_file(content.path_of(&run.attachments[1].content.sha256))
            .expect("remove content");
        let err = place(&run, &base.join("ws"), &content, None).expect_err("missing");
        assert!(
            err.to_string().contains("\"blob.bin\" cannot be read"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
