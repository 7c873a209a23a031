//! A record of the admin audit log as JSON: one item of `GET /api/v1/audit/admin`, and one
//! `admin` line of `runledger export`, which `runledger import` reads back with
//! `admin_record_from_json`, its exact inverse (a value it would not have written is refused,
//! so the restored bytes, and so the chain's links, are those that were exported).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use runledger_domain::AdminEvent;
use runledger_store::{AdminEntry, AdminRecord};

use crate::events::OriginData;
use crate::time::{format_time, hex, parse_exact_time, unhex32};

/// One administrative act, with who did it and its place in the hash chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminItem {
    /// The record's sequence number in the admin log, from 0.
    pub seq: u64,
    /// When the act was recorded (RFC 3339, UTC, milliseconds).
    pub at: String,
    /// The record type: `KeyCreated`, `KeyRevoked`, `TeamCreated`, `SecretRotated`,
    /// `ServerStarted`, `ServerStopped` or `IndexRebuilt`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The type's fields (`docs/api.md`, "Admin audit records").
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// Who did it, through which channel, from which request.
    pub origin: OriginData,
    /// The link of the record before, lowercase hex (64 zeros before the first record).
    pub prev: String,
    /// This record's link: SHA-256 of `prev`'s bytes and the record's stored body, hex.
    pub link: String,
}

/// Why a JSON value is not an admin record as `admin_json` writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("admin record {seq}: {detail}")]
pub struct AdminJsonError {
    pub seq: u64,
    pub detail: String,
}

/// A stored record as JSON.
pub fn admin_json(entry: &AdminEntry) -> AdminItem {
    let record = &entry.record;
    AdminItem {
        seq: record.seq,
        at: format_time(record.at),
        kind: record.event.kind().to_string(),
        data: event_data(&record.event),
        origin: OriginData::from(&record.origin),
        prev: hex(&record.prev),
        link: hex(&entry.link),
    }
}

/// The fields of `event` as a JSON object (the variant's own, without its name).
fn event_data(event: &AdminEvent) -> serde_json::Value {
    match serde_json::to_value(event) {
        // An externally tagged variant: `{"KeyCreated": {...}}`.
        Ok(serde_json::Value::Object(mut tagged)) => tagged
            .remove(event.kind())
            .unwrap_or(serde_json::Value::Null),
        _ => serde_json::Value::Null,
    }
}

/// The record `item` names, and the link it claims; refused unless `admin_json` would write
/// exactly `item` back.
pub fn admin_record_from_json(item: &AdminItem) -> Result<(AdminRecord, [u8; 32]), AdminJsonError> {
    let bad = |detail: String| AdminJsonError {
        seq: item.seq,
        detail,
    };
    let at =
        parse_exact_time(&item.at).ok_or_else(|| bad(format!("at {:?} is not a time", item.at)))?;
    let tagged = serde_json::json!({ item.kind.as_str(): item.data });
    let event: AdminEvent = serde_json::from_value(tagged)
        .map_err(|e| bad(format!("type {:?} with this data: {e}", item.kind)))?;
    let origin = item
        .origin
        .clone()
        .origin()
        .map_err(|e| bad(e.to_string()))?;
    let hash = |what: &str, text: &str| {
        unhex32(text)
            .filter(|bytes| hex(bytes) == text)
            .ok_or_else(|| bad(format!("{what} {text:?} is not 64 lowercase hex digits")))
    };
    let prev = hash("prev", &item.prev)?;
    let link = hash("link", &item.link)?;
    let record = AdminRecord {
        seq: item.seq,
        at,
        event,
        origin,
        prev,
    };
    let again = admin_json(&AdminEntry {
        record: record.clone(),
        link,
    });
    if &again != item {
        return Err(bad("not as an export writes it".into()));
    }
    Ok((record, link))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{Origin, Timestamp};

    #[test]
    fn a_record_round_trips_and_an_unknown_type_is_refused() {
        let entry = AdminEntry {
            record: AdminRecord {
                seq: 3,
                at: Timestamp(1_764_000_000_123),
                event: AdminEvent::KeyRevoked {
                    key_id: "01K".into(),
                    name: "ci".into(),
                    team: "infra".into(),
                    already: false,
                },
                origin: Origin::system("test"),
                prev: [7; 32],
            },
            link: [0xab; 32],
        };
        let item = admin_json(&entry);
        assert_eq!(item.kind, "KeyRevoked");
        assert_eq!(item.data["key_id"], "01K");
        let (record, link) = admin_record_from_json(&item).expect("reads back");
        assert_eq!(record, entry.record);
        assert_eq!(link, entry.link);
        let mut other = item.clone();
        other.kind = "KeyDeleted".into();
        assert!(admin_record_from_json(&other).is_err());
        let mut upper = item;
        upper.link = upper.link.to_uppercase();
        assert!(admin_record_from_json(&upper).is_err());
    }
}
