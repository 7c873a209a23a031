//! The charge of one request to its key's rate limit, and the 429 that refuses it: shared by
//! the API's extractors (`auth`) and the console's pages, so that both count against one bucket
//! per key. It must not authenticate: it is given a key already found live, so a request
//! without one has no bucket to charge. The bucket arithmetic is `ratelimit`'s.

use super::problem::ApiError;
use super::ratelimit;
use super::AppState;
use runledger_runs::api_keys::Key;

/// Charges one request to `key`'s rate limit: API requests, with a bearer key or a console
/// session, and console pages alike.
pub(crate) fn charge(state: &AppState, key: &Key) -> Result<(), ApiError> {
    // Limited by key id, so only after authentication: a request without a valid key costs a
    // hash and one lookup, and has no bucket to charge (see docs/api.md, Rate limits).
    if let Some(limiter) = &state.rate_limiter {
        if let Err(wait) = limiter.check(&key.id) {
            let rate = limiter.rate();
            let secs = ratelimit::retry_after_secs(wait);
            return Err(ApiError::rate_limited(
                secs,
                format!(
                    "this API key sent more than {} requests per second (bursts of up to {}); \
                     retry after {secs} s",
                    rate.per_sec, rate.burst
                ),
            ));
        }
    }
    Ok(())
}
