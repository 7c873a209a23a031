//! What an execution changed in its workspace (`ExecutionChanges`), recorded after its agent
//! exits and before its end (`Event::Changes`): for each repository checked out (or the
//! workspace itself when it has none), the files that differ from the run's base, with their
//! status and line counts, and the address of the unified diff in the content store. Plain
//! data: the shell computes it (`exec/src/changes/`), the log keeps it, the API and webhooks
//! read it back. Each execution's record is the run's changes from its base up to that
//! execution's end (cumulative), so the latest one is the run's total.

use serde::{Deserialize, Serialize};

use super::content::Content;

/// The run's changes at the end of one execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionChanges {
    /// One entry per repository of the environment, in checkout order; a workspace without
    /// repositories has one entry whose `path` is `.` and whose `base` is a tree id.
    pub repositories: Vec<RepositoryChanges>,
    /// The unified diff of every repository (paths relative to the workspace), redacted, in the
    /// content store; `None` when nothing changed or it could not be computed.
    pub diff: Option<Content>,
    /// The diff was longer than the environment's `changes_max_mb` and was cut: the summary is
    /// whole, the stored diff is not (and holds no partial file).
    pub cut: bool,
}

/// What changed in one repository (or in a plain workspace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepositoryChanges {
    /// Where it is, relative to the workspace (`.` for the workspace itself).
    pub path: String,
    /// What the changes are counted from: the commit the run's first execution started from
    /// (40 hex digits), or for a plain workspace the git tree of its state at that start.
    pub base: String,
    pub files: Vec<ChangedFile>,
    /// Why the changes could not be computed (then `files` is empty).
    pub error: Option<String>,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Relative to the repository.
    pub path: String,
    /// The path it was renamed from.
    pub old_path: Option<String>,
    pub status: FileStatus,
    /// Lines added and removed; 0 for a binary file.
    pub additions: u64,
    pub deletions: u64,
    pub binary: bool,
}

/// How a file changed. Append new values at the end only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    Renamed,
    /// Only its mode (executable bit) changed.
    ModeChanged,
    /// It is (now) a symbolic link: added as one, or its target or type changed. A link is
    /// recorded as a link (its target's path), never the content it points at.
    Symlink,
}

impl FileStatus {
    /// The name the API and the log's JSON use.
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Added => "added",
            FileStatus::Modified => "modified",
            FileStatus::Deleted => "deleted",
            FileStatus::Renamed => "renamed",
            FileStatus::ModeChanged => "mode_changed",
            FileStatus::Symlink => "symlink",
        }
    }

    /// The inverse of `as_str`.
    pub fn parse(text: &str) -> Option<FileStatus> {
        [
            FileStatus::Added,
            FileStatus::Modified,
            FileStatus::Deleted,
            FileStatus::Renamed,
            FileStatus::ModeChanged,
            FileStatus::Symlink,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// Files, lines added and lines removed, added up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ChangesTotals {
    pub files: u64,
    pub additions: u64,
    pub deletions: u64,
}

impl ExecutionChanges {
    /// Every repository's files and lines, added up.
    pub fn totals(&self) -> ChangesTotals {
        let mut totals = ChangesTotals::default();
        for file in self.repositories.iter().flat_map(|r| &r.files) {
            totals.files += 1;
            totals.additions = totals.additions.saturating_add(file.additions);
            totals.deletions = totals.deletions.saturating_add(file.deletions);
        }
        totals
    }
}
