//! The runs page: the filter form (`filters`), then the first page of matching runs rendered
//! here (rows `console.js` renders the same way) and the paging links that keep the filters.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use super::super::respond::html;
use super::display::{state_badge, text, when};
use super::filters::filters;
use super::gate::gate;
use super::layout::{error_page, layout};
use crate::html::escape;
use crate::problem::ApiError;
use crate::{access, AppState};

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

/// The page of runs the API answered: the empty-state text, the table and the paging links.
fn listing(page: &Value, pairs: &[(String, String)]) -> String {
    let mut body = String::new();
    let runs = page["runs"].as_array().map_or(&[][..], Vec::as_slice);
    body.push_str("<p id=\"runs-status\" class=\"hint\" role=\"status\" aria-live=\"polite\"></p>");
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
            escape(&query_with(pairs, None))
        ));
    }
    if let Some(next) = page["page_info"]["next_cursor"].as_str() {
        body.push_str(&format!(
            "<a id=\"next-page\" rel=\"next\" href=\"/runs?{}\">Next page</a>",
            escape(&query_with(pairs, Some(("cursor", next))))
        ));
    }
    body.push_str("</nav>");
    body
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
            body.push_str(&listing(&page, &pairs));
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
