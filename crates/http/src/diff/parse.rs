//! Reads unified git diff text into files and hunks. Pure and forgiving: a line it does not
//! understand is kept as context of the file it is in (or skipped before the first file), so
//! a damaged or hostile diff still shows what it holds and never fails the page.

/// What became of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Added,
    Deleted,
    Modified,
    Renamed,
    Copied,
    /// Only its mode changed (executable bit, or a file becoming a symlink).
    ModeChanged,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Deleted => "deleted",
            Status::Modified => "modified",
            Status::Renamed => "renamed",
            Status::Copied => "copied",
            Status::ModeChanged => "mode changed",
        }
    }
}

/// A line of a hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineKind {
    /// The `@@ -a,b +c,d @@` header of a hunk.
    Hunk,
    Context,
    Added,
    Removed,
    /// `\ No newline at end of file`.
    Note,
}

/// One file of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileDiff<'a> {
    pub(crate) old_path: String,
    pub(crate) new_path: String,
    pub(crate) status: Status,
    pub(crate) old_mode: Option<&'a str>,
    pub(crate) new_mode: Option<&'a str>,
    pub(crate) binary: bool,
    pub(crate) additions: usize,
    pub(crate) deletions: usize,
    /// The hunks' lines, headers included, borrowed from the diff text.
    pub(crate) lines: Vec<(LineKind, &'a str)>,
}

impl FileDiff<'_> {
    /// The path to show: the new one, or the old one of a deleted file.
    pub(crate) fn path(&self) -> &str {
        if self.status == Status::Deleted {
            &self.old_path
        } else {
            &self.new_path
        }
    }
}

/// The files of `diff`, in order.
pub(crate) fn parse(diff: &str) -> Vec<FileDiff<'_>> {
    let mut files: Vec<FileDiff<'_>> = Vec::new();
    // Inside a hunk, `---`/`+++` are removed/added lines, not headers.
    let mut in_hunk = false;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let (old, new) = header_paths(rest);
            files.push(FileDiff {
                old_path: old,
                new_path: new,
                status: Status::Modified,
                old_mode: None,
                new_mode: None,
                binary: false,
                additions: 0,
                deletions: 0,
                lines: Vec::new(),
            });
            in_hunk = false;
            continue;
        }
        let Some(file) = files.last_mut() else {
            continue;
        };
        if line.starts_with("@@") {
            in_hunk = true;
            file.lines.push((LineKind::Hunk, line));
            continue;
        }
        if in_hunk {
            let kind = match line.as_bytes().first() {
                Some(b'+') => {
                    file.additions += 1;
                    LineKind::Added
                }
                Some(b'-') => {
                    file.deletions += 1;
                    LineKind::Removed
                }
                Some(b'\\') => LineKind::Note,
                _ => LineKind::Context,
            };
            file.lines.push((kind, line));
            continue;
        }
        if let Some(mode) = line.strip_prefix("new file mode ") {
            file.status = Status::Added;
            file.new_mode = Some(mode);
        } else if let Some(mode) = line.strip_prefix("deleted file mode ") {
            file.status = Status::Deleted;
            file.old_mode = Some(mode);
        } else if let Some(mode) = line.strip_prefix("old mode ") {
            file.old_mode = Some(mode);
            if file.status == Status::Modified {
                file.status = Status::ModeChanged;
            }
        } else if let Some(mode) = line.strip_prefix("new mode ") {
            file.new_mode = Some(mode);
        } else if let Some(path) = line.strip_prefix("rename from ") {
            file.status = Status::Renamed;
            file.old_path = unquote(path);
        } else if let Some(path) = line.strip_prefix("rename to ") {
            file.status = Status::Renamed;
            file.new_path = unquote(path);
        } else if let Some(path) = line.strip_prefix("copy from ") {
            file.status = Status::Copied;
            file.old_path = unquote(path);
        } else if let Some(path) = line.strip_prefix("copy to ") {
            file.status = Status::Copied;
            file.new_path = unquote(path);
        } else if line.starts_with("Binary files ") || line == "GIT binary patch" {
            file.binary = true;
        } else if let Some(path) = line.strip_prefix("--- ") {
            if let Some(p) = side(path, "a/") {
                file.old_path = p;
            }
        } else if let Some(path) = line.strip_prefix("+++ ") {
            if let Some(p) = side(path, "b/") {
                file.new_path = p;
            }
        }
        // A file whose content changed besides its mode is modified (its modes still shown).
        if file.status == Status::ModeChanged && (line.starts_with("--- ") || file.binary) {
            file.status = Status::Modified;
        }
    }
    files
}

/// The path of a `---`/`+++` line without its `a/`/`b/` prefix; `None` for `/dev/null`.
fn side(path: &str, prefix: &str) -> Option<String> {
    let path = unquote(path.trim_end_matches('\t'));
    path.strip_prefix(prefix).map(str::to_string)
}

/// The two paths of a `diff --git a/X b/Y` header. Unquoted paths with spaces are ambiguous
/// there; the `rename`/`---`/`+++` lines that follow correct them.
fn header_paths(rest: &str) -> (String, String) {
    if rest.starts_with('"') {
        let (old, after) = quoted(rest);
        let new = unquote(after.trim_start());
        return (strip(&old, "a/"), strip(&new, "b/"));
    }
    // `a/X b/X`: the same path twice is the common case, found by halving.
    let half = rest.len().saturating_sub(1) / 2;
    if rest.is_char_boundary(half)
        && rest.get(half..half + 1) == Some(" ")
        && rest[..half].get(2..) == rest[half + 1..].get(2..)
    {
        return (strip(&rest[..half], "a/"), strip(&rest[half + 1..], "b/"));
    }
    match rest.split_once(" b/") {
        Some((old, new)) => (strip(old, "a/"), new.to_string()),
        None => (rest.to_string(), rest.to_string()),
    }
}

fn strip(path: &str, prefix: &str) -> String {
    path.strip_prefix(prefix).unwrap_or(path).to_string()
}

/// A path as git writes it: C-quoted (`"a\tb\303\251"`) when it holds special bytes.
fn unquote(path: &str) -> String {
    if path.starts_with('"') {
        quoted(path).0
    } else {
        path.to_string()
    }
}

/// The C-quoted string at the start of `text` and what follows it.
fn quoted(text: &str) -> (String, &str) {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return (String::from_utf8_lossy(&out).into_owned(), &text[i + 1..]),
            b'\\' if i + 1 < bytes.len() => {
                let c = bytes[i + 1];
                i += 2;
                match c {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'r' => out.push(b'\r'),
                    b'v' => out.push(11),
                    b'0'..=b'7' => {
                        let mut value = u32::from(c - b'0');
                        for _ in 0..2 {
                            match bytes.get(i) {
                                Some(d @ b'0'..=b'7') => {
                                    value = value * 8 + u32::from(d - b'0');
                                    i += 1;
                                }
                                _ => break,
                            }
                        }
                        out.push(u8::try_from(value & 0xff).unwrap_or(0));
                    }
                    other => out.push(other),
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), "")
}
