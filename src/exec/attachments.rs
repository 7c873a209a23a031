//! The run's attachments in its workspace: the files a client attached at create, copied from
//! the content store into `<workspace>/.runledger/attachments/` before the agent starts, and
//! named to the agent by `RUNLEDGER_ATTACHMENTS_DIR`.
//!
//! Every execution puts back the attachments that are missing, and leaves a file the agent
//! changed as it is (the workspace is the agent's from then on). The directories and files are
//! checked without following symbolic links and created exclusively, so an agent that replaced
//! them with links in an earlier execution cannot make the server write elsewhere; no agent
//! process of the run is alive while this runs (the execution before was stopped whole).

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::domain::Run;
use crate::store::content::ContentStore;

/// Where the attachments are, relative to the workspace.
pub const DIR: [&str; 2] = [".runledger", "attachments"];

/// The attachments directory of the workspace `workspace`.
pub fn dir(workspace: &Path) -> PathBuf {
    DIR.iter().fold(workspace.to_path_buf(), |p, c| p.join(c))
}

/// A real directory at `path`: anything else there (a link, a file) is removed first.
fn real_dir(path: &Path) -> io::Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => return Ok(false),
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir(path)?;
    Ok(true)
}

/// Copies the run's missing attachments into its workspace; `hand_over` gives what is
/// created to the agent's user. Returns the names it wrote.
pub fn place(
    run: &Run,
    workspace: &Path,
    content: &ContentStore,
    hand_over: &dyn Fn(&Path) -> io::Result<()>,
) -> Result<Vec<String>, String> {
    if run.attachments.is_empty() {
        return Ok(Vec::new());
    }
    let mut path = workspace.to_path_buf();
    for part in DIR {
        path.push(part);
        let made = real_dir(&path)
            .map_err(|e| format!("cannot make the directory {}: {e}", path.display()))?;
        if made {
            hand_over(&path).map_err(|e| format!("cannot hand over {}: {e}", path.display()))?;
        }
    }
    let mut written = Vec::new();
    for attachment in &run.attachments {
        let target = path.join(&attachment.file_name);
        match std::fs::symlink_metadata(&target) {
            // The agent's copy, changed or not, stays.
            Ok(m) if m.is_file() => continue,
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&target),
            Ok(_) => std::fs::remove_file(&target),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
        .map_err(|e| format!("cannot clear {}: {e}", target.display()))?;
        let mut source = content.open_content(&attachment.content).map_err(|e| {
            format!(
                "attachment {:?} cannot be read from the content store: {e}",
                attachment.file_name
            )
        })?;
        let mut copy = || -> io::Result<()> {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&target)?;
            io::copy(&mut source, &mut file)?;
            file.sync_all()?;
            hand_over(&target)
        };
        copy().map_err(|e| format!("cannot write {}: {e}", target.display()))?;
        written.push(attachment.file_name.clone());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{sample_run, Attachment};

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

    fn no_hand_over(_: &Path) -> io::Result<()> {
        Ok(())
    }

    #[test]
    fn attachments_are_written_once_and_an_agents_change_is_kept() {
        let (base, content, run) = setup("once");
        let ws = base.join("ws");
        let written = place(&run, &ws, &content, &no_hand_over).expect("placed");
        assert_eq!(written, ["notes é.md", "blob.bin"]);
        assert_eq!(
            std::fs::read(dir(&ws).join("blob.bin")).expect("read"),
            [0u8, 1, 2, 255]
        );
        std::fs::write(dir(&ws).join("notes é.md"), b"changed").expect("change");
        std::fs::remove_file(dir(&ws).join("blob.bin")).expect("remove");
        let again = place(&run, &ws, &content, &no_hand_over).expect("placed again");
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
        place(&run, &ws, &content, &no_hand_over).expect("placed");
        assert!(std::fs::symlink_metadata(dir(&ws)).expect("dir").is_dir());
        assert_eq!(std::fs::read_dir(&outside).expect("outside").count(), 0);
        // One file replaced by a link to a file elsewhere.
        let victim = outside.join("victim");
        std::fs::write(&victim, b"keep").expect("victim");
        std::fs::remove_file(dir(&ws).join("blob.bin")).expect("remove");
        std::os::unix::fs::symlink(&victim, dir(&ws).join("blob.bin")).expect("link");
        place(&run, &ws, &content, &no_hand_over).expect("placed");
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
        let err = place(&run, &base.join("ws"), &content, &no_hand_over).expect_err("missing");
        assert!(err.contains("\"blob.bin\" cannot be read"), "{err}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
