//! Who is calling: `Principal` (a bearer API key, or without one the key of a console session
//! cookie) and `MaybePrincipal`, their extractors, and the parsing of a bearer `Authorization`
//! header (`bearer_secret`, which `/metrics`' scrape check shares). An authenticated caller is
//! charged to its key's rate limit (`charge`) before any handler runs. It decides who a caller
//! is, answering 401 (or 429); it must not decide what that caller may see or do, which `access`
//! and each handler decide.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{web, FromRequest, HttpRequest};

use super::charge::charge;
use super::console;
use super::problem::ApiError;
use super::AppState;
use runledger_runs::api_keys::Key;

/// The authenticated caller of an `/api/v1` request — a bearer key, or without one the key of a
/// console session cookie (`console::authenticate`) — charged one token of its key's rate limit.
/// Every `/api/v1` handler takes one, which is what puts the whole API under the limit.
pub struct Principal(pub Key);

impl FromRequest for Principal {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Principal, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        std::future::ready(authenticate(req))
    }
}

/// The caller of an endpoint the official clients call without a key (the redirect checks):
/// `None` when the request has no `Authorization` header; a key that is sent must be valid
/// (else 401), and is charged like any other.
pub struct MaybePrincipal(pub Option<Key>);

impl FromRequest for MaybePrincipal {
    type Error = ApiError;
    type Future = std::future::Ready<Result<MaybePrincipal, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        std::future::ready(if req.headers().contains_key(header::AUTHORIZATION) {
            authenticate(req).map(|Principal(key)| MaybePrincipal(Some(key)))
        } else {
            Ok(MaybePrincipal(None))
        })
    }
}

fn authenticate(req: &HttpRequest) -> Result<Principal, ApiError> {
    let Some(state) = req.app_data::<web::Data<AppState>>() else {
        return Err(ApiError::internal(&"application state missing"));
    };
    let key = match req.headers().get(header::AUTHORIZATION) {
        Some(header) => bearer(state, header)?,
        // Without a bearer key, the console's session cookie (with its CSRF rules) may stand
        // in for the key that signed in; a bearer request never looks at cookies.
        None => console::authenticate(req, state)?.ok_or_else(|| {
            ApiError::unauthenticated("send an API key as 'Authorization: Bearer <key>'")
        })?,
    };
    charge(state, &key)?;
    Ok(Principal(key))
}

/// The secret of a bearer `Authorization` header; `what` names it in the refusal.
pub(crate) fn bearer_secret<'h>(header: &'h HeaderValue, what: &str) -> Result<&'h str, ApiError> {
    header
        .to_str()
        .ok()
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::unauthenticated(format!(
                "the Authorization header must be 'Bearer <{what}>'"
            ))
        })
}

/// The live key of a bearer `Authorization` header.
fn bearer(state: &AppState, header: &HeaderValue) -> Result<Key, ApiError> {
    let secret = bearer_secret(header, "key")?;
    state
        .keys
        .authenticate(secret)?
        .ok_or_else(|| ApiError::unauthenticated("the API key is not valid or has been revoked"))
}
