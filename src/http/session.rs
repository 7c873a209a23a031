//! The `session_link` page: a run's transcript as HTML, reachable without an API key through
//! its capability token. Without the right token the page does not exist (404), so a link that
//! was never shared reveals nothing — not even that the run exists.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::openapi::{InternalError, NotFound};
use super::problem::ApiError;
use super::wire::{format_time, session_token};
use super::AppState;
use crate::domain::RunId;

#[derive(Deserialize)]
pub struct TokenQuery {
    token: Option<String>,
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A run's transcript as an HTML page (the `session_link`), reachable without an API key
/// through its token. Without the right token the page does not exist.
#[utoipa::path(
    get,
    path = "/sessions/{run_id}",
    tag = "service",
    operation_id = "sessionPage",
    params(
        ("run_id" = String, Path, description = "The run's id."),
        ("token" = Option<String>, Query, description = "The capability token of the run's `session_link`."),
    ),
    responses(
        (status = 200, description = "The latest 256 KiB of the transcript as HTML",
         body = String, content_type = "text/html"),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
pub async fn page(
    path: web::Path<String>,
    query: web::Query<TokenQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let missing = || ApiError::not_found("no such session");
    let id: RunId = path.parse().map_err(|_| missing())?;
    let expected = session_token(&state.session_secret, id);
    let given = query.token.as_deref().unwrap_or("");
    if !bool::from(expected.as_bytes().ct_eq(given.as_bytes())) {
        return Err(missing());
    }
    let run = state.runs.get(id)?.ok_or_else(missing)?;
    // The page shows the latest output; the full transcript is paged through the API.
    let slice = state
        .runs
        .executor()
        .transcripts()
        .tail(id, 256 * 1024)
        .map_err(|e| ApiError::internal(&e))?;
    let live = !run.state.is_terminal();
    let mut html = String::from("<!doctype html><html><head><meta charset=\"utf-8\">");
    if live {
        // The page follows a live run by reloading itself.
        html.push_str("<meta http-equiv=\"refresh\" content=\"2\">");
    }
    html.push_str(&format!(
        "<title>{}</title><style>body{{font-family:sans-serif;margin:2em}}pre{{white-space:pre-wrap;margin:0}}\
         .stderr{{color:#a00}}.system,.followup{{color:#055}}</style></head><body><h1>{}</h1><p>Run <code>{}</code> — <strong>{}</strong></p><div>",
        escape(&run.title),
        escape(&run.title),
        id,
        run.state.as_str()
    ));
    if slice.entries.first().is_some_and(|(offset, _)| *offset > 0) {
        html.push_str("<p><em>Earlier output is in the transcript API.</em></p>");
    }
    for (_, e) in &slice.entries {
        html.push_str(&format!(
            "<pre class=\"{}\">[{}] {}</pre>",
            escape(&e.stream),
            format_time(e.at),
            escape(&e.text)
        ));
    }
    html.push_str("</div></body></html>");
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .body(html))
}
