//! The run page's "Steps" section: a page of the run's steps as a review reads them
//! (`crate::review`), paged on the server by `?steps=CURSOR`, so it works before (and
//! without) the script; the live raw transcript below it is one click away.

use crate::html::escape;
use crate::problem::ApiError;
use crate::AppState;
use runledger_domain::Run;
use runledger_runs::steps::{Cursor, CursorError, DEFAULT_LIMIT};

/// The section for `run`, at the page of steps `query`'s `steps` names (the first without).
pub(super) fn section(state: &AppState, run: &Run, query: &str) -> Result<String, ApiError> {
    let mut cursor = Cursor::default();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key == "steps" {
            cursor = value
                .parse()
                .map_err(|e: CursorError| ApiError::bad_request(format!("steps: {e}")))?;
        }
    }
    let page = crate::step_pages::read(state, run, cursor, DEFAULT_LIMIT)?;
    let next = (page.more && page.next_cursor != cursor)
        .then(|| format!("/runs/{}?steps={}#steps-h", run.id, page.next_cursor));
    Ok(format!(
        "<section id=\"steps\" aria-labelledby=\"steps-h\"><h2 id=\"steps-h\">Steps</h2>\
         <p class=\"hint\">What the agent said and did; <a href=\"#tx-h\">the raw transcript</a> \
         is below.{}</p>{}</section>",
        if cursor == Cursor::default() {
            String::new()
        } else {
            format!(
                " <a href=\"/runs/{}#steps-h\">First steps</a>.",
                escape(&run.id.to_string())
            )
        },
        crate::review::steps_html(&page, cursor == Cursor::default(), next.as_deref())
    ))
}
