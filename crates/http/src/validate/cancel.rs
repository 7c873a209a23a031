//! The body of a cancel: none, or `{"reason": "…"}` with a reason of at most
//! `runledger_domain::origin::MAX_REASON` bytes, which the origin of the `Cancelled` event
//! records. The official clients send no body or `{}`, which ask nothing more than a cancel.

use super::limits::parse_json;
use crate::problem::ApiError;
use crate::wire::CancelRequest;
use runledger_domain::origin::MAX_REASON;

/// The reason a cancel's body gives, if any. An empty body (or only whitespace), `null`, `{}`,
/// a null or empty reason give none; a body that is not a JSON object with a string `reason`, or a
/// longer reason, is refused naming `reason`.
pub fn cancel(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    // `null` too: the OpenAPI document describes the body as optional, which a generated
    // client may send as JSON `null`.
    let request: Option<CancelRequest> = parse_json(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of a cancel is none or {{\"reason\": \"…\"}}: {}",
            e.detail
        ))
    })?;
    let Some(reason) = request.and_then(|r| r.reason) else {
        return Ok(None);
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
    Ok((!reason.is_empty()).then_some(reason))
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
            assert_eq!(cancel(body.as_bytes()).expect(body), None, "{body}");
        }
    }

    #[test]
    fn a_reason_is_kept_up_to_its_limit() {
        let at_limit = "é".repeat(MAX_REASON / 2);
        let body = serde_json::json!({ "reason": at_limit }).to_string();
        assert_eq!(
            cancel(body.as_bytes()).expect("at the limit"),
            Some(at_limit)
        );
        let over = serde_json::json!({ "reason": "x".repeat(MAX_REASON + 1) }).to_string();
        let error = cancel(over.as_bytes()).expect_err("over the limit");
        assert!(error.detail.contains("reason"), "{}", error.detail);
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
