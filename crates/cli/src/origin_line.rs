//! The short line `runledger events` and `runledger runs events` print under an event that has
//! an origin: the channel, the key's name and id, the client's address, and the cause or the
//! reason. Read from the event's JSON (`origin` beside `data`), the same for a stopped store
//! and a server's answer; an event without one (recorded before origins were) gets no line.
//! Every field is the client's or the log's text, so it goes through `terminal::printable`.

use serde_json::Value;

use crate::terminal::{self, Origin as Text};

/// `      origin: api, key ops (key_01…), from 127.0.0.1, reason "…"`; `None` without an origin.
pub fn origin_line(event: &Value) -> Option<String> {
    let origin = event.get("origin")?.as_object()?;
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(|s| terminal::printable(s, Text::Field).into_owned())
    };
    let mut parts = vec![text(origin.get("channel")).unwrap_or_else(|| "?".into())];
    if let Some(key) = origin.get("key").and_then(Value::as_object) {
        let name = text(key.get("name")).unwrap_or_default();
        let id = text(key.get("id")).unwrap_or_default();
        parts.push(format!("key {name} ({id})"));
    }
    if let Some(addr) = text(origin.get("client_addr")) {
        parts.push(format!("from {addr}"));
    }
    if let Some(cause) = text(origin.get("cause")) {
        parts.push(cause);
    }
    if let Some(reason) = text(origin.get("reason")) {
        parts.push(format!("reason \"{reason}\""));
    }
    Some(format!("      origin: {}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_names_its_channel_key_address_and_reason() {
        let event = json!({"origin": {
            "channel": "api",
            "key": {"id": "k1", "name": "ops\u{1b}[2J", "kind": "personal", "team": "t", "admin": false},
            "client_addr": "127.0.0.1",
            "reason": "stuck"
        }});
        assert_eq!(
            origin_line(&event).as_deref(),
            Some("      origin: api, key ops\\x1b[2J (k1), from 127.0.0.1, reason \"stuck\"")
        );
    }

    #[test]
    fn the_service_names_its_cause_and_an_old_event_has_no_line() {
        let event = json!({"origin": {"channel": "system", "cause": "a slot came free"}});
        assert_eq!(
            origin_line(&event).as_deref(),
            Some("      origin: system, a slot came free")
        );
        assert_eq!(origin_line(&json!({"data": {}})), None);
    }
}
