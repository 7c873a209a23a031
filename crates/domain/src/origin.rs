//! Where a change to a run came from: the key and its team as they were when it acted, the
//! channel it came through, the request that carried it, and for what the service does itself,
//! the cause. Recorded beside each event (in the store's envelope, not in the event, so that the
//! event vocabulary and the fold stay as they are); the decision rules never read it.
//!
//! Every field but `channel` is optional: an event written before origins were recorded has no
//! origin at all, and a request that did not send a user agent has none to record.

use serde::{Deserialize, Serialize};

/// The largest user agent recorded, in bytes; a longer one is cut at a character boundary.
pub const MAX_USER_AGENT: usize = 256;

/// The largest reason a caller may give for what it asks (a cancel's `reason`), in bytes.
pub const MAX_REASON: usize = 1024;

/// Who and what caused an event.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Origin {
    pub channel: Channel,
    /// The API key that asked, as it was when it asked (a later rename does not rewrite it).
    pub key: Option<OriginKey>,
    /// The id the service gave the request (its `x-request-id` answer header).
    pub request_id: Option<String>,
    /// The client's address: the peer's, or the one a trusted proxy forwarded.
    pub client_addr: Option<String>,
    /// The client's `User-Agent`, cut to `MAX_USER_AGENT` bytes.
    pub user_agent: Option<String>,
    /// What made the service act on its own (a slot came free, the agent exited, a node was
    /// lost, a schedule fired).
    pub cause: Option<String>,
    /// Why the caller asked, in its own words (a cancel's `reason`), at most `MAX_REASON` bytes.
    pub reason: Option<String>,
}

/// An API key as an origin names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginKey {
    pub id: String,
    pub name: String,
    /// `personal` or `agent`.
    pub kind: String,
    pub team: String,
    pub admin: bool,
}

/// The way a change reached the service. Append new values at the end only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Channel {
    /// The HTTP API, called with an API key.
    #[default]
    Api,
    /// The web console, with a console session.
    Console,
    /// The `runledger` command line.
    Cli,
    /// A schedule's firing.
    Schedule,
    /// The service itself: its executor, its recovery at start.
    System,
}

impl Channel {
    pub const ALL: [Channel; 5] = [
        Channel::Api,
        Channel::Console,
        Channel::Cli,
        Channel::Schedule,
        Channel::System,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Api => "api",
            Channel::Console => "console",
            Channel::Cli => "cli",
            Channel::Schedule => "schedule",
            Channel::System => "system",
        }
    }

    pub fn parse(s: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl Origin {
    /// A change the service makes on its own, for `cause`.
    pub fn system(cause: impl Into<String>) -> Origin {
        Origin {
            channel: Channel::System,
            cause: Some(cause.into()),
            ..Origin::default()
        }
    }

    /// A change a schedule's firing makes, for `cause` (which schedule, which due time).
    pub fn schedule(cause: impl Into<String>) -> Origin {
        Origin {
            channel: Channel::Schedule,
            cause: Some(cause.into()),
            ..Origin::default()
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_round_trip_through_their_names() {
        for c in Channel::ALL {
            assert_eq!(Channel::parse(c.as_str()), Some(c));
        }
        assert_eq!(Channel::parse("API"), None);
    }

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdef", 3), "abc");
        // "é" is two bytes: a cut inside it keeps the character out.
        assert_eq!(cut("aé", 2), "a");
    }
}
