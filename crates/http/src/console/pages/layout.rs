//! The frame of every console page: the document around a page's content (head, navigation,
//! sign-out form) and the error page. It renders; it checks nobody (`gate`).

use super::super::assets;
use super::super::respond::html;
use crate::html::escape;
use crate::problem::ApiError;
use crate::sessions::Session;
use actix_web::HttpResponse;
use runledger_runs::api_keys::Key;

/// Who is signed in on a page.
pub(super) struct SignedIn {
    pub(super) key: Key,
    pub(super) session: Session,
}

/// The document around a page's content.
pub(super) fn layout(title: &str, who: Option<&SignedIn>, page: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 2048);
    out.push_str("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<meta name=\"color-scheme\" content=\"light dark\">");
    if let Some(who) = who {
        out.push_str(&format!(
            "<meta name=\"csrf-token\" content=\"{}\">",
            escape(&who.session.csrf)
        ));
    }
    out.push_str(&format!(
        "<title>{} · runledger</title><link rel=\"stylesheet\" href=\"{}\">\
         <script src=\"{}\" defer></script></head><body data-page=\"{page}\">",
        escape(title),
        assets::CSS.url(),
        assets::JS.url()
    ));
    out.push_str("<a class=\"skip\" href=\"#main\">Skip to content</a>");
    out.push_str("<header class=\"top\"><a class=\"brand\" href=\"/runs\">runledger</a>");
    if let Some(who) = who {
        out.push_str("<nav aria-label=\"Main\">");
        let mut items = vec![("runs", "/runs", "Runs"), ("new", "/new", "New run")];
        if who.key.admin {
            items.push(("keys", "/keys", "Keys"));
        }
        for (id, href, label) in items {
            let current = if id == page || (page == "run" && id == "runs") {
                " aria-current=\"page\""
            } else {
                ""
            };
            out.push_str(&format!("<a href=\"{href}\"{current}>{label}</a>"));
        }
        out.push_str("</nav>");
        out.push_str(&format!(
            "<form class=\"signout\" method=\"post\" action=\"/signout\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <span class=\"who\" title=\"team {}\">{}</span>\
             <button type=\"submit\">Sign out</button></form>",
            escape(&who.session.csrf),
            escape(&who.key.team),
            escape(&who.key.name)
        ));
    }
    out.push_str("</header><main id=\"main\" tabindex=\"-1\">");
    out.push_str(body);
    out.push_str("</main></body></html>");
    out
}

/// An error as a page that says what happened and what to do.
pub(super) fn error_page(who: Option<&SignedIn>, e: &ApiError) -> HttpResponse {
    let advice = match e.status.as_u16() {
        404 => "Go back to the <a href=\"/runs\">runs</a>.",
        429 => "Wait a moment, then reload the page.",
        403 => "Sign in with a key that may do this.",
        s if s >= 500 => "Reload the page; if it keeps failing, see the server's log.",
        _ => "Go back to the <a href=\"/runs\">runs</a>.",
    };
    let body = format!(
        "<h1>{}</h1><p class=\"error\" role=\"alert\">{}</p><p>{advice}</p>",
        e.status.canonical_reason().unwrap_or("Error"),
        escape(&e.detail)
    );
    html(e.status, layout("Error", who, "error", &body))
}
