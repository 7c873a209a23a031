//! Transcripts: what an agent printed and was told, stored beside the event log as one
//! JSON-lines file per run (`<data_dir>/transcripts/<run_id>.jsonl`). Not events: output can be
//! large and is not state, so it never slows or bloats the log. Reads are by byte offset and
//! bounded in size, so serving the transcript of an agent that printed gigabytes costs no more
//! memory than serving a short one.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use runledger_base::notify::{Feed, Follower, Writing};
use runledger_domain::{RunId, Timestamp};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub at: Timestamp,
    pub execution: u32,
    /// `stdout`, `stderr` (of the agent or a setup command), `system` (what the harness did)
    /// or `followup`.
    pub stream: String,
    pub text: String,
    /// The last line of `text` goes on in the next entry of the same stream and execution
    /// (`exec/lines.rs`). Written only when true, so entries of older transcripts read as
    /// whole lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continued: bool,
}

/// A slice of a transcript and where the next one starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    pub entries: Vec<(u64, Entry)>,
    /// Byte offset after the last entry read; pass it back to continue.
    pub next_offset: u64,
    /// Whether the file holds more after `next_offset` (right now).
    pub more: bool,
}

/// Complete lines of a transcript as stored, unparsed (for the SSE stream, which splices them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSlice {
    pub bytes: Vec<u8>,
    /// Each complete line's byte offset in the file and its range in `bytes`, without the
    /// newline.
    pub lines: Vec<(u64, std::ops::Range<usize>)>,
    /// Byte offset after the last complete line (or after bytes skipped as damaged).
    pub next_offset: u64,
}

/// The longest line a raw read waits for. No entry the server writes comes near it (a
/// follow-up of 64 KiB of control characters escapes to 384 KiB); a longer run of bytes
/// without a newline is damage, skipped so that a reader never stalls on it.
pub const LONGEST_LINE: u64 = 8 << 20;

/// Says whether appends must stop: the data directory's filesystem is low on space (or the
/// store failed), and agents' output must not eat the room kept for recording how runs end.
pub type Gate = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

#[derive(Clone)]
pub struct Transcripts {
    dir: PathBuf,
    gate: Option<Gate>,
    /// The size of a transcript after which output is dropped (`server.transcript_max_mb`).
    max_bytes: u64,
    /// Who writes and who follows each run's transcript (shared by every clone).
    feed: std::sync::Arc<Feed<RunId>>,
}

/// An open transcript, appended to by one execution.
///
/// Past the transcript's size cap, entries are dropped (counted, not written) and the append
/// succeeds: the agent keeps running. When the writer is dropped, at the end of the execution,
/// one `system` entry says how much was dropped; it is the only entry written past the cap.
pub struct Writer {
    file: File,
    redactor: Redactor,
    gate: Option<Gate>,
    /// The file's size: where it was opened, plus every entry written since.
    size: u64,
    max_bytes: u64,
    /// Bytes of entries dropped past the cap, and how many.
    dropped: u64,
    dropped_entries: u64,
    /// The execution of the last entry dropped (the closing note's).
    execution: u32,
    /// Tells followers of each write; dropped after the closing note, so a follower that
    /// sees no writer has every entry in the file.
    writing: Writing<RunId>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.dropped == 0 {
            return;
        }
        let note = Entry {
            at: runledger_base::clock::now(),
            execution: self.execution,
            stream: "system".into(),
            text: format!(
                "output dropped: the transcript reached its cap of {} bytes \
                 (server.transcript_max_mb), and {} more bytes in {} entries were not recorded",
                self.max_bytes, self.dropped, self.dropped_entries
            ),
            continued: false,
        };
        let written = serde_json::to_vec(&note)
            .map_err(std::io::Error::other)
            .and_then(|mut line| {
                line.push(b'\n');
                self.file.write_all(&line)
            });
        if let Err(e) = written {
            tracing::warn!(error = %e, "cannot record how much output was dropped");
        }
        // `writing` is dropped after this body: the note is in the file by then.
    }
}

/// Replaces the values of an execution's secrets with `[secret:NAME]`. Applied to every entry
/// before it is written, so no reader of the transcript (the API, the session page, an export)
/// can show a value an agent printed; applied as well to everything else an agent reports
/// (report lines, the status messages, session ids and model names taken from a CLI's output).
/// One pass over the text, leftmost-longest: a secret that contains another is replaced whole,
/// and no replacement is rewritten by a later secret.
///
/// Each value is looked for as it is, as JSON writes it inside a string (quotes, backslashes
/// and control characters escaped), and in the encodings an agent is most likely to print it
/// in: base64 (standard and URL-safe alphabets, padded or not) and hex (lower and upper case),
/// of the value alone. An encoding of a value shorter than `ENCODED_MIN_BYTES` is not looked
/// for: four hex digits or three base64 letters occur everywhere in ordinary output. Empty
/// values are never looked for.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// `None` when the execution has no secrets.
    matcher: Option<std::sync::Arc<(aho_corasick::AhoCorasick, Vec<String>)>>,
    /// The length in bytes of the longest pattern (a value or one of its encodings).
    longest: usize,
}

/// The shortest value whose base64 and hex forms are redacted too.
pub const ENCODED_MIN_BYTES: usize = 8;

/// The forms of `value` that are redacted: itself, as it stands inside a JSON string (a
/// preset CLI's output lines are JSON), then its base64 and hex encodings (once each: a value
/// without `+` or `/` in its base64 has one form for both alphabets).
fn forms(value: &str) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use base64::Engine;
    let mut out = vec![value.to_string()];
    let quoted = serde_json::Value::from(value).to_string();
    let in_json = quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(value);
    if in_json != value {
        out.push(in_json.to_string());
    }
    if value.len() >= ENCODED_MIN_BYTES {
        let bytes = value.as_bytes();
        let lower: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let upper = lower.to_ascii_uppercase();
        for form in [
            STANDARD.encode(bytes),
            STANDARD_NO_PAD.encode(bytes),
            URL_SAFE.encode(bytes),
            URL_SAFE_NO_PAD.encode(bytes),
            lower,
            upper,
        ] {
            if !out.contains(&form) {
                out.push(form);
            }
        }
    }
    out
}

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Redactor {
        let (patterns, replacements): (Vec<String>, Vec<String>) = secrets
            .into_iter()
            .filter(|(_, value)| !value.is_empty())
            .flat_map(|(name, value)| {
                let replacement = format!("[secret:{name}]");
                forms(value)
                    .into_iter()
                    .map(move |form| (form, replacement.clone()))
            })
            .unzip();
        if patterns.is_empty() {
            return Redactor::default();
        }
        let longest = patterns.iter().map(String::len).max().unwrap_or(0);
        let matcher = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(&patterns);
        match matcher {
            Ok(matcher) => Redactor {
                matcher: Some(std::sync::Arc::new((matcher, replacements))),
                longest,
            },
            // Only a pattern set too large for the automaton fails to build; values are
            // bounded by the secrets an operator configures, so this is not reached in
            // practice, and failing closed would stop every run.
            Err(e) => {
                tracing::error!(error = %e, "cannot build the secret redactor");
                Redactor::default()
            }
        }
    }

    /// How many bytes at the end of a text that goes on in the next entry can hold the start
    /// of a value not yet complete: one less than the longest pattern (0 without secrets).
    pub fn window(&self) -> usize {
        self.longest.saturating_sub(1)
    }

    pub fn apply<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        let Some(matcher) = &self.matcher else {
            return std::borrow::Cow::Borrowed(text);
        };
        let (automaton, replacements) = &**matcher;
        if !automaton.is_match(text) {
            return std::borrow::Cow::Borrowed(text);
        }
        std::borrow::Cow::Owned(automaton.replace_all(text, replacements))
    }

    /// `apply` on bytes that need not be UTF-8 (a diff of files in any encoding): the same
    /// patterns, replaced where they occur, every other byte left as it is.
    pub fn apply_bytes<'t>(&self, bytes: &'t [u8]) -> std::borrow::Cow<'t, [u8]> {
        let Some(matcher) = &self.matcher else {
            return std::borrow::Cow::Borrowed(bytes);
        };
        let (automaton, replacements) = &**matcher;
        if !automaton.is_match(bytes) {
            return std::borrow::Cow::Borrowed(bytes);
        }
        std::borrow::Cow::Owned(automaton.replace_all_bytes(bytes, replacements))
    }
}

impl Writer {
    /// The same transcript, with `redactor` applied to every entry written from now on.
    pub fn redacting(mut self, redactor: Redactor) -> Writer {
        self.redactor = redactor;
        self
    }

    /// See `Redactor::window`.
    pub fn redaction_window(&self) -> usize {
        self.redactor.window()
    }

    /// What this transcript redacts with, for text kept elsewhere (a stderr tail).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Appends one entry. Each entry is written whole with one `write`, so readers never see
    /// half an entry except at the very end of a file being written. While the gate is closed,
    /// nothing is written and the error is the one a full disk gives (`StorageFull`), so the
    /// execution ends the same way.
    pub fn append(&mut self, entry: &Entry) -> std::io::Result<()> {
        if self.gate.as_ref().is_some_and(|closed| closed()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "the data directory's filesystem is (almost) full; output is no longer recorded",
            ));
        }
        let redacted;
        let entry = match self.redactor.apply(&entry.text) {
            std::borrow::Cow::Borrowed(_) => entry,
            std::borrow::Cow::Owned(text) => {
                redacted = Entry {
                    text,
                    ..entry.clone()
                };
                &redacted
            }
        };
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let len = line.len() as u64;
        if self.dropped > 0 || self.size.saturating_add(len) > self.max_bytes {
            self.dropped = self.dropped.saturating_add(len);
            self.dropped_entries += 1;
            self.execution = entry.execution;
            return Ok(());
        }
        self.file.write_all(&line)?;
        self.size += len;
        self.writing.wrote();
        Ok(())
    }
}

impl Transcripts {
    pub fn open(data_dir: &std::path::Path) -> std::io::Result<Transcripts> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = data_dir.join("transcripts");
        // Transcripts can hold secrets: readable by this user only.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        Ok(Transcripts {
            dir,
            gate: None,
            max_bytes: u64::MAX,
            feed: std::sync::Arc::new(Feed::default()),
        })
    }

    /// Transcripts whose output past `max_bytes` is dropped (see `Writer`).
    pub fn with_cap(self, max_bytes: u64) -> Transcripts {
        Transcripts { max_bytes, ..self }
    }

    /// Transcripts whose appends fail while `gate` says so.
    pub fn with_gate(self, gate: Gate) -> Transcripts {
        Transcripts {
            gate: Some(gate),
            ..self
        }
    }

    fn path(&self, id: RunId) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    pub fn writer(&self, id: RunId) -> std::io::Result<Writer> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .mode(0o600)
            .open(self.path(id))?;
        // A line cut short by a crash is ended here, so it is skipped as one damaged entry
        // instead of swallowing the next one (or stalling readers at a line that never ends).
        let len = file.metadata()?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        let size = file.metadata()?.len();
        Ok(Writer {
            file,
            redactor: Redactor::default(),
            gate: self.gate.clone(),
            size,
            max_bytes: self.max_bytes,
            dropped: 0,
            dropped_entries: 0,
            execution: 0,
            writing: self.feed.writing(id),
        })
    }

    /// Appends one entry (for occasional writers; executions keep a `Writer`). Not capped:
    /// these are the harness's own notes and follow-up messages, bounded by the requests that
    /// make them, and a capped transcript must still show what it was told.
    pub fn append(&self, id: RunId, entry: &Entry) -> std::io::Result<()> {
        let mut writer = self.writer(id)?;
        writer.max_bytes = u64::MAX;
        writer.append(entry)
    }

    /// Up to `limit` entries starting at byte `offset` (0: the beginning), reading at most
    /// `max_bytes` of the file.
    pub fn read(
        &self,
        id: RunId,
        offset: u64,
        limit: usize,
        max_bytes: u64,
    ) -> std::io::Result<Slice> {
        let mut file = match File::open(self.path(id)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Slice {
                    entries: Vec::new(),
                    next_offset: 0,
                    more: false,
                })
            }
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        let offset = offset.min(len);
        file.seek(SeekFrom::Start(offset))?;
        let mut reader = BufReader::new(file.take(max_bytes));
        let mut entries = Vec::new();
        let mut position = offset;
        let mut line = Vec::new();
        while entries.len() < limit {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            // Stop at the end, or at a line still being written (or cut by the byte budget).
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            // A line damaged by a crash is skipped, not fatal to the whole transcript.
            if let Ok(entry) = serde_json::from_slice::<Entry>(&line) {
                entries.push((position, entry));
            }
            position += n as u64;
        }
        Ok(Slice {
            entries,
            next_offset: position,
            more: position < len,
        })
    }

    /// The complete lines from byte `offset`, about `max_bytes` of them but at least one
    /// whole line when there is one (up to `LONGEST_LINE`), unparsed. A line still being
    /// written at the end of the file is left for the next read.
    pub fn read_raw(&self, id: RunId, offset: u64, max_bytes: u64) -> std::io::Result<RawSlice> {
        let nothing = RawSlice {
            bytes: Vec::new(),
            lines: Vec::new(),
            next_offset: offset,
        };
        let mut file = match File::open(self.path(id)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(nothing),
            Err(e) => return Err(e),
        };
        let available = file.metadata()?.len().saturating_sub(offset);
        if available == 0 {
            return Ok(nothing);
        }
        file.seek(SeekFrom::Start(offset))?;
        let mut bytes = Vec::new();
        (&mut file)
            .take(max_bytes.min(available))
            .read_to_end(&mut bytes)?;
        if !bytes.contains(&b'\n') && (bytes.len() as u64) < available.min(LONGEST_LINE) {
            // One line longer than a batch: read on to its end.
            let more = available.min(LONGEST_LINE) - bytes.len() as u64;
            (&mut file).take(more).read_to_end(&mut bytes)?;
        }
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(n) = bytes[start..].iter().position(|&b| b == b'\n') {
            lines.push((offset + start as u64, start..start + n));
            start += n + 1;
        }
        let next_offset = if start == 0 && bytes.len() as u64 >= LONGEST_LINE {
            tracing::warn!(run_id = %id, offset, "skipping {LONGEST_LINE} bytes of the transcript without a line end");
            offset + bytes.len() as u64
        } else {
            offset + start as u64
        };
        bytes.truncate(start);
        Ok(RawSlice {
            bytes,
            lines,
            next_offset,
        })
    }

    /// Follows the run's transcript: a notice after each write and when a writer closes.
    pub fn follow(&self, id: RunId) -> Follower<RunId> {
        self.feed.follow(id)
    }

    /// The entries in the last `max_bytes` of the transcript (for the session page).
    pub fn tail(&self, id: RunId, max_bytes: u64) -> std::io::Result<Slice> {
        let len = match std::fs::metadata(self.path(id)) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        if len <= max_bytes {
            return self.read(id, 0, usize::MAX, max_bytes);
        }
        // Start at the first whole line inside the window.
        let mut file = File::open(self.path(id))?;
        let start = len - max_bytes;
        file.seek(SeekFrom::Start(start))?;
        let mut skipped = Vec::new();
        let n = BufReader::new(file.take(max_bytes)).read_until(b'\n', &mut skipped)?;
        self.read(id, start + n as u64, usize::MAX, max_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_replaces_every_occurrence_and_the_longest_secret_first() {
        let r = Redactor::new([("SHORT", "abc"), ("LONG", "abcdef"), ("EMPTY", "")]);
        assert_eq!(
            r.apply("x abcdef y abc z abcabc"),
            "x [secret:LONG] y [secret:SHORT] z [secret:SHORT][secret:SHORT]"
        );
        assert!(matches!(r.apply("nothing"), std::borrow::Cow::Borrowed(_)));
        // A value that occurs in another secret's replacement does not rewrite it.
        let r = Redactor::new([("TOKEN", "tok-123456"), ("S", "secret")]);
        assert_eq!(r.apply("tok-123456 secret"), "[secret:TOKEN] [secret:S]");
        assert_eq!(Redactor::new([]).apply("x"), "x");
        assert_eq!(Redactor::new([]).window(), 0);
        // The longest pattern is the value's hex form.
        assert_eq!(r.window(), 2 * "tok-123456".len() - 1);
    }

    #[test]
    fn base64_and_hex_forms_of_a_value_are_redacted_too() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};
        use base64::Engine;
        // Bytes whose base64 holds `+` and `/` (standard) or `-` and `_` (URL-safe), and
        // needs padding.
        let value = "k>?~\u{fb}\u{ff}-secret-value!";
        let r = Redactor::new([("KEY", value)]);
        let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
        let std = STANDARD.encode(value);
        let url = URL_SAFE_NO_PAD.encode(value);
        assert!(std.contains(['+', '/']) && std.ends_with('='), "{std}");
        assert!(url.contains(['-', '_']), "{url}");
        for form in [
            value.to_string(),
            std.clone(),
            std.trim_end_matches('=').to_string(),
            URL_SAFE.encode(value),
            url,
            hex.clone(),
            hex.to_ascii_uppercase(),
        ] {
            assert_eq!(
                r.apply(&format!("a {form} b")),
                "a [secret:KEY] b",
                "{form}"
            );
        }
        // Padding is taken with the value, not left behind.
        assert_eq!(r.apply(&format!("{std}.")), "[secret:KEY].");
        // A value with a quote, as a CLI's JSON line holds it.
        let quoted = Redactor::new([("Q", "say \"hi\" \\ now")]);
        assert_eq!(
            quoted.apply(r#"{"text":"say \"hi\" \\ now"}"#),
            r#"{"text":"[secret:Q]"}"#
        );
        // Short values: the value itself only, never its encodings.
        let short = Redactor::new([("PIN", "1234")]);
        assert_eq!(
            short.apply("1234 31323334 MTIzNA"),
            "[secret:PIN] 31323334 MTIzNA"
        );
    }

    #[test]
    fn a_closed_gate_refuses_appends_as_a_full_disk_would() {
        let dir = tempfile::tempdir().expect("tempdir");
        let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gate = closed.clone();
        let t = Transcripts::open(dir.path())
            .expect("open")
            .with_gate(std::sync::Arc::new(move || {
                gate.load(std::sync::atomic::Ordering::Relaxed)
            }));
        let id = RunId::new(Timestamp(1), 1);
        let mut w = t.writer(id).expect("writer");
        w.append(&entry(1)).expect("open gate");
        closed.store(true, std::sync::atomic::Ordering::Relaxed);
        let refused = w.append(&entry(2)).expect_err("closed gate");
        assert_eq!(refused.kind(), std::io::ErrorKind::StorageFull);
        let slice = t.read(id, 0, 10, 1 << 20).expect("read");
        assert_eq!(slice.entries.len(), 1);
    }

    #[test]
    fn output_past_the_cap_is_dropped_with_one_note_of_how_much() {
        let dir = tempfile::tempdir().expect("tempdir");
        let line = serde_json::to_vec(&entry(1)).expect("json").len() as u64 + 1;
        // Room for three entries (and a little), not four.
        let t = Transcripts::open(dir.path())
            .expect("open")
            .with_cap(3 * line + 2);
        let id = RunId(11);
        let mut w = t.writer(id).expect("writer");
        for n in 0..10 {
            // Past the cap the append still succeeds: the agent keeps running.
            w.append(&entry(n)).expect("append");
        }
        let read = |t: &Transcripts| {
            t.read(id, 0, 100, 1 << 20)
                .expect("read")
                .entries
                .into_iter()
                .map(|(_, e)| e)
                .collect::<Vec<_>>()
        };
        // Nothing about the drop until the execution ends.
        assert_eq!(read(&t).len(), 3);
        drop(w);
        let entries = read(&t);
        assert_eq!(entries.len(), 4, "{entries:?}");
        let note = &entries[3];
        assert_eq!(note.stream, "system");
        assert!(
            note.text
                .contains(&format!("{} more bytes in 7 entries", 7 * line)),
            "{}",
            note.text
        );
        // A later execution of the same run starts over the cap: all of it is dropped, with
        // its own note; follow-up messages (occasional appends) are still recorded.
        t.append(id, &entry(20)).expect("append");
        let mut w = t.writer(id).expect("writer");
        w.append(&entry(21)).expect("append");
        drop(w);
        let texts: Vec<_> = read(&t).into_iter().map(|e| e.text).collect();
        assert_eq!(texts.len(), 6, "{texts:?}");
        assert_eq!(texts[4], "line 20");
        assert!(texts[5].contains("1 entries"), "{}", texts[5]);
        // A writer that dropped nothing adds nothing.
        let other = RunId(12);
        drop(t.writer(other).expect("writer"));
        assert!(t
            .read(other, 0, 10, 1 << 20)
            .expect("read")
            .entries
            .is_empty());
    }

    fn entry(n: u32) -> Entry {
        Entry {
            at: Timestamp(u64::from(n)),
            execution: 1,
            stream: "stdout".into(),
            text: format!("line {n}"),
            continued: false,
        }
    }

    #[test]
    fn pages_by_offset_and_tails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = Transcripts::open(dir.path()).expect("open");
        let id = RunId(9);
        assert!(t.read(id, 0, 10, 1 << 20).expect("read").entries.is_empty());
        let mut w = t.writer(id).expect("writer");
        for n in 0..10 {
            w.append(&entry(n)).expect("append");
        }
        let first = t.read(id, 0, 4, 1 << 20).expect("read");
        assert_eq!(first.entries.len(), 4);
        assert!(first.more);
        let rest = t.read(id, first.next_offset, 100, 1 << 20).expect("read");
        assert_eq!(
            rest.entries
                .iter()
                .map(|(_, e)| e.text.clone())
                .collect::<Vec<_>>()[0],
            "line 4"
        );
        assert_eq!(rest.entries.len(), 6);
        assert!(!rest.more);
        let tail = t.tail(id, 60).expect("tail");
        assert!(!tail.entries.is_empty() && tail.entries.len() < 10);
        assert_eq!(
            tail.entries.last().map(|(_, e)| e.text.as_str()),
            Some("line 9")
        );
    }

    #[test]
    fn a_partial_last_line_is_not_read_yet() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = Transcripts::open(dir.path()).expect("open");
        let id = RunId(3);
        t.append(id, &entry(1)).expect("append");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(t.path(id))
            .expect("open");
        f.write_all(b"{\"at\":2,").expect("write");
        let slice = t.read(id, 0, 10, 1 << 20).expect("read");
        assert_eq!(slice.entries.len(), 1);
        assert!(slice.more);
        // The next writer ends the cut line; the damaged entry is skipped, the new one is read.
        t.append(id, &entry(3)).expect("append");
        let slice = t.read(id, 0, 10, 1 << 20).expect("read");
        let texts: Vec<_> = slice.entries.iter().map(|(_, e)| e.text.as_str()).collect();
        assert_eq!(texts, ["line 1", "line 3"]);
        assert!(!slice.more);
    }

    #[test]
    fn raw_reads_give_whole_lines_wait_for_a_line_being_written_and_skip_endless_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = Transcripts::open(dir.path()).expect("open");
        let id = RunId(12);
        let path = t.path(id);
        assert_eq!(t.read_raw(id, 0, 100).expect("no file").next_offset, 0);
        let long = format!("{{\"long\":\"{}\"}}", "x".repeat(300));
        std::fs::write(&path, format!("a\n{long}\nc\npartial")).expect("write");
        // A batch smaller than a line still gives that whole line.
        let first = t.read_raw(id, 0, 4).expect("read");
        assert_eq!(first.lines, vec![(0, 0..1)]);
        assert_eq!(first.next_offset, 2);
        let second = t.read_raw(id, 2, 4).expect("read");
        assert_eq!(second.lines[0], (2, 0..long.len()));
        assert_eq!(&second.bytes[..long.len()], long.as_bytes());
        // The line still being written is left for the next read.
        let rest = t
            .read_raw(id, 2 + long.len() as u64 + 1, 1 << 20)
            .expect("read");
        assert_eq!(rest.lines.len(), 1);
        assert_eq!(&rest.bytes[rest.lines[0].1.clone()], b"c");
        let end = rest.next_offset;
        assert_eq!(second.next_offset, end);
        assert_eq!(t.read_raw(id, end, 1 << 20).expect("read").next_offset, end);
        // More than LONGEST_LINE without a newline is skipped, not waited for.
        std::fs::write(&path, vec![b'z'; LONGEST_LINE as usize + 10]).expect("write");
        let skipped = t.read_raw(id, 0, 1 << 20).expect("read");
        assert!(skipped.lines.is_empty());
        assert_eq!(skipped.next_offset, LONGEST_LINE);
    }
}
