//! Who may see a page: the signed-in caller from the session cookie (charged like an API
//! request), or the answer that sends them to sign in; and the console's cookies' attributes.

use actix_web::cookie::{Cookie, SameSite};
use actix_web::{HttpRequest, HttpResponse};

use super::super::guard::{cookie_name, live_key, session_cookie};
use super::super::respond::see_other;
use super::layout::{error_page, SignedIn};
use crate::AppState;

/// A cookie of the console: HttpOnly, SameSite=Strict, Secure under TLS.
pub(super) fn cookie<'a>(
    state: &AppState,
    name: &'a str,
    value: String,
    path: &'a str,
) -> Cookie<'a> {
    Cookie::build(name, value)
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(state.config.tls.is_some())
        .path(path)
        .finish()
}

/// The cookie that deletes `name` in the browser.
pub(super) fn removal<'a>(state: &AppState, name: &'a str, path: &'a str) -> Cookie<'a> {
    let mut c = cookie(state, name, String::new(), path);
    c.make_removal();
    c
}

/// The signed-in caller of a page, charged like an API request; otherwise the answer to send:
/// the sign-in page (a stale cookie removed), or an error page.
pub(super) fn gate(req: &HttpRequest, state: &AppState) -> Result<SignedIn, Box<HttpResponse>> {
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
