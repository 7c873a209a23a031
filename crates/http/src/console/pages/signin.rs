//! Signing in and out: the sign-in form with its double-submit token, the exchange of an API key
//! for a session cookie, and the sign-out that ends it. The key is checked exactly as a bearer
//! key; the session table is `crate::sessions`'.

use actix_web::cookie::time::Duration as CookieDuration;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use subtle::ConstantTimeEq as _;

use super::super::guard::{cookie_name, cross_site, live_key, session_cookie};
use super::super::respond::{html, see_other};
use super::gate::{cookie, removal};
use super::layout::{error_page, layout};
use crate::html::escape;
use crate::problem::ApiError;
use crate::AppState;

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

/// `/`: the runs, or the sign-in page.
pub(in crate::console) async fn home() -> HttpResponse {
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
pub(in crate::console) async fn signin_form(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> HttpResponse {
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
pub(in crate::console) async fn signin(
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
        i64::try_from(crate::sessions::LIFETIME.as_secs()).unwrap_or(i64::MAX),
    ));
    let mut r = see_other("/runs");
    let _ = r.add_cookie(&session);
    let _ = r.add_removal_cookie(&removal(&state, SIGNIN_COOKIE, "/signin"));
    r
}

/// `POST /signout`: ends the session (with its CSRF token, so no other site can sign a user
/// out) and removes the cookie.
pub(in crate::console) async fn signout(
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
