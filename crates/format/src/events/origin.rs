//! An event's origin as JSON (`origin` beside `data` in an event line): who caused the event,
//! through which channel, from which request. Both directions; absent fields are left out, so
//! an event without an origin (recorded before origins were) writes no `origin` at all.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use runledger_domain::{Channel, Origin, OriginKey};

use super::error::{bad, EventJsonError};

/// Who and what caused an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginData {
    /// How the change reached the service: `api`, `console`, `cli`, `schedule` or `system`.
    pub channel: String,
    /// The API key that asked, as it was when it asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<OriginKeyData>,
    /// The id the service gave the request (its `x-request-id` answer header).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The client's address (the peer's, or the one a trusted proxy forwarded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_addr: Option<String>,
    /// The client's `User-Agent`, at most 256 bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// What made the service act on its own (a `system` or `schedule` change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// Why the caller asked, in its own words (a cancel's `reason`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An API key as an origin names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginKeyData {
    pub id: String,
    pub name: String,
    /// `personal` or `agent`.
    pub kind: String,
    pub team: String,
    pub admin: bool,
}

impl From<&Origin> for OriginData {
    fn from(o: &Origin) -> OriginData {
        OriginData {
            channel: o.channel.as_str().to_string(),
            key: o.key.as_ref().map(|k| OriginKeyData {
                id: k.id.clone(),
                name: k.name.clone(),
                kind: k.kind.clone(),
                team: k.team.clone(),
                admin: k.admin,
            }),
            request_id: o.request_id.clone(),
            client_addr: o.client_addr.clone(),
            user_agent: o.user_agent.clone(),
            cause: o.cause.clone(),
            reason: o.reason.clone(),
        }
    }
}

impl OriginData {
    /// The origin this JSON names; refused when the channel is unknown.
    pub fn origin(self) -> Result<Origin, EventJsonError> {
        let channel = Channel::parse(&self.channel)
            .ok_or_else(|| bad(format!("origin channel {:?} is unknown", self.channel)))?;
        Ok(Origin {
            channel,
            key: self.key.map(|k| OriginKey {
                id: k.id,
                name: k.name,
                kind: k.kind,
                team: k.team,
                admin: k.admin,
            }),
            request_id: self.request_id,
            client_addr: self.client_addr,
            user_agent: self.user_agent,
            cause: self.cause,
            reason: self.reason,
        })
    }
}
