//! Transcripts: what an agent printed and was told, stored beside the event log as one
//! JSON-lines file per run (`<data_dir>/transcripts/<run_id>.jsonl`). Not events: output can be
//! large and is not state, so it never slows or bloats the log.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::domain::{RunId, Timestamp};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub at: Timestamp,
    pub execution: u32,
    /// `stdout`, `stderr`, `system` or `followup`.
    pub stream: String,
    pub text: String,
}

#[derive(Clone)]
pub struct Transcripts {
    dir: PathBuf,
}

impl Transcripts {
    pub fn open(data_dir: &std::path::Path) -> std::io::Result<Transcripts> {
        let dir = data_dir.join("transcripts");
        std::fs::create_dir_all(&dir)?;
        Ok(Transcripts { dir })
    }

    fn path(&self, id: RunId) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    pub fn append(&self, id: RunId, entry: &Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path(id))?;
        file.write_all(&line)
    }

    /// Every entry of a run's transcript (empty if it has none yet).
    pub fn read(&self, id: RunId) -> std::io::Result<Vec<Entry>> {
        let file = match std::fs::File::open(self.path(id)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut entries = Vec::new();
        for line in std::io::BufReader::new(file).lines() {
            let line = line?;
            // A line cut short by a crash is skipped rather than failing the whole transcript.
            if let Ok(entry) = serde_json::from_str(&line) {
                entries.push(entry);
            }
        }
        Ok(entries)
    }
}
