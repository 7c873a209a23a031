//! The report file protocol: how an agent reports artifacts (docs/execution.md).
//!
//! Every execution of the command harness and its presets gets `RUNLEDGER_REPORT`, a file of
//! its own (in the run's private agent files, bound into the sandbox read-write) to which the
//! agent appends one JSON object per line: a pull request, a file or a screenshot of its
//! workspace, or a plan. This module reads what was appended since the last look (complete
//! lines only: a partial last line waits for its newline, except at the execution's end),
//! validates each line, copies the bytes a line names into the content store, and hands back
//! the artifacts to record and, for every line it refuses, the reason. A refused line is never
//! fatal; it is noted in the transcript and nothing is recorded for it.
//!
//! Every string of a line (keys included) is redacted with the execution's `Redactor` as soon
//! as the line is parsed, before it is validated or looked at: a field added to `Line` later
//! is redacted without anyone remembering to. A path that names a secret is then looked for
//! under its redacted name, and refused when no such file exists.
//!
//! Files are opened beneath the workspace with `openat2(RESOLVE_BENEATH)`: a path with `..`
//! or a symbolic link that leaves the workspace is refused by the kernel, so no check can be
//! raced by an agent that swaps a link between a check and the open. Everything here is
//! blocking file I/O: callers run `Reports::poll` off the async executor.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

use super::safe_fs::{self, Dir, Links, Owner};
use super::transcript::Redactor;
use runledger_config::ArtifactLimits;
use runledger_domain::{Artifact, ArtifactKind, ReportedArtifact, MAX_ARTIFACTS};
use runledger_store::content::{self, ContentStore};

/// The variable that names the report file.
pub const VAR: &str = "RUNLEDGER_REPORT";

/// How often the file is looked at while the agent runs.
pub const POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// Most bytes of a pull request's URL.
const URL_BYTES: usize = 2048;
/// Most bytes of a branch name.
const BRANCH_BYTES: usize = 256;
/// Most bytes of a title.
const TITLE_BYTES: usize = 1024;
/// Most bytes of a description.
const DESCRIPTION_BYTES: usize = 4096;
/// Most bytes of a reported path.
const PATH_BYTES: usize = 4096;
/// Bytes read from the report file at a time.
const CHUNK: usize = 64 * 1024;
/// Refused lines after which an execution's report file is no longer read: what one agent can
/// make the server parse, note and hold is bounded whatever it writes.
pub const MAX_REFUSED: usize = 1000;

/// One line of the report file.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    PullRequest {
        url: String,
        branch: String,
        title: Option<String>,
    },
    File {
        path: String,
        description: Option<String>,
    },
    Plan {
        title: Option<String>,
        markdown: String,
    },
    Screenshot {
        path: String,
        description: Option<String>,
    },
}

/// What became of one line: an artifact to record, or why the line was refused (the text
/// names the line's number).
pub type Outcome = Result<Artifact, String>;

/// The report file of one execution and where reading it has got to.
pub struct Reports {
    path: PathBuf,
    workspace: PathBuf,
    limits: ArtifactLimits,
    content: ContentStore,
    /// Bytes of the file read so far.
    offset: u64,
    /// Lines ended so far (the next line's number is this plus one).
    lines: u64,
    /// The start of the line not yet ended.
    carry: Vec<u8>,
    /// The line not yet ended is longer than the limit: its bytes are dropped until its end.
    overlong: bool,
    /// Artifacts the run holds, the ones recorded before this execution included.
    count: usize,
    /// Bytes of the run's artifacts.
    total: u64,
    /// Lines refused so far; at `MAX_REFUSED` the file is closed for good.
    refused: usize,
    closed: bool,
    /// Applied to every string of a line before anything else (see the module's comment).
    redactor: Redactor,
}

impl Reports {
    /// Creates (empty) the report file at `path` and the state for reading it. `earlier` are
    /// the artifacts the run holds already: they count towards the run's limits.
    pub fn create(
        path: PathBuf,
        workspace: PathBuf,
        limits: ArtifactLimits,
        content: ContentStore,
        earlier: &[ReportedArtifact],
        owner: Option<Owner>,
    ) -> Result<Reports, safe_fs::Error> {
        // Private to the agent, and made new: whatever was at its name is unlinked, never
        // followed or truncated.
        let (dir, name) = dir_and_name(&path)?;
        dir.create_file(name, 0o600, owner)?;
        Ok(Reports {
            path,
            workspace,
            limits,
            content,
            offset: 0,
            lines: 0,
            carry: Vec::new(),
            overlong: false,
            refused: 0,
            closed: false,
            redactor: Redactor::default(),
            count: earlier.len(),
            total: earlier
                .iter()
                .filter_map(|a| a.artifact.kind.content())
                .map(|c| c.size)
                .sum(),
        })
    }

    /// The same reports, with every string of every line redacted by `redactor`.
    pub fn redacting(self, redactor: Redactor) -> Reports {
        Reports { redactor, ..self }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what was appended since the last call and handles every complete line; with
    /// `at_end`, a last line without its newline too (the agent has ended: nothing more will
    /// come). Blocking.
    pub fn poll(&mut self, at_end: bool) -> Vec<Outcome> {
        let mut out = Vec::new();
        if self.closed {
            return out;
        }
        if let Err(e) = self.read(&mut out) {
            out.push(Err(format!("the report file cannot be read: {e}")));
        }
        if at_end && !self.closed && (!self.carry.is_empty() || self.overlong) {
            self.end_line(&mut out);
        }
        out
    }

    fn read(&mut self, out: &mut Vec<Outcome>) -> std::io::Result<()> {
        // Only a regular file, never through a link, never blocking on a FIFO (`safe_fs`).
        let (dir, name) = dir_and_name(&self.path)?;
        let mut file = dir.open_file(Path::new(name), Links::Allowed)?;
        let meta = file.metadata()?;
        if meta.len() < self.offset {
            // Truncated (written with `>` instead of `>>`): read it again from its start.
            out.push(Err(
                "the report file was truncated; it is read again from its start (append to it \
                 with >>)"
                    .into(),
            ));
            self.offset = 0;
            self.carry.clear();
            self.overlong = false;
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.offset += n as u64;
            let mut rest = &buf[..n];
            while let Some(i) = rest.iter().position(|b| *b == b'\n') {
                self.push(&rest[..i]);
                self.end_line(out);
                if self.closed {
                    return Ok(());
                }
                rest = &rest[i + 1..];
            }
            self.push(rest);
        }
    }

    /// Adds bytes to the line not yet ended, dropping them once it is longer than the limit.
    fn push(&mut self, bytes: &[u8]) {
        if self.overlong {
            return;
        }
        if (self.carry.len() + bytes.len()) as u64 > self.limits.line_bytes {
            self.carry = Vec::new();
            self.overlong = true;
        } else {
            self.carry.extend_from_slice(bytes);
        }
    }

    fn end_line(&mut self, out: &mut Vec<Outcome>) {
        self.lines += 1;
        let number = self.lines;
        let line = std::mem::take(&mut self.carry);
        let outcome = if std::mem::take(&mut self.overlong) {
            Err(format!(
                "longer than {} bytes (limits.artifact_report_line_kb)",
                self.limits.line_bytes
            ))
        } else if line.iter().all(u8::is_ascii_whitespace) {
            return;
        } else {
            self.handle(&line)
        };
        match outcome {
            Ok(artifact) => out.push(Ok(artifact)),
            Err(reason) => {
                out.push(Err(format!("report line {number}: {reason}")));
                self.refused += 1;
                if self.refused >= MAX_REFUSED {
                    self.closed = true;
                    self.carry = Vec::new();
                    out.push(Err(format!(
                        "{MAX_REFUSED} lines were refused; the rest of the report file is not read"
                    )));
                }
            }
        }
    }

    /// Validates one line and stores what it names.
    fn handle(&mut self, line: &[u8]) -> Result<Artifact, String> {
        let mut value: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| format!("not a report object: {e}"))?;
        redact_strings(&mut value, &self.redactor);
        let line = Line::deserialize(value).map_err(|e| format!("not a report object: {e}"))?;
        if self.count >= MAX_ARTIFACTS {
            return Err(format!(
                "the run already has {MAX_ARTIFACTS} artifacts, the most one run may hold"
            ));
        }
        let kind = match line {
            Line::PullRequest { url, branch, title } => {
                check_url(&url)?;
                check_text("branch", &branch, BRANCH_BYTES, false)?;
                if branch.chars().any(char::is_whitespace) {
                    return Err("branch: a branch name has no whitespace".into());
                }
                check_optional("title", title.as_deref(), TITLE_BYTES)?;
                ArtifactKind::PullRequest { url, branch, title }
            }
            Line::Plan { title, markdown } => {
                check_optional("title", title.as_deref(), TITLE_BYTES)?;
                if markdown.trim().is_empty() {
                    return Err("markdown: empty".into());
                }
                let size = markdown.len() as u64;
                if size > self.limits.plan_bytes {
                    return Err(format!(
                        "markdown: {size} bytes, more than the limit of {} (limits.artifact_plan_kb)",
                        self.limits.plan_bytes
                    ));
                }
                self.within_total(size)?;
                let content = self
                    .content
                    .put_bytes(markdown.as_bytes(), "text/markdown")
                    .map_err(|e| stored(&e))?;
                ArtifactKind::Plan { title, content }
            }
            Line::File { path, description } => {
                check_optional("description", description.as_deref(), DESCRIPTION_BYTES)?;
                let (relative, file) = self.open(&path, self.limits.file_bytes)?;
                let mime = mime_guess::from_path(&relative)
                    .first_or_octet_stream()
                    .essence_str()
                    .to_string();
                let content =
                    self.store(file, self.limits.file_bytes, &mime, "artifact_file_mb")?;
                ArtifactKind::File {
                    path: relative,
                    description,
                    content,
                }
            }
            Line::Screenshot { path, description } => {
                check_optional("description", description.as_deref(), DESCRIPTION_BYTES)?;
                let limit = self.limits.screenshot_bytes;
                let (relative, mut file) = self.open(&path, limit)?;
                let mut head = [0u8; 16];
                let mut got = 0;
                while got < head.len() {
                    match file.read(&mut head[got..]) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(format!("path: cannot be read: {e}")),
                    }
                }
                let mime = image_type(&head[..got]).ok_or_else(|| {
                    format!("path: {relative:?} is not a PNG, JPEG, GIF or WebP image")
                })?;
                file.seek(SeekFrom::Start(0))
                    .map_err(|e| format!("path: cannot be read: {e}"))?;
                let content = self.store(file, limit, mime, "artifact_screenshot_mb")?;
                ArtifactKind::Screenshot {
                    path: relative,
                    description,
                    content,
                }
            }
        };
        if let Some(c) = kind.content() {
            self.total += c.size;
        }
        self.count += 1;
        Ok(Artifact {
            uid: uuid::Uuid::new_v4().to_string(),
            kind,
        })
    }

    fn within_total(&self, size: u64) -> Result<(), String> {
        if self.total.saturating_add(size) > self.limits.run_total_bytes {
            return Err(format!(
                "the run's artifacts would hold more than {} bytes together \
                 (limits.artifact_run_total_mb)",
                self.limits.run_total_bytes
            ));
        }
        Ok(())
    }

    /// Copies an opened file into the content store, at most `limit` bytes (it may still grow
    /// while it is copied).
    fn store(
        &self,
        file: File,
        limit: u64,
        mime: &str,
        setting: &str,
    ) -> Result<runledger_domain::Content, String> {
        let limit = limit.min(self.limits.run_total_bytes.saturating_sub(self.total));
        self.content
            .put_reader(file, limit, mime)
            .map_err(|e| match e {
                content::Error::TooLarge { limit } => {
                    format!("path: the file grew past {limit} bytes while it was copied (limits.{setting})")
                }
                e => stored(&e),
            })
    }

    /// Opens a reported path beneath the workspace: returns its workspace-relative form, the
    /// open file (a regular file), refused when larger than `limit`.
    fn open(&self, given: &str, limit: u64) -> Result<(String, File), String> {
        if given.is_empty() || given.len() > PATH_BYTES || given.contains('\0') {
            return Err(format!("path: 1 to {PATH_BYTES} bytes without NUL"));
        }
        let relative = beneath(&self.workspace, given)?;
        let file = open_beneath(&self.workspace, &relative)
            .map_err(|reason| format!("path {given:?}: {reason}"))?;
        let meta = file
            .metadata()
            .map_err(|e| format!("path {given:?}: {e}"))?;
        if !meta.is_file() {
            return Err(format!(
                "path {given:?}: not a regular file (a directory, FIFO, socket or device is \
                 never read)"
            ));
        }
        {
            use std::os::unix::fs::MetadataExt;
            // A host file the agent hard-linked into its workspace would be read as root.
            if meta.nlink() > 1 {
                return Err(format!(
                    "path {given:?}: it has other hard links (copy the file instead)"
                ));
            }
        }
        let size = meta.len();
        let setting = if limit == self.limits.screenshot_bytes {
            "artifact_screenshot_mb"
        } else {
            "artifact_file_mb"
        };
        if size > limit {
            return Err(format!(
                "path {given:?}: {size} bytes, more than the limit of {limit} (limits.{setting})"
            ));
        }
        self.within_total(size)?;
        Ok((relative, file))
    }
}

/// Redacts every string in `value`, object keys included, whatever its shape. The recursion is
/// bounded: serde_json refuses a document nested deeper than 128 levels.
fn redact_strings(value: &mut serde_json::Value, redactor: &Redactor) {
    use serde_json::Value;
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(redacted) = redactor.apply(text) {
                *text = redacted;
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| redact_strings(item, redactor)),
        Value::Object(fields) => {
            *fields = std::mem::take(fields)
                .into_iter()
                .map(|(key, mut field)| {
                    redact_strings(&mut field, redactor);
                    (redactor.apply(&key).into_owned(), field)
                })
                .collect();
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn stored(e: &content::Error) -> String {
    tracing::error!(error = %e, "a reported artifact could not be stored");
    format!("cannot be stored: {e}")
}

fn check_text(field: &str, value: &str, max: usize, empty_ok: bool) -> Result<(), String> {
    if !empty_ok && value.trim().is_empty() {
        return Err(format!("{field}: empty"));
    }
    if value.len() > max {
        return Err(format!("{field}: more than {max} bytes"));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(format!("{field}: holds control characters"));
    }
    Ok(())
}

fn check_optional(field: &str, value: Option<&str>, max: usize) -> Result<(), String> {
    value.map_or(Ok(()), |v| check_text(field, v, max, true))
}

fn check_url(url: &str) -> Result<(), String> {
    check_text("url", url, URL_BYTES, false)?;
    let parsed = url::Url::parse(url).map_err(|e| format!("url: not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err("url: only http:// and https:// URLs with a host are taken".into());
    }
    Ok(())
}

/// The workspace-relative form of a reported path (`a/b.txt`): relative paths are taken from
/// the workspace, absolute ones must lie in it; `..` may not climb out of it. Checked on the
/// text alone; the open checks again, with what is on disk (symbolic links).
fn beneath(workspace: &Path, given: &str) -> Result<String, String> {
    let path = Path::new(given);
    let rest = if path.is_absolute() {
        path.strip_prefix(workspace)
            .map_err(|_| format!("path {given:?}: an absolute path outside the workspace"))?
    } else {
        path
    };
    let mut parts: Vec<&str> = Vec::new();
    for component in rest.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(format!("path {given:?}: `..` leaves the workspace"));
                }
            }
            Component::Normal(part) => parts.push(part.to_str().unwrap_or_default()),
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("path {given:?}: not inside the workspace"))
            }
        }
    }
    if parts.is_empty() {
        return Err(format!(
            "path {given:?}: names the workspace itself, not a file"
        ));
    }
    Ok(parts.join("/"))
}

/// Opens `relative` for reading beneath `workspace`, never through a link that leaves it and
/// never blocking (a FIFO opens without a writer, and is then refused as not a file).
fn open_beneath(workspace: &Path, relative: &str) -> Result<File, String> {
    use nix::errno::Errno;
    use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
    let dir = File::open(workspace).map_err(|e| format!("the workspace cannot be opened: {e}"))?;
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    match openat2(&dir, relative, how) {
        Ok(fd) => Ok(File::from(fd)),
        Err(Errno::EXDEV) => Err("resolves outside the workspace (through a symbolic link)".into()),
        Err(Errno::ENOENT) => Err("no such file in the workspace".into()),
        Err(Errno::ENOSYS | Errno::EPERM) => open_checked(workspace, relative),
        Err(e) => Err(format!("cannot be opened: {}", e.desc())),
    }
}

/// `open_beneath` on kernels before 5.6 (no `openat2`) or where a seccomp filter refuses it:
/// one component at a time without following any link (`safe_fs`), so a link inside the
/// workspace is refused there too.
fn open_checked(workspace: &Path, relative: &str) -> Result<File, String> {
    let dir = Dir::open(workspace).map_err(|e| format!("the workspace cannot be opened: {e}"))?;
    dir.open_file(Path::new(relative), Links::Allowed)
        .map_err(|e| match e {
            safe_fs::Error::Refused { why, .. } => why.to_string(),
            safe_fs::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                "no such file in the workspace".to_string()
            }
            safe_fs::Error::Io { source, .. } => format!("cannot be opened: {source}"),
        })
}

/// The directory (the run's agent files, the server's) and the name of the report file.
fn dir_and_name(path: &Path) -> Result<(Dir, &str), safe_fs::Error> {
    match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(dir), Some(name)) => Ok((Dir::open(dir)?, name)),
        _ => Err(safe_fs::Error::Refused {
            path: path.to_path_buf(),
            why: "it is not a file in a directory",
        }),
    }
}

/// The image type the first bytes of a file announce (PNG, JPEG, GIF, WebP).
fn image_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
        reports: Reports,
    }

    fn fixture(limits: ArtifactLimits) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(&workspace).expect("ws");
        let content = ContentStore::open(&dir.path().join("data")).expect("content");
        let reports = Reports::create(
            dir.path().join("report.jsonl"),
            workspace,
            limits,
            content,
            &[],
            None,
        )
        .expect("create");
        Fixture { dir, reports }
    }

    impl Fixture {
        fn ws(&self) -> PathBuf {
            self.dir.path().join("ws")
        }
        fn append(&self, text: &str) {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(self.reports.path())
                .expect("open");
            f.write_all(text.as_bytes()).expect("write");
        }
    }

    #[test]
    fn complete_lines_are_taken_and_a_partial_one_waits_for_its_newline() {
        let mut f = fixture(ArtifactLimits::default());
        f.append(r#"{"type":"pull_request","url":"https://x.test/pr/1","branch":"b"}"#);
        assert!(f.reports.poll(false).is_empty(), "no newline yet");
        f.append("\n{\"type\":\"plan\",\"title\":\"t\",\"markdown\":\"# p\"}\n");
        let out = f.reports.poll(false);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out.iter().all(Result::is_ok), "{out:?}");
        assert!(f.reports.poll(true).is_empty());
    }

    #[test]
    fn paths_that_leave_the_workspace_are_refused() {
        let mut f = fixture(ArtifactLimits::default());
        let outside = f.dir.path().join("secret");
        std::fs::write(&outside, b"s").expect("write");
        std::os::unix::fs::symlink(&outside, f.ws().join("link")).expect("link");
        std::fs::create_dir(f.ws().join("d")).expect("dir");
        std::os::unix::fs::symlink("../secret", f.ws().join("d/up")).expect("link");
        std::fs::write(f.ws().join("ok.txt"), b"fine").expect("write");
        std::os::unix::fs::symlink("ok.txt", f.ws().join("inside")).expect("link");
        let lines = [
            "../secret".to_string(),
            outside.display().to_string(),
            "link".into(),
            "d/up".into(),
            "d".into(),
            "d/../../secret".into(),
        ];
        for path in &lines {
            f.append(&format!("{{\"type\":\"file\",\"path\":{path:?}}}\n"));
        }
        f.append("{\"type\":\"file\",\"path\":\"d/../inside\"}\n");
        let abs = f.ws().join("ok.txt");
        f.append(&format!(
            "{{\"type\":\"file\",\"path\":{:?}}}\n",
            abs.display().to_string()
        ));
        let out = f.reports.poll(true);
        assert_eq!(out.len(), lines.len() + 2);
        for (i, o) in out[..lines.len()].iter().enumerate() {
            assert!(o.is_err(), "{} was taken: {o:?}", lines[i]);
        }
        for o in &out[lines.len()..] {
            match o {
                Ok(Artifact {
                    kind: ArtifactKind::File { path, content, .. },
                    ..
                }) => {
                    let mime = match path.as_str() {
                        "inside" => "application/octet-stream",
                        "ok.txt" => "text/plain",
                        other => panic!("{other}"),
                    };
                    assert_eq!(content.mime_type, mime);
                    assert_eq!(content.size, 4);
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn limits_and_bad_lines_are_named() {
        let limits = ArtifactLimits {
            file_bytes: 10,
            line_bytes: 100,
            ..ArtifactLimits::default()
        };
        let mut f = fixture(limits);
        std::fs::write(f.ws().join("big"), [0u8; 11]).expect("write");
        std::fs::write(f.ws().join("not.png"), b"hello there, no image").expect("write");
        f.append("{\"type\":\"file\",\"path\":\"big\"}\n");
        f.append("{\"type\":\"screenshot\",\"path\":\"not.png\"}\n");
        f.append("not json\n");
        f.append(&format!("{}\n", "x".repeat(500)));
        f.append("{\"type\":\"video\"}\n");
        f.append("{\"type\":\"pull_request\",\"url\":\"file:///etc/passwd\",\"branch\":\"b\"}\n");
        f.append("\n");
        let out = f.reports.poll(false);
        let reasons: Vec<String> = out.into_iter().map(|o| o.expect_err("refused")).collect();
        assert_eq!(reasons.len(), 6, "{reasons:?}");
        assert!(
            reasons[0].starts_with("report line 1:") && reasons[0].contains("artifact_file_mb")
        );
        assert!(reasons[1].contains("not a PNG"), "{}", reasons[1]);
        assert!(reasons[3].contains("longer than 100"), "{}", reasons[3]);
        assert!(reasons[4].contains("unknown variant"), "{}", reasons[4]);
        assert!(reasons[5].contains("http"), "{}", reasons[5]);
    }

    #[test]
    fn after_too_many_refused_lines_the_file_is_not_read_any_more() {
        let mut f = fixture(ArtifactLimits::default());
        f.append(&"junk\n".repeat(MAX_REFUSED + 100));
        let out = f.reports.poll(false);
        assert_eq!(out.len(), MAX_REFUSED + 1);
        assert!(out[MAX_REFUSED]
            .as_ref()
            .is_err_and(|r| r.contains("is not read")));
        f.append("{\"type\":\"pull_request\",\"url\":\"https://x.test/1\",\"branch\":\"b\"}\n");
        assert!(f.reports.poll(true).is_empty());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let mut f = fixture(ArtifactLimits::default());
        nix::unistd::mkfifo(&f.ws().join("pipe"), nix::sys::stat::Mode::S_IRWXU).expect("fifo");
        f.append("{\"type\":\"file\",\"path\":\"pipe\"}\n");
        let out = f.reports.poll(false);
        assert!(
            out[0]
                .as_ref()
                .is_err_and(|r| r.contains("not a regular file")),
            "{out:?}"
        );
    }

    #[test]
    fn every_string_of_every_line_is_redacted_before_it_is_checked() {
        const SECRET: &str = "s3cr3t-value-42";
        let mut f = fixture(ArtifactLimits::default());
        f.reports = f
            .reports
            .redacting(Redactor::new([("KEY", SECRET), ("OTHER", "other-token-9")]));
        std::fs::write(f.ws().join("notes.txt"), b"n").expect("write");
        std::fs::write(f.ws().join("shot.png"), b"\x89PNG\r\n\x1a\nrest").expect("write");
        std::fs::write(f.ws().join(format!("{SECRET}.txt")), b"n").expect("write");
        let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, SECRET);
        let lines = [
            serde_json::json!({"type": "pull_request", "url": format!("https://x.test/{SECRET}"),
                "branch": format!("b-{encoded}"), "title": format!("t {SECRET}"),
                SECRET: SECRET}),
            serde_json::json!({"type": "plan", "title": format!("p {SECRET}"),
                "markdown": format!("# {SECRET}\nother-token-9")}),
            serde_json::json!({"type": "file", "path": "notes.txt",
                "description": format!("d {SECRET}")}),
            serde_json::json!({"type": "screenshot", "path": "shot.png",
                "description": format!("d {SECRET}")}),
            // The file exists, but only under the secret's name: it is looked for redacted.
            serde_json::json!({"type": "file", "path": format!("{SECRET}.txt")}),
            serde_json::json!({"type": SECRET}),
        ];
        for line in &lines {
            f.append(&format!("{line}\n"));
        }
        let out = f.reports.poll(true);
        assert_eq!(out.len(), lines.len(), "{out:?}");
        let shown = format!("{out:?}");
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(!shown.contains(&encoded), "{shown}");
        let kinds: Vec<ArtifactKind> = out[..4]
            .iter()
            .map(|o| o.clone().expect("taken").kind)
            .collect();
        match &kinds[0] {
            ArtifactKind::PullRequest { url, branch, title } => {
                assert_eq!(url, "https://x.test/[secret:KEY]");
                assert_eq!(branch, "b-[secret:KEY]");
                assert_eq!(title.as_deref(), Some("t [secret:KEY]"));
            }
            other => panic!("{other:?}"),
        }
        match &kinds[1] {
            ArtifactKind::Plan { title, content } => {
                assert_eq!(title.as_deref(), Some("p [secret:KEY]"));
                let stored = f.reports.content.read(content).expect("stored");
                assert_eq!(stored, b"# [secret:KEY]\n[secret:OTHER]");
            }
            other => panic!("{other:?}"),
        }
        for kind in &kinds[2..4] {
            let (ArtifactKind::File { description, .. }
            | ArtifactKind::Screenshot { description, .. }) = kind
            else {
                panic!("{kind:?}")
            };
            assert_eq!(description.as_deref(), Some("d [secret:KEY]"));
        }
        assert!(
            out[4]
                .as_ref()
                .is_err_and(|r| r.contains("[secret:KEY].txt")),
            "{:?}",
            out[4]
        );
        assert!(out[5].is_err());
    }

    #[test]
    fn limits_are_checked_on_the_redacted_text() {
        let secret = "x".repeat(200);
        let mut f = fixture(ArtifactLimits::default());
        f.reports = f
            .reports
            .redacting(Redactor::new([("LONG", secret.as_str())]));
        // Over the branch limit as written, within it once redacted.
        let branch = secret.repeat(2);
        assert!(branch.len() > BRANCH_BYTES);
        f.append(&format!(
            "{}\n",
            serde_json::json!({"type": "pull_request", "url": "https://x.test/1", "branch": branch})
        ));
        let out = f.reports.poll(true);
        match &out[..] {
            [Ok(Artifact {
                kind: ArtifactKind::PullRequest { branch, .. },
                ..
            })] => assert_eq!(branch, "[secret:LONG][secret:LONG]"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hard_linked_file_is_refused() {
        let mut f = fixture(ArtifactLimits::default());
        let outside = f.dir.path().join("host-file");
        std::fs::write(&outside, b"host").expect("write");
        std::fs::hard_link(&outside, f.ws().join("linked")).expect("link");
        f.append("{\"type\":\"file\",\"path\":\"linked\"}\n");
        let out = f.reports.poll(false);
        assert!(
            out[0].as_ref().is_err_and(|r| r.contains("hard links")),
            "{out:?}"
        );
    }

    #[test]
    fn a_report_file_replaced_by_a_link_or_a_fifo_is_not_read() {
        let mut f = fixture(ArtifactLimits::default());
        let outside = f.dir.path().join("host.jsonl");
        std::fs::write(
            &outside,
            "{\"type\":\"plan\",\"title\":\"t\",\"markdown\":\"m\"}\n",
        )
        .expect("write");
        std::fs::remove_file(f.reports.path()).expect("remove");
        std::os::unix::fs::symlink(&outside, f.reports.path()).expect("link");
        let out = f.reports.poll(true);
        assert!(
            out.len() == 1 && out[0].as_ref().is_err_and(|r| r.contains("symbolic link")),
            "{out:?}"
        );
        std::fs::remove_file(f.reports.path()).expect("remove");
        nix::unistd::mkfifo(f.reports.path(), nix::sys::stat::Mode::S_IRWXU).expect("fifo");
        let out = f.reports.poll(true);
        assert!(
            out.len() == 1 && out[0].as_ref().is_err_and(|r| r.contains("FIFO")),
            "{out:?}"
        );
    }

    #[test]
    fn images_are_told_by_their_first_bytes() {
        assert_eq!(image_type(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(image_type(b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(image_type(b"GIF89a.."), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_type(b"<svg"), None);
    }
}
