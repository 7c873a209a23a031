//! How the pages show a run's values: times, strings and state badges, always escaped.

use serde_json::Value;

use crate::html::escape;

/// Display of an RFC 3339 time of the API: to the second, in UTC.
pub(super) fn when(v: &Value) -> String {
    let Some(s) = v.as_str() else {
        return String::new();
    };
    let s = s.replacen('T', " ", 1);
    let s = match s.find('.') {
        Some(dot) => s[..dot].to_string(),
        None => s.trim_end_matches('Z').to_string(),
    };
    format!("{s} UTC")
}

pub(super) fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

pub(super) fn state_badge(state: &str, id: Option<&str>) -> String {
    let id = id.map_or(String::new(), |i| format!(" id=\"{i}\""));
    format!(
        "<span class=\"state state-{}\"{id}>{}</span>",
        escape(&state.to_ascii_lowercase()),
        escape(state)
    )
}
