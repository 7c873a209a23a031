//! What the observer makes of a CLI's words: one clean line, a message clipped at a word, a
//! session id it may keep, and the platform's code for an authentication failure. Pure text.

/// Longest `status_message` taken from a CLI, in characters.
pub(super) const MESSAGE_LIMIT: usize = 600;

/// An authentication failure gets the platform's code, so a client can tell it apart.
pub(super) fn auth_code(message: &str, status: Option<u64>) -> Option<&'static str> {
    let lower = message.to_lowercase();
    let auth = status == Some(401)
        || [
            "not logged in",
            "api key",
            "api_key",
            "unauthorized",
            "authentication",
        ]
        .iter()
        .any(|w| lower.contains(w))
        || (lower.contains("missing environment variable") && lower.contains("key"));
    auth.then_some("authentication_required")
}

/// A session id as the CLIs print them (UUIDs, thread ids): short and plain, so it can never
/// be taken for an option or a path.
pub fn is_session_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.starts_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// One clean line: ANSI escapes removed, whitespace runs (newlines included) made one space.
pub fn one_line(text: &str) -> String {
    let plain = strip_ansi_escapes::strip_str(text);
    plain
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// At most `MESSAGE_LIMIT` characters, cut at a word boundary and marked with "…".
pub fn clip(text: &str) -> String {
    if text.chars().count() <= MESSAGE_LIMIT {
        return text.to_string();
    }
    let cut: String = text.chars().take(MESSAGE_LIMIT).collect();
    let at = cut
        .rfind(' ')
        .filter(|&i| i > MESSAGE_LIMIT / 2)
        .unwrap_or(cut.len());
    format!("{}…", cut[..at].trim_end())
}
