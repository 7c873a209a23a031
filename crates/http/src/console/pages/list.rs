//! The runs page: the filter form filled with the current query, the first page of matching
//! runs (rows `console.js` renders the same way) and the paging links.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use super::super::respond::html;
use super::display::{state_badge, text, when};
use super::gate::gate;
use super::layout::{error_page, layout};
use crate::html::escape;
use crate::problem::ApiError;
use crate::{access, wire, AppState};
use runledger_domain::{RunState, SourceType};
use runledger_runs::api_keys::Key;

/// One row of the runs table; `console.js` (`runRow`) renders the same markup.
fn run_row(run: &Value) -> String {
    let id = text(&run["run_id"]);
    let title = match text(&run["title"]) {
        "" => "(untitled)",
        t => t,
    };
    format!(
        "<tr data-run=\"{id}\"><td class=\"title\"><a href=\"/runs/{id}\">{}</a></td>\
         <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        escape(title),
        state_badge(text(&run["state"]), None),
        escape(text(&run["agent_config"]["environment_id"])),
        escape(text(&run["creator"]["display_name"])),
        when(&run["created_at"]),
        when(&run["updated_at"]),
        id = escape(id),
    )
}

/// A query string of `pairs` with `cursor` dropped, then `extra` added.
fn query_with(pairs: &[(String, String)], extra: Option<(&str, &str)>) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        if k != "cursor" && !v.is_empty() {
            q.append_pair(k, v);
        }
    }
    if let Some((k, v)) = extra {
        q.append_pair(k, v);
    }
    q.finish()
}

/// The filter form, filled with the current query.
fn filters(state: &AppState, key: &Key, pairs: &[(String, String)]) -> String {
    let value = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name || (name == "config_name" && k == "name"))
            .map_or(String::new(), |(_, v)| escape(v))
    };
    let has = |name: &str, v: &str| pairs.iter().any(|(k, x)| k == name && x == v);
    let mut out = String::from(
        "<form id=\"filters\" class=\"filters\" method=\"get\" action=\"/runs\" \
         role=\"search\" aria-label=\"Filter runs\">",
    );
    out.push_str(&format!(
        "<div class=\"field wide\"><label for=\"f-q\">Search</label><input id=\"f-q\" \
         name=\"q\" type=\"search\" value=\"{}\" placeholder=\"title, prompt or skill\"></div>",
        value("q")
    ));
    out.push_str("<fieldset class=\"field wide states\"><legend>State</legend>");
    for s in RunState::ALL {
        let s = s.as_str();
        let checked = if has("state", s) { " checked" } else { "" };
        out.push_str(&format!(
            "<label class=\"check\"><input type=\"checkbox\" name=\"state\" value=\"{s}\"{checked}> {s}</label>"
        ));
    }
    out.push_str("</fieldset>");
    out.push_str(&format!(
        "<div class=\"field\"><label for=\"f-env\">Environment</label><input id=\"f-env\" \
         name=\"environment_id\" list=\"f-envs\" value=\"{}\"><datalist id=\"f-envs\">",
        value("environment_id")
    ));
    for env in state
        .config
        .environments
        .iter()
        .filter(|e| e.open_to(&key.team))
    {
        out.push_str(&format!("<option value=\"{}\">", escape(&env.id)));
    }
    out.push_str("</datalist></div>");
    for (name, label) in [
        ("config_name", "Config name"),
        ("model_id", "Model"),
        ("creator", "Creator (key id)"),
    ] {
        out.push_str(&format!(
            "<div class=\"field\"><label for=\"f-{name}\">{label}</label>\
             <input id=\"f-{name}\" name=\"{name}\" value=\"{}\"></div>",
            value(name)
        ));
    }
    out.push_str(
        "<div class=\"field\"><label for=\"f-source\">Source</label>\
         <select id=\"f-source\" name=\"source\"><option value=\"\">Any</option>",
    );
    for s in SourceType::ALL {
        let s = s.as_str();
        let selected = if has("source", s) { " selected" } else { "" };
        out.push_str(&format!("<option{selected}>{s}</option>"));
    }
    out.push_str("</select></div>");
    for (name, label) in [
        ("created_after", "Created after"),
        ("created_before", "Created before"),
    ] {
        out.push_str(&format!(
            "<div class=\"field\"><label for=\"f-{name}\">{label}</label>\
             <input id=\"f-{name}\" name=\"{name}\" value=\"{}\" \
             placeholder=\"2026-01-31T09:00:00Z\" aria-describedby=\"f-time-hint\"></div>",
            value(name)
        ));
    }
    out.push_str(
        "<div class=\"field\"><label for=\"f-sort\">Sort by</label>\
         <select id=\"f-sort\" name=\"sort_by\">",
    );
    for (s, _) in wire::SORT_BY {
        let selected = if has("sort_by", s) { " selected" } else { "" };
        out.push_str(&format!("<option{selected}>{s}</option>"));
    }
    out.push_str(
        "</select></div><div class=\"field\"><label for=\"f-order\">Order</label>\
         <select id=\"f-order\" name=\"sort_order\">",
    );
    for (s, _) in wire::SORT_ORDER {
        let selected = if has("sort_order", s) {
            " selected"
        } else {
            ""
        };
        out.push_str(&format!("<option{selected}>{s}</option>"));
    }
    out.push_str(
        "</select></div><div class=\"field\"><label for=\"f-limit\">Per page</label>\
         <select id=\"f-limit\" name=\"limit\">",
    );
    for n in ["20", "50", "100"] {
        let selected = if has("limit", n) { " selected" } else { "" };
        out.push_str(&format!("<option{selected}>{n}</option>"));
    }
    out.push_str(
        "</select></div><p class=\"hint wide\" id=\"f-time-hint\">Times are RFC 3339 \
         (UTC when no offset is given); both bounds are exclusive.</p>\
         <div class=\"actions wide\"><button type=\"submit\">Apply filters</button>\
         <a href=\"/runs\">Clear filters</a></div></form>",
    );
    out
}

/// `GET /runs`: the filters, and the first page of matching runs rendered here.
pub(in crate::console) async fn runs(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let who = match gate(&req, &state) {
        Ok(who) => who,
        Err(r) => return *r,
    };
    let raw = req.query_string();
    let pairs: Vec<(String, String)> = form_urlencoded::parse(raw.as_bytes())
        .into_owned()
        .collect();
    let mut body = String::from("<h1>Runs</h1>");
    body.push_str(&filters(&state, &who.key, &pairs));
    let listed = async {
        let bytes = access::list_json(&state, &who.key, raw).await?;
        serde_json::from_slice::<Value>(&bytes).map_err(|e| ApiError::internal(&e))
    }
    .await;
    let status = match listed {
        Err(e) if e.status.is_client_error() => {
            body.push_str(&format!(
                "<p class=\"error\" role=\"alert\" id=\"runs-error\">These filters cannot be \
                 applied: {}. Change them and apply again, or <a href=\"/runs\">clear them</a>.</p>",
                escape(&e.detail)
            ));
            StatusCode::BAD_REQUEST
        }
        Err(e) => return error_page(Some(&who), &e),
        Ok(page) => {
            let runs = page["runs"].as_array().map_or(&[][..], Vec::as_slice);
            body.push_str(
                "<p id=\"runs-status\" class=\"hint\" role=\"status\" aria-live=\"polite\"></p>",
            );
            let empty = if pairs
                .iter()
                .any(|(k, v)| k != "sort_by" && k != "sort_order" && k != "limit" && !v.is_empty())
            {
                "No runs match these filters. <a href=\"/runs\">Clear the filters</a> or \
                 <a href=\"/new\">start a new run</a>."
            } else {
                "No runs yet. <a href=\"/new\">Start a new run</a>, or create one through the \
                 API or <code>runledger run</code>."
            };
            body.push_str(&format!(
                "<p id=\"runs-empty\" class=\"empty\"{}>{empty}</p>",
                if runs.is_empty() { "" } else { " hidden" }
            ));
            body.push_str(
                "<div class=\"table-wrap\"><table id=\"runs\"><thead><tr>\
                 <th scope=\"col\">Title</th><th scope=\"col\">State</th>\
                 <th scope=\"col\">Environment</th><th scope=\"col\">Creator</th>\
                 <th scope=\"col\">Created</th><th scope=\"col\">Updated</th></tr></thead>\
                 <tbody id=\"run-rows\">",
            );
            for run in runs {
                body.push_str(&run_row(run));
            }
            body.push_str("</tbody></table></div><nav class=\"paging\" aria-label=\"Pages\">");
            if pairs.iter().any(|(k, _)| k == "cursor") {
                body.push_str(&format!(
                    "<a href=\"/runs?{}\">First page</a>",
                    escape(&query_with(&pairs, None))
                ));
            }
            if let Some(next) = page["page_info"]["next_cursor"].as_str() {
                body.push_str(&format!(
                    "<a id=\"next-page\" rel=\"next\" href=\"/runs?{}\">Next page</a>",
                    escape(&query_with(&pairs, Some(("cursor", next))))
                ));
            }
            body.push_str("</nav>");
            StatusCode::OK
        }
    };
    html(status, layout("Runs", Some(&who), "runs", &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_escapes_everything_a_client_chose() {
        let run = serde_json::json!({
            "run_id": "01M\"><script>",
            "title": "<script>alert(1)</script>",
            "state": "QUEUED",
            "agent_config": {"environment_id": "e\"onmouseover=\"x"},
            "creator": {"display_name": "<img src=x>"},
            "created_at": "2026-11-26T01:24:09.319Z",
        });
        let row = run_row(&run);
        assert!(!row.contains("<script>"), "{row}");
        assert!(!row.contains("<img"), "{row}");
        assert!(!row.contains("\"onmouseover"), "{row}");
        assert!(
            row.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{row}"
        );
        assert!(row.contains("2026-11-26 01:24:09 UTC"), "{row}");
    }

    #[test]
    fn paging_links_keep_the_filters_and_replace_the_cursor() {
        let pairs = vec![
            ("state".to_string(), "QUEUED".to_string()),
            ("cursor".to_string(), "old".to_string()),
            ("q".to_string(), "a b&c".to_string()),
            ("model_id".to_string(), String::new()),
        ];
        assert_eq!(query_with(&pairs, None), "state=QUEUED&q=a+b%26c");
        assert_eq!(
            query_with(&pairs, Some(("cursor", "new"))),
            "state=QUEUED&q=a+b%26c&cursor=new"
        );
    }
}
