//! The console's pages, rendered on the server: each is a complete HTML document that is
//! useful before its script runs (the runs page carries its first page of runs; the run page
//! its details), with every value from a run or a key escaped. Live parts (transcript, events,
//! polling, forms that call the API) are the script's (`assets/console.js`).

use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;
use subtle::ConstantTimeEq as _;

use super::{assets, cookie_name, cross_site, html, live_key, see_other, session_cookie, Session};
use crate::html::escape;
use crate::problem::ApiError;
use crate::{access, wire, AppState};
use runledger_domain::{RunId, RunState, SourceType};
use runledger_runs::api_keys::Key;

/// The double-submit cookie of the sign-in form: the form's hidden `token` must equal it, so
/// another site cannot sign a browser in under the attacker's key (login CSRF).
const SIGNIN_COOKIE: &str = "runledger_signin";

/// A random token as the sessions make them.
fn token() -> String {
    use base64::Engine as _;
    use rand::RngCore as _;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A cookie of the console: HttpOnly, SameSite=Strict, Secure under TLS.
fn cookie<'a>(state: &AppState, name: &'a str, value: String, path: &'a str) -> Cookie<'a> {
    Cookie::build(name, value)
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(state.config.tls.is_some())
        .path(path)
        .finish()
}

/// The cookie that deletes `name` in the browser.
fn removal<'a>(state: &AppState, name: &'a str, path: &'a str) -> Cookie<'a> {
    let mut c = cookie(state, name, String::new(), path);
    c.make_removal();
    c
}

/// Who is signed in on a page.
struct SignedIn {
    key: Key,
    session: Session,
}

/// The signed-in caller of a page, charged like an API request; otherwise the answer to send:
/// the sign-in page (a stale cookie removed), or an error page.
fn gate(req: &HttpRequest, state: &AppState) -> Result<SignedIn, Box<HttpResponse>> {
    let to_signin = || {
        let mut r = see_other("/signin");
        let _ = r.add_removal_cookie(&removal(state, cookie_name(state), "/"));
        r
    };
    let cookie = session_cookie(req, state).ok_or_else(|| Box::new(see_other("/signin")))?;
    let session = state
        .console
        .find(&cookie)
        .ok_or_else(|| Box::new(to_signin()))?;
    let key = match live_key(state, &session) {
        Ok(Some(key)) => key,
        Ok(None) => return Err(Box::new(to_signin())),
        Err(e) => return Err(Box::new(error_page(None, &e))),
    };
    crate::charge(state, &key).map_err(|e| Box::new(error_page(None, &e)))?;
    Ok(SignedIn { key, session })
}

/// The document around a page's content.
fn layout(title: &str, who: Option<&SignedIn>, page: &str, body: &str) -> String {
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
fn error_page(who: Option<&SignedIn>, e: &ApiError) -> HttpResponse {
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

/// `/`: the runs, or the sign-in page.
pub async fn home() -> HttpResponse {
    see_other("/runs")
}

fn signin_page(state: &AppState, status: StatusCode, error: Option<&str>) -> HttpResponse {
    let token = token();
    let error = error.map_or(String::new(), |e| {
        format!(
            "<p class=\"error\" role=\"alert\" id=\"signin-error\">{}</p>",
            escape(e)
        )
    });
    let body = format!(
        "<section class=\"narrow\"><h1>Sign in</h1>{error}\
         <form method=\"post\" action=\"/signin\" class=\"stack\">\
         <input type=\"hidden\" name=\"token\" value=\"{token}\">\
         <label for=\"key\">API key</label>\
         <input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"off\" required \
         autofocus spellcheck=\"false\" aria-describedby=\"key-hint\">\
         <p class=\"hint\" id=\"key-hint\">An API key of this server (<code>rl_…</code>). It is \
         exchanged for a session cookie; the browser does not keep the key.</p>\
         <button type=\"submit\">Sign in</button></form></section>"
    );
    let mut r = html(status, layout("Sign in", None, "signin", &body));
    let _ = r.add_cookie(&cookie(state, SIGNIN_COOKIE, token, "/signin"));
    r
}

/// `GET /signin`: the form (or the runs, for someone signed in).
pub async fn signin_form(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    if let Some(cookie) = session_cookie(&req, &state) {
        if let Some(session) = state.console.find(&cookie) {
            if let Ok(Some(_)) = live_key(&state, &session) {
                return see_other("/runs");
            }
        }
    }
    signin_page(&state, StatusCode::OK, None)
}

/// The value of `name` in a form body (the first one).
fn field(body: &[u8], name: &str) -> Option<String> {
    form_urlencoded::parse(body)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// `POST /signin`: the key is checked exactly as a bearer key, and exchanged for a session.
pub async fn signin(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    if cross_site(&req, &state) {
        return signin_page(
            &state,
            StatusCode::FORBIDDEN,
            Some("Sign in from this server's own sign-in page."),
        );
    }
    let expected = req.cookie(SIGNIN_COOKIE).map(|c| c.value().to_string());
    let given = field(&body, "token").unwrap_or_default();
    let fresh =
        expected.is_some_and(|e| !e.is_empty() && bool::from(e.as_bytes().ct_eq(given.as_bytes())));
    if !fresh {
        return signin_page(
            &state,
            StatusCode::FORBIDDEN,
            Some("The sign-in form had expired. Enter the key again."),
        );
    }
    let secret = field(&body, "key").unwrap_or_default();
    let key = match state.keys.authenticate(secret.trim()) {
        Ok(Some(key)) => key,
        Ok(None) => {
            return signin_page(
                &state,
                StatusCode::UNAUTHORIZED,
                Some("That API key is not valid or has been revoked. Check it and try again."),
            )
        }
        Err(e) => return error_page(None, &ApiError::from(e)),
    };
    let (value, _) = state.console.open(&key.id);
    let mut session = cookie(&state, cookie_name(&state), value, "/");
    session.set_max_age(CookieDuration::seconds(
        i64::try_from(super::sessions::LIFETIME.as_secs()).unwrap_or(i64::MAX),
    ));
    let mut r = see_other("/runs");
    let _ = r.add_cookie(&session);
    let _ = r.add_removal_cookie(&removal(&state, SIGNIN_COOKIE, "/signin"));
    r
}

/// `POST /signout`: ends the session (with its CSRF token, so no other site can sign a user
/// out) and removes the cookie.
pub async fn signout(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    let cookie = session_cookie(&req, &state);
    if let Some(cookie) = &cookie {
        let Some(session) = state.console.find(cookie) else {
            return see_other("/signin");
        };
        let given = field(&body, "csrf").unwrap_or_default();
        if cross_site(&req, &state) || !session.csrf_matches(&given) {
            return error_page(
                None,
                &ApiError::forbidden("sign out with the console's own Sign out button"),
            );
        }
        state.console.close(cookie);
    }
    let mut r = see_other("/signin");
    let _ = r.add_removal_cookie(&removal(&state, cookie_name(&state), "/"));
    r
}

/// Display of an RFC 3339 time of the API: to the second, in UTC.
fn when(v: &Value) -> String {
    let Some(s) = v.as_str() else {
        return String::new();
    };
    let s = s.replacen('T', " ", 1);
    let s = match s.find('.') {
        Some(dot) => s[..dot].to_string(),
        None => s.trim_end_matches('Z').to_string(),
    };
    format!("{s} UTC")
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn state_badge(state: &str, id: Option<&str>) -> String {
    let id = id.map_or(String::new(), |i| format!(" id=\"{i}\""));
    format!(
        "<span class=\"state state-{}\"{id}>{}</span>",
        escape(&state.to_ascii_lowercase()),
        escape(state)
    )
}

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
pub async fn runs(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
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

/// `GET /runs/{id}`: one run of the key's team (another team's is answered as missing).
pub async fn run(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> HttpResponse {
    let who = match gate(&req, &state) {
        Ok(who) => who,
        Err(r) => return *r,
    };
    let missing =
        || ApiError::not_found(format!("there is no run {:?} for this key", path.as_str()));
    let found = (|| {
        let id: RunId = path.parse().map_err(|_| missing())?;
        let run = state
            .runs
            .get(id)?
            .filter(|run| run.team == who.key.team)
            .ok_or_else(missing)?;
        let bytes = access::run_json(&state, &run)?;
        serde_json::from_slice::<Value>(&bytes).map_err(|e| ApiError::internal(&e))
    })();
    let run = match found {
        Ok(run) => run,
        Err(e) => return error_page(Some(&who), &e),
    };
    let id = escape(text(&run["run_id"]));
    let run_state = text(&run["state"]);
    let title = match text(&run["title"]) {
        "" => "(untitled)",
        t => t,
    };
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
    body.push_str("<h2>Details</h2><dl class=\"details\">");
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
    body.push_str(
        "<section aria-labelledby=\"ev-h\"><h2 id=\"ev-h\">Events</h2>\
         <ol id=\"events\" class=\"events\"></ol></section></div>",
    );
    html(StatusCode::OK, layout(title, Some(&who), "run", &body))
}

/// `GET /new`: the new-run form; the script fills the environments and creates the run.
pub async fn new_run(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let who = match gate(&req, &state) {
        Ok(who) => who,
        Err(r) => return *r,
    };
    let body = "<h1>New run</h1><form id=\"new-run\" class=\"stack narrow\">\
         <label for=\"n-prompt\">Prompt</label>\
         <textarea id=\"n-prompt\" name=\"prompt\" rows=\"6\" required></textarea>\
         <label for=\"n-env\">Environment</label>\
         <select id=\"n-env\" name=\"environment_id\"><option value=\"\">The default \
         environment</option></select>\
         <label for=\"n-model\">Model <span class=\"hint\">(optional)</span></label>\
         <input id=\"n-model\" name=\"model_id\">\
         <label for=\"n-title\">Title <span class=\"hint\">(optional)</span></label>\
         <input id=\"n-title\" name=\"title\">\
         <div class=\"actions\"><button type=\"submit\">Start run</button></div>\
         <p id=\"new-result\" role=\"status\" aria-live=\"polite\"></p></form>";
    html(StatusCode::OK, layout("New run", Some(&who), "new", body))
}

/// `GET /keys`: key management, for admin keys only (the API refuses the others anyway).
pub async fn keys(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let who = match gate(&req, &state) {
        Ok(who) => who,
        Err(r) => return *r,
    };
    if !who.key.admin {
        return error_page(
            Some(&who),
            &ApiError::forbidden("keys are managed with an admin key; this key is not one"),
        );
    }
    let body = "<h1>API keys</h1>\
         <form id=\"new-key\" class=\"stack narrow\"><h2>Create a key</h2>\
         <label for=\"k-name\">Name</label><input id=\"k-name\" name=\"name\" required>\
         <label for=\"k-team\">Team</label><input id=\"k-team\" name=\"team\" value=\"default\">\
         <label for=\"k-kind\">Kind</label><select id=\"k-kind\" name=\"kind\">\
         <option>personal</option><option>agent</option></select>\
         <label class=\"check\"><input type=\"checkbox\" id=\"k-admin\" name=\"admin\"> Admin \
         (may manage keys and teams)</label>\
         <div class=\"actions\"><button type=\"submit\">Create key</button></div>\
         <div id=\"key-result\" role=\"status\" aria-live=\"polite\"></div></form>\
         <h2>Keys</h2><p id=\"keys-status\" class=\"hint\" role=\"status\"></p>\
         <div class=\"table-wrap\"><table id=\"keys\"><thead><tr><th scope=\"col\">Name</th>\
         <th scope=\"col\">Id</th><th scope=\"col\">Team</th><th scope=\"col\">Kind</th>\
         <th scope=\"col\">Created</th><th scope=\"col\">State</th>\
         <th scope=\"col\"><span class=\"sr\">Actions</span></th></tr></thead>\
         <tbody id=\"key-rows\"></tbody></table></div>";
    html(StatusCode::OK, layout("Keys", Some(&who), "keys", body))
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
