//! One run's page: its head (title, state, cancel, share link), details, prompt, attachments
//! and artifacts rendered here, its parent and children (`family`), its files changed
//! (`changes_view`) and steps (`review`), the timeline and "the run at this event" (`timeline`), and the
//! frames the script fills live (transcript, follow-up).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use super::super::respond::html;
use super::display::{state_badge, text, when};
use super::family;
use super::gate::gate;
use super::layout::{error_page, layout};
use super::timeline;
use crate::html::escape;
use crate::problem::ApiError;
use crate::{access, AppState};
use runledger_domain::{Run, RunId, RunState};
use runledger_runs::api_keys::Key;

/// `GET /runs/{id}`: one run of the key's team (another team's is answered as missing);
/// `?events_from=SEQ` pages the timeline, `?at=SEQ` shows the run right after that event.
pub(in crate::console) async fn run(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> HttpResponse {
    let who = match gate(&req, &state) {
        Ok(who) => who,
        Err(r) => return *r,
    };
    let (current, run) = match find(&state, &who.key, &path) {
        Ok(found) => found,
        Err(e) => return error_page(Some(&who), &e),
    };
    let view = match timeline::view(req.query_string()) {
        Ok(view) => view,
        Err(e) => return error_page(Some(&who), &e),
    };
    let at = match view
        .at
        .map(|seq| timeline::at_section(&state, &current, seq))
    {
        Some(Ok(section)) => section,
        Some(Err(e)) => return error_page(Some(&who), &e),
        None => String::new(),
    };
    let events = match timeline::timeline(&state, &current, &view) {
        Ok(events) => events,
        Err(e) => return error_page(Some(&who), &e),
    };
    let family =
        match crate::tree::family(&state, &who.key, &current, family::SHOWN_CHILDREN + 1).await {
            Ok((parent, children)) => family::section(&current, parent.as_ref(), &children),
            Err(e) => return error_page(Some(&who), &e),
        };
    let id = escape(text(&run["run_id"]));
    let title = match text(&run["title"]) {
        "" => "(untitled)",
        t => t,
    };
    let mut body = head(&run, &id, title);
    body.push_str(&at);
    body.push_str(&details(&run, &id));
    body.push_str(&prompt_and_attachments(&run));
    body.push_str(&artifacts(&run));
    body.push_str(&family);
    body.push_str(&super::provenance::section(&run));
    let patch = format!("/api/v1/agent/runs/{id}/changes?format=patch");
    match crate::changes_view::files_changed(&state, &current, Some(&patch)) {
        Ok(section) => body.push_str(&section),
        Err(e) => return error_page(Some(&who), &e),
    }
    match super::review::section(&state, &current, req.query_string()) {
        Ok(section) => body.push_str(&section),
        Err(e) => return error_page(Some(&who), &e),
    }
    live_frames(&mut body, &events);
    html(StatusCode::OK, layout(title, Some(&who), "run", &body))
}

/// The run `path` names, and as the API shows it, if it is one of `key`'s team.
fn find(state: &AppState, key: &Key, path: &str) -> Result<(Run, Value), ApiError> {
    let missing = || ApiError::not_found(format!("there is no run {path:?} for this key"));
    let id: RunId = path.parse().map_err(|_| missing())?;
    let run = state
        .runs
        .get(id)?
        .filter(|run| run.team == key.team)
        .ok_or_else(missing)?;
    let bytes = access::run_json(state, &run)?;
    let json = serde_json::from_slice::<Value>(&bytes).map_err(|e| ApiError::internal(&e))?;
    Ok((run, json))
}

/// The page's head: title, state badge, the cancel button (hidden once the run has ended) and
/// the shareable session link, then the line where actions report; `id` is already escaped.
/// It opens the page's `<div id="run">`, which `live_frames` closes.
fn head(run: &Value, id: &str, title: &str) -> String {
    let run_state = text(&run["state"]);
    let mut body = format!(
        "<div id=\"run\" data-run-id=\"{id}\" data-state=\"{}\">\
         <p class=\"crumbs\"><a href=\"/runs\">Runs</a></p>\
         <h1 id=\"run-title\">{}</h1><div class=\"run-head\">{}",
        escape(run_state),
        escape(title),
        state_badge(run_state, Some("run-state"))
    );
    let terminal = RunState::ALL
        .iter()
        .any(|s| s.as_str() == run_state && s.is_terminal());
    body.push_str(&format!(
        "<button type=\"button\" id=\"cancel\" class=\"danger\"{}>Cancel run</button>",
        if terminal { " hidden" } else { "" }
    ));
    if let Some(link) = run["session_link"].as_str() {
        body.push_str(&format!(
            "<a id=\"session-link\" href=\"{}\">Shareable session page</a>",
            escape(link)
        ));
    }
    body.push_str("</div><p id=\"action-result\" role=\"status\" aria-live=\"polite\"></p>");
    body
}

/// The run's details as a definition list; `id` is already escaped.
fn details(run: &Value, id: &str) -> String {
    let mut body = String::from("<h2>Details</h2><dl class=\"details\">");
    let mut item = |label: &str, value: String| {
        if !value.is_empty() {
            body.push_str(&format!("<dt>{label}</dt><dd>{value}</dd>"));
        }
    };
    item("Run id", format!("<code>{id}</code>"));
    item("Created", when(&run["created_at"]));
    item("Started", when(&run["started_at"]));
    item("Updated", when(&run["updated_at"]));
    item("Run time", escape(text(&run["run_time"])));
    item("Failure", timeline::failure(&run["status_message"]));
    let config = &run["agent_config"];
    item("Environment", escape(text(&config["environment_id"])));
    item("Model", escape(text(&config["model_id"])));
    item("Config name", escape(text(&config["name"])));
    item("Skill", escape(text(&config["skill_spec"])));
    let creator = &run["creator"];
    item(
        "Creator",
        format!(
            "{} <span class=\"hint\">({}, {})</span>",
            escape(text(&creator["display_name"])),
            escape(text(&creator["type"])),
            escape(text(&creator["uid"]))
        ),
    );
    item("Source", escape(text(&run["source"])));
    if let Some(schedule) = run["schedule"].as_object() {
        item(
            "Schedule",
            escape(
                schedule
                    .get("schedule_id")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
        );
    }
    if let Some(metadata) = run["metadata"].as_object() {
        let pairs: Vec<String> = metadata
            .iter()
            .map(|(k, v)| format!("<code>{}={}</code>", escape(k), escape(text(v))))
            .collect();
        item("Metadata", pairs.join(" "));
    }
    body.push_str("</dl>");
    body
}

/// The prompt and the attachments' names, types and sizes.
fn prompt_and_attachments(run: &Value) -> String {
    let mut body = String::new();
    if let Some(prompt) = run["prompt"].as_str() {
        body.push_str(&format!(
            "<h2>Prompt</h2><pre class=\"prompt\">{}</pre>",
            escape(prompt)
        ));
    }
    if let Some(attachments) = run["attachments"].as_array() {
        body.push_str("<h2>Attachments</h2><ul class=\"files\">");
        for a in attachments {
            body.push_str(&format!(
                "<li>{} <span class=\"hint\">{}, {} bytes</span></li>",
                escape(text(&a["file_name"])),
                escape(text(&a["mime_type"])),
                a["size_bytes"].as_u64().unwrap_or(0)
            ));
        }
        body.push_str("</ul>");
    }
    body
}

/// The artifacts: type, name, link and time.
fn artifacts(run: &Value) -> String {
    let mut body = String::new();
    if let Some(artifacts) = run["artifacts"].as_array() {
        body.push_str("<h2>Artifacts</h2><ul class=\"files\">");
        for a in artifacts {
            let data = &a["data"];
            let name = [
                &data["title"],
                &data["filename"],
                &data["description"],
                &data["branch"],
            ]
            .into_iter()
            .find_map(Value::as_str)
            .unwrap_or("");
            let link = data["url"].as_str().map_or(String::new(), |url| {
                format!(
                    " <a href=\"{}\" rel=\"noreferrer\">{}</a>",
                    escape(url),
                    escape(url)
                )
            });
            body.push_str(&format!(
                "<li><span class=\"tag\">{}</span> {}{link} <span class=\"hint\">{}</span></li>",
                escape(text(&a["artifact_type"])),
                escape(name),
                when(&a["created_at"])
            ));
        }
        body.push_str("</ul>");
    }
    body
}

/// The frames the script fills live (the transcript, the follow-up form), then the timeline
/// (`events`, which the script extends while it shows the newest page).
fn live_frames(body: &mut String, events: &str) {
    body.push_str(
        "<section aria-labelledby=\"tx-h\"><h2 id=\"tx-h\">Transcript</h2>\
         <div class=\"tx-tools\"><button type=\"button\" id=\"tx-pause\" aria-pressed=\"false\">\
         Pause auto-scroll</button><span id=\"tx-status\" class=\"hint\" role=\"status\"></span>\
         <span class=\"legend\"><span class=\"s-stdout\">stdout</span> \
         <span class=\"s-stderr\">stderr</span> <span class=\"s-system\">system</span> \
         <span class=\"s-followup\">follow-up</span></span></div>\
         <div id=\"transcript\" class=\"transcript\" tabindex=\"0\" role=\"log\" \
         aria-label=\"Transcript\"><div class=\"tx-spacer\"><div class=\"tx-rows\"></div></div>\
         </div><noscript><p>The live transcript needs JavaScript; the \
         shareable session page shows it without.</p></noscript></section>",
    );
    body.push_str(
        "<section aria-labelledby=\"fu-h\"><h2 id=\"fu-h\">Follow-up</h2>\
         <form id=\"followup\" class=\"stack\"><label for=\"followup-message\">Message to the \
         agent (a finished run resumes)</label><textarea id=\"followup-message\" \
         name=\"message\" rows=\"3\" required></textarea><div class=\"actions\">\
         <button type=\"submit\">Send follow-up</button></div>\
         <p id=\"followup-result\" role=\"status\" aria-live=\"polite\"></p></form></section>",
    );
    body.push_str(events);
    body.push_str("</div>");
}
