//! What a CLI keeps under its home by the path of the directory it ran in, moved to the fork's
//! workspace path when a fork starts from a snapshot: the fork works in another directory
//! (`<workspace_root>/<fork id>`), and a CLI that looks its session up by its working directory
//! would not find it there. Claude Code keeps a session in
//! `~/.claude/projects/<the path, every character but [A-Za-z0-9] as '->/<session>.jsonl`.
//! Gemini CLI keeps a project's chats in `~/.gemini/tmp/<slug>/` (and its history in
//! `~/.gemini/history/<slug>/`), each with a `.project_root` file naming the project's path,
//! which it looks up by the working directory. Codex finds a session by its id, first in its
//! state database (`~/.codex/state_<n>.sqlite`), which records each session file by its
//! absolute path (under the original's home, which the fork's sandbox does not have), then by
//! scanning `~/.codex/sessions/`: the database is left out of the fork's home, so the scan
//! finds the session file the fork has. Everything is reached through `safe_fs`: a
//! link the agent left at one of these names is refused, never followed.

use std::path::Path;

use nix::errno::Errno;

use crate::safe_fs::{self, Dir, Links, Owner};

/// Claude Code's name for the sessions of the directory `path`.
fn claude_project(path: &Path) -> String {
    path.display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Moves the CLIs' entries for `from` (the original's workspace) under `home` to `to` (the
/// fork's), given to `owner`; an entry that is not there is fine.
pub fn relocate(
    home: &Dir,
    from: &Path,
    to: &Path,
    owner: Option<Owner>,
) -> Result<(), safe_fs::Error> {
    claude(home, from, to)?;
    gemini(home, from, to, owner)?;
    codex(home)
}

/// Removes Codex's state database (and its WAL and shared-memory files) from the fork's home.
fn codex(home: &Dir) -> Result<(), safe_fs::Error> {
    let dir = match home.open_dir(Path::new(".codex")) {
        Err(e) if e.is_not_found() => return Ok(()),
        opened => opened?,
    };
    for name in dir.names()? {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("state_") && name.contains(".sqlite") {
            dir.remove(name)?;
        }
    }
    Ok(())
}

fn claude(home: &Dir, from: &Path, to: &Path) -> Result<(), safe_fs::Error> {
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

/// Gemini CLI's `.project_root` markers naming `from` now name `to`: the CLI finds the
/// project's directory (its chats) by them when its registry has no entry for `to`.
fn gemini(home: &Dir, from: &Path, to: &Path, owner: Option<Owner>) -> Result<(), safe_fs::Error> {
    const MARKER: &str = ".project_root";
    let old = from.display().to_string();
    let new = to.display().to_string();
    for base in [".gemini/tmp", ".gemini/history"] {
        let dir = match home.open_dir(Path::new(base)) {
            Err(e) if e.is_not_found() => continue,
            opened => opened?,
        };
        for name in dir.names()? {
            let Some(name) = name.to_str() else { continue };
            let project = match dir.open_dir(Path::new(name)) {
                // Not a directory, or a link: not the CLI's.
                Err(safe_fs::Error::Refused { .. }) => continue,
                Err(e) if e.is_not_found() => continue,
                opened => opened?,
            };
            let marker = match project.read(Path::new(MARKER), Links::Refused) {
                Ok(Some(bytes)) => bytes,
                Ok(None) | Err(safe_fs::Error::Refused { .. }) => continue,
                Err(e) => return Err(e),
            };
            if String::from_utf8_lossy(&marker).trim() == old {
                project.replace(MARKER, new.as_bytes(), 0o644, owner)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cli_finds_its_session_under_the_forks_path() {
        let home = std::env::temp_dir().join(format!(
            "runledger-sessions-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let (from, to) = (
            Path::new("/data/workspaces/old"),
            Path::new("/data/workspaces/new"),
        );
        let claude = home.join(".claude/projects").join(claude_project(from));
        std::fs::create_dir_all(&claude).expect("test step");
        std::fs::write(claude.join("s.jsonl"), "{}").expect("test step");
        for base in ["tmp", "history"] {
            let dir = home.join(".gemini").join(base).join("old");
            std::fs::create_dir_all(&dir).expect("test step");
            std::fs::write(dir.join(".project_root"), "/data/workspaces/old").expect("test step");
        }
        std::fs::create_dir_all(home.join(".codex")).expect("test step");
        for name in ["state_5.sqlite", "state_5.sqlite-wal", "logs_2.sqlite"] {
            std::fs::write(home.join(".codex").join(name), "db").expect("test step");
        }
        let other = home.join(".gemini/tmp/other");
        std::fs::create_dir_all(&other).expect("test step");
        std::fs::write(other.join(".project_root"), "/elsewhere").expect("test step");
        let dir = Dir::open(&home).expect("test step");
        relocate(&dir, from, to, None).expect("relocated");
        let moved = home.join(".claude/projects").join(claude_project(to));
        assert!(moved.join("s.jsonl").exists());
        for base in ["tmp", "history"] {
            let marker = home.join(".gemini").join(base).join("old/.project_root");
            assert_eq!(
                std::fs::read_to_string(marker).expect("test step"),
                "/data/workspaces/new"
            );
        }
        assert_eq!(
            std::fs::read_to_string(other.join(".project_root")).expect("test step"),
            "/elsewhere"
        );
        assert!(!home.join(".codex/state_5.sqlite").exists());
        assert!(!home.join(".codex/state_5.sqlite-wal").exists());
        assert!(home.join(".codex/logs_2.sqlite").exists());
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn claude_names_a_project_by_its_path_with_dashes() {
        assert_eq!(
            claude_project(Path::new("/data/workspaces/0b1e-2f_x.y")),
            "-data-workspaces-0b1e-2f-x-y"
        );
    }
}
