//! The "Files changed" section of the session page and of the console's run page: the run's
//! patch (its latest execution's diff from the run's base, through the changes handle) as a
//! coloured diff per file (`diff/`). At most `PAGE_DIFF_BYTES` of the stored patch are read,
//! so a page costs the same whatever the environment's `changes_max_mb`.

use std::io::Read as _;

use super::diff::{diff_html, Caps};
use super::problem::ApiError;
use super::AppState;
use runledger_domain::Run;

/// The most bytes of a patch a page reads (the whole of a diff at the default
/// `changes_max_mb`).
const PAGE_DIFF_BYTES: u64 = 10 << 20;

/// The section for `run`; `whole`: where a reader of this page gets the whole patch (a URL),
/// if anywhere.
pub(crate) fn files_changed(
    state: &AppState,
    run: &Run,
    whole: Option<&str>,
) -> Result<String, ApiError> {
    let mut html = String::from(
        "<section id=\"changes\" aria-labelledby=\"changes-h\"><h2 id=\"changes-h\">Files changed</h2>",
    );
    match state.changes.patch(run.id)? {
        None => html.push_str("<p class=\"hint\">No changes recorded.</p>"),
        Some(patch) => {
            let mut bytes = Vec::new();
            patch
                .file
                .take(PAGE_DIFF_BYTES)
                .read_to_end(&mut bytes)
                .map_err(|e| ApiError::internal(&e))?;
            let read_whole = (bytes.len() as u64) >= patch.size;
            if !read_whole {
                // Only whole lines: a cut line would read as a change it is not.
                let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                bytes.truncate(end);
            }
            let text = String::from_utf8_lossy(&bytes);
            html.push_str(&format!(
                "<p class=\"hint\">After execution {}, from the run's base.</p>",
                patch.execution
            ));
            html.push_str(&diff_html(&text, Caps::default(), whole));
            if patch.cut || !read_whole {
                html.push_str(
                    "<p class=\"hint\">The diff was cut: files past the cut are not shown.</p>",
                );
            }
        }
    }
    html.push_str("</section>");
    Ok(html)
}
