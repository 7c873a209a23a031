//! Who may read `/metrics`: a scraper that sends the configured metrics token
//! (`server.metrics_token`) as `Authorization: Bearer <token>` — what Prometheus'
//! `authorization` scrape option sends — or a caller with an admin API key. The metrics name
//! environments, webhook subscriptions, costs and every team's traffic, and agents share the
//! host's network, so nothing else reads them. This module decides; it renders nothing.

use actix_web::http::header;
use actix_web::HttpRequest;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::problem::ApiError;
use super::AppState;

/// Admits the request to `/metrics`, or says why not: 401 without credentials or with ones
/// that are neither the metrics token nor a live API key, 403 for a live key that is not an
/// admin's (as the admin API answers it). A scrape is not charged to a key's rate limit: the
/// limit protects the API, and a scraper that is throttled loses the very series that would
/// show why.
pub fn authorize(req: &HttpRequest, state: &AppState) -> Result<(), ApiError> {
    let given = req.headers().get(header::AUTHORIZATION).ok_or_else(|| {
        ApiError::unauthenticated(
            "/metrics needs 'Authorization: Bearer <token>' with the metrics token \
                 (server.metrics_token) or an admin API key",
        )
    })?;
    let given = super::auth::bearer_secret(given, "token")?;
    if let Some(token) = &state.config.metrics_token {
        if same_secret(given, token.expose()) {
            return Ok(());
        }
    }
    let key = state.keys.authenticate(given)?.ok_or_else(|| {
        ApiError::unauthenticated(
            "neither the metrics token nor a live API key: /metrics needs the metrics token \
             (server.metrics_token) or an admin API key",
        )
    })?;
    if !key.admin {
        return Err(ApiError::forbidden(
            "only admin keys and the metrics token (server.metrics_token) may read /metrics",
        ));
    }
    Ok(())
}

/// Whether `given` is `expected`, in time that depends on neither: both are hashed first, so
/// even their lengths are compared in constant time.
fn same_secret(given: &str, expected: &str) -> bool {
    let given = Sha256::digest(given.as_bytes());
    let expected = Sha256::digest(expected.as_bytes());
    bool::from(given.ct_eq(&expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_secret_matches() {
        assert!(same_secret("0123456789abcdef", "0123456789abcdef"));
        for other in [
            "",
            "0123456789abcdeF",
            "0123456789abcdef0",
            "0123456789abcde",
        ] {
            assert!(!same_secret(other, "0123456789abcdef"), "{other}");
        }
    }
}
