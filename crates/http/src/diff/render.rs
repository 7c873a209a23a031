//! Parsed diff files as HTML: a summary line, then one `<details>` per file (its path, status,
//! counts; a binary file summarized), its lines in a `<pre>` with one `<span>` per added,
//! removed or hunk-header line, classed `add`, `del`, `hunk`. Caps keep a page bounded
//! whatever the diff's size; what is cut is said, with where to get the whole.

use super::parse::{parse, FileDiff, LineKind, Status};
use crate::html::escape;

/// How much of a diff one page shows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    /// Files shown with their lines; later files are listed by name and counts only.
    pub(crate) files: usize,
    /// Lines shown of one file.
    pub(crate) lines_per_file: usize,
    /// Lines shown in all.
    pub(crate) lines: usize,
    /// Characters shown of one line.
    pub(crate) line_chars: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            files: 200,
            lines_per_file: 2000,
            lines: 20_000,
            line_chars: 1000,
        }
    }
}

/// Files folded open by default: the first few, when small.
const OPEN_FILES: usize = 3;
const OPEN_LINES: usize = 60;

/// `diff` (unified git diff text) as HTML within `caps`; `whole`: where the complete patch is
/// (a link, already a URL), named when anything was cut.
pub(crate) fn diff_html(diff: &str, caps: Caps, whole: Option<&str>) -> String {
    let files = parse(diff);
    let (added, removed) = files
        .iter()
        .fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions));
    let mut html = format!(
        "<div class=\"diff\"><p class=\"diff-summary\">{} file{} changed, \
         <span class=\"add\">+{added}</span> <span class=\"del\">−{removed}</span></p>",
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    let mut budget = caps.lines;
    let mut cut = false;
    for (index, file) in files.iter().enumerate() {
        if index >= caps.files {
            cut = true;
            html.push_str(&format!("<p class=\"diff-file\">{}</p>", file_head(file)));
            continue;
        }
        let shown = file.lines.len().min(caps.lines_per_file).min(budget);
        budget -= shown;
        let open = index < OPEN_FILES && file.lines.len() <= OPEN_LINES;
        html.push_str(&format!(
            "<details class=\"diff-file\"{}><summary>{}</summary>",
            if open { " open" } else { "" },
            file_head(file)
        ));
        if file.binary {
            html.push_str("<p class=\"hint\">Binary file; its content is not shown.</p>");
        } else if file.lines.is_empty() {
            html.push_str(&format!("<p class=\"hint\">{}</p>", no_lines(file)));
        } else {
            html.push_str("<pre>");
            for (kind, line) in &file.lines[..shown] {
                let text = clip(line, caps.line_chars);
                match kind {
                    LineKind::Added => {
                        html.push_str(&format!("<span class=\"add\">{}</span>\n", escape(&text)))
                    }
                    LineKind::Removed => {
                        html.push_str(&format!("<span class=\"del\">{}</span>\n", escape(&text)))
                    }
                    LineKind::Hunk => {
                        html.push_str(&format!("<span class=\"hunk\">{}</span>\n", escape(&text)))
                    }
                    LineKind::Note => {
                        html.push_str(&format!("<span class=\"meta\">{}</span>\n", escape(&text)))
                    }
                    LineKind::Context => {
                        html.push_str(&escape(&text));
                        html.push('\n');
                    }
                }
            }
            html.push_str("</pre>");
            if shown < file.lines.len() {
                cut = true;
                html.push_str(&format!(
                    "<p class=\"hint\">{} more lines of this file are not shown.</p>",
                    file.lines.len() - shown
                ));
            }
        }
        html.push_str("</details>");
    }
    if cut {
        html.push_str("<p class=\"hint\">The diff is longer than a page shows");
        match whole {
            Some(href) => html.push_str(&format!(
                "; <a href=\"{}\">the whole patch</a>.</p>",
                escape(href)
            )),
            None => html.push_str(".</p>"),
        }
    }
    html.push_str("</div>");
    html
}

/// A file's summary line: path (and where it came from), status, counts, modes.
fn file_head(file: &FileDiff<'_>) -> String {
    let mut head = format!(
        "<code>{}</code> <span class=\"tag\">{}</span>",
        escape(file.path()),
        file.status.as_str()
    );
    if matches!(file.status, Status::Renamed | Status::Copied) {
        head.push_str(&format!(" from <code>{}</code>", escape(&file.old_path)));
    }
    if file.binary {
        head.push_str(" <span class=\"tag\">binary</span>");
    } else {
        head.push_str(&format!(
            " <span class=\"add\">+{}</span> <span class=\"del\">−{}</span>",
            file.additions, file.deletions
        ));
    }
    if let (Some(old), Some(new)) = (file.old_mode, file.new_mode) {
        head.push_str(&format!(
            " <span class=\"meta\">{} → {}</span>",
            escape(old),
            escape(new)
        ));
    }
    head
}

/// What to say of a file without lines.
fn no_lines(file: &FileDiff<'_>) -> &'static str {
    match file.status {
        Status::Renamed | Status::Copied => "Same content.",
        Status::ModeChanged => "Only its mode changed.",
        _ => "Empty.",
    }
}

/// At most `max` characters of `line`, marked when cut.
fn clip(line: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]).into(),
        None => line.into(),
    }
}
