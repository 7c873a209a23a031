//! The console's guard on the public API: the session cookie's name, and the checks a request
//! authenticated by that cookie instead of a bearer key must pass (a live session, a live key,
//! the CSRF token and same-origin for anything that changes something). It answers who the
//! caller is or why not; it renders nothing and keeps no sessions itself (`crate::sessions`).

use actix_web::http::{header, Method};
use actix_web::HttpRequest;

use crate::problem::ApiError;
use crate::sessions::Session;
use crate::AppState;
use runledger_runs::api_keys::Key;

/// The session cookie over plain HTTP (loopback only: config refuses plain HTTP elsewhere).
pub const COOKIE: &str = "runledger_session";
/// The session cookie under TLS: `__Host-` makes the browser insist on `Secure`, `Path=/` and
/// no `Domain`, so no sibling host can plant or overwrite it.
pub const TLS_COOKIE: &str = "__Host-runledger_session";
/// The header an unsafe cookie-authenticated request carries its session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The name of the session cookie on this server.
pub fn cookie_name(state: &AppState) -> &'static str {
    if state.config.tls.is_some() {
        TLS_COOKIE
    } else {
        COOKIE
    }
}

/// The session cookie's value sent with `req`, if any.
pub(super) fn session_cookie(req: &HttpRequest, state: &AppState) -> Option<String> {
    req.cookie(cookie_name(state))
        .map(|c| c.value().to_string())
        .filter(|v| !v.is_empty())
}

/// Methods that change nothing; every other one needs the CSRF token.
fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether the browser says `req` comes from another site: `Sec-Fetch-Site` other than
/// `same-origin`, or an `Origin` that is neither the one the request was addressed to nor the
/// configured public URL's (a proxy in front may rewrite the host). Absent headers say nothing
/// (older browsers, non-browser clients); the CSRF token still has to match.
pub(super) fn cross_site(req: &HttpRequest, state: &AppState) -> bool {
    if let Some(site) = req.headers().get("sec-fetch-site") {
        if site.as_bytes() != b"same-origin" {
            return true;
        }
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let info = req.connection_info();
        let addressed = format!("{}://{}", info.scheme(), info.host());
        let public = url::Url::parse(&state.public_url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_default();
        let origin = origin.as_bytes();
        if origin != addressed.as_bytes() && origin != public.as_bytes() {
            return true;
        }
    }
    false
}

/// The live key of `session`: a key revoked (or gone) since sign-in ends all its sessions at
/// once, so a revocation holds for the console from the next request on, as for bearer keys.
pub(super) fn live_key(state: &AppState, session: &Session) -> Result<Option<Key>, ApiError> {
    match state.keys.get(&session.key_id)? {
        Some(key) if key.revoked_at.is_none() => Ok(Some(key)),
        _ => {
            state.console.close_key(&session.key_id);
            Ok(None)
        }
    }
}

/// The key of a request that has no `Authorization` header, from its session cookie: `None`
/// without a cookie; 401 when the session has ended or its key was revoked; 403 for an unsafe
/// method without the session's CSRF token or from another site. Called by the `Principal`
/// extractor, which then charges the key's rate limit as for a bearer request.
pub fn authenticate(req: &HttpRequest, state: &AppState) -> Result<Option<Key>, ApiError> {
    let Some(cookie) = session_cookie(req, state) else {
        return Ok(None);
    };
    let ended = || {
        ApiError::unauthenticated(
            "the console session has ended (signed out, expired, its key revoked, or the \
             server restarted); sign in again, or send 'Authorization: Bearer <key>'",
        )
    };
    let session = state.console.find(&cookie).ok_or_else(ended)?;
    let key = live_key(state, &session)?.ok_or_else(ended)?;
    if !is_safe(req.method()) {
        if cross_site(req, state) {
            return Err(ApiError::forbidden(
                "a cookie-authenticated request must come from the console's own origin",
            ));
        }
        let given = req
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !session.csrf_matches(given) {
            return Err(ApiError::forbidden(
                "a cookie-authenticated request that changes something must carry the \
                 session's CSRF token in the X-CSRF-Token header",
            ));
        }
    }
    Ok(Some(key))
}
