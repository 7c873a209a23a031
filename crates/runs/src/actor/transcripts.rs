//! `TranscriptReader`: reads of the runs' transcripts (the agents' output) for the HTTP edge,
//! without the writers, which belong to the executor.

use runledger_domain::RunId;
use runledger_exec::{transcript, Executor};

/// A cheap-to-clone handle on the transcripts for `GET /api/v1/agent/runs/{id}/transcript`
/// (`read`; as a live stream `read_raw`, `follow`), and for
/// `GET /api/v1/agent/runs/{id}/conversation` and the session page `/sessions/{id}` (`tail`).
#[derive(Clone)]
pub struct TranscriptReader {
    executor: Executor,
}

impl TranscriptReader {
    pub(super) fn new(executor: &Executor) -> TranscriptReader {
        TranscriptReader {
            executor: executor.clone(),
        }
    }

    /// Entries of run `id` from `offset`: at most `limit` of them and about `max_bytes`.
    pub fn read(
        &self,
        id: RunId,
        offset: u64,
        limit: usize,
        max_bytes: u64,
    ) -> std::io::Result<transcript::Slice> {
        self.executor
            .transcripts()
            .read(id, offset, limit, max_bytes)
    }

    /// Complete lines of run `id`'s transcript from `offset`, unparsed (see
    /// `Transcripts::read_raw`).
    pub fn read_raw(
        &self,
        id: RunId,
        offset: u64,
        max_bytes: u64,
    ) -> std::io::Result<transcript::RawSlice> {
        self.executor.transcripts().read_raw(id, offset, max_bytes)
    }

    /// Notices of run `id`'s transcript growing and of its writers closing.
    pub fn follow(&self, id: RunId) -> runledger_base::notify::Follower<RunId> {
        self.executor.transcripts().follow(id)
    }

    /// The last entries of run `id`, about `max_bytes` of them.
    pub fn tail(&self, id: RunId, max_bytes: u64) -> std::io::Result<transcript::Slice> {
        self.executor.transcripts().tail(id, max_bytes)
    }
}
