//! The body of a follow-up to a run (`POST /agent/runs/{id}/followups`) into its message and
//! mode. Nothing else.

use super::limits::{check_len, parse_json, MAX_FOLLOWUP_BYTES};
use crate::problem::ApiError;
use crate::wire::FollowupRequest;
use runledger_domain::FollowupMode;

/// A follow-up's message (not blank, within `MAX_FOLLOWUP_BYTES`) and mode (`normal` when not
/// given).
pub fn followup(body: &[u8]) -> Result<(String, FollowupMode), ApiError> {
    let request: FollowupRequest = parse_json(body)?;
    let message = request.message.unwrap_or_default();
    if message.trim().is_empty() {
        return Err(ApiError::bad_request(
            "message is required and must not be empty",
        ));
    }
    check_len("message", &message, MAX_FOLLOWUP_BYTES)?;
    let mode = match request.mode.as_deref() {
        None => FollowupMode::Normal,
        Some(m) => FollowupMode::parse(m).ok_or_else(|| {
            ApiError::bad_request("mode must be one of normal, plan, orchestrate")
        })?,
    };
    Ok((message, mode))
}
