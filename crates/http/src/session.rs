//! The `session_link` page: a run's steps as HTML (`review.rs`; the raw transcript one click
//! away), reachable without an API key through
//! its capability token. Without the right token the page does not exist (404), so a link that
//! was never shared reveals nothing — not even that the run exists. An expired link, and one
//! handed out before the run's links were revoked, are answered the same way. Also the revoke
//! itself, an API call of the run's team.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};

use super::error_responses::{Conflict, InternalError, NotFound, Unauthorized, Unavailable};
use super::html::escape;
use super::problem::ApiError;
use super::wire::{format_time, session_token_matches, RunItem, SessionLink};
use super::{AppState, Principal};
use runledger_domain::{Command, RunId, Timestamp};
use runledger_runs::transcript::Entry;

/// The page's only stylesheet, inline; the Content-Security-Policy allows exactly it, by hash.
const STYLE: &str = "body{font-family:sans-serif;margin:2em}pre{white-space:pre-wrap;margin:0}\
                     .stderr{color:#a00}.system,.followup{color:#055}.agent{color:#225}\
                     .steps{list-style:none;padding:0}.step{margin:.4em 0}\
                     .when,.hint{color:#666;font-size:.85em}.who{font-weight:bold}\
                     .said{white-space:pre-wrap;margin:.2em 0 .6em}\
                     .step-followup .said{border-left:3px solid #055;padding-left:.5em}\
                     .exit{font-size:.85em;padding:0 .3em;border-radius:3px}\
                     .exit.ok{background:#dfd}.exit.failed,.denied{background:#fdd}.exit.none{background:#eee}\
                     summary{cursor:pointer}pre.output{background:#f6f6f6;padding:.4em}\
                     .diff-file{margin:.4em 0}.diff pre{margin:0}.diff .add{background:#e6ffed}\
                     .diff .del{background:#ffeef0}.diff .hunk{color:#6f42c1}.diff .meta{color:#666}";

/// `sha256-<base64>` of `STYLE`, the CSP source that allows it.
pub fn style_hash() -> String {
    use base64::Engine as _;
    use sha2::{Digest, Sha256};
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()))
    )
}

/// The value of `name` in a query string: exactly one, and nothing that cannot be decoded.
/// Anything else (none, two, malformed) is `None`, which the page answers as a page that does
/// not exist.
fn param(query: &str, name: &str) -> Option<String> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(query)
        .ok()?
        .into_inner();
    let mut values = pairs.into_iter().filter(|(k, _)| k == name).map(|(_, v)| v);
    let value = values.next()?;
    values.next().is_none().then_some(value)
}

/// The entries as blocks of text: a piece of a long line (`continued`) is joined to the next
/// entry of its stream and execution, so the page shows the line whole.
fn blocks(entries: &[(u64, Entry)]) -> Vec<(&str, Timestamp, String)> {
    let mut blocks: Vec<(&str, Timestamp, String)> = Vec::new();
    // The block a stream's next entry continues, by (execution, stream).
    let mut open: HashMap<(u32, &str), usize> = HashMap::new();
    for (_, e) in entries {
        let key = (e.execution, e.stream.as_str());
        let index = match open.remove(&key) {
            Some(i) => {
                blocks[i].2.push_str(&e.text);
                i
            }
            None => {
                blocks.push((&e.stream, e.at, e.text.clone()));
                blocks.len() - 1
            }
        };
        if e.continued {
            open.insert(key, index);
        }
    }
    blocks
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
        ("expires" = Option<u64>, Query, description = "Unix seconds the link is valid until, as handed out in the run's `session_link`."),
        ("epoch" = Option<u32>, Query, description = "The run's session epoch the link was handed out in (how many times its links had been revoked), as handed out."),
        ("token" = Option<String>, Query, description = "The capability token of the run's `session_link`."),
        ("cursor" = Option<String>, Query, description = "The page of steps to show: a `cursor` of the steps endpoint; the first page when absent."),
        ("view" = Option<String>, Query, description = "`raw`: the latest 256 KiB of the transcript instead of the steps."),
    ),
    responses(
        (status = 200, description = "A page of the run's steps as HTML (with `view=raw`, the latest 256 KiB of the transcript)",
         body = String, content_type = "text/html"),
        (status = 400, description = "A `cursor` the steps endpoint did not hand out",
         content_type = "application/problem+json", body = super::problem::Problem),
        (status = 404, description = "No such page: an unknown run, a wrong token, an expired link, or one handed out before the run's links were revoked",
         content_type = "application/problem+json", body = super::problem::Problem),
        (status = 500, response = InternalError),
    )
)]
pub async fn page(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let missing = || ApiError::not_found("no such session");
    let id: RunId = path.parse().map_err(|_| missing())?;
    // Read here rather than by an extractor, whose errors would be 400s that tell a client
    // more than that there is no such page.
    let query = req.query_string();
    let expires = param(query, "expires").and_then(|v| v.parse::<u64>().ok());
    let epoch = param(query, "epoch").and_then(|v| v.parse::<u32>().ok());
    let (Some(expires), Some(epoch), Some(given)) = (expires, epoch, param(query, "token")) else {
        return Err(missing());
    };
    let link = SessionLink {
        run: id,
        epoch,
        expires,
    };
    // The token is checked before anything is read, so a visitor without a genuine link
    // costs one HMAC and learns nothing, not even from the time the answer takes.
    if !session_token_matches(&state.session_secret, &link, &given)
        || link.expired(
            runledger_base::clock::now(),
            state.config.session_link_ttl_secs,
        )
    {
        return Err(missing());
    }
    // A genuine link of an earlier epoch was handed out before a revoke.
    let run = state
        .runs
        .get(id)?
        .filter(|run| run.session_epoch == epoch)
        .ok_or_else(missing)?;
    let raw = param(query, "view").is_some_and(|v| v == "raw");
    // The link's own parameters, which every link of the page keeps.
    let link_query = form_urlencoded::Serializer::new(String::new())
        .append_pair("expires", &expires.to_string())
        .append_pair("epoch", &epoch.to_string())
        .append_pair("token", &given)
        .finish();
    let live = !run.state.is_terminal();
    let mut html = String::from("<!doctype html><html><head><meta charset=\"utf-8\">");
    if live {
        // The page follows a live run by reloading itself.
        html.push_str("<meta http-equiv=\"refresh\" content=\"2\">");
    }
    html.push_str(&format!(
        "<title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1><p>Run <code>{}</code> — <strong>{}</strong></p>",
        escape(&run.title),
        escape(&run.title),
        id,
        run.state.as_str()
    ));
    if raw {
        html.push_str(&format!(
            "<p><a href=\"/sessions/{id}?{}\">Steps</a> · Raw transcript</p>",
            escape(&link_query)
        ));
        raw_transcript(&state, id, &mut html)?;
    } else {
        let cursor = match param(query, "cursor") {
            Some(c) => c.parse().map_err(|e: runledger_runs::steps::CursorError| {
                ApiError::bad_request(e.to_string())
            })?,
            None => Default::default(),
        };
        let steps = if cursor == Default::default() {
            "Steps".to_string()
        } else {
            format!(
                "<a id=\"first-link\" href=\"/sessions/{id}?{}\">First steps</a>",
                escape(&link_query)
            )
        };
        html.push_str(&format!(
            "<p>{steps} · <a id=\"raw-link\" href=\"/sessions/{id}?{}&amp;view=raw\">Raw transcript</a></p>",
            escape(&link_query)
        ));
        let page =
            super::step_pages::read(&state, &run, cursor, runledger_runs::steps::DEFAULT_LIMIT)?;
        let next = (page.more && page.next_cursor != cursor)
            .then(|| format!("/sessions/{id}?{link_query}&cursor={}", page.next_cursor));
        if cursor == Default::default() {
            // What changed first, as a reviewer reads it; the whole patch is in the API.
            html.push_str(&super::changes_view::files_changed(&state, &run, None)?);
        }
        html.push_str("<section><h2>Steps</h2>");
        html.push_str(&super::review::steps_html(
            &page,
            cursor == Default::default(),
            next.as_deref(),
        ));
        html.push_str("</section>");
    }
    html.push_str("</body></html>");
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .body(html))
}

/// The latest 256 KiB of the transcript as blocks of text (the page's raw view).
fn raw_transcript(state: &AppState, id: RunId, html: &mut String) -> Result<(), ApiError> {
    let slice = state
        .transcripts
        .tail(id, 256 * 1024)
        .map_err(|e| ApiError::internal(&e))?;
    html.push_str("<div>");
    if slice.entries.first().is_some_and(|(offset, _)| *offset > 0) {
        html.push_str("<p><em>Earlier output is in the transcript API.</em></p>");
    }
    // A preset's CLI prints JSON events; their readable `agent` entries stand in for them on
    // the page (the raw lines stay in the transcript API).
    let readable = slice.entries.iter().any(|(_, e)| e.stream == "agent");
    let shown: Vec<_> = slice
        .entries
        .iter()
        .filter(|(_, e)| !(readable && e.stream == "stdout"))
        .cloned()
        .collect();
    if readable {
        html.push_str("<p><em>The agent's raw JSON output is in the transcript API.</em></p>");
    }
    for (stream, at, text) in blocks(&shown) {
        html.push_str(&format!(
            "<pre class=\"{}\">[{}] {}</pre>",
            escape(stream),
            format_time(at),
            escape(&text)
        ));
    }
    html.push_str("</div>");
    Ok(())
}

/// Revoke the run's session links: every `session_link` handed out for it so far answers 404
/// from now on, and the run's next get or list carries a new one (runledger's own endpoint).
/// Durable before the answer (a `SessionLinkRevoked` event, which also records which key
/// asked); any key of the run's team may revoke, in any state of the run.
#[utoipa::path(
    post,
    path = "/api/v1/agent/runs/{run_id}/session-link/revoke",
    tag = "runs",
    operation_id = "revokeSessionLink",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The links are revoked; the body is the run as a get answers it now, with its new `session_link` once it has a session",
         body = RunItem),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 500, response = InternalError),
        (status = 503, response = Unavailable),
    ),
    security(("bearerAuth" = []))
)]
pub async fn revoke(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = super::access::run_id(&path)?;
    super::access::visible(&state, &key, id)?;
    let origin = super::origin::of(&req, &key, &state.config.trusted_proxies);
    let outcome = state
        .runs
        .execute(id, Command::RevokeSessionLink { by: key.id }, origin)
        .await?;
    Ok(HttpResponse::Ok()
        .insert_header(actix_web::http::header::ContentType::json())
        .body(super::access::run_json(&state, &outcome.run)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_well_formed_value_is_a_parameter() {
        assert_eq!(param("token=abc", "token").as_deref(), Some("abc"));
        assert_eq!(param("x=1&token=a%2Bb", "token").as_deref(), Some("a+b"));
        assert_eq!(param("expires=5&token=a", "expires").as_deref(), Some("5"));
        for bad in ["", "token=a&token=a", "token=a&token=b", "tok=a"] {
            assert_eq!(param(bad, "token"), None, "{bad}");
        }
    }

    #[test]
    fn the_style_hash_is_of_the_style_sent() {
        assert!(style_hash().starts_with("sha256-"));
        assert_eq!(style_hash().len(), "sha256-".len() + 44);
    }

    #[test]
    fn pieces_of_a_long_line_are_joined_per_stream() {
        let entry = |stream: &str, text: &str, continued: bool| {
            (
                0,
                Entry {
                    at: Timestamp(1),
                    execution: 1,
                    stream: stream.into(),
                    text: text.into(),
                    continued,
                },
            )
        };
        let entries = [
            entry("stdout", "ab", true),
            entry("stderr", "warning", false),
            entry("stdout", "cd", true),
            entry("stdout", "e\nnext", false),
            entry("stdout", "last", false),
        ];
        let texts: Vec<(&str, String)> = blocks(&entries)
            .into_iter()
            .map(|(stream, _, text)| (stream, text))
            .collect();
        assert_eq!(
            texts,
            [
                ("stdout", "abcde\nnext".to_string()),
                ("stderr", "warning".to_string()),
                ("stdout", "last".to_string()),
            ]
        );
    }
}
