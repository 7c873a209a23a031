//! The `[server]` settings that decide who reaches what without an API key of a run's team:
//! the bearer token of `/metrics` (`server.metrics_token`) and the lifetime of a run's
//! `session_link` (`server.session_link_ttl_secs`). Resolved from the file here; the HTTP layer
//! enforces them. Nothing here reads a request or the store.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::range::Range;
use crate::secrets::{Secret, SecretValue};

/// How long a `session_link` is valid by default: a week, long enough to share a run's page in
/// a review or a ticket, short enough that a link found later in a chat log is dead.
pub const DEFAULT_SESSION_LINK_TTL_SECS: u64 = 7 * 24 * 3600;

/// The longest `session_link_ttl_secs` accepted: a year.
pub const MAX_SESSION_LINK_TTL_SECS: u64 = 366 * 24 * 3600;

/// The fewest bytes a metrics token may have: anything shorter could be guessed by a scraper
/// on the host's network, and `/metrics` has no rate limit.
pub const MIN_METRICS_TOKEN_BYTES: usize = 16;

/// `server.metrics_token`: the name of a `[secrets]` entry whose value a Prometheus scraper
/// sends as `Authorization: Bearer <value>`. `None`: only admin keys read `/metrics`.
pub(super) fn metrics_token(
    name: Option<String>,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Option<SecretValue>, Error> {
    let Some(name) = name else {
        return Ok(None);
    };
    let invalid = |message: String| Error::Invalid(format!("server.metrics_token: {message}"));
    let secret = secrets.get(&name).ok_or_else(|| {
        invalid(format!(
            "{name:?} is not defined in [secrets]; name a [secrets] entry that holds the token"
        ))
    })?;
    let value = secret.value.expose();
    if value.len() < MIN_METRICS_TOKEN_BYTES {
        return Err(invalid(format!(
            "the value of [secrets] {name:?} has {} bytes; give at least \
             {MIN_METRICS_TOKEN_BYTES} random bytes (e.g. `openssl rand -hex 32`)",
            value.len()
        )));
    }
    // Sent in an HTTP header: a character a header cannot carry would never match.
    if !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid(format!(
            "the value of [secrets] {name:?} must be printable ASCII without spaces (it is \
             sent in the Authorization header)"
        )));
    }
    Ok(Some(secret.value.clone()))
}

/// `server.session_link_ttl_secs`, default `DEFAULT_SESSION_LINK_TTL_SECS`.
pub(super) fn session_link_ttl_secs(secs: Option<u64>) -> Result<u64, Error> {
    Range::between(1, MAX_SESSION_LINK_TTL_SECS, "a time", "seconds").or_default(
        "server.session_link_ttl_secs",
        secs,
        DEFAULT_SESSION_LINK_TTL_SECS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(value: &str) -> BTreeMap<String, Secret> {
        BTreeMap::from([(
            "METRICS".to_string(),
            Secret {
                value: SecretValue(value.into()),
                file: None,
            },
        )])
    }

    #[test]
    fn the_metrics_token_is_a_long_printable_secret() {
        let good = secrets("0123456789abcdef0123");
        let token = metrics_token(Some("METRICS".into()), &good).expect("valid");
        assert_eq!(
            token.map(|t| t.expose().to_string()).as_deref(),
            Some("0123456789abcdef0123")
        );
        assert!(metrics_token(None, &good).expect("valid").is_none());
        for (name, value, says) in [
            (
                "NOPE",
                "0123456789abcdef0123",
                "\"NOPE\" is not defined in [secrets]",
            ),
            ("METRICS", "short", "has 5 bytes"),
            ("METRICS", "0123456789 abcdef0123", "printable ASCII"),
        ] {
            let err = metrics_token(Some(name.into()), &secrets(value)).expect_err(value);
            let text = err.to_string();
            assert!(
                text.contains("server.metrics_token") && text.contains(says),
                "{text}"
            );
        }
    }

    #[test]
    fn the_session_link_ttl_is_a_bounded_time() {
        assert_eq!(session_link_ttl_secs(None).expect("default"), 604_800);
        assert_eq!(session_link_ttl_secs(Some(1)).expect("one second"), 1);
        for bad in [0, MAX_SESSION_LINK_TTL_SECS + 1] {
            let err = session_link_ttl_secs(Some(bad)).expect_err("out of range");
            assert!(
                err.to_string().contains("server.session_link_ttl_secs"),
                "{err}"
            );
        }
    }
}
