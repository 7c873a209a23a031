//! The body of a cancel: none, or `{"reason": "…", "cascade": false}` with a reason of at most
//! `runledger_domain::origin::MAX_REASON` bytes, which the origin of the `Cancelled` event
//! records, and whether the run's unfinished descendants are cancelled with it (they are
//! unless `cascade` is `false`). The official clients send no body or `{}`, which ask nothing
//! more than a cancel (and its cascade).

use super::limits::parse_json;
use crate::problem::ApiError;
use crate::wire::CancelRequest;
use runledger_domain::origin::MAX_REASON;

/// What a cancel's body asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancel {
    /// Why, in the caller's words; `None` when the body gives none.
    pub reason: Option<String>,
    /// Whether the run's unfinished descendants are cancelled too.
    pub cascade: bool,
}

/// What a cancel's body asks. An empty body (or only whitespace), `null`, `{}`, a null or
/// empty reason give no reason, and a missing or null `cascade` cascades; a body that is not
/// a JSON object with a string `reason` and a boolean `cascade`, or a longer reason, is
/// refused naming `reason`.
pub fn cancel(body: &[u8]) -> Result<Cancel, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Cancel {
            reason: None,
            cascade: true,
        });
    }
    // `null` too: the OpenAPI document describes the body as optional, which a generated
    // client may send as JSON `null`.
    let request: Option<CancelRequest> = parse_json(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of a cancel is none or {{\"reason\": \"…\", \"cascade\": true|false}}: {}",
            e.detail
        ))
    })?;
    let (reason, cascade) = match request {
        Some(r) => (r.reason, r.cascade.unwrap_or(true)),
        None => (None, true),
    };
    let Some(reason) = reason else {
        return Ok(Cancel {
            reason: None,
            cascade,
        });
    };
    if reason.len() > MAX_REASON {
        return Err(ApiError::bad_request(format!(
            "reason is longer than {MAX_REASON} bytes"
        )));
    }
    // Control characters would let a reason rewrite the lines a terminal shows around it.
    if reason.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "reason must not contain control characters",
        ));
    }
    Ok(Cancel {
        reason: (!reason.is_empty()).then_some(reason),
        cascade,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_body_or_an_empty_object_is_a_plain_cancel() {
        for body in [
            "",
            "  \n",
            "null",
            "{}",
            "{\"reason\": null}",
            "{\"reason\": \"\"}",
        ] {
            let asked = cancel(body.as_bytes()).expect(body);
            assert_eq!(asked.reason, None, "{body}");
            assert!(asked.cascade, "{body}");
        }
    }

    #[test]
    fn a_reason_is_kept_up_to_its_limit() {
        let at_limit = "é".repeat(MAX_REASON / 2);
        let body = serde_json::json!({ "reason": at_limit }).to_string();
        assert_eq!(
            cancel(body.as_bytes()).expect("at the limit").reason,
            Some(at_limit)
        );
        let over = serde_json::json!({ "reason": "x".repeat(MAX_REASON + 1) }).to_string();
        let error = cancel(over.as_bytes()).expect_err("over the limit");
        assert!(error.detail.contains("reason"), "{}", error.detail);
    }

    #[test]
    fn cascade_false_keeps_the_descendants_running() {
        let asked = cancel(br#"{"cascade": false, "reason": "r"}"#).expect("valid");
        assert_eq!(
            asked,
            Cancel {
                reason: Some("r".into()),
                cascade: false
            }
        );
        assert!(cancel(br#"{"cascade": true}"#).expect("valid").cascade);
        assert!(cancel(br#"{"cascade": "no"}"#).is_err());
    }

    #[test]
    fn anything_else_is_refused_naming_reason() {
        for body in [
            "nope",
            "[]",
            "\"why\"",
            "{\"reason\": 5}",
            "{\"reason\": \"a\\u001bb\"}",
        ] {
            let error = cancel(body.as_bytes()).expect_err(body);
            assert_eq!(error.status, actix_web::http::StatusCode::BAD_REQUEST);
            assert!(error.detail.contains("reason"), "{body}: {}", error.detail);
        }
    }
}
