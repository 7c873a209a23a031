//! What every request body and query shares: the size limits (which bound every stored event,
//! so the log, the read index and memory per run stay small), the checks that refuse a field
//! with a 400 naming it, metadata's rules, the JSON body and a `limit` parameter. It knows no
//! particular request.

use std::collections::BTreeMap;

use crate::problem::ApiError;
use crate::wire::MAX_METADATA_KEYS;

pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
pub const MAX_BASE_PROMPT_BYTES: usize = 16 * 1024;
pub const MAX_TITLE_CHARS: usize = 256;
pub const MAX_FIELD_BYTES: usize = 256;
pub const MAX_MCP_SERVERS: usize = 16;
pub const MAX_MCP_VALUE_BYTES: usize = 2048;
pub const MAX_FOLLOWUP_BYTES: usize = 64 * 1024;
/// `q` searches titles (256 characters) and prompts (64 KiB); longer search text is not a
/// search a person makes, and each listed run is scanned for it.
pub const MAX_QUERY_TEXT_BYTES: usize = 1024;
pub const MAX_LIST_LIMIT: usize = 500;
pub const MAX_TRANSCRIPT_LIMIT: usize = 10_000;
pub const DEFAULT_TRANSCRIPT_LIMIT: usize = 1000;
pub const MAX_EVENTS_LIMIT: usize = 10_000;
pub const DEFAULT_EVENTS_LIMIT: usize = 1000;

/// Refuses a value longer than `max` bytes or holding NUL, naming `field`.
pub fn check_len(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max {
        return Err(ApiError::bad_request(format!(
            "{field} is longer than {max} bytes"
        )));
    }
    // Values reach agents as environment variables and arguments, which cannot hold NUL.
    if value.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "{field} must not contain NUL characters"
        )));
    }
    Ok(())
}

/// An optional short field (an id, a name): not empty, within `MAX_FIELD_BYTES`.
pub(super) fn short_field(field: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        Some(v) if v.is_empty() => Err(ApiError::bad_request(format!("{field} must not be empty"))),
        Some(v) => {
            check_len(field, &v, MAX_FIELD_BYTES)?;
            Ok(Some(v))
        }
        None => Ok(None),
    }
}

/// A request's metadata map: at most `MAX_METADATA_KEYS` pairs, each by `metadata_pair`.
pub fn metadata(
    input: Option<BTreeMap<String, String>>,
) -> Result<BTreeMap<String, String>, ApiError> {
    let input = input.unwrap_or_default();
    if input.len() > MAX_METADATA_KEYS {
        return Err(ApiError::bad_request(format!(
            "metadata has more than {MAX_METADATA_KEYS} keys"
        )));
    }
    for (k, v) in &input {
        metadata_pair(k, v)?;
    }
    Ok(input)
}

/// One metadata pair: the key 1-64 characters of `[a-zA-Z0-9._-]`, the value at most 256
/// bytes without NUL.
pub(super) fn metadata_pair(k: &str, v: &str) -> Result<(), ApiError> {
    // A refused key is quoted only when short: a 1 MiB key must not come back in the error.
    let shown = || {
        if k.len() <= 64 {
            format!("{k:?}")
        } else {
            format!("of {} bytes", k.len())
        }
    };
    if k.is_empty()
        || k.len() > 64
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(ApiError::bad_request(format!(
            "metadata key {} must be 1-64 characters of [a-zA-Z0-9._-]",
            shown()
        )));
    }
    if v.len() > 256 || v.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "metadata value of {} must be at most 256 bytes without NUL",
            shown()
        )));
    }
    Ok(())
}

/// The body's JSON into `T`; a 400 that tells malformed JSON from a wrong type or value.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request needs a JSON body"));
    }
    serde_json::from_slice(body).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Data => "wrong type or value",
            _ => "malformed JSON",
        };
        ApiError::bad_request(format!("{what}: {e}"))
    })
}

/// A `limit` parameter: an integer from 1 to `max`.
pub(super) fn limit(value: &str, max: usize) -> Result<usize, ApiError> {
    value
        .parse()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| ApiError::bad_request(format!("limit must be an integer from 1 to {max}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_rules() {
        let mut ok = BTreeMap::new();
        ok.insert("team.name-1_x".to_string(), "v".to_string());
        assert!(metadata(Some(ok)).is_ok());
        let too_many: BTreeMap<_, _> = (0..21).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(metadata(Some(too_many)).is_err());
        let nul: BTreeMap<_, _> = [("k".to_string(), "a\0b".to_string())].into();
        assert!(metadata(Some(nul)).is_err());
        let long: BTreeMap<_, _> = [("k".to_string(), "x".repeat(257))].into();
        assert!(metadata(Some(long)).is_err());
    }
}
