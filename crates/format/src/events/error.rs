//! Why a JSON value is not an event as `event_json` writes it, and the two ways the readers make
//! one. Shared by the payloads' and the line's readers, so neither imports the other for it.

/// Why a JSON value is not an event as `event_json` writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EventJsonError(String);

pub(super) fn bad(what: String) -> EventJsonError {
    EventJsonError(what)
}

/// Reads `value` as a `T`, naming `what` it is in the error.
pub(super) fn read<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    what: &str,
) -> Result<T, EventJsonError> {
    T::deserialize(value).map_err(|e| EventJsonError(format!("{what}: {e}")))
}
