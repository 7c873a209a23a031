//! The payload of a `Changes` event as JSON (`ChangesData`), both ways: from the domain's
//! `ExecutionChanges` (the events API, exports, the changes endpoint, webhooks) and back
//! (`runledger import`, which also checks that the line round-trips).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{bad, EventJsonError};
use runledger_domain::{
    ChangedFile, ChangesTotals, ExecutionChanges, FileStatus, RepositoryChanges,
};

/// What the run's workspace held changed at the end of one execution, from the run's base.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangesData {
    /// The execution at whose end they were computed.
    pub execution: u32,
    /// One entry per repository in checkout order (a plain workspace: one entry, path `.`).
    pub repositories: Vec<RepositoryChangesData>,
    /// The unified diff in the content store; absent when nothing changed or it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffData>,
    /// The diff passed the environment's `changes_max_mb` and was cut (the summary is whole).
    pub cut: bool,
}

/// The diff's bytes in the content store: their SHA-256 (lower-case hex), size and media type
/// (the shape of every content's address in the events).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffData {
    pub sha256: String,
    pub size: u64,
    pub mime_type: String,
}

/// One repository's changed files.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepositoryChangesData {
    /// Relative to the workspace.
    pub path: String,
    /// The commit the run started from, or for a plain workspace the git tree of its start.
    pub base: String,
    pub files: Vec<ChangedFileData>,
    /// Why the changes could not be computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One changed file.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangedFileData {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// `added`, `modified`, `deleted`, `renamed`, `mode_changed` or `symlink`.
    pub status: String,
    pub additions: u64,
    pub deletions: u64,
    pub binary: bool,
}

/// Files, lines added and lines removed, added up.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangesTotalsData {
    pub files: u64,
    pub additions: u64,
    pub deletions: u64,
}

impl From<ChangesTotals> for ChangesTotalsData {
    fn from(t: ChangesTotals) -> ChangesTotalsData {
        ChangesTotalsData {
            files: t.files,
            additions: t.additions,
            deletions: t.deletions,
        }
    }
}

impl ChangesData {
    pub fn from(execution: u32, c: &ExecutionChanges) -> ChangesData {
        ChangesData {
            execution,
            repositories: c
                .repositories
                .iter()
                .map(|r| RepositoryChangesData {
                    path: r.path.clone(),
                    base: r.base.clone(),
                    files: r
                        .files
                        .iter()
                        .map(|f| ChangedFileData {
                            path: f.path.clone(),
                            old_path: f.old_path.clone(),
                            status: f.status.as_str().to_string(),
                            additions: f.additions,
                            deletions: f.deletions,
                            binary: f.binary,
                        })
                        .collect(),
                    error: r.error.clone(),
                })
                .collect(),
            diff: c.diff.as_ref().map(|d| DiffData {
                sha256: crate::time::hex(&d.sha256),
                size: d.size,
                mime_type: d.mime_type.clone(),
            }),
            cut: c.cut,
        }
    }

    /// The execution and its changes, as the log holds them.
    pub fn changes(self) -> Result<(u32, ExecutionChanges), EventJsonError> {
        let mut repositories = Vec::with_capacity(self.repositories.len());
        for r in self.repositories {
            let mut files = Vec::with_capacity(r.files.len());
            for f in r.files {
                let status = FileStatus::parse(&f.status)
                    .ok_or_else(|| bad(format!("file status {:?} is unknown", f.status)))?;
                files.push(ChangedFile {
                    path: f.path,
                    old_path: f.old_path,
                    status,
                    additions: f.additions,
                    deletions: f.deletions,
                    binary: f.binary,
                });
            }
            repositories.push(RepositoryChanges {
                path: r.path,
                base: r.base,
                files,
                error: r.error,
            });
        }
        let diff = match self.diff {
            Some(d) => Some(runledger_domain::Content {
                sha256: crate::time::unhex32(&d.sha256)
                    .ok_or_else(|| bad(format!("sha256 {:?} is not 64 hex digits", d.sha256)))?,
                size: d.size,
                mime_type: d.mime_type,
            }),
            None => None,
        };
        Ok((
            self.execution,
            ExecutionChanges {
                repositories,
                diff,
                cut: self.cut,
            },
        ))
    }
}
