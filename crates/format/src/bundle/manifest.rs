//! The names of a bundle's sections and its manifest: what each name may be (a fixed name or
//! `content/` and 64 hex digits, never a path of the file system), the order they come in, and
//! the bounds that keep a hostile manifest from making a reader allocate or wait for
//! what the file does not hold. It does no I/O.

use serde::{Deserialize, Serialize};

use super::Error;
use crate::time::{hex, unhex32};

/// The first word of a bundle's first line.
pub const MAGIC: &str = "runledger-bundle";
/// The format version the first line carries; a reader refuses versions it does not know.
pub const FORMAT: u64 = 1;
/// The longest header, manifest or `section` line a reader accepts.
pub const MAX_MANIFEST: u64 = 16 * 1024 * 1024;
/// The largest `state.json` or `proof.json`: both are read whole.
pub const MAX_SMALL: u64 = 16 * 1024 * 1024;
/// The longest event line (as `runledger import` reads a backup's).
pub const MAX_EVENT_LINE: u64 = 64 * 1024 * 1024;

/// What a section holds, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionKind {
    /// `state.json`: the run as its events fold, as JSON.
    State,
    /// `proof.json`: the run's chain head and the latest seal covering it (`GET …/proof`).
    Proof,
    /// `events.jsonl`: the run's event lines with their hash chain `link`s.
    Events,
    /// `transcript.jsonl`: the run's transcript file, byte for byte.
    Transcript,
    /// `content/<sha256>`: an attachment's or artifact's bytes.
    Content([u8; 32]),
}

impl SectionKind {
    pub fn name(&self) -> String {
        match self {
            SectionKind::State => "state.json".into(),
            SectionKind::Proof => "proof.json".into(),
            SectionKind::Events => "events.jsonl".into(),
            SectionKind::Transcript => "transcript.jsonl".into(),
            SectionKind::Content(sha) => format!("content/{}", hex(sha)),
        }
    }

    /// The kind a name stands for; anything else (a path, `..`, another file) is refused.
    pub fn parse(name: &str) -> Result<SectionKind, Error> {
        Ok(match name {
            "state.json" => SectionKind::State,
            "proof.json" => SectionKind::Proof,
            "events.jsonl" => SectionKind::Events,
            "transcript.jsonl" => SectionKind::Transcript,
            other => match other.strip_prefix("content/").and_then(unhex32_lower) {
                Some(sha) => SectionKind::Content(sha),
                None => {
                    return Err(Error::Damaged(format!(
                        "the manifest names a section {other:?}: a bundle holds only state.json, \
                         proof.json, events.jsonl, transcript.jsonl and content/<sha256>, never \
                         a path"
                    )))
                }
            },
        })
    }

    /// Where the kind may stand: the fixed sections in this order, then the contents.
    fn rank(&self) -> u8 {
        match self {
            SectionKind::State => 0,
            SectionKind::Proof => 1,
            SectionKind::Events => 2,
            SectionKind::Transcript => 3,
            SectionKind::Content(_) => 4,
        }
    }
}

/// 64 lowercase hex digits only, so that a name has one spelling.
fn unhex32_lower(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    unhex32(text)
}

/// A section as the manifest names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    pub size: u64,
    /// SHA-256 of the section's bytes, 64 hex digits.
    pub sha256: String,
}

/// The bundle's second line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u64,
    pub run_id: String,
    /// The run's events in `events.jsonl`.
    pub events: u64,
    pub sections: Vec<Entry>,
}

impl Manifest {
    /// The sections' kinds, once every entry has been checked: known names in order, each
    /// fixed one once (`state.json`, `proof.json` and `events.jsonl` always), contents sorted
    /// and named by their own digest, small sections within their bounds.
    pub fn check(&self) -> Result<Vec<SectionKind>, Error> {
        let damaged = |why: String| Err(Error::Damaged(format!("the manifest {why}")));
        if self.format != FORMAT {
            return damaged(format!(
                "is of bundle format {}; this version reads format {FORMAT}",
                self.format
            ));
        }
        if self.run_id.parse::<runledger_domain::RunId>().is_err() {
            return damaged(format!(
                "names run {:?}, which is not a run id",
                self.run_id
            ));
        }
        let mut kinds = Vec::with_capacity(self.sections.len());
        let mut last: Option<SectionKind> = None;
        for entry in &self.sections {
            let kind = SectionKind::parse(&entry.name)?;
            if unhex32_lower(&entry.sha256).is_none() {
                return damaged(format!(
                    "gives section {} a sha256 that is not 64 hex digits",
                    entry.name
                ));
            }
            if let SectionKind::Content(sha) = kind {
                if entry.sha256 != hex(&sha) {
                    return damaged(format!(
                        "gives section {} another sha256 than its name",
                        entry.name
                    ));
                }
            }
            let small = matches!(kind, SectionKind::State | SectionKind::Proof);
            if small && entry.size > MAX_SMALL {
                return damaged(format!(
                    "gives section {} {} bytes; it is at most {MAX_SMALL}",
                    entry.name, entry.size
                ));
            }
            let in_order = match (last, kind) {
                (None, k) => k == SectionKind::State,
                (Some(SectionKind::Content(a)), SectionKind::Content(b)) => a < b,
                (Some(a), b) => a.rank() < b.rank() && (b.rank() != 2 || a.rank() == 1),
            };
            if !in_order {
                return damaged(format!(
                    "names section {} out of order or twice (the order is state.json, \
                     proof.json, events.jsonl, transcript.jsonl, then contents by digest)",
                    entry.name
                ));
            }
            last = Some(kind);
            kinds.push(kind);
        }
        let has = |k: SectionKind| kinds.contains(&k);
        if !(has(SectionKind::State) && has(SectionKind::Proof) && has(SectionKind::Events)) {
            return damaged("lacks state.json, proof.json or events.jsonl".into());
        }
        Ok(kinds)
    }

    /// The bytes the sections and their framing take after the manifest line.
    pub fn body_len(&self) -> Option<u64> {
        self.sections.iter().try_fold(0u64, |sum, e| {
            let framing = format!("section {} {}\n", e.name, e.size).len() as u64 + 1;
            sum.checked_add(e.size)?.checked_add(framing)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_never_a_section_name() {
        for name in [
            "../state.json",
            "/etc/passwd",
            "content/../../x",
            "content/ABCDEF",
            "transcripts/x.jsonl",
        ] {
            assert!(SectionKind::parse(name).is_err(), "{name}");
        }
        let sha = [7u8; 32];
        let name = SectionKind::Content(sha).name();
        assert_eq!(
            SectionKind::parse(&name).ok(),
            Some(SectionKind::Content(sha))
        );
    }
}
