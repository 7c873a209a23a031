//! `Artifacts`: the content store as the HTTP edge sees it — a create's attachments going in,
//! and the artifacts and plans the log names coming out, with the lookup of the run holding an
//! artifact. It never writes the log.

use super::error::Error;
use super::runs::Runs;
use runledger_domain::{Attachment, Content, Run};
use runledger_store as store;

/// A file of a create, validated and decoded, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub file_name: String,
    pub mime_type: String,
    pub bytes: Vec<u8>,
}

/// A cheap-to-clone handle on the content for `POST /api/v1/agent/run` (`store_attachments`),
/// `GET /api/v1/agent/artifacts/{uid}` (`artifact_run`, `read_content` for a plan's Markdown)
/// and `GET /artifacts/{uid}/download` (`artifact_run`, `open_content`).
#[derive(Clone)]
pub struct Artifacts {
    runs: Runs,
}

impl Artifacts {
    pub(super) fn new(runs: &Runs) -> Artifacts {
        Artifacts { runs: runs.clone() }
    }

    /// The bytes of a content the log names (a plan's Markdown), read whole.
    pub fn read_content(&self, content: &Content) -> Result<Vec<u8>, Error> {
        Ok(self
            .runs
            .inner
            .store
            .content()
            .read(content)
            .map_err(store::Error::from)?)
    }

    /// A content the log names, opened for streaming (a download).
    pub fn open_content(&self, content: &Content) -> Result<std::fs::File, Error> {
        Ok(self
            .runs
            .inner
            .store
            .content()
            .open_content(content)
            .map_err(store::Error::from)?)
    }

    /// Puts the files of a create in the content store, durably, before the run that names
    /// them is recorded; on the blocking pool. Refused, storing nothing, while the store
    /// refuses new work.
    pub async fn store_attachments(&self, files: Vec<Upload>) -> Result<Vec<Attachment>, Error> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let log = &self.runs.inner.store;
        log.admit(store::Writer::Client)?;
        let content = log.content().clone();
        let stored = tokio::task::spawn_blocking(move || {
            files
                .into_iter()
                .map(|u| {
                    Ok(Attachment {
                        content: content.put_bytes(&u.bytes, &u.mime_type)?,
                        file_name: u.file_name,
                    })
                })
                .collect::<Result<Vec<_>, store::content::Error>>()
        })
        .await
        .map_err(|_| Error::Unavailable)?;
        Ok(stored.map_err(store::Error::from)?)
    }

    /// The run holding artifact `uid` (`GET /agent/artifacts/{uid}`), found by the index's
    /// artifact lookup once it holds every command acknowledged before the call.
    pub async fn artifact_run(&self, uid: &str) -> Result<Option<Run>, Error> {
        let inner = &self.runs.inner;
        inner.projector.caught_up().await;
        match inner.index.artifact_run(uid)? {
            Some(run) => self.runs.get(run.id),
            None => Ok(None),
        }
    }
}
