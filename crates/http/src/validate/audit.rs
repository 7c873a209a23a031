//! The query string of `GET /api/v1/audit/events`: its filters (`type` repeats), cursor and
//! limit, each refused with a message naming the parameter. Who may ask for which team is the
//! handler's to decide; this only parses.

use runledger_domain::{RunId, Timestamp};
use runledger_runs::query::{AuditQuery, Position};

use crate::problem::ApiError;
use crate::wire::parse_time;

/// The page size when `limit` is not given, and the largest one allowed.
pub const DEFAULT_AUDIT_LIMIT: usize = 100;
pub const MAX_AUDIT_LIMIT: usize = 1_000;

/// Longest `type`, `actor` or `team` accepted (a key id or a type name is far shorter).
const MAX_FILTER_BYTES: usize = 256;
/// Most `type` values in one query (there are fewer event types than this).
const MAX_TYPES: usize = 32;

/// An audit query as the request asks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRequest {
    pub query: AuditQuery,
    pub cursor: Option<Position>,
    pub limit: usize,
}

/// Parses the audit events query. Unknown parameters are refused: a misspelt filter must not
/// silently widen what an audit answers.
pub fn audit_query(raw: &str) -> Result<AuditRequest, ApiError> {
    let mut request = AuditRequest {
        query: AuditQuery::default(),
        cursor: None,
        limit: DEFAULT_AUDIT_LIMIT,
    };
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        let value = value.into_owned();
        let q = &mut request.query;
        match key.as_ref() {
            "type" => {
                let value = filter("type", value)?;
                if !q.types.contains(&value) {
                    q.types.push(value);
                }
                if q.types.len() > MAX_TYPES {
                    return Err(ApiError::bad_request(format!(
                        "type is given more than {MAX_TYPES} times"
                    )));
                }
            }
            "actor" => q.actor = Some(filter("actor", value)?),
            "team" => q.team = Some(filter("team", value)?),
            "run_id" => {
                q.run_id = Some(value.parse::<RunId>().map_err(|_| {
                    ApiError::bad_request(format!("run_id {value:?} is not a run id"))
                })?)
            }
            "since" => q.since = Some(time("since", &value, false)?),
            "until" => q.until = Some(time("until", &value, true)?),
            "cursor" => {
                request.cursor = Some(Position::decode(&value).ok_or_else(|| {
                    ApiError::bad_request("cursor is not a cursor returned by this server")
                })?)
            }
            "limit" => {
                request.limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_AUDIT_LIMIT).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "limit must be a whole number from 1 to {MAX_AUDIT_LIMIT}"
                        ))
                    })?
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}: the filters are type, actor, run_id, team, \
                     since and until, with cursor and limit"
                )))
            }
        }
    }
    Ok(request)
}

fn filter(key: &str, value: String) -> Result<String, ApiError> {
    if value.is_empty() || value.len() > MAX_FILTER_BYTES {
        return Err(ApiError::bad_request(format!(
            "{key} must be 1 to {MAX_FILTER_BYTES} bytes"
        )));
    }
    Ok(value)
}

/// A time bound in milliseconds: rounded up (`ceil`) for the exclusive `until`, so that a
/// sub-millisecond bound excludes nothing it should keep.
fn time(key: &str, value: &str, ceil: bool) -> Result<Timestamp, ApiError> {
    let nanos = parse_time(value).ok_or_else(|| {
        ApiError::bad_request(format!(
            "{key} must be an RFC 3339 time (such as 2026-01-31T12:00:00Z), not {value:?}"
        ))
    })?;
    if nanos < 0 {
        return Err(ApiError::bad_request(format!("{key} is before 1970")));
    }
    let ms = nanos / 1_000_000;
    let ms = if ceil && nanos % 1_000_000 != 0 {
        ms + 1
    } else {
        ms
    };
    Ok(Timestamp(ms as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(raw: &str) -> String {
        match audit_query(raw) {
            Ok(q) => panic!("{raw:?} was accepted: {q:?}"),
            Err(e) => e.detail,
        }
    }

    #[test]
    fn every_filter_is_read_and_type_repeats() {
        let id = RunId(7);
        let cursor = Position {
            at: Timestamp(3),
            run_id: id,
            seq: 2,
        };
        let raw = format!(
            "type=Cancelled&type=Failed&type=Cancelled&actor=k1&team=a&run_id={id}\
             &since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00.0005Z&limit=7&cursor={}",
            cursor.encode()
        );
        let r = audit_query(&raw).expect("parses");
        assert_eq!(r.query.types, vec!["Cancelled", "Failed"]);
        assert_eq!(r.query.actor.as_deref(), Some("k1"));
        assert_eq!(r.query.team.as_deref(), Some("a"));
        assert_eq!(r.query.run_id, Some(id));
        assert_eq!(r.query.since, Some(Timestamp(1_767_225_600_000)));
        assert_eq!(r.query.until, Some(Timestamp(1_767_312_000_001)));
        assert_eq!((r.limit, r.cursor), (7, Some(cursor)));
        assert_eq!(audit_query("").expect("empty").limit, DEFAULT_AUDIT_LIMIT);
    }

    #[test]
    fn bad_values_are_refused_naming_the_parameter() {
        assert!(refusal("since=yesterday").starts_with("since must be an RFC 3339"));
        assert!(refusal("until=2026-13-01T00:00:00Z").starts_with("until must be"));
        assert!(refusal("limit=0").starts_with("limit"));
        assert!(refusal("limit=1001").starts_with("limit"));
        assert!(refusal("cursor=abc").starts_with("cursor"));
        assert!(refusal("run_id=nope").starts_with("run_id"));
        assert!(refusal("actor=").starts_with("actor"));
        assert!(refusal("actr=k").contains("\"actr\""));
    }
}
