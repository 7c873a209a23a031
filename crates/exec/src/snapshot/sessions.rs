//! What a CLI keeps under its home by the path of the directory it ran in, moved to the fork's
//! workspace path when a fork starts from a snapshot: the fork works in another directory
//! (`<workspace_root>/<fork id>`), and a CLI that looks its session up by its working directory
//! would not find it there. Claude Code keeps a session in
//! `~/.claude/projects/<the path, every character but [A-Za-z0-9] as '->/<session>.jsonl`.
//! Codex finds a session by its id wherever it ran. Everything is reached through `safe_fs`: a
//! link the agent left at one of these names is refused, never followed.

use std::path::Path;

use nix::errno::Errno;

use crate::safe_fs::{self, Dir};

/// Claude Code's name for the sessions of the directory `path`.
fn claude_project(path: &Path) -> String {
    path.display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Renames the CLIs' entries for `from` (the original's workspace) under `home` to those of
/// `to` (the fork's); an entry that is not there is fine.
pub fn relocate(home: &Dir, from: &Path, to: &Path) -> Result<(), safe_fs::Error> {
    let projects = match home.open_dir(Path::new(".claude/projects")) {
        Err(e) if e.is_not_found() => return Ok(()),
        opened => opened?,
    };
    let (old, new) = (claude_project(from), claude_project(to));
    match nix::fcntl::renameat(projects.fd(), old.as_str(), projects.fd(), new.as_str()) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(safe_fs::Error::io(projects.path().join(new), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_names_a_project_by_its_path_with_dashes() {
        assert_eq!(
            claude_project(Path::new("/data/workspaces/0b1e-2f_x.y")),
            "-data-workspaces-0b1e-2f-x-y"
        );
    }
}
